package loop

import (
	"fmt"
	"maps"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/runnerscaler/runnerscaler/internal/runnerpod"
)

// The monitor's judgments of what its watch of runner pods reports (podAdded,
// podChanged, podGone), against what the simulator says the runners run.

// runnerPod is runner pod name whose runner container (containerd://<name>-1) runs.
func runnerPod(name string) *corev1.Pod {
	return &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: name, UID: types.UID("uid-" + name)},
		Status: corev1.PodStatus{ContainerStatuses: []corev1.ContainerStatus{{Name: runnerpod.ContainerName,
			ContainerID: "containerd://" + name + "-1", State: corev1.ContainerState{Running: &corev1.ContainerStateRunning{}}}}}}
}

// withStop is pod with its runner container stopped with code and reason at at.
func withStop(pod *corev1.Pod, code int32, reason string, at time.Time) *corev1.Pod {
	p := pod.DeepCopy()
	cs := &p.Status.ContainerStatuses[0]
	cs.State = corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{ExitCode: code, Reason: reason,
		ContainerID: cs.ContainerID, FinishedAt: metav1.NewTime(at)}}
	return p
}

// restarted is pod whose stopped runner container (withStop) the kubelet replaced
// with a new one, running.
func restarted(pod *corev1.Pod) *corev1.Pod {
	p := pod.DeepCopy()
	cs := &p.Status.ContainerStatuses[0]
	cs.LastTerminationState, cs.State = cs.State, corev1.ContainerState{Running: &corev1.ContainerStateRunning{}}
	cs.RestartCount++
	cs.ContainerID = fmt.Sprintf("containerd://%s-%d", p.Name, cs.RestartCount+1)
	return p
}

// deleting is pod being deleted.
func deleting(pod *corev1.Pod) *corev1.Pod {
	p := pod.DeepCopy()
	now := metav1.Now()
	p.DeletionTimestamp = &now
	return p
}

// mustFind fails unless exactly one of got contains every part.
func mustFind(t *testing.T, what string, got []string, parts ...string) {
	t.Helper()
	n := 0
	for _, g := range got {
		all := true
		for _, p := range parts {
			all = all && strings.Contains(g, p)
		}
		if all {
			n++
		}
	}
	if n != 1 {
		t.Fatalf("%s %q: want exactly one with %q", what, got, parts)
	}
}

// TestContainerStopUnderAJob: a runner container that stops while the simulator
// says its runner runs a job is a violation, judged once however often the watch
// reports it, and excused when a fault hit the pod; a container that never
// started (StartError) ran no job: it is counted, not judged.
func TestContainerStopUnderAJob(t *testing.T) {
	t.Parallel()
	sim, _, take := simWithRunner(t)
	l := testLoop(t, sim)
	_, job := take("small-a")
	take("small-b")
	take("small-c")
	l.Monitor.Fault("small-b", "runner process killed")
	pods := map[string]*corev1.Pod{}
	for _, name := range []string{"small-a", "small-b", "small-c"} {
		pods[name] = runnerPod(name)
		l.podAdded(pods[name])
	}
	if v := l.Monitor.Violations(); len(v) != 0 {
		t.Fatalf("running containers: violations %q", v)
	}
	now := time.Now()
	stoppedA := withStop(pods["small-a"], 137, "Error", now)
	l.podChanged(pods["small-a"], stoppedA)
	l.podChanged(stoppedA, stoppedA) // the same stop, reported again
	l.podChanged(pods["small-b"], withStop(pods["small-b"], 137, "OOMKilled", now))
	l.podChanged(pods["small-c"], withStop(pods["small-c"], 128, "StartError", now))

	v := l.Monitor.Violations()
	if len(v) != 1 {
		t.Fatalf("violations %q, want small-a's stop alone", v)
	}
	mustFind(t, "violations", v, "pod small-a", "exited with code 137 (Error)", fmt.Sprintf("job %d", job.ID))
	ex := l.Monitor.Excused()
	if len(ex) != 1 {
		t.Fatalf("excused %q, want small-b's stop alone", ex)
	}
	mustFind(t, "excused", ex, "pod small-b", "137 (OOMKilled)", "runner process killed")
	want := map[string]int{"137 Error": 1, "137 OOMKilled": 1, "128 StartError": 1}
	if got := l.Monitor.ContainerStops(); !maps.Equal(got, want) {
		t.Fatalf("container stops %v, want %v", got, want)
	}
}

// TestStopBeforeTheWatchBeganIsNotJudged: a pod first seen with a container that
// stopped before (its last termination, the container since restarted) says
// nothing about the job its runner runs now; a restart after exit 0 seen
// happening is counted.
func TestStopBeforeTheWatchBeganIsNotJudged(t *testing.T) {
	t.Parallel()
	sim, _, take := simWithRunner(t)
	l := testLoop(t, sim)
	take("small-a")
	earlier := restarted(withStop(runnerPod("small-a"), 137, "Error", time.Now().Add(-time.Hour)))
	l.podAdded(earlier)
	if v, stops := l.Monitor.Violations(), l.Monitor.ContainerStops(); len(v) != 0 || len(stops) != 0 {
		t.Fatalf("a stop before the watch began: violations %q, stops %v; want neither", v, stops)
	}

	idle := runnerPod("keep-a") // no job
	l.podAdded(idle)
	done := withStop(idle, 0, "Completed", time.Now())
	l.podChanged(idle, done)
	l.podChanged(done, restarted(done))
	if n := l.Monitor.RestartsAfterExit0(); n != 1 {
		t.Fatalf("RestartsAfterExit0 = %d, want 1", n)
	}
	if v := l.Monitor.Violations(); len(v) != 0 {
		t.Fatalf("an idle runner's exit 0: violations %q", v)
	}
}

// TestDeletionWithinTheHandoverWindow: a pod deleted under a job younger than the
// handover window (the job handed over as the sweeper stopped the idle runner)
// is counted once, however often the watch reports the deleting pod, and is no
// violation — but its container must still not stop under the job. Under an
// older job a deletion is a violation, excused by a fault on the pod.
func TestDeletionWithinTheHandoverWindow(t *testing.T) {
	t.Parallel()
	sim, _, take := simWithRunner(t)
	l := testLoop(t, sim)
	_, young := take("small-a")
	a := runnerPod("small-a")
	l.podAdded(a)
	l.podChanged(a, deleting(a))
	l.podChanged(deleting(a), deleting(a))
	if n, v := l.Monitor.Handovers(), l.Monitor.Violations(); n != 1 || len(v) != 0 {
		t.Fatalf("deleted under a young job: %d handovers, violations %q; want 1 and none", n, v)
	}
	l.podChanged(deleting(a), withStop(deleting(a), 143, "Error", time.Now()))
	if v := l.Monitor.Violations(); len(v) != 1 {
		t.Fatalf("the handed-over job's container stopped: violations %q, want one", v)
	} else {
		mustFind(t, "violations", v, "pod small-a", "exited with code 143", fmt.Sprintf("job %d", young.ID))
	}

	l.Monitor.handover = 0 // every job is older than that now
	_, old := take("small-b")
	take("small-c")
	l.Monitor.Fault("small-c", "pod deleted by hand")
	for _, name := range []string{"small-b", "small-c"} {
		p := runnerPod(name)
		l.podAdded(p)
		l.podChanged(p, deleting(p))
	}
	v := l.Monitor.Violations()
	if len(v) != 2 {
		t.Fatalf("deleted under older jobs: violations %q, want small-a's stop and small-b's deletion", v)
	}
	mustFind(t, "violations", v, "pod small-b: deleted while its runner ran job "+fmt.Sprint(old.ID))
	mustFind(t, "excused", l.Monitor.Excused(), "pod small-c: deleted while its runner ran job", "pod deleted by hand")
	if n := l.Monitor.Handovers(); n != 1 {
		t.Fatalf("%d handovers, want still 1", n)
	}
}

// TestPodGoneUnseen: a pod that disappears without the watch having seen it
// being deleted, while its runner runs a job, is a violation; a pod whose
// deletion was seen (and judged then) is not judged again when it goes.
func TestPodGoneUnseen(t *testing.T) {
	t.Parallel()
	sim, _, take := simWithRunner(t)
	l := testLoop(t, sim)
	_, job := take("small-a")
	take("small-b")
	a, b := runnerPod("small-a"), runnerPod("small-b")
	l.podAdded(a)
	l.podAdded(b)
	l.podGone(a)
	l.podChanged(b, deleting(b)) // a young job: a handover
	l.podGone(deleting(b))
	v := l.Monitor.Violations()
	if len(v) != 1 {
		t.Fatalf("violations %q, want small-a gone alone", v)
	}
	mustFind(t, "violations", v, "pod small-a: gone while its runner ran job "+fmt.Sprint(job.ID))
	if l.Monitor.PodTime() <= 0 {
		t.Fatal("PodTime: the gone pods' lifetimes not counted")
	}
}

// TestContainerDiedBeforeRemovalIsNotLostToRemoval (the chaos suite's false
// positive): a runner container seen stopping under its job (an OOM kill), whose
// runner was unregistered only afterwards, lost the job with its process, not to
// the removal: the stop and the job are excused by the fault on the pod. A
// container stop seen before the job started excuses nothing: that job, lost to
// the removal, is a violation whatever hit the pod.
func TestContainerDiedBeforeRemovalIsNotLostToRemoval(t *testing.T) {
	t.Parallel()
	sim, url, take := simWithRunner(t)
	l := testLoop(t, sim)

	dead, deadJob := take("small-a")
	a := runnerPod("small-a")
	l.podAdded(a)
	l.Monitor.Fault("small-a", "OOM kill")
	l.podChanged(a, withStop(a, 137, "OOMKilled", time.Now()))
	removeWhileRESTSaysIdle(t, sim, url, dead.ID)

	b := runnerPod("small-b")
	l.podAdded(b)
	l.podChanged(b, withStop(b, 137, "OOMKilled", time.Now())) // no job yet
	restartedB, lostJob := take("small-b")
	l.Monitor.Fault("small-b", "OOM kill")
	removeWhileRESTSaysIdle(t, sim, url, restartedB.ID)

	l.judgeJobs(sim.Jobs())
	if n := l.Monitor.JobsLostToRemoval(); n != 1 {
		t.Fatalf("JobsLostToRemoval = %d, want 1 (job %d)", n, lostJob.ID)
	}
	v := l.Monitor.Violations()
	if len(v) != 1 {
		t.Fatalf("violations %q, want job %d lost alone", v, lostJob.ID)
	}
	mustFind(t, "violations", v, fmt.Sprintf("job %d lost", lostJob.ID), "small-b")
	ex := l.Monitor.Excused()
	if len(ex) != 2 {
		t.Fatalf("excused %q, want small-a's stop and its job", ex)
	}
	mustFind(t, "excused", ex, "pod small-a: runner container exited with code 137 (OOMKilled) while its runner ran job "+fmt.Sprint(deadJob.ID))
	mustFind(t, "excused", ex, fmt.Sprintf("job %d on runner small-a ended failure", deadJob.ID))
}
