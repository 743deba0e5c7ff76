package tests

import (
	"context"
	"net/http"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/runnerscaler/runnerscaler/internal/reconcile"
	"github.com/runnerscaler/runnerscaler/internal/runnername"
	"github.com/runnerscaler/runnerscaler/internal/runnerpod"
	"github.com/runnerscaler/runnerscaler/local/githubsim"
	"github.com/runnerscaler/runnerscaler/local/loop"
)

// Paths of the graceful stop on which a runner that holds a job was taken for
// an idle one. Each test drives the real entrypoint and fake runner
// on the node into the path, and judges by the simulator's truth how the job
// ended.

// restartedPool: one ephemeral runner at a time, registered by config.sh with
// a registration token (so a failed registration fails the container's start
// before the entrypoint writes its run marker).
const restartedPool = `
pools:
  - name: once
    organization: acme
    labels: [once]
    registration: token
    maxReplicas: 1
    scaleDownDelaySecondsAfterScaleOut: 1
    kubernetes: {namespace: %[1]s, template: %[2]s}
`

// TestStopPathRestartedBeforeItsRunMarker: an ephemeral runner whose first
// container start fails before runner/entrypoint.sh writes its run marker
// (config.sh's registration answered 502) is restarted by the kubelet,
// registers, and takes the job waiting for it. It has not run yet: a restart
// before the marker is not a finished runner. GitHub's REST view lists it idle
// for the first minute of its job (the busy lie), while the sweeper runs every
// second: the job must still run to its end on that runner, whose registration
// is not removed under it.
func TestStopPathRestartedBeforeItsRunMarker(t *testing.T) {
	t.Parallel()
	lag := time.Minute
	w := newWorld(t, restartedPool, loop.Options{SweepEvery: time.Second,
		BusyLie: &githubsim.BusyLie{MinLag: lag, MaxLag: lag},
		// Over the lie's lag, as loop.Options says to keep it when REST lies.
		IdleConfirmation: reconcile.DefaultIdleConfirmation})
	w.loop.Sim.InjectRegistrationStatus(http.StatusBadGateway, 1)
	j := w.loop.Sim.QueueJob(githubsim.JobSpec{Repository: "acme/app", Organization: "acme",
		Labels: []string{"self-hosted", "once"}, Duration: 90 * time.Second})

	// The path: the first start ended with config.sh's exit code 1 (the
	// entrypoint exits with it, before it writes the run marker).
	var failed string
	w.waitFor("a runner container whose first start failed at its registration", 2*time.Minute, func() bool {
		for _, pod := range w.podsOf("once") {
			if term := lastTermination(&pod); term != nil && term.ExitCode == 1 {
				failed = pod.Name
			}
		}
		return failed != ""
	})
	if n := w.loop.Sim.Calls()["POST /_runner/registrations"]; n < 1 {
		t.Fatalf("runner %s exited 1 with no registration attempted: not the path under test\n%s", failed, w.diagnose())
	}

	w.waitFor("the job handed to a runner", 2*time.Minute, func() bool { return w.job(j.ID).State != githubsim.JobQueued })
	if got := w.job(j.ID); got.RunnerName != failed {
		t.Fatalf("job %d went to %q, want %s, the runner restarted after its failed start\n%s", j.ID, got.RunnerName, failed, w.diagnose())
	}
	t.Logf("job %d runs on %s, restarted after its registration failed", j.ID, failed)

	w.waitFor("the job completed", 4*time.Minute, func() bool { return w.job(j.ID).State == githubsim.JobCompleted })
	got := w.job(j.ID)
	if got.Conclusion != githubsim.JobSuccess || got.LostRunner {
		t.Fatalf("job %d on %s ended %s (runner removed under it: %v; %s), want success on the restarted runner\n%s",
			j.ID, got.RunnerName, got.Conclusion, got.LostRunner, got.FailureReason, w.diagnose())
	}
	if lost := w.loop.Sim.LostJobs(); len(lost) != 0 {
		t.Fatalf("jobs lost to a removal of their runner: %+v", lost)
	}
	w.waitFor("back to zero", 2*time.Minute, w.quiescent)
	w.noViolations()
}

// keepPool: one persistent runner, scaled down as soon as its jobs are done.
const keepPool = `
pools:
  - name: keep
    organization: acme
    labels: [keep]
    ephemeral: false
    maxReplicas: 1
    scaleDownDelaySecondsAfterScaleOut: 1
    kubernetes: {namespace: %[1]s, template: %[2]s}
`

// TestStopPathDrainAbsorbsAJobStart: the sweeper scales an idle persistent
// runner down; before it deletes the runner's pod it removes the runner's
// custom labels on GitHub. GitHub hands the runner a job of its pool while that
// call is under way (the simulator holds it), and the runner's pod reports the
// job (its container turns Ready) before the call returns. The drain must not
// delete the pod of a runner whose job started since it last looked: the job
// runs to its end (longer than the entrypoint's graceful stop, so a deletion
// would cancel it), and the pod is not deleted while it runs.
func TestStopPathDrainAbsorbsAJobStart(t *testing.T) {
	t.Parallel()
	w := newWorld(t, keepPool, loop.Options{SweepEvery: time.Second})
	keep := func(d time.Duration) githubsim.JobSpec {
		return githubsim.JobSpec{Repository: "acme/app", Organization: "acme", Labels: []string{"self-hosted", "keep"}, Duration: d}
	}
	first := w.loop.Sim.QueueJob(keep(time.Second))
	var runner githubsim.Runner
	w.waitFor("the runner registered", 2*time.Minute, func() bool {
		rs := w.loop.Sim.Runners()
		if len(rs) == 1 {
			runner = rs[0]
		}
		return len(rs) == 1
	})
	hold := w.loop.Sim.HoldLabelRemoval(runner.ID)
	t.Cleanup(hold.Release)
	w.waitFor("the first job completed", 2*time.Minute, func() bool { return w.job(first.ID).State == githubsim.JobCompleted })

	// Scaled down (no job left), the idle runner is drained: its labels go first.
	select {
	case <-hold.Arrived():
	case <-time.After(2 * time.Minute):
		t.Fatalf("the sweeper did not remove the idle runner %s's labels within 2m\n%s", runner.Name, w.diagnose())
	case <-t.Context().Done():
		t.Fatal(t.Context().Err())
	}
	second := w.loop.Sim.QueueJob(keep(30 * time.Second))
	w.waitFor("the second job running", time.Minute, func() bool { return w.job(second.ID).State != githubsim.JobQueued })
	if got := w.job(second.ID); got.RunnerName != runner.Name || got.State != githubsim.JobInProgress {
		t.Fatalf("second job %s on %q, want in progress on %s, whose labels are not removed yet", got.State, got.RunnerName, runner.Name)
	}
	var uid string
	w.waitFor("the runner's pod reporting the job (its runner container Ready)", time.Minute, func() bool {
		pod, err := w.kube.CoreV1().Pods(w.ns).Get(context.Background(), runner.Name, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if pod.DeletionTimestamp != nil {
			t.Fatalf("pod %s deleted before the label removal returned\n%s", pod.Name, w.diagnose())
		}
		cs := runnerpod.RunnerStatus(pod)
		uid = string(pod.UID)
		return cs != nil && cs.State.Running != nil && cs.Ready
	})
	hold.Release()

	// Each look reads the pod before the job: a pod seen being deleted while
	// the job, read after it, still ran was deleted under the job.
	var deletedUnder *metav1.Time
	w.waitFor("the second job completed", 3*time.Minute, func() bool {
		pod, err := w.kube.CoreV1().Pods(w.ns).Get(context.Background(), runner.Name, metav1.GetOptions{})
		deleting := err == nil && string(pod.UID) == uid && pod.DeletionTimestamp != nil
		j := w.job(second.ID)
		if deleting && j.State == githubsim.JobInProgress && deletedUnder == nil {
			deletedUnder = pod.DeletionTimestamp
		}
		return j.State == githubsim.JobCompleted
	})
	got := w.job(second.ID)
	if got.Conclusion != githubsim.JobSuccess {
		t.Errorf("second job %d on %s ended %s, want success", got.ID, got.RunnerName, got.Conclusion)
	}
	if deletedUnder != nil {
		t.Errorf("pod %s deleted while its job %d ran (deletion timestamp %s; the job ran %s – %s)", runner.Name, got.ID,
			deletedUnder.UTC().Format(time.RFC3339), got.StartedAt.UTC().Format(time.RFC3339), got.EndedAt.UTC().Format(time.RFC3339))
	}
	if t.Failed() {
		t.FailNow()
	}
	w.waitFor("back to zero", 2*time.Minute, w.quiescent)
	w.noViolations()
}

// orphanPools: one runner at a time, persistent (registered with a
// registration token; the sweeper removes its registration) or ephemeral (a
// JIT config; GitHub removes it after its job).
const (
	orphanPersistentPool = `
pools:
  - name: orphan
    organization: acme
    labels: [orphan]
    ephemeral: false
    maxReplicas: 1
    scaleDownDelaySecondsAfterScaleOut: 1
    kubernetes: {namespace: %[1]s, template: %[2]s}
`
	orphanEphemeralPool = `
pools:
  - name: orphan
    organization: acme
    labels: [orphan]
    maxReplicas: 1
    scaleDownDelaySecondsAfterScaleOut: 1
    kubernetes: {namespace: %[1]s, template: %[2]s}
`
)

// TestStopPathOrphanedBusyRunnerFinishesItsJob: the StatefulSet of
// a runner that runs a job is deleted with --cascade=orphan. Its pod stays,
// owned by nothing, and so does its Secret. GitHub's REST view lists the
// runner idle for the whole job (the busy lie) while the sweeper runs every
// second with its short idle confirmation, and the orphaned Secret is older
// than the orphan grace before the job ends (cleanup takes it for a leftover
// of a creation unless it sees the pod). The
// job must run to its end on that runner: its registration is not removed and
// its pod and Secret are not deleted while it runs. Then the runner is
// unregistered and its orphaned pod and Secret go: nothing leaks.
func TestStopPathOrphanedBusyRunnerFinishesItsJob(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct{ name, pools string }{
		{"persistent", orphanPersistentPool},
		{"ephemeral", orphanEphemeralPool},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			orphanBusyRunner(t, tc.pools)
		})
	}
}

// orphanBusyRunner drives a runner of the pool "orphan" of pools into path 2
// and judges how its job ended (TestStopPathOrphanedBusyRunnerFinishesItsJob).
func orphanBusyRunner(t *testing.T, pools string) {
	const jobTime = 90 * time.Second
	// Longer than the job: REST says busy: false from the job's start to its end.
	lie := &githubsim.BusyLie{MinLag: 3 * time.Minute, MaxLag: 3 * time.Minute}
	w := newWorld(t, pools, loop.Options{SweepEvery: time.Second, BusyLie: lie})
	ctx := t.Context()
	j := w.loop.Sim.QueueJob(githubsim.JobSpec{Repository: "acme/app", Organization: "acme",
		Labels: []string{"self-hosted", "orphan"}, Duration: jobTime})

	w.waitFor("the job handed to a runner", 3*time.Minute, func() bool { return w.job(j.ID).State != githubsim.JobQueued })
	running := w.job(j.ID)
	if running.State != githubsim.JobInProgress {
		t.Fatalf("job %d is %s on %q, want in progress\n%s", j.ID, running.State, running.RunnerName, w.diagnose())
	}
	podName, runnerID := running.RunnerName, running.RunnerID
	name := runnername.FromPod(podName) // the runner's StatefulSet and Secret
	var pod *corev1.Pod
	w.waitFor("the runner's pod reporting the job (its runner container Ready)", time.Minute, func() bool {
		var err error
		if pod, err = w.kube.CoreV1().Pods(w.ns).Get(ctx, podName, metav1.GetOptions{}); err != nil {
			t.Fatalf("reading pod %s of the job's runner: %v", podName, err)
		}
		cs := runnerpod.RunnerStatus(pod)
		return cs != nil && cs.State.Running != nil && cs.Ready
	})
	if busy, ok := w.loop.Sim.RESTBusy(runnerID); !ok || busy {
		t.Fatalf("GitHub's REST view of runner %s (id %d): listed %v, busy %v; want listed idle while its job runs (the busy lie)",
			podName, runnerID, ok, busy)
	}
	sec, err := w.kube.CoreV1().Secrets(w.ns).Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		t.Fatalf("reading the Secret of runner %s: %v", name, err)
	}
	if j := w.job(j.ID); j.State != githubsim.JobInProgress {
		t.Fatalf("job %d ended (%s) before its runner's StatefulSet was deleted; make it longer\n%s", j.ID, j.Conclusion, w.diagnose())
	}

	// The path: kubectl delete statefulset NAME --cascade=orphan.
	orphan := metav1.DeletePropagationOrphan
	if err := w.kube.AppsV1().StatefulSets(w.ns).Delete(ctx, name, metav1.DeleteOptions{PropagationPolicy: &orphan}); err != nil {
		t.Fatalf("deleting statefulset %s with --cascade=orphan: %v", name, err)
	}
	w.waitFor("the StatefulSet gone, its dependents orphaned", time.Minute, func() bool {
		_, err := w.kube.AppsV1().StatefulSets(w.ns).Get(ctx, name, metav1.GetOptions{})
		if err != nil && !apierrors.IsNotFound(err) {
			t.Fatalf("reading statefulset %s: %v", name, err)
		}
		return apierrors.IsNotFound(err)
	})
	t.Logf("job %d runs on %s (GitHub id %d); its StatefulSet %s is gone", j.ID, podName, runnerID, name)
	now, err := w.kube.CoreV1().Pods(w.ns).Get(ctx, podName, metav1.GetOptions{})
	switch {
	case err != nil && !apierrors.IsNotFound(err):
		t.Fatalf("reading pod %s: %v", podName, err)
	case err == nil && now.UID == pod.UID && metav1.GetControllerOf(now) != nil:
		t.Fatalf("pod %s still has a controller (%+v) after its StatefulSet went with --cascade=orphan: not the path under test",
			podName, *metav1.GetControllerOf(now))
	}
	if now, err := w.kube.CoreV1().Secrets(w.ns).Get(ctx, name, metav1.GetOptions{}); err == nil && now.UID == sec.UID && len(now.OwnerReferences) > 0 {
		t.Fatalf("secret %s still owned by %+v after its StatefulSet went with --cascade=orphan: not the path under test", name, now.OwnerReferences)
	} else if err != nil && !apierrors.IsNotFound(err) {
		t.Fatalf("reading secret %s: %v", name, err)
	}

	// Each look reads the registration, the pod and the Secret before the job:
	// one seen gone while the job, read after it, still ran went under the job.
	var under []string
	seen := map[string]bool{}
	goneUnder := func(what string) {
		if !seen[what] {
			seen[what] = true
			under = append(under, what+" at "+time.Now().UTC().Format(time.RFC3339))
		}
	}
	w.waitFor("the job completed", 4*time.Minute, func() bool {
		_, registered := w.loop.Sim.Runner(runnerID)
		podExists, podDeleting := w.podLook(podName, pod.UID)
		secExists, secDeleting := w.secretLook(name, sec.UID)
		if w.job(j.ID).State == githubsim.JobCompleted {
			return true
		}
		if !registered {
			goneUnder("its GitHub registration removed")
		}
		if !podExists || podDeleting {
			goneUnder("its pod deleted")
		}
		if !secExists || secDeleting {
			goneUnder("its Secret deleted")
		}
		return false
	})
	got := w.job(j.ID)
	if got.Conclusion != githubsim.JobSuccess || got.LostRunner || got.RunnerName != podName {
		t.Errorf("job %d on %s ended %s (runner removed under it: %v; %s), want success on %s, the orphaned runner",
			got.ID, got.RunnerName, got.Conclusion, got.LostRunner, got.FailureReason, podName)
	}
	if lost := w.loop.Sim.LostJobs(); len(lost) != 0 {
		t.Errorf("jobs lost to a removal of their runner's registration: %+v", lost)
	}
	if len(under) > 0 {
		t.Errorf("while job %d ran (%s – %s) on the orphaned runner %s: %s", got.ID, got.StartedAt.UTC().Format(time.RFC3339),
			got.EndedAt.UTC().Format(time.RFC3339), podName, strings.Join(under, "; "))
	}
	if t.Failed() {
		t.Fatalf("%s\nlog lines about %s:\n%s", w.diagnose(), name, strings.Join(w.logs.matching([]string{name}, 60), "\n"))
	}

	// Then nothing of the orphan is left: no registration, pod or Secret.
	w.waitFor("the orphaned runner unregistered, its pod and Secret gone", 2*time.Minute, func() bool {
		_, registered := w.loop.Sim.Runner(runnerID)
		podExists, _ := w.podLook(podName, pod.UID)
		secExists, _ := w.secretLook(name, sec.UID)
		return !registered && !podExists && !secExists
	})
	t.Logf("job %d ended %s at %s; %s unregistered, its pod and Secret gone within %s of it", got.ID, got.Conclusion,
		got.EndedAt.UTC().Format(time.RFC3339), podName, time.Since(got.EndedAt).Round(time.Second))
	w.waitFor("back to zero", 2*time.Minute, w.quiescent)
	w.noViolations()
}

// podLook is whether the pod uid named name exists, and whether it is being
// deleted.
func (w *world) podLook(name string, uid types.UID) (exists, deleting bool) {
	w.t.Helper()
	pod, err := w.kube.CoreV1().Pods(w.ns).Get(w.t.Context(), name, metav1.GetOptions{})
	if err != nil && !apierrors.IsNotFound(err) {
		w.t.Fatalf("reading pod %s: %v", name, err)
	}
	exists = err == nil && pod.UID == uid
	return exists, exists && pod.DeletionTimestamp != nil
}

// secretLook is podLook for the Secret uid named name.
func (w *world) secretLook(name string, uid types.UID) (exists, deleting bool) {
	w.t.Helper()
	sec, err := w.kube.CoreV1().Secrets(w.ns).Get(w.t.Context(), name, metav1.GetOptions{})
	if err != nil && !apierrors.IsNotFound(err) {
		w.t.Fatalf("reading secret %s: %v", name, err)
	}
	exists = err == nil && sec.UID == uid
	return exists, exists && sec.DeletionTimestamp != nil
}

// podsOf lists the runner pods of pool.
func (w *world) podsOf(pool string) []corev1.Pod {
	w.t.Helper()
	list, err := w.kube.CoreV1().Pods(w.ns).List(w.t.Context(), metav1.ListOptions{LabelSelector: runnerpod.LabelPool + "=" + pool})
	if err != nil {
		w.t.Fatal(err)
	}
	return list.Items
}

// lastTermination is how the runner container of pod last ended (nil: it has not).
func lastTermination(pod *corev1.Pod) *corev1.ContainerStateTerminated {
	cs := runnerpod.RunnerStatus(pod)
	switch {
	case cs == nil:
		return nil
	case cs.State.Terminated != nil:
		return cs.State.Terminated
	}
	return cs.LastTerminationState.Terminated
}
