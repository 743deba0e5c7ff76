package sweeper_test

import (
	"context"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/runnerscaler/runnerscaler/internal/pool"
	"github.com/runnerscaler/runnerscaler/internal/poolstate"
	"github.com/runnerscaler/runnerscaler/internal/reservation"
	"github.com/runnerscaler/runnerscaler/internal/scaling"
	"github.com/runnerscaler/runnerscaler/internal/sweeper"
)

// exitingRunner plays a reconciler and the runner pods it looks at: the named
// runners' containers are still running for the first `running` looks
// (StillRunning calls), then have exited; -1 never exits. It records, for each
// Reconcile, whether the runners had exited by then.
type exitingRunner struct {
	running int
	looked  chan []string // each look's names
	// stopping: the named runners are being stopped (Stopping's answer).
	stopping bool

	mu     sync.Mutex
	looks  int
	sweeps []bool // per Reconcile: had the runners exited?
	// finished: per Reconcile, the runners its decision named finished.
	finished [][]string
}

func newExitingRunner(running int) *exitingRunner {
	return &exitingRunner{running: running, looked: make(chan []string, 1000)}
}

func (x *exitingRunner) exited() bool { return x.running >= 0 && x.looks > x.running }

func (x *exitingRunner) StillRunning(_ context.Context, _ *pool.Pool, pods []string) ([]string, error) {
	x.mu.Lock()
	x.looks++
	exited := x.exited()
	x.mu.Unlock()
	x.looked <- pods
	if exited {
		return nil, nil
	}
	return pods, nil
}

func (x *exitingRunner) Stopping(_ context.Context, _ *pool.Pool, _ []string) (bool, error) {
	return x.stopping, nil
}

func (x *exitingRunner) Reconcile(_ context.Context, _ *pool.Pool, d scaling.Decision, _ *poolstate.Status) error {
	x.mu.Lock()
	defer x.mu.Unlock()
	x.sweeps = append(x.sweeps, x.looks > 0 && x.exited())
	x.finished = append(x.finished, d.Finished)
	return nil
}

func (x *exitingRunner) report() (looks int, sweeps []bool) {
	x.mu.Lock()
	defer x.mu.Unlock()
	return x.looks, slices.Clone(x.sweeps)
}

// newRefillEnv is newEnv with the refill wait and poll given.
func newRefillEnv(t *testing.T, rec sweeper.Reconciler, wait, poll time.Duration) *env {
	t.Helper()
	e := newEnv(t, rec)
	cfg, err := pool.Load(filepath.Join("..", "..", "local", "pools.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	if e.sweeper, err = sweeper.New(cfg, e.rs, e.status, e.leases, rec, e.clock, nil,
		sweeper.Options{RefillWait: wait, RefillPoll: poll}); err != nil {
		t.Fatal(err)
	}
	return e
}

// pollFor steps the fake clock by poll after each of the first n looks, once the
// sweeper waits for it, and returns the names of the look after them.
func (e *env) pollFor(t *testing.T, x *exitingRunner, n int, poll time.Duration) []string {
	t.Helper()
	for i := range n {
		x.next(t, i)
		for !e.clock.HasWaiters() {
			time.Sleep(time.Millisecond)
		}
		e.clock.Step(poll)
	}
	return x.next(t, n)
}

// next waits for look i (from 0) and returns its names.
func (x *exitingRunner) next(t *testing.T, i int) []string {
	t.Helper()
	select {
	case names := <-x.looked:
		return names
	case <-time.After(10 * time.Second):
		t.Fatalf("the sweeper did not look at the runners a %d. time", i+1)
		return nil
	}
}

// TestRefillSweepsAtOnceThenOnceTheRunnerExited: a job completed on runner
// octo-bcdfg-0 of a pool with jobs waiting. The nudge sweeps at once, naming
// the runner finished (the reconciler counts it out once its job link shows
// the job completed, and replaces it); the runner's container exits only a
// moment later (here after three looks): the nudge waits for it, then sweeps
// again, which stops the exited runner. Without the first sweep the slot
// would wait for the exit; without the second, the exited runner would wait
// for the next scheduled sweep.
func TestRefillSweepsAtOnceThenOnceTheRunnerExited(t *testing.T) {
	t.Parallel()
	const poll = 250 * time.Millisecond
	x := newExitingRunner(3)
	e := newRefillEnv(t, x, 10*time.Second, poll)
	e.queue(t, "octo", 1, 2)
	type result struct {
		r   sweeper.Report
		err error
	}
	done := make(chan result, 1)
	go func() {
		r, err := e.invoke(t, []byte(`{"pool":"octo","finished":["octo-bcdfg-0"]}`))
		done <- result{r, err}
	}()
	if last := e.pollFor(t, x, 3, poll); !slices.Equal(last, []string{"octo-bcdfg-0"}) {
		t.Fatalf("looked at %v, want the finished runner", last)
	}
	res := <-done
	if res.err != nil || !contains(res.r.Swept, "octo") {
		t.Fatalf("report %+v, %v; want octo swept", res.r, res.err)
	}
	looks, sweeps := x.report()
	if looks != 4 || !slices.Equal(sweeps, []bool{false, true}) {
		t.Fatalf("%d looks, sweeps saw the runner exited: %v; want a sweep before the first look, 4 looks, then a sweep after the exit", looks, sweeps)
	}
	x.mu.Lock()
	finished := slices.Clone(x.finished)
	x.mu.Unlock()
	if len(finished) != 2 || !slices.Equal(finished[0], []string{"octo-bcdfg-0"}) || !slices.Equal(finished[1], []string{"octo-bcdfg-0"}) {
		t.Fatalf("sweeps named finished %v; want the nudge's runner named in the sweep at once and in the one after its exit", finished)
	}
	if waited := e.clock.Since(t0); waited != 3*poll {
		t.Fatalf("waited %v, want 3 polls", waited)
	}
}

// TestRefillWithoutWaitingJobs: when no job waits for the pool there is no slot
// to refill: the nudge neither waits nor sweeps; the next scheduled sweep
// replaces the finished runner.
func TestRefillWithoutWaitingJobs(t *testing.T) {
	t.Parallel()
	x := newExitingRunner(3)
	e := newRefillEnv(t, x, 10*time.Second, 250*time.Millisecond)
	e.queue(t, "octo", 1)
	if _, err := e.rs.Record(t.Context(), reservation.Delivery{Pool: "octo", JobID: 1, State: reservation.InProgress, Amount: 1, Duration: 10 * time.Minute}); err != nil {
		t.Fatal(err)
	}
	r, err := e.sweeper.Handle(t.Context(), sweeper.Event{Pool: "octo", Finished: []string{"octo-bcdfg-0"}})
	if err != nil || !contains(r.Skipped, "octo") {
		t.Fatalf("report %+v, %v; want octo skipped", r, err)
	}
	if looks, sweeps := x.report(); looks != 0 || len(sweeps) != 0 {
		t.Fatalf("%d looks and %d sweeps with no job waiting, want none", looks, len(sweeps))
	}
	if st := e.desired(t, "octo"); st.Version != 0 {
		t.Fatalf("pool status written: %+v", st)
	}
}

// TestStoppingRunnerIsSweptWithoutWaitingJobs: the job of a runner being stopped
// (deleted, evicted, scaled down) completed: even with no job waiting, the nudge
// waits for its container to exit and sweeps, so the runner is unregistered at
// once rather than at the next scheduled sweep, before GitHub can hand it
// another job.
func TestStoppingRunnerIsSweptWithoutWaitingJobs(t *testing.T) {
	t.Parallel()
	const poll = 250 * time.Millisecond
	x := newExitingRunner(1)
	x.stopping = true
	e := newRefillEnv(t, x, 10*time.Second, poll)
	type result struct {
		r   sweeper.Report
		err error
	}
	done := make(chan result, 1)
	go func() {
		r, err := e.sweeper.Handle(t.Context(), sweeper.Event{Pool: "octo", Finished: []string{"octo-bcdfg-0"}})
		done <- result{r, err}
	}()
	e.pollFor(t, x, 1, poll)
	res := <-done
	if res.err != nil || !contains(res.r.Swept, "octo") {
		t.Fatalf("report %+v, %v; want octo swept", res.r, res.err)
	}
	if looks, sweeps := x.report(); looks != 2 || len(sweeps) != 1 || !sweeps[0] {
		t.Fatalf("%d looks, sweeps %v: want the sweep after the stopping runner exited", looks, sweeps)
	}
}

// TestRefillWaitIsBounded: a runner whose container does not exit holds the
// nudge for RefillWait at most; then the pool is swept anyway.
func TestRefillWaitIsBounded(t *testing.T) {
	t.Parallel()
	const poll = 250 * time.Millisecond
	x := newExitingRunner(-1)
	e := newRefillEnv(t, x, time.Second, poll)
	e.queue(t, "octo", 1)
	done := make(chan sweeper.Report, 1)
	go func() {
		r, _ := e.sweeper.Handle(t.Context(), sweeper.Event{Pool: "octo", Finished: []string{"octo-bcdfg-0"}})
		done <- r
	}()
	e.pollFor(t, x, 4, poll) // looks at 0, 0.25, 0.5, 0.75 s, then the last at 1 s
	if r := <-done; !contains(r.Swept, "octo") {
		t.Fatalf("report %+v, want octo swept after the wait", r)
	}
	if looks, sweeps := x.report(); looks != 5 || !slices.Equal(sweeps, []bool{false, false}) {
		t.Fatalf("%d looks, sweeps %v; want a sweep at once, 5 looks within the 1 s wait, then one more sweep", looks, sweeps)
	}
}

// TestRefillNudgeRejectsBadRunners: a nudge's finished runners must be pod names,
// and few.
func TestRefillNudgeRejectsBadRunners(t *testing.T) {
	t.Parallel()
	x := newExitingRunner(0)
	e := newRefillEnv(t, x, time.Second, 250*time.Millisecond)
	e.queue(t, "octo", 1)
	many := make([]string, 101)
	for i := range many {
		many[i] = "octo-bcdfg-0"
	}
	for _, tc := range []struct {
		names []string
		want  string
	}{
		{[]string{"Octo_Runner"}, `finished runner "Octo_Runner" is not a pod name`},
		{[]string{""}, `finished runner "" is not a pod name`},
		{[]string{strings.Repeat("a", 300)}, "is not a pod name"},
		{many, "101 finished runners named, at most 100"},
	} {
		_, err := e.sweeper.Handle(t.Context(), sweeper.Event{Pool: "octo", Finished: tc.names})
		if err == nil || !strings.Contains(err.Error(), tc.want) || len(err.Error()) > 600 {
			t.Fatalf("finished %.40q: error %v, want one (short) containing %q", tc.names, err, tc.want)
		}
	}
	if looks, sweeps := x.report(); looks != 0 || len(sweeps) != 0 {
		t.Fatalf("rejected nudges looked %d times and swept %d times", looks, len(sweeps))
	}
}

// TestRefillNudgeHandsOverToTheHolder: a refill nudge that finds the pool's lease
// held marks the pool dirty with its finished runner, and the holder sweeps
// again before it lets go, naming that runner finished: the refill is not lost,
// nor does it wait for the runner's exit.
func TestRefillNudgeHandsOverToTheHolder(t *testing.T) {
	t.Parallel()
	rec := &blockingReconciler{entered: make(chan struct{}), release: make(chan struct{})}
	e := newEnv(t, rec)
	e.queue(t, "octo", 1)
	done := make(chan sweeper.Report, 1)
	go func() {
		r, _ := e.sweeper.Handle(t.Context(), sweeper.Event{Pool: "octo"})
		done <- r
	}()
	<-rec.entered
	r, err := e.sweeper.Handle(t.Context(), sweeper.Event{Pool: "octo", Finished: []string{"octo-bcdfg-0"}})
	if err != nil || !contains(r.Skipped, "octo") {
		t.Fatalf("refill nudge during the hold: %+v, %v; want skipped (handed over)", r, err)
	}
	close(rec.release)
	if r := <-done; !contains(r.Swept, "octo") {
		t.Fatalf("holder report %+v", r)
	}
	if n := rec.calls.Load(); n != 2 {
		t.Fatalf("the holder reconciled %d times, want 2 (again for the refill nudge)", n)
	}
	rec.mu.Lock()
	defer rec.mu.Unlock()
	if len(rec.finished) != 2 || len(rec.finished[0]) != 0 || !slices.Equal(rec.finished[1], []string{"octo-bcdfg-0"}) {
		t.Fatalf("finished runners per sweep %v; want none, then the refill nudge's", rec.finished)
	}
}

// TestForcedReleaseLeavesFinishedRunnersToTheNextHolder: a holder that let the
// lease go after a failed sweep (ForceRelease) leaves on it the runners a
// refill nudge handed over; the next sweeper to take the lease names them
// finished, so the refill is not lost.
func TestForcedReleaseLeavesFinishedRunnersToTheNextHolder(t *testing.T) {
	t.Parallel()
	rec := &blockingReconciler{entered: make(chan struct{}), release: make(chan struct{})}
	close(rec.release)
	e := newEnv(t, rec)
	ctx := t.Context()
	held, err := e.leases.Acquire(ctx, "octo", "failing-holder")
	if err != nil {
		t.Fatal(err)
	}
	if ok, err := e.leases.MarkDirtyFor(ctx, "octo", nil, []string{"octo-bcdfg-0"}); err != nil || !ok {
		t.Fatalf("MarkDirtyFor = %v, %v", ok, err)
	}
	if err := held.ForceRelease(ctx); err != nil {
		t.Fatal(err)
	}
	if r, err := e.sweeper.Handle(ctx, sweeper.Event{Pool: "octo"}); err != nil || !contains(r.Swept, "octo") {
		t.Fatalf("nudge after the forced release: %+v, %v; want octo swept", r, err)
	}
	rec.mu.Lock()
	defer rec.mu.Unlock()
	if len(rec.finished) == 0 || !slices.Equal(rec.finished[0], []string{"octo-bcdfg-0"}) {
		t.Fatalf("finished runners per sweep %v; want the handed-over runner named in the first", rec.finished)
	}
}
