package reconcile_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/runnerscaler/runnerscaler/internal/emf"
	"github.com/runnerscaler/runnerscaler/internal/githubapi"
	"github.com/runnerscaler/runnerscaler/internal/pool"
	"github.com/runnerscaler/runnerscaler/internal/reconcile"
	"github.com/runnerscaler/runnerscaler/internal/reservation"
	"github.com/runnerscaler/runnerscaler/internal/scope"
	"github.com/runnerscaler/runnerscaler/local/githubsim"
)

// GitHub's REST busy flag lies (it lists a runner that holds a job as idle for a
// while after the job was assigned, and at moments during it, and then answers
// RemoveRunner with 204). Each test below makes exactly one busy signal the one
// that knows a job runs, with every other signal saying idle, and fails if the
// reconciler ignores that signal: the runner would be removed under its job.

// busyWorld is a persistent pool with one registered runner that already ran a
// job (so its idle confirmation applies), and a reconciler that writes metrics.
type busyWorld struct {
	*env
	name    string
	id      int64
	metrics *bytes.Buffer
}

func newBusyWorld(t *testing.T, opts ...func(*githubsim.Options)) *busyWorld {
	t.Helper()
	e := newEnv(t, false, opts...)
	w := &busyWorld{env: e, metrics: &bytes.Buffer{}}
	mw, err := emf.NewWriter(w.metrics, "")
	if err != nil {
		t.Fatal(err)
	}
	cfg, err := pool.Parse([]byte(poolYAML(e.ns, false, "runner:1")))
	if err != nil {
		t.Fatal(err)
	}
	if e.rec, err = reconcile.New(cfg, e.kube, e.gh, e.clock, nil, reconcile.Options{JobLinks: e.links, Metrics: mw, Roster: e.roster}); err != nil {
		t.Fatal(err)
	}
	e.mustSweep(1, time.Time{})
	w.name = e.statefulSets()[0]
	w.id = e.start(w.name).ID
	e.mustSweep(1, time.Time{}) // records the registration
	// An earlier job, long finished: the runner is no longer one that never took a job.
	e.links.link(w.name+"-0", 1, reservation.Completed, e.clock.Now())
	return w
}

// reportJob plays the kubelet running the runner container's job probe: the
// container is ready exactly while a job runs, and the pod's Ready condition follows.
func (w *busyWorld) reportJob(job bool) {
	w.t.Helper()
	pod := w.pods()[w.name]
	now := metav1.NewTime(w.clock.Now())
	status := corev1.ConditionFalse
	if job {
		status = corev1.ConditionTrue
	}
	pod.Status.Conditions = []corev1.PodCondition{{Type: corev1.PodReady, Status: status, LastTransitionTime: now}}
	pod.Status.ContainerStatuses[0].Ready = job
	if _, err := w.kube.CoreV1().Pods(w.ns).UpdateStatus(w.t.Context(), pod, metav1.UpdateOptions{}); err != nil {
		w.t.Fatal(err)
	}
}

// takeJob gives the runner a job on the Actions side; REST keeps saying idle.
func (w *busyWorld) takeJob() {
	w.t.Helper()
	if err := w.sim.SetBusy(w.id, true); err != nil {
		w.t.Fatal(err)
	}
	if err := w.sim.SetRESTBusy(w.id, false); err != nil {
		w.t.Fatal(err)
	}
}

// scaleDownAndConfirmIdle marks the runner for removal while GitHub lists it
// idle, and lets the idle confirmation start: the first idle read.
func (w *busyWorld) scaleDownAndConfirmIdle() {
	w.t.Helper()
	w.mustSweep(0, time.Time{})
	if got := w.statefulSets(); !slices.Equal(got, []string{w.name}) {
		w.t.Fatalf("after the first idle read: %v, want %s kept until the idle confirmation", got, w.name)
	}
	if w.removals() != 0 {
		w.t.Fatal("RemoveRunner called on the first idle read")
	}
	w.clock.Step(reconcile.DefaultIdleConfirmation)
}

func (w *busyWorld) removals() int { return w.sim.Calls()[removeCall] }

// kept asserts the runner is still there and GitHub was not asked to remove it.
func (w *busyWorld) kept(why string) {
	w.t.Helper()
	if got := w.statefulSets(); !slices.Equal(got, []string{w.name}) {
		w.t.Fatalf("%s: statefulsets %v, want the runner %s kept", why, got, w.name)
	}
	if _, ok := w.sim.Runner(w.id); !ok || w.removals() != 0 {
		w.t.Fatalf("%s: the runner was removed on GitHub (%d RemoveRunner calls)", why, w.removals())
	}
}

// metric sums a field over the pool records written so far.
func (w *busyWorld) metric(name string) float64 {
	w.t.Helper()
	sum := 0.0
	for line := range strings.Lines(w.metrics.String()) {
		var rec map[string]any
		if err := json.Unmarshal([]byte(line), &rec); err != nil {
			w.t.Fatalf("metric line %q: %v", line, err)
		}
		if v, ok := rec[name].(float64); ok {
			sum += v
		}
	}
	return sum
}

// TestPodReportVetoesRemoval: GitHub lists the runner idle on two reads the idle
// confirmation apart, and no in_progress delivery has named it yet, but its job
// probe reports the job it took in between: no RemoveRunner. Once the job ends
// the runner goes after a fresh idle confirmation.
func TestPodReportVetoesRemoval(t *testing.T) {
	t.Parallel()
	w := newBusyWorld(t)
	w.scaleDownAndConfirmIdle()
	w.takeJob()
	w.reportJob(true)
	w.mustSweep(0, time.Time{})
	w.kept("GitHub idle twice, the pod reports a job")
	if got := w.metric("RemovalsVetoedByPodReport"); got < 1 {
		t.Fatalf("RemovalsVetoedByPodReport %v, want the veto counted", got)
	}

	if err := w.sim.FinishJob(w.id); err != nil {
		t.Fatal(err)
	}
	w.reportJob(false)
	w.mustSweep(0, time.Time{}) // a fresh idle streak starts
	w.kept("the job just ended")
	w.clock.Step(reconcile.DefaultIdleConfirmation)
	w.mustSweep(0, time.Time{})
	if got := w.statefulSets(); len(got) != 0 || w.removals() != 1 {
		t.Fatalf("after the job and the idle confirmation: %v, %d RemoveRunner calls; want the runner removed once", got, w.removals())
	}
}

// TestJobLinkVetoesRemoval: a job routed to another pool runs on this runner (its
// labels cover that job's). GitHub lists the runner idle twice, the pod's report
// lags: the in_progress delivery that named the runner vetoes the removal.
func TestJobLinkVetoesRemoval(t *testing.T) {
	t.Parallel()
	w := newBusyWorld(t)
	w.scaleDownAndConfirmIdle()
	w.takeJob()
	w.links.link(w.name+"-0", 42, reservation.InProgress, w.clock.Now())
	w.mustSweep(0, time.Time{})
	w.kept("GitHub idle twice, another pool's job in progress on the runner")
	if got := w.metric("RemovalsVetoedByJobLink"); got < 1 {
		t.Fatalf("RemovalsVetoedByJobLink %v, want the veto counted", got)
	}
	if got := w.metric("BusySignalDisagreements"); got < 1 {
		t.Fatalf("BusySignalDisagreements %v, want GitHub's idle answer against the link counted", got)
	}
	if rn, _ := w.sim.Runner(w.id); !slices.Equal(rn.Labels, []string{"self-hosted", "Linux", "X64"}) {
		t.Fatalf("runner labels on GitHub %v: want them removed (the idle confirmation was complete, so the stop withdrew them before the link's veto)", rn.Labels)
	}
	w.links.link(w.name+"-0", 42, reservation.Completed, w.clock.Now())
	if err := w.sim.FinishJob(w.id); err != nil {
		t.Fatal(err)
	}
	// Its labels are gone, so GitHub hands it no job of its pool: once the link
	// and the pod's report say idle, its pod goes without a fresh idle streak.
	w.mustSweep(0, time.Time{})
	if got := w.statefulSets(); len(got) != 0 {
		t.Fatalf("after the job completed: %v, want the runner removed", got)
	}
}

// TestJobCompletedWithoutTheRunnersNameEndsTheLinksVeto: the runner's link
// says in_progress, and the job's `completed` delivery named no runner (GitHub
// sends some so): the link alone would veto the runner's stop for the link's
// lifetime (hours). Once the job's own record is completed, the link no
// longer vetoes; while it is not, it still does.
func TestJobCompletedWithoutTheRunnersNameEndsTheLinksVeto(t *testing.T) {
	t.Parallel()
	w := newBusyWorld(t)
	w.links.link(w.name+"-0", 42, reservation.InProgress, w.clock.Now())
	w.links.mu.Lock()
	w.links.jobs[w.name+"-0"][len(w.links.jobs[w.name+"-0"])-1].Pool = "p"
	w.links.mu.Unlock()
	w.scaleDownAndConfirmIdle()
	w.mustSweep(0, time.Time{})
	w.kept("a job in progress by its link, and by its own record")
	w.links.complete("p", 42)
	w.clock.Step(reconcile.DefaultIdleConfirmation)
	w.mustSweep(0, time.Time{})
	w.mustSweep(0, time.Time{})
	if got := w.statefulSets(); len(got) != 0 || w.removals() != 1 {
		t.Fatalf("after the job's record completed: %v, %d RemoveRunner calls; want the runner removed once", got, w.removals())
	}
}

// TestIdleConfirmationCatchesTheLagAfterAssignment: GitHub hands the runner a job
// and lists it idle for the next 60 s; the pod's report lags and the in_progress
// delivery is lost. The first idle read only starts the idle confirmation, and
// by the second read, 90 s on, GitHub lists the runner busy.
func TestIdleConfirmationCatchesTheLagAfterAssignment(t *testing.T) {
	t.Parallel()
	w := newBusyWorld(t)
	if err := w.sim.SetBusyLie(&githubsim.BusyLie{MinLag: time.Minute, MaxLag: time.Minute}); err != nil {
		t.Fatal(err)
	}
	if err := w.sim.SetBusy(w.id, true); err != nil {
		t.Fatal(err)
	}
	w.mustSweep(0, time.Time{})
	w.kept("job assigned a moment ago, GitHub lists the runner idle")
	if got := w.metric("RemovalsVetoedByIdleWindow"); got < 1 {
		t.Fatalf("RemovalsVetoedByIdleWindow %v, want the wait counted", got)
	}
	w.clock.Step(reconcile.DefaultIdleConfirmation)
	w.mustSweep(0, time.Time{})
	w.kept("GitHub lists the runner busy on the second read")
	if len(w.sim.LostJobs()) != 0 {
		t.Fatalf("jobs lost: %+v", w.sim.LostJobs())
	}
}

// TestIdleConfirmationIsBetweenReads: with shared runner lists, a sweep may be
// served a list read seconds before it; the idle confirmation runs from
// GitHub's first idle read to its last, not to the sweep's clock. The first
// idle read is at t; a read at t+85 s still lists the runner idle; a sweep at
// t+91 s is served that read (6 s old): only 85 s of GitHub's reads, so no
// removal. The next read, past the list's age, completes the confirmation.
func TestIdleConfirmationIsBetweenReads(t *testing.T) {
	t.Parallel()
	w := newBusyWorld(t)
	cfg, err := pool.Parse([]byte(poolYAML(w.ns, false, "runner:1")))
	if err != nil {
		t.Fatal(err)
	}
	if w.rec, err = reconcile.New(cfg, w.kube, w.gh, w.clock, nil, reconcile.Options{JobLinks: w.links, Roster: w.roster,
		RunnerListMaxAge: 10 * time.Second}); err != nil {
		t.Fatal(err)
	}
	w.mustSweep(0, time.Time{}) // the first idle read
	w.kept("first idle read")
	w.clock.Step(reconcile.DefaultIdleConfirmation - 5*time.Second)
	w.mustSweep(0, time.Time{}) // a new read: the list of the first is too old
	w.kept("85 s of idle reads")
	w.clock.Step(6 * time.Second)
	w.mustSweep(0, time.Time{})
	w.kept("the sweep 91 s on was served the read of 85 s")
	w.clock.Step(5 * time.Second)
	w.mustSweep(0, time.Time{})
	if w.removals() != 1 {
		t.Fatalf("%d RemoveRunner calls after idle reads 96 s apart, want 1", w.removals())
	}
}

// TestIdleConfirmationCatchesAFlickerMidJob: a long job, listed busy, except at
// the one moment the sweep reads GitHub's list; the pod's report and the link are
// blind (no hooks in the image, the in_progress delivery lost). The idle read
// starts the idle confirmation; the next read lists the runner busy and ends it.
func TestIdleConfirmationCatchesAFlickerMidJob(t *testing.T) {
	t.Parallel()
	w := newBusyWorld(t)
	if err := w.sim.SetBusy(w.id, true); err != nil {
		t.Fatal(err)
	}
	w.mustSweep(1, time.Time{}) // GitHub lists it busy
	if err := w.sim.SetRESTBusy(w.id, false); err != nil {
		t.Fatal(err)
	}
	w.mustSweep(0, time.Time{}) // the flicker: idle on this read
	w.kept("a flicker mid-job")
	if err := w.sim.SetRESTBusy(w.id, true); err != nil {
		t.Fatal(err)
	}
	w.clock.Step(reconcile.DefaultIdleConfirmation)
	w.mustSweep(0, time.Time{})
	w.kept("busy again on the next read")
	if _, ok := w.pods()[w.name].Annotations["runnerscaler.dev/github-idle-since"]; ok {
		t.Fatal("the busy read did not end the idle streak")
	}
}

// forbiddenGitHub answers RemoveRunner with GitHub's 403 while forbid is set.
type forbiddenGitHub struct {
	reconcile.GitHub
	forbid atomic.Bool
}

func (f *forbiddenGitHub) RemoveRunner(ctx context.Context, s scope.Scope, id int64) error {
	if f.forbid.Load() {
		return fmt.Errorf("injected: %w", githubapi.ErrForbidden)
	}
	return f.GitHub.RemoveRunner(ctx, s, id)
}

// TestForbiddenNeverCompletesAStop: the App may not remove runners (403). The
// runner runs a job that every signal misses (GitHub lists it idle, no report,
// no link): its pod is deleted to stop it, the entrypoint lets the job finish,
// and then RemoveRunner answers 403. The stop does not complete while GitHub
// lists the runner, the pool status says which permission to grant, and the
// runner keeps its slot. Once GitHub no longer lists it, the stop completes.
func TestForbiddenNeverCompletesAStop(t *testing.T) {
	t.Parallel()
	w := newBusyWorld(t)
	gh := &forbiddenGitHub{GitHub: w.gh}
	gh.forbid.Store(true)
	w.useGitHub(gh)
	w.scaleDownAndConfirmIdle()
	w.takeJob()
	w.mustSweep(0, time.Time{}) // its pod deleted to stop it: the entrypoint waits for the job
	w.kept("the job runs")
	if err := w.sim.FinishJob(w.id); err != nil {
		t.Fatal(err)
	}
	for range 3 {
		w.mustSweep(0, time.Time{})
		if got := w.statefulSets(); !slices.Equal(got, []string{w.name}) {
			t.Fatalf("after a 403: %v, want the runner %s kept", got, w.name)
		}
		if reason := w.status.Stuck[w.name]; !strings.Contains(reason, "403") || !strings.Contains(reason, "Self-hosted runners") {
			t.Fatalf("stuck %q, want the 403 and the permission to grant", reason)
		}
		w.clock.Step(time.Minute)
	}
	if err := w.gh.RemoveRunner(t.Context(), w.pool.Scope(), w.id); err != nil { // an admin removes it
		t.Fatal(err)
	}
	w.mustSweep(0, time.Time{})
	if got := w.statefulSets(); len(got) != 0 {
		t.Fatalf("GitHub no longer lists the runner: %v, want the stop completed", got)
	}
}

// TestNeverUsedRunnerGoesAtOnce: a runner that never took a job — no link, and
// its job probe never reported one — is removed on the first idle read: scale-down
// of unused capacity does not wait for the idle confirmation.
func TestNeverUsedRunnerGoesAtOnce(t *testing.T) {
	t.Parallel()
	e := newEnv(t, false)
	e.mustSweep(1, time.Time{})
	name := e.statefulSets()[0]
	e.start(name)
	e.mustSweep(1, time.Time{})
	e.clock.Step(3 * time.Second) // its job probe has had time to report a job
	e.mustSweep(0, time.Time{})
	if got := e.statefulSets(); len(got) != 0 {
		t.Fatalf("an unused runner: %v, want it removed at once", got)
	}
}

// TestStartingRunnerIsNotTakenForIdle: a runner marked for scale-down while its
// pod's status still shows the container being created (the kubelet reports a
// start a moment after it) may already have registered and taken a job: GitHub
// lists it idle (the lag after assignment), no report, no link yet. It is not
// removed on the first idle read; nor is a runner whose container started less
// than the report's settling time ago.
func TestStartingRunnerIsNotTakenForIdle(t *testing.T) {
	t.Parallel()
	for _, started := range []bool{false, true} {
		t.Run(fmt.Sprintf("status shows it running: %v", started), func(t *testing.T) {
			t.Parallel()
			e := newEnv(t, true)
			e.mustSweep(1, time.Time{})
			name := e.statefulSets()[0]
			if started { // a moment ago: its job probe may not have reported yet
				e.run(name)
				e.setRunnerStatus(name, corev1.ContainerStatus{State: corev1.ContainerState{
					Running: &corev1.ContainerStateRunning{StartedAt: metav1.NewTime(e.clock.Now())}}})
			} else {
				e.setRunnerStatus(name, corev1.ContainerStatus{State: corev1.ContainerState{Waiting: &corev1.ContainerStateWaiting{Reason: "ContainerCreating"}}})
			}
			id := e.register(name).ID
			if err := e.sim.SetBusy(id, true); err != nil {
				t.Fatal(err)
			}
			if err := e.sim.SetRESTBusy(id, false); err != nil {
				t.Fatal(err)
			}
			e.mustSweep(0, time.Time{})
			if got := e.statefulSets(); !slices.Equal(got, []string{name}) {
				t.Fatalf("statefulsets %v, want %s kept", got, name)
			}
			if _, ok := e.sim.Runner(id); !ok || len(e.sim.LostJobs()) != 0 {
				t.Fatalf("the runner was removed on GitHub under its job (lost %v)", e.sim.LostJobs())
			}
		})
	}
}

// TestDeletedPodNotYetReportedRunningIsNotTakenForEnded: a runner's pod is
// deleted (a drain, a hand) a moment after its container started, before the
// kubelet reported the start: the status still shows the container being
// created, but the runner has registered and taken a job, and GitHub's REST
// view lies idle. A container of a pod being deleted that has not terminated
// may be running: the runner is not removed on GitHub under its job (300-job
// chaos: the job was lost).
func TestDeletedPodNotYetReportedRunningIsNotTakenForEnded(t *testing.T) {
	t.Parallel()
	e := newEnv(t, true)
	e.mustSweep(1, time.Time{})
	name := e.statefulSets()[0]
	e.pods() // the StatefulSet controller has made the pod
	e.bind(name+"-0", "node-a")
	e.setRunnerStatus(name, corev1.ContainerStatus{State: corev1.ContainerState{Waiting: &corev1.ContainerStateWaiting{Reason: "ContainerCreating"}}})
	id := e.register(name).ID
	if err := e.sim.SetBusy(id, true); err != nil {
		t.Fatal(err)
	}
	if err := e.sim.SetRESTBusy(id, false); err != nil {
		t.Fatal(err)
	}
	if err := e.raw.CoreV1().Pods(e.ns).Delete(t.Context(), name+"-0", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	for range 3 {
		if err := e.sweep(0, time.Time{}); err != nil {
			t.Fatalf("sweep: %v", err)
		}
	}
	if _, ok := e.sim.Runner(id); !ok || len(e.sim.LostJobs()) != 0 {
		t.Fatalf("the runner was removed on GitHub under its job (lost %v)", e.sim.LostJobs())
	}
}
