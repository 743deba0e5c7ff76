package stack_test

import (
	"context"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"
	"k8s.io/utils/ptr"

	"github.com/runnerscaler/runnerscaler/internal/testenv"
)

func TestMain(m *testing.M) { testenv.Main(m) }

// TestControlPlane checks the moves the sweeper tests make on the real control plane:
// the StatefulSet controller creates the pod with an owner reference, a finalizer
// holds a deleted pod, the status subresource can be patched, and deleting the
// StatefulSet garbage-collects its pod.
func TestControlPlane(t *testing.T) {
	t.Parallel()
	cs, ns := testenv.Namespace(t)
	ctx := t.Context()
	sts := statefulSet(ns, "runner")
	sts, err := cs.AppsV1().StatefulSets(ns).Create(ctx, sts, metav1.CreateOptions{})
	if err != nil {
		t.Fatalf("creating statefulset: %v", err)
	}

	pod := waitPod(t, cs, ns, "runner-0")
	if len(pod.OwnerReferences) != 1 || pod.OwnerReferences[0].UID != sts.UID {
		t.Fatalf("pod owner references = %+v, want the statefulset %s", pod.OwnerReferences, sts.UID)
	}

	// The kubelet's moves: Running/Ready, then the runner container exits 0.
	pod.Status = corev1.PodStatus{
		Phase:      corev1.PodRunning,
		Conditions: []corev1.PodCondition{{Type: corev1.PodReady, Status: corev1.ConditionTrue}},
		ContainerStatuses: []corev1.ContainerStatus{{Name: "runner", State: corev1.ContainerState{
			Terminated: &corev1.ContainerStateTerminated{ExitCode: 0, Reason: "Completed"}}}},
	}
	pod, err = cs.CoreV1().Pods(ns).UpdateStatus(ctx, pod, metav1.UpdateOptions{})
	if err != nil {
		t.Fatalf("patching pod status: %v", err)
	}
	if got := pod.Status.ContainerStatuses[0].State.Terminated; got == nil || got.ExitCode != 0 {
		t.Fatalf("pod status after update = %+v, want runner terminated with exit code 0", pod.Status)
	}

	// A finalizer holds a deleted pod until it is removed.
	patch := []byte(`{"metadata":{"finalizers":["runnerscaler.dev/test"]}}`)
	if _, err := cs.CoreV1().Pods(ns).Patch(ctx, pod.Name, types.MergePatchType, patch, metav1.PatchOptions{}); err != nil {
		t.Fatalf("adding finalizer: %v", err)
	}
	if err := cs.CoreV1().Pods(ns).Delete(ctx, pod.Name, metav1.DeleteOptions{}); err != nil {
		t.Fatalf("deleting pod: %v", err)
	}
	held, err := cs.CoreV1().Pods(ns).Get(ctx, pod.Name, metav1.GetOptions{})
	if err != nil || held.DeletionTimestamp == nil {
		t.Fatalf("finalized pod after delete: err=%v deletionTimestamp=%v, want it held and marked", err, held.DeletionTimestamp)
	}
	clear := []byte(`{"metadata":{"finalizers":null}}`)
	if _, err := cs.CoreV1().Pods(ns).Patch(ctx, pod.Name, types.MergePatchType, clear, metav1.PatchOptions{}); err != nil {
		t.Fatalf("removing finalizer: %v", err)
	}

	// The controller recreates the pod; deleting the StatefulSet garbage-collects it.
	recreated := waitPod(t, cs, ns, "runner-0")
	if recreated.UID == pod.UID {
		t.Fatalf("pod was not recreated after its deletion")
	}
	policy := metav1.DeletePropagationBackground
	if err := cs.AppsV1().StatefulSets(ns).Delete(ctx, sts.Name, metav1.DeleteOptions{PropagationPolicy: &policy}); err != nil {
		t.Fatalf("deleting statefulset: %v", err)
	}
	err = wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, 30*time.Second, true, func(ctx context.Context) (bool, error) {
		_, err := cs.CoreV1().Pods(ns).Get(ctx, "runner-0", metav1.GetOptions{})
		return apierrors.IsNotFound(err), nil
	})
	if err != nil {
		t.Fatalf("pod of deleted statefulset was not garbage-collected: %v", err)
	}
}

func waitPod(t *testing.T, cs kubernetes.Interface, ns, name string) *corev1.Pod {
	t.Helper()
	var pod *corev1.Pod
	err := wait.PollUntilContextTimeout(t.Context(), 50*time.Millisecond, 30*time.Second, true, func(ctx context.Context) (bool, error) {
		p, err := cs.CoreV1().Pods(ns).Get(ctx, name, metav1.GetOptions{})
		if err != nil || p.DeletionTimestamp != nil {
			return false, nil
		}
		pod = p
		return true, nil
	})
	if err != nil {
		t.Fatalf("statefulset controller did not create pod %s: %v", name, err)
	}
	return pod
}

func statefulSet(ns, name string) *appsv1.StatefulSet {
	labels := map[string]string{"app": name}
	return &appsv1.StatefulSet{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns},
		Spec: appsv1.StatefulSetSpec{
			Replicas: ptr.To[int32](1),
			Selector: &metav1.LabelSelector{MatchLabels: labels},
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: labels},
				Spec:       corev1.PodSpec{Containers: []corev1.Container{{Name: "runner", Image: "runner:test"}}},
			},
		},
	}
}
