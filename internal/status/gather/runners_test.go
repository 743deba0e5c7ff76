package gather

import (
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/runnerscaler/runnerscaler/internal/runnerpod"
	"github.com/runnerscaler/runnerscaler/internal/status"
)

func TestDescribe(t *testing.T) {
	t.Parallel()
	created := time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC)
	sts := func(annotations map[string]string) *appsv1.StatefulSet {
		a := map[string]string{runnerpod.AnnotationSyncTime: created.Format(time.RFC3339)}
		for k, v := range annotations {
			a[k] = v
		}
		return &appsv1.StatefulSet{ObjectMeta: metav1.ObjectMeta{Name: "p-abc", Annotations: a}}
	}
	withStatus := func(phase corev1.PodPhase, st corev1.ContainerState, conds ...corev1.PodCondition) *corev1.Pod {
		return &corev1.Pod{Status: corev1.PodStatus{Phase: phase, Conditions: conds,
			ContainerStatuses: []corev1.ContainerStatus{{Name: runnerpod.ContainerName, State: st}}}}
	}
	readyCond := corev1.PodCondition{Type: corev1.PodReady, Status: corev1.ConditionTrue}
	deleting := withStatus(corev1.PodRunning, corev1.ContainerState{})
	deleting.DeletionTimestamp = &metav1.Time{Time: created}
	registered := withStatus(corev1.PodRunning, corev1.ContainerState{Running: &corev1.ContainerStateRunning{}}, readyCond)
	registered.Annotations = map[string]string{runnerpod.AnnotationRunnerID: "77"}
	// The docker sidecar (a native sidecar) cannot start: the runner container
	// waits behind it.
	sidecarWaiting := withStatus(corev1.PodPending, corev1.ContainerState{Waiting: &corev1.ContainerStateWaiting{Reason: "PodInitializing"}})
	sidecarWaiting.Status.InitContainerStatuses = []corev1.ContainerStatus{{Name: "docker", State: corev1.ContainerState{Waiting: &corev1.ContainerStateWaiting{
		Reason: "ImagePullBackOff", Message: `Back-off pulling image "docker:27-dind"`}}}}
	cases := []struct {
		name          string
		sts           *appsv1.StatefulSet
		pod           *corev1.Pod
		phase, reason string
		id            int64
	}{
		{"no pod yet", sts(nil), nil, status.PhasePending, "", 0},
		{"jit id on the statefulset", sts(map[string]string{runnerpod.AnnotationRunnerID: "12"}), nil, status.PhasePending, "", 12},
		{"running, registered", sts(nil), registered, status.PhaseRunning, "", 77},
		{"marked for unregistration", sts(map[string]string{runnerpod.AnnotationUnregistrationRequest: "x"}), registered, status.PhaseStopping, "", 77},
		{"pod deleting", sts(nil), deleting, status.PhaseTerminating, "", 0},
		{"exited", sts(nil), withStatus(corev1.PodRunning, corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{}}), status.PhaseCompleted, "", 0},
		{"image cannot be pulled", sts(nil), withStatus(corev1.PodPending, corev1.ContainerState{Waiting: &corev1.ContainerStateWaiting{
			Reason: "ImagePullBackOff", Message: "Back-off pulling image"}}), status.PhasePending, "ImagePullBackOff: Back-off pulling image", 0},
		{"docker sidecar's image cannot be pulled", sts(nil), sidecarWaiting, status.PhasePending,
			`docker container: ImagePullBackOff: Back-off pulling image "docker:27-dind"`, 0},
		{"creating", sts(nil), withStatus(corev1.PodPending, corev1.ContainerState{Waiting: &corev1.ContainerStateWaiting{Reason: "ContainerCreating"}}),
			status.PhasePending, "", 0},
		{"unschedulable", sts(nil), withStatus(corev1.PodPending, corev1.ContainerState{}, corev1.PodCondition{Type: corev1.PodScheduled,
			Status: corev1.ConditionFalse, Reason: "Unschedulable", Message: "0/3 nodes are available"}), status.PhasePending,
			"Unschedulable: 0/3 nodes are available", 0},
	}
	for _, c := range cases {
		rn := describe(c.sts, c.pod)
		if rn.Phase != c.phase || rn.Reason != c.reason || rn.GitHubID != c.id || rn.Name != "p-abc-0" || !rn.Created.Equal(created) {
			t.Errorf("%s: %+v, want phase %s reason %q id %d", c.name, rn, c.phase, c.reason, c.id)
		}
	}
}
