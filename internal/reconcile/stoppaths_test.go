package reconcile_test

import (
	"context"
	"net/http"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"

	"github.com/runnerscaler/runnerscaler/internal/githubapi"
	"github.com/runnerscaler/runnerscaler/internal/pool"
	"github.com/runnerscaler/runnerscaler/internal/reconcile"
	"github.com/runnerscaler/runnerscaler/internal/reservation"
	"github.com/runnerscaler/runnerscaler/internal/runnerpod"
	"github.com/runnerscaler/runnerscaler/internal/scaling"
	"github.com/runnerscaler/runnerscaler/internal/scope"
	"github.com/runnerscaler/runnerscaler/local/githubsim"
)

// TestPodTurnedReadyDuringWithdrawalIsNotDeleted: GitHub hands an idle runner
// being stopped a job while the sweeper removes its labels, and its pod turns
// Ready (the job probe) before the sweeper records the removal on the pod. The
// pod is read again right before its deletion: it reports a job, so it is not
// deleted, and the runner stays until the job is over.
func TestPodTurnedReadyDuringWithdrawalIsNotDeleted(t *testing.T) {
	t.Parallel()
	w := newBusyWorld(t)
	w.scaleDownAndConfirmIdle()
	var turned atomic.Bool
	w.useClient(func(req *http.Request) {
		if req.Method != http.MethodPatch || !strings.HasSuffix(req.URL.Path, "/pods/"+w.name+"-0") {
			return
		}
		if rn, _ := w.sim.Runner(w.id); !slices.Contains(rn.Labels, "big") && !turned.Swap(true) {
			w.takeJob()
			w.reportJob(true)
		}
	})
	if err := w.sweep(0, time.Time{}); err != nil {
		t.Fatal(err)
	}
	if !turned.Load() {
		t.Fatal("the sweep recorded no label removal on the pod: the test proves nothing")
	}
	if pod := w.pod(w.name + "-0"); pod.DeletionTimestamp != nil {
		t.Fatal("the pod was deleted although it turned Ready (took a job) during the label withdrawal")
	}
	w.kept("a job started during the label withdrawal")
}

// TestUnregisteredRunnerPastTheTimeoutIsStoppedByItsEntrypoint: a token-mode
// runner GitHub has not listed by the registration timeout registers, and takes
// a job, just after the sweep read GitHub's list. It is not concluded "never
// registered" and deleted under its listener: its pod is deleted, so that its
// entrypoint lets the job finish, and once its container has ended GitHub's
// list shows it and it is removed there too (its registration does not leak).
func TestUnregisteredRunnerPastTheTimeoutIsStoppedByItsEntrypoint(t *testing.T) {
	t.Parallel()
	e := newEnv(t, false)
	e.mustSweep(1, time.Time{})
	name := e.statefulSets()[0]
	e.run(name)
	e.clock.Step(11 * time.Minute)
	var reg githubsim.Runner
	var registered atomic.Bool
	e.useClient(func(req *http.Request) {
		if req.Method == http.MethodDelete && !registered.Swap(true) {
			reg = e.register(name) // just after the sweep's list
			e.setBusy(reg.ID, true)
		}
	})
	e.mustSweep(1, time.Time{})
	if !registered.Load() {
		t.Fatal("the sweep deleted nothing: the test proves nothing")
	}
	if !slices.Contains(e.statefulSets(), name) {
		t.Fatal("the runner that registered and took a job as the registration timeout passed was deleted under its job")
	}
	if _, ok := e.sim.Runner(reg.ID); !ok {
		t.Fatal("the runner running a job was removed from GitHub")
	}
	e.setBusy(reg.ID, false) // its job ends; the entrypoint stops the runner
	e.mustSweep(1, time.Time{})
	e.mustSweep(1, time.Time{})
	if slices.Contains(e.statefulSets(), name) {
		t.Fatal("the stopped runner was not deleted")
	}
	if _, ok := e.sim.Runner(reg.ID); ok {
		t.Fatal("the runner was deleted without being unregistered: its registration leaks")
	}
}

// TestWaitingJobOfAnotherPoolHoldsAnIdleRunner: GitHub hands a waiting job to
// any idle runner whose labels match it, whatever pool it was routed to; a
// runner whose listener stops just then cancels it. So an idle runner of pool
// p is not stopped while a job of pool q, whose labels p's runners carry, waits;
// once it no longer waits, the runner goes.
func TestWaitingJobOfAnotherPoolHoldsAnIdleRunner(t *testing.T) {
	t.Parallel()
	w := newBusyWorld(t)
	cfg, err := pool.Parse([]byte(poolYAML(w.ns, false, "runner:1") + `
  - name: q
    organization: acme
    labels: [linux]
    maxReplicas: 1
    kubernetes: {namespace: ` + w.ns + `, image: "runner:1"}
`))
	if err != nil {
		t.Fatal(err)
	}
	queued := &queuedJobs{byPool: map[string][]reservation.Reservation{
		"q": {{Pool: "q", JobID: 7, State: reservation.Queued, Amount: 1, Labels: []string{"self-hosted", "linux"}}}}}
	if w.rec, err = reconcile.New(cfg, w.kube, w.gh, w.clock, nil, reconcile.Options{JobLinks: w.links, Queued: queued, Roster: w.roster}); err != nil {
		t.Fatal(err)
	}
	w.scaleDownAndConfirmIdle()
	if err := w.rec.Reconcile(t.Context(), w.pool, scaling.Decision{}, &w.status); err != nil {
		t.Fatal(err)
	}
	if pod := w.pod(w.name + "-0"); pod.DeletionTimestamp != nil {
		t.Fatal("the idle runner was stopped while a job of another pool that its labels match waits")
	}
	if rn, _ := w.sim.Runner(w.id); !slices.Contains(rn.Labels, "big") {
		t.Fatalf("labels %v: the held runner's labels were removed", rn.Labels)
	}
	if n := queued.reads.Load(); n != 1 {
		t.Fatalf("%d reads of pool q's jobs, want 1", n)
	}
	queued.set("q", nil) // the job was taken
	if err := w.rec.Reconcile(t.Context(), w.pool, scaling.Decision{}, &w.status); err != nil {
		t.Fatal(err)
	}
	if pod := w.pod(w.name + "-0"); pod.DeletionTimestamp == nil {
		t.Fatal("the idle runner was kept after no job waited")
	}
}

// queuedJobs plays the reservation store's active reservations by pool.
type queuedJobs struct {
	mu     chan struct{}
	byPool map[string][]reservation.Reservation
	reads  atomic.Int64
}

func (q *queuedJobs) set(pool string, rs []reservation.Reservation) {
	q.lock()
	defer q.unlock()
	q.byPool[pool] = rs
}

func (q *queuedJobs) Active(_ context.Context, pool string, _ ...int64) ([]reservation.Reservation, error) {
	q.reads.Add(1)
	q.lock()
	defer q.unlock()
	return slices.Clone(q.byPool[pool]), nil
}

func (q *queuedJobs) lock() {
	if q.mu == nil {
		q.mu = make(chan struct{}, 1)
	}
	q.mu <- struct{}{}
}

func (q *queuedJobs) unlock() { <-q.mu }

// TestRunnerAListMissesIsStillCheckedAndRemoved: GitHub's runner list, read
// page by page while runners come and go, misses a persistent runner that runs
// a job of another pool (the link shows it). Not listed is no proof of idle:
// its pod and link are still read before its pod goes, and the link keeps it.
// Once the job is over and its container has ended, the runner, which the list
// still misses, is read by itself and removed from GitHub: its registration
// does not outlive its pod.
func TestRunnerAListMissesIsStillCheckedAndRemoved(t *testing.T) {
	t.Parallel()
	w := newBusyWorld(t)
	w.scaleDownAndConfirmIdle()
	w.useGitHub(&missingGitHub{GitHub: w.gh, id: w.id})
	w.takeJob()
	w.links.link(w.name+"-0", 42, reservation.InProgress, w.clock.Now())
	w.mustSweep(0, time.Time{})
	if pod := w.pod(w.name + "-0"); pod.DeletionTimestamp != nil {
		t.Fatal("the pod of a runner the list missed was deleted while the link shows its job")
	}
	w.links.link(w.name+"-0", 42, reservation.Completed, w.clock.Now())
	if err := w.sim.SetBusy(w.id, false); err != nil {
		t.Fatal(err)
	}
	w.mustSweep(0, time.Time{})
	if got := w.statefulSets(); len(got) != 0 {
		t.Fatalf("statefulsets %v, want the stopped runner deleted", got)
	}
	if _, ok := w.sim.Runner(w.id); ok {
		t.Fatal("the runner's registration outlived its pod: the list missed it, and no one asked GitHub")
	}
}

// missingGitHub is GitHub whose runner lists miss runner id (its pages shifted
// as runners came and went), while a read of the runner alone finds it.
type missingGitHub struct {
	reconcile.GitHub
	id int64
}

func (g *missingGitHub) Runners(ctx context.Context, s scope.Scope) ([]githubapi.Runner, error) {
	list, err := g.GitHub.Runners(ctx, s)
	return slices.DeleteFunc(list, func(r githubapi.Runner) bool { return r.ID == g.id }), err
}

// TestRunnerNotStartedIsNotFinished: an ephemeral runner container whose first
// start failed before its runner started (the entrypoint's termination message
// says so) waits for the kubelet to start it again: started again, it registers
// and takes a job like a first start. It is not taken for finished: neither
// replaced nor stopped, before or after it started again.
func TestRunnerNotStartedIsNotFinished(t *testing.T) {
	t.Parallel()
	e := newEnv(t, true)
	e.mustSweep(1, time.Time{})
	name := e.statefulSets()[0]
	e.run(name)
	e.setRunnerStatus(name, corev1.ContainerStatus{RestartCount: 1,
		State: corev1.ContainerState{Waiting: &corev1.ContainerStateWaiting{Reason: "CrashLoopBackOff"}},
		LastTerminationState: corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{ExitCode: 1, Reason: "Error",
			Message: "runner not started: docker did not become ready within 120s"}}})
	e.mustSweep(1, time.Time{})
	if got := e.statefulSets(); !slices.Equal(got, []string{name}) {
		t.Fatalf("statefulsets %v, want only %s: a runner that has not started yet is not finished", got, name)
	}
	if pod := e.pods()[name]; pod.DeletionTimestamp != nil || pod.Annotations[runnerpod.AnnotationUnregistrationRequest] != "" {
		t.Fatalf("the not-started runner's pod: deleted %v, annotations %v; want it left to start again", pod.DeletionTimestamp, pod.Annotations)
	}

	// Started again, it registers and takes a job, which GitHub lists idle for
	// a while (and the job probe has not reported yet): it is not removed.
	r := e.register(name)
	e.setBusy(r.ID, true)
	if err := e.sim.SetRESTBusy(r.ID, false); err != nil {
		t.Fatal(err)
	}
	e.setRunnerStatus(name, corev1.ContainerStatus{RestartCount: 1,
		State: corev1.ContainerState{Running: &corev1.ContainerStateRunning{}},
		LastTerminationState: corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{ExitCode: 1, Reason: "Error",
			Message: "runner not started: docker did not become ready within 120s"}}})
	for range 5 {
		e.clock.Step(30 * time.Second)
		e.mustSweep(1, time.Time{})
	}
	if !slices.Equal(e.statefulSets(), []string{name}) || e.sim.Calls()[removeCall] != 0 {
		t.Fatalf("statefulsets %v, %d RemoveRunner calls: want the restarted runner, which runs a job, kept and not removed",
			e.statefulSets(), e.sim.Calls()[removeCall])
	}
	if _, ok := e.sim.Runner(r.ID); !ok {
		t.Fatal("the restarted runner running a job was removed from GitHub")
	}
}
