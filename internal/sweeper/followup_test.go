package sweeper_test

import (
	"context"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/runnerscaler/runnerscaler/internal/pool"
	"github.com/runnerscaler/runnerscaler/internal/poolstate"
	"github.com/runnerscaler/runnerscaler/internal/scaling"
	"github.com/runnerscaler/runnerscaler/internal/sweeper"
)

// stoppingPool plays a reconciler whose pool has runners being stopped: each
// Reconcile records the phases phases[i] (the last one repeats), as a pool
// whose finished runners hold their slots until a later sweep unregisters them.
type stoppingPool struct {
	phases []map[string]int
	mu     sync.Mutex
	calls  int
	inCall bool
}

func (s *stoppingPool) Reconcile(_ context.Context, _ *pool.Pool, _ scaling.Decision, st *poolstate.Status) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	st.Phases = s.phases[min(s.calls, len(s.phases)-1)]
	s.calls++
	return nil
}

func (s *stoppingPool) count() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.calls
}

// newFollowUpEnv is newEnv with the follow-up's interval and bound given.
func newFollowUpEnv(t *testing.T, rec sweeper.Reconciler, every, bound time.Duration) *env {
	t.Helper()
	e := newEnv(t, rec)
	cfg, err := pool.Load(filepath.Join("..", "..", "local", "pools.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	if e.sweeper, err = sweeper.New(cfg, e.rs, e.status, e.leases, rec, e.clock, nil,
		sweeper.Options{FollowUpEvery: every, FollowUpFor: bound}); err != nil {
		t.Fatal(err)
	}
	return e
}

// nudge sends a nudge for pool and, until it returns, steps the fake clock by
// a tenth of every whenever something waits on it; it returns the report and
// how far the clock was stepped. The steps are small because the lease's
// renewal timer waits on the clock too while a sweep holds the pool: large
// ones would let the lease run out under a slow sweep.
func (e *env) nudge(t *testing.T, pool string, every time.Duration) (sweeper.Report, time.Duration) {
	t.Helper()
	done := make(chan sweeper.Report, 1)
	go func() {
		r, err := e.sweeper.Handle(t.Context(), sweeper.Event{Pool: pool})
		if err != nil {
			t.Errorf("nudge: %v", err)
		}
		done <- r
	}()
	deadline := time.After(20 * time.Second)
	var stepped time.Duration
	for {
		select {
		case r := <-done:
			return r, stepped
		case <-deadline:
			t.Fatal("the nudge did not return")
		case <-time.After(2 * time.Millisecond):
		}
		if e.clock.HasWaiters() {
			e.clock.Step(every / 10)
			stepped += every / 10
		}
	}
}

// TestNudgeFollowsUpAStopThatHoldsWaitingJobs: a nudge's sweep leaves a job
// waiting while the pool's one slot is held by a runner being stopped (its
// stop goes on at the next sweep). No other event comes — no job starts or
// ends to nudge again, and the schedule is far — so the nudge sweeps the pool
// again itself, after FollowUpEvery, and stops once the sweep leaves no job
// waiting behind a stop (the runner replaced: one pending).
func TestNudgeFollowsUpAStopThatHoldsWaitingJobs(t *testing.T) {
	t.Parallel()
	const every = time.Second
	rec := &stoppingPool{phases: []map[string]int{{"stopping": 1}, {"pending": 1}}}
	e := newFollowUpEnv(t, rec, every, 20*time.Second)
	e.queue(t, "octo", 1)
	r, stepped := e.nudge(t, "octo", every)
	if !contains(r.Swept, "octo") {
		t.Fatalf("report %+v, want octo swept", r)
	}
	if n := rec.count(); n != 2 {
		t.Fatalf("%d sweeps of the nudge, want 2: the nudge's, and one follow-up that found the slot refilled", n)
	}
	if stepped < every {
		t.Fatalf("the follow-up came after %v, want it after FollowUpEvery (%v)", stepped, every)
	}
}

// TestFollowUpIsBoundedAndOnlyForWaitingJobs: a stop that does not end within
// FollowUpFor ends the follow-ups (the next nudge or tick sweeps again); and a
// sweep that leaves no job waiting behind a stop — no job queued, or the pool
// has the runners it wants besides the one being stopped — is not followed up.
func TestFollowUpIsBoundedAndOnlyForWaitingJobs(t *testing.T) {
	t.Parallel()
	const every, bound = time.Second, 3 * time.Second
	for _, tc := range []struct {
		name   string
		queued bool
		phases map[string]int
		min    int
		max    int
	}{
		{"a stop that never ends", true, map[string]int{"stopping": 1}, 2, 1 + int(bound/every)},
		{"a pod being deleted that never goes", true, map[string]int{"terminating": 1}, 2, 1 + int(bound/every)},
		{"no job waits", false, map[string]int{"stopping": 1}, 1, 1},
		{"the pool has its runners", true, map[string]int{"stopping": 1, "running": 1}, 1, 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			rec := &stoppingPool{phases: []map[string]int{tc.phases}}
			e := newFollowUpEnv(t, rec, every, bound)
			if tc.queued {
				e.queue(t, "octo", 1)
			}
			r, _ := e.nudge(t, "octo", every)
			if !contains(r.Swept, "octo") {
				t.Fatalf("report %+v, want octo swept", r)
			}
			if n := rec.count(); n < tc.min || n > tc.max {
				t.Fatalf("%d sweeps, want %d to %d", n, tc.min, tc.max)
			}
		})
	}
}
