package reconcile_test

import (
	"context"
	"fmt"
	"sync"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/utils/ptr"
)

// barrierLabel marks a controller barrier's StatefulSet and pod. They carry no
// runner label, so the reconciler never sees them.
const barrierLabel = "test.runnerscaler.dev/barrier"

// controllerBarrier tells a test when the StatefulSet controller has seen every
// change made before a moment. The controller learns of StatefulSets and of pods
// through one watch each, and a watch delivers changes in the order the API
// server made them; its queue hands out the StatefulSets to sync in the order
// they were queued. So once it has answered a change to the barrier's own
// StatefulSet (its new generation observed) and one to the barrier's pod (the
// deleted pod replaced), both made after the changes of interest, it has seen
// those changes and begun every sync it queued for them.
type controllerBarrier struct {
	e    *env
	name string
	mu   sync.Mutex
	gen  int64
	pod  types.UID
}

// newControllerBarrier creates the barrier's StatefulSet (one pod that no
// scheduler takes) and waits for its pod.
func (e *env) newControllerBarrier() *controllerBarrier {
	e.t.Helper()
	b := &controllerBarrier{e: e, name: "barrier"}
	labels := map[string]string{barrierLabel: b.name}
	sts := &appsv1.StatefulSet{
		ObjectMeta: metav1.ObjectMeta{Name: b.name, Labels: labels},
		Spec: appsv1.StatefulSetSpec{
			Replicas:            ptr.To[int32](1),
			Selector:            &metav1.LabelSelector{MatchLabels: labels},
			PodManagementPolicy: appsv1.ParallelPodManagement,
			// A change to the template replaces no pod: only settle does.
			UpdateStrategy: appsv1.StatefulSetUpdateStrategy{Type: appsv1.OnDeleteStatefulSetStrategyType},
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: labels},
				Spec: corev1.PodSpec{SchedulerName: "runnerscaler.dev/no-scheduler",
					Containers: []corev1.Container{{Name: "barrier", Image: "barrier:1", ImagePullPolicy: corev1.PullNever}}},
			},
		},
	}
	created, err := e.raw.AppsV1().StatefulSets(e.ns).Create(e.t.Context(), sts, metav1.CreateOptions{})
	if err != nil {
		e.t.Fatalf("creating the controller barrier: %v", err)
	}
	b.gen = created.Generation
	if b.pod, err = b.waitPod(""); err != nil {
		e.t.Fatal(err)
	}
	return b
}

// settle returns once the controller has seen every change made before the
// call (see controllerBarrier). It reports failure as an error, not through the
// test, so that a reconciler's request may call it.
func (b *controllerBarrier) settle() error {
	b.mu.Lock()
	defer b.mu.Unlock()
	ctx := b.e.t.Context()
	patch := fmt.Sprintf(`{"spec":{"template":{"metadata":{"annotations":{%q:"%d"}}}}}`, barrierLabel, b.gen+1)
	sts, err := b.e.raw.AppsV1().StatefulSets(b.e.ns).Patch(ctx, b.name, types.MergePatchType, []byte(patch), metav1.PatchOptions{})
	if err != nil {
		return fmt.Errorf("changing the controller barrier: %w", err)
	}
	b.gen = sts.Generation
	err = wait.PollUntilContextTimeout(ctx, 20*time.Millisecond, 20*time.Second, true, func(ctx context.Context) (bool, error) {
		sts, err := b.e.raw.AppsV1().StatefulSets(b.e.ns).Get(ctx, b.name, metav1.GetOptions{})
		return err == nil && sts.Status.ObservedGeneration >= b.gen, nil
	})
	if err != nil {
		return fmt.Errorf("the StatefulSet controller never observed generation %d of the barrier: %w", b.gen, err)
	}
	// The pod was never scheduled: the API server deletes it at once.
	if err := b.e.raw.CoreV1().Pods(b.e.ns).Delete(ctx, b.name+"-0", metav1.DeleteOptions{Preconditions: &metav1.Preconditions{UID: &b.pod}}); err != nil {
		return fmt.Errorf("deleting the controller barrier's pod: %w", err)
	}
	b.pod, err = b.waitPod(b.pod)
	return err
}

// waitPod waits for the barrier's pod other than the one with UID old, and
// returns its UID.
func (b *controllerBarrier) waitPod(old types.UID) (types.UID, error) {
	var uid types.UID
	err := wait.PollUntilContextTimeout(b.e.t.Context(), 20*time.Millisecond, 20*time.Second, true, func(ctx context.Context) (bool, error) {
		pod, err := b.e.raw.CoreV1().Pods(b.e.ns).Get(ctx, b.name+"-0", metav1.GetOptions{})
		if err != nil || pod.UID == old || pod.DeletionTimestamp != nil {
			return false, nil
		}
		uid = pod.UID
		return true, nil
	})
	if err != nil {
		return "", fmt.Errorf("the StatefulSet controller made no pod for the barrier: %w", err)
	}
	return uid, nil
}
