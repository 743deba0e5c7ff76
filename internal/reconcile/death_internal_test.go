package reconcile

import (
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/runnerscaler/runnerscaler/internal/runnerpod"
)

var deathT0 = time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)

func runnerPod(state, last corev1.ContainerState) *corev1.Pod {
	start := metav1.NewTime(deathT0)
	return &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "p-abcde-0"}, Status: corev1.PodStatus{StartTime: &start,
		ContainerStatuses: []corev1.ContainerStatus{{Name: runnerpod.ContainerName, State: state, LastTerminationState: last}}}}
}

func ended(code int32, reason string, at time.Time) corev1.ContainerState {
	return corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{ExitCode: code, Reason: reason, FinishedAt: metav1.NewTime(at)}}
}

var running = corev1.ContainerState{Running: &corev1.ContainerStateRunning{StartedAt: metav1.NewTime(deathT0)}}

// backOff is a container the kubelet waits to restart: its last state is its
// latest end.
var backOff = corev1.ContainerState{Waiting: &corev1.ContainerStateWaiting{Reason: "CrashLoopBackOff"}}

// restarted sets how often the kubelet restarted pod's runner container.
func restarted(pod *corev1.Pod, n int32) *corev1.Pod {
	pod.Status.ContainerStatuses[0].RestartCount = n
	return pod
}

// repeat is the end of a restarted ephemeral container repeating its run's
// kill (runner/entrypoint.sh, exit_again).
func repeat(at time.Time) corev1.ContainerState {
	s := ended(137, "Error", at)
	s.Terminated.Message = "runner died: its container was killed before its runner exited\n"
	return s
}

// What a pod shows of its runner's death: an OOM kill or a non-zero exit (for an
// ephemeral runner, exactly while the kubelet still shows its first container's
// end, and bounded by the pod's start when only restarted containers repeating
// the run's outcome show — in back-off after one restart, the kubelet's last
// state is the repeat's); a deletion while the runner ran, over the grace
// period; nothing for a runner that exited 0 (whatever a restarted container
// shows after), one still running, or a pod deleted after its runner had ended.
func TestDeathFromPod(t *testing.T) {
	at := deathT0.Add(time.Minute)
	deleting := func(p *corev1.Pod, reason string) *corev1.Pod {
		end := metav1.NewTime(at.Add(30 * time.Second))
		grace := int64(30)
		p.DeletionTimestamp, p.DeletionGracePeriodSeconds = &end, &grace
		if reason != "" {
			p.Status.Conditions = []corev1.PodCondition{{Type: corev1.DisruptionTarget, Status: corev1.ConditionTrue, Reason: reason}}
		}
		return p
	}
	none := corev1.ContainerState{}
	cases := []struct {
		name             string
		pod              *corev1.Pod
		ephemeral        bool
		cause            string // "": no death
		from, to         time.Time
		killed, repeated bool
	}{
		{"persistent OOM kill, restarted", restarted(runnerPod(running, ended(137, "OOMKilled", at)), 1), false, "OOMKilled (exit code 137)", at, at, true, false},
		{"persistent runner exited with an error", runnerPod(ended(1, "Error", at), none), false, "Error (exit code 1)", at, at, false, false},
		{"ephemeral killed, not restarted yet", runnerPod(ended(137, "Error", at), none), true, "Error (exit code 137)", at, at, true, false},
		{"ephemeral killed, restarted once, its repeat ended", restarted(runnerPod(repeat(at.Add(10*time.Second)), ended(137, "Error", at)), 1), true,
			"Error (exit code 137)", at, at, true, false},
		{"ephemeral killed, in back-off before its first restart", runnerPod(backOff, ended(137, "Error", at)), true, "Error (exit code 137)", at, at, true, false},
		{"ephemeral killed, restarted once, its repeat running", restarted(runnerPod(running, ended(137, "Error", at)), 1), true,
			"Error (exit code 137)", at, at, true, false},
		{"ephemeral killed, restarted once, its repeat in back-off", restarted(runnerPod(backOff, repeat(at.Add(10*time.Second))), 1), true,
			"runner died: its container was killed", deathT0, at.Add(10 * time.Second), true, true},
		{"ephemeral killed, restarted twice", restarted(runnerPod(repeat(at.Add(time.Minute)), repeat(at.Add(50*time.Second))), 2), true,
			"runner died: its container was killed", deathT0, at.Add(time.Minute), true, true},
		{"ephemeral runner exited with an error", runnerPod(ended(1, "Error", at), none), true, "Error (exit code 1)", at, at, false, false},
		{"runner exited 0", runnerPod(ended(0, "Completed", at), none), true, "", time.Time{}, time.Time{}, false, false},
		{"ephemeral exited 0, restarted once, its repeat OOM-killed", restarted(runnerPod(ended(137, "OOMKilled", at.Add(time.Second)), ended(0, "Completed", at)), 1), true,
			"", time.Time{}, time.Time{}, false, false},
		{"running", runnerPod(running, none), false, "", time.Time{}, time.Time{}, false, false},
		{"evicted while running", deleting(runnerPod(running, none), "EvictionByEvictionAPI"), true,
			"pod deleted: EvictionByEvictionAPI", at, at.Add(30 * time.Second), false, false},
		{"deleted by hand while running", deleting(runnerPod(running, none), ""), false, "pod deleted", at, at.Add(30 * time.Second), false, false},
		{"deleted after its runner exited", deleting(runnerPod(ended(0, "Completed", deathT0.Add(time.Second)), none), ""), true,
			"", time.Time{}, time.Time{}, false, false},
		{"deleted after its runner was OOM-killed", deleting(runnerPod(ended(137, "OOMKilled", deathT0.Add(time.Second)), none), ""), true,
			"OOMKilled (exit code 137)", deathT0.Add(time.Second), deathT0.Add(time.Second), true, false},
		{"no pod", nil, true, "", time.Time{}, time.Time{}, false, false},
		{"deleted, its runner stopped on SIGTERM", deleting(runnerPod(ended(143, "Error", at.Add(5*time.Second)), none), ""), false,
			"pod deleted", at, at.Add(30 * time.Second), false, false},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			ds := deaths(tc.pod, tc.ephemeral)
			if len(ds) != 0 != (tc.cause != "") || len(ds) > 1 {
				t.Fatalf("deaths = %+v; want a death: %v", ds, tc.cause != "")
			}
			if len(ds) == 0 {
				return
			}
			d := ds[0]
			if !strings.Contains(d.Cause, tc.cause) || !d.From().Equal(tc.from) || !d.To().Equal(tc.to) || d.Runner != "p-abcde-0" ||
				d.Deleted != strings.HasPrefix(tc.cause, "pod deleted") || d.Killed != tc.killed || d.Repeated != tc.repeated {
				t.Fatalf("death = %+v (from %s to %s), want %q from %s to %s, killed %v, repeated %v", d, d.From(), d.To(), tc.cause, tc.from, tc.to,
					tc.killed, tc.repeated)
			}
		})
	}
}

// A runner the kubelet killed at the end of its pod's grace period shows both
// the deletion and the container's death.
func TestDeathsOfAPodKilledAtTheEndOfItsGrace(t *testing.T) {
	at := deathT0.Add(time.Minute)
	pod := runnerPod(ended(137, "Error", at.Add(30*time.Second)), corev1.ContainerState{})
	end, grace := metav1.NewTime(at.Add(30*time.Second)), int64(30)
	pod.DeletionTimestamp, pod.DeletionGracePeriodSeconds = &end, &grace
	ds := deaths(pod, false)
	if len(ds) != 2 || !ds[0].Deleted || ds[1].Deleted || !ds[1].Killed || !strings.Contains(ds[1].Cause, "exit code 137") || !ds[1].To().Equal(at.Add(30*time.Second)) {
		t.Fatalf("deaths = %+v, want the deletion and the container killed at its end", ds)
	}
}

// TestContainerTheRuntimeCouldNotStart: a runner container whose start failed
// in the runtime (StartError: its process never ran) is started again by the
// kubelet as a first start. That end is no runner death (no job ran in it, so a
// job the restarted runner fails by itself is not re-run), and the runner is not
// finished while the restart runs (it registers and takes a job).
func TestContainerTheRuntimeCouldNotStart(t *testing.T) {
	startError := ended(128, "StartError", deathT0)
	startError.Terminated.Message = "failed to create containerd task: failed to create shim task: context canceled: unknown"
	for name, pod := range map[string]*corev1.Pod{
		"restarted, running": restarted(runnerPod(running, startError), 1),
		"in back-off":        restarted(runnerPod(backOff, startError), 1),
	} {
		if d, ok := containerDeath(pod, runnerStatus(pod), true); ok {
			t.Errorf("%s: death %+v, want none: the container never ran", name, d)
		}
		if finished(pod, true) {
			t.Errorf("%s: finished, want not: the runner never ran in it", name)
		}
	}
}
