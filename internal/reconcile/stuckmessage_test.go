package reconcile_test

import (
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// TestHeldUpRunnerReasonCarriesItsMessage: a persistent runner whose container
// keeps exiting is held up for the reason its container gave (its termination
// message: here GitHub's refusal of its version), not its exit code alone.
func TestHeldUpRunnerReasonCarriesItsMessage(t *testing.T) {
	t.Parallel()
	e := newEnv(t, false)
	t0 := e.clock.Now()
	e.mustSweep(1, t0)
	name := e.statefulSets()[0]
	refusal := "runner refused by GitHub: An error occurred: Error: Forbidden Runner version v2.320.0 is deprecated and cannot receive messages."
	e.setRunnerStatus(name, corev1.ContainerStatus{RestartCount: 2,
		State: corev1.ContainerState{Waiting: &corev1.ContainerStateWaiting{Reason: "CrashLoopBackOff"}},
		LastTerminationState: corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{ExitCode: 1, Reason: "Error",
			Message: refusal + "\n", FinishedAt: metav1.NewTime(e.clock.Now().Add(-time.Second))}}})
	e.mustSweep(1, t0)
	want := "CrashLoopBackOff: last exit code 1 (Error), 2 restarts: " + refusal
	if r := e.status.Stuck[name]; r != want {
		t.Fatalf("stuck %q; want %s's %q", e.status.Stuck, name, want)
	}
}

// TestHeldUpRunnerReasonNamesAWaitingInitContainer: a runner whose docker
// sidecar (a native sidecar, an init container) cannot pull its image reports
// only PodInitializing; the reason is the sidecar's.
func TestHeldUpRunnerReasonNamesAWaitingInitContainer(t *testing.T) {
	t.Parallel()
	e := newEnv(t, false)
	t0 := e.clock.Now()
	e.mustSweep(1, t0)
	name := e.statefulSets()[0]
	pod := e.pods()[name]
	pod.Status = corev1.PodStatus{Phase: corev1.PodPending,
		InitContainerStatuses: []corev1.ContainerStatus{{Name: "docker", State: corev1.ContainerState{
			Waiting: &corev1.ContainerStateWaiting{Reason: "ImagePullBackOff", Message: "Back-off pulling image \"docker:27-dind\""}}}},
		ContainerStatuses: []corev1.ContainerStatus{{Name: "runner", State: corev1.ContainerState{
			Waiting: &corev1.ContainerStateWaiting{Reason: "PodInitializing"}}}}}
	if _, err := e.kube.CoreV1().Pods(e.ns).UpdateStatus(t.Context(), pod, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	e.mustSweep(1, t0)
	want := "ImagePullBackOff: docker: Back-off pulling image \"docker:27-dind\""
	if r := e.status.Stuck[name]; r != want {
		t.Fatalf("stuck %q; want %s's %q", e.status.Stuck, name, want)
	}
}
