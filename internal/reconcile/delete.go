package reconcile

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/types"

	"github.com/runnerscaler/runnerscaler/internal/roster"
	"github.com/runnerscaler/runnerscaler/internal/runnername"
	"github.com/runnerscaler/runnerscaler/internal/runnerpod"
)

// deleteRunner deletes an unregistered runner: its StatefulSet first, then our
// finalizer from its pod, then its Secret. In this order the StatefulSet
// controller cannot put a new pod in the old one's place: while the StatefulSet
// exists its pod is held by the finalizer (perhaps Terminating, never gone), and
// once the StatefulSet is gone nothing recreates it. The pod and the volume
// claims then go by garbage collection; the Secret is deleted here too
// (deleteSecret), whether or not its owner was ever set. A pod the controller
// was creating anyway (the runner had none when the sweep looked) is left with
// our finalizer and no owner: finishOrphans finishes it.
func (r *Reconciler) deleteRunner(ctx context.Context, s *sweep, rn *runner) error {
	if err := r.retire(ctx, s, rn.name()); err != nil {
		return err // nothing deleted: the next sweep comes back here
	}
	policy := metav1.DeletePropagationBackground
	err := r.kube.AppsV1().StatefulSets(rn.sts.Namespace).Delete(ctx, rn.name(), metav1.DeleteOptions{
		PropagationPolicy: &policy, Preconditions: &metav1.Preconditions{UID: &rn.sts.UID}})
	if err != nil && !apierrors.IsNotFound(err) {
		return fmt.Errorf("deleting statefulset %s: %w", rn.name(), err)
	}
	// A StatefulSet that was already going (deleted by hand, perhaps with
	// --cascade=orphan) may not take its pod with it: the pod is deleted here.
	orphaning := apierrors.IsNotFound(err) || rn.sts.DeletionTimestamp != nil
	if rn.pod != nil {
		if err := r.removeFinalizer(ctx, rn.pod); err != nil {
			return err // the pod is an orphan now: finishOrphans retries
		}
		if orphaning && rn.pod.DeletionTimestamp == nil {
			uid := rn.pod.UID
			err := r.kube.CoreV1().Pods(rn.pod.Namespace).Delete(ctx, rn.pod.Name, metav1.DeleteOptions{Preconditions: &metav1.Preconditions{UID: &uid}})
			if err != nil && !apierrors.IsNotFound(err) {
				return fmt.Errorf("deleting pod %s of a statefulset already gone: %w", rn.pod.Name, err)
			}
		}
	}
	rn.phase = Terminating
	s.stats.deleted++
	s.log.Info("runner deleted", "runner", rn.name())
	r.deleteSecret(ctx, s, rn)
	return nil
}

// deleteUnboundPod makes "this runner never ran" true for good: it deletes the
// runner's pod only if it is still exactly as observed, unbound (a
// resourceVersion precondition), so a pod bound since — which a kubelet may be
// starting — is never concluded unstarted. A pod being deleted cannot be bound
// any more (the API server refuses the binding), and our finalizer keeps it until
// deleteRunner. A runner without a pod has nothing to delete here: a pod the
// StatefulSet controller creates after the sweep looked is deleted with the
// StatefulSet and, orphaned, stopped by finishOrphans through the stop machine.
// errPodChanged: the pod changed since the sweep looked.
var errPodChanged = errors.New("the pod changed since the sweep looked")

func (r *Reconciler) deleteUnboundPod(ctx context.Context, rn *runner) error {
	if rn.pod == nil || rn.pod.DeletionTimestamp != nil {
		return nil
	}
	rv := rn.pod.ResourceVersion
	err := r.kube.CoreV1().Pods(rn.pod.Namespace).Delete(ctx, rn.pod.Name, metav1.DeleteOptions{
		Preconditions: &metav1.Preconditions{UID: &rn.pod.UID, ResourceVersion: &rv}})
	switch {
	case err == nil:
		return r.rereadDeleted(ctx, rn)
	case apierrors.IsNotFound(err):
		return nil
	case apierrors.IsConflict(err):
		return errPodChanged
	default:
		return fmt.Errorf("deleting unbound pod %s: %w", rn.pod.Name, err)
	}
}

// rereadDeleted reads the runner's pod again after this sweep deleted it (our
// finalizer holds it): the stop's next write is fenced by the version the delete
// left, not refused for the sweep's own change.
func (r *Reconciler) rereadDeleted(ctx context.Context, rn *runner) error {
	pod, err := r.reread(ctx, rn.pod)
	if err != nil || pod == nil {
		return err
	}
	return rn.adopt(pod, true)
}

// removeFinalizer removes our finalizer, and only it, from pod: a JSON patch that
// tests the pod's UID and our finalizer at its index before removing that index,
// so that another controller's finalizer, or a newer pod of the same name, is never
// touched. When the test fails (the list changed since the pod was read), the pod
// is read again and the patch recomputed.
func (r *Reconciler) removeFinalizer(ctx context.Context, pod *corev1.Pod) error {
	const attempts = 5
	for range attempts {
		i := slices.Index(pod.Finalizers, runnerpod.Finalizer)
		if i < 0 {
			return nil
		}
		patch := fmt.Sprintf(`[{"op":"test","path":"/metadata/uid","value":%q},`+
			`{"op":"test","path":"/metadata/finalizers/%d","value":%q},{"op":"remove","path":"/metadata/finalizers/%d"}]`,
			pod.UID, i, runnerpod.Finalizer, i)
		_, err := r.kube.CoreV1().Pods(pod.Namespace).Patch(ctx, pod.Name, types.JSONPatchType, []byte(patch), metav1.PatchOptions{})
		switch {
		case err == nil || apierrors.IsNotFound(err):
			return nil
		case !apierrors.IsInvalid(err) && !apierrors.IsConflict(err):
			return fmt.Errorf("removing finalizer of pod %s: %w", pod.Name, err)
		}
		if pod, err = r.reread(ctx, pod); err != nil || pod == nil {
			return err
		}
	}
	return fmt.Errorf("removing finalizer of pod %s: its finalizers kept changing (%d attempts)", pod.Name, attempts)
}

// reread returns the current version of pod, or nil when it is gone or another pod
// has taken its name. (A list by name: the sweeper's Role has no pods/get.)
func (r *Reconciler) reread(ctx context.Context, pod *corev1.Pod) (*corev1.Pod, error) {
	sel := fields.OneTermEqualSelector("metadata.name", pod.Name).String()
	list, err := r.kube.CoreV1().Pods(pod.Namespace).List(ctx, metav1.ListOptions{FieldSelector: sel})
	if err != nil {
		return nil, fmt.Errorf("reading pod %s again: %w", pod.Name, err)
	}
	for i := range list.Items {
		if list.Items[i].UID == pod.UID {
			return &list.Items[i], nil
		}
	}
	return nil, nil
}

// orphans returns the pods that carry our finalizer, are no claimed runner's
// pod (attached), and whose controller is none of the pool's StatefulSets the
// roster claimed: a StatefulSet someone
// deleted, one deleted by a sweep that stopped before releasing the pod, or a
// pod the controller created while its runner was being deleted. Each is a
// runner's only if the roster ties it to one (orphanEntry).
func orphans(pods []corev1.Pod, claimed, attached map[types.UID]bool) []*corev1.Pod {
	var out []*corev1.Pod
	for i := range pods {
		pod := &pods[i]
		if ref := metav1.GetControllerOf(pod); hasFinalizer(pod) && !attached[pod.UID] && (ref == nil || !claimed[ref.UID]) {
			out = append(out, pod)
		}
	}
	return out
}

// finishOrphans finishes pods that carry our finalizer but have no StatefulSet
// and that the roster ties to a runner (orphanEntry): each goes through the
// graceful stop like any runner and loses our finalizer only once GitHub
// released its runner or it never registered; then its runner's Secret goes.
// The runner is the roster entry's, never one the pod's name, labels or
// annotations claim, and its GitHub id is the one the entry recorded.
func (r *Reconciler) finishOrphans(ctx context.Context, s *sweep) error {
	var errs []error
	for _, rn := range s.orphans {
		if err := r.finishOrphan(ctx, s, rn); err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

// finishRetired deletes the StatefulSets of retired runners (s.retired):
// a deletion cut short between the runner's retirement and its StatefulSet's
// delete. Its pod, an orphan then, is stopped by finishOrphans through the
// stop machine (the roster ties it to the retired runner by the StatefulSet's
// UID), and its Secret goes with its owner. A StatefulSet whose pod may hold
// a job (mayHoldJob) waits.
func (r *Reconciler) finishRetired(ctx context.Context, s *sweep) error {
	var errs []error
	policy := metav1.DeletePropagationBackground
	for _, rn := range s.retired {
		sts := rn.sts
		if mayHoldJob(rn.pod, s.p.IsEphemeral()) {
			// A pod its controller made again since the runner was released
			// may have started and taken a job: deleting the StatefulSet
			// would SIGTERM it. It waits until the pod cannot hold a job.
			s.noteStuck(sts.Name, "a retired runner's statefulset waits for its pod, which may hold a job")
			continue
		}
		err := r.kube.AppsV1().StatefulSets(sts.Namespace).Delete(ctx, sts.Name, metav1.DeleteOptions{
			PropagationPolicy: &policy, Preconditions: &metav1.Preconditions{UID: &sts.UID}})
		if err != nil && !apierrors.IsNotFound(err) {
			errs = append(errs, fmt.Errorf("deleting statefulset %s of a retired runner: %w", sts.Name, err))
			continue
		}
		s.log.Info("deleted the statefulset of a retired runner, whose deletion was cut short", "runner", sts.Name)
	}
	return errors.Join(errs...)
}

func (r *Reconciler) finishOrphan(ctx context.Context, s *sweep, rn *runner) error {
	if err := r.ensurePodMarked(ctx, rn); err != nil {
		return err
	}
	done, err := r.gracefulStop(ctx, s, rn)
	if err != nil || !done {
		return err
	}
	if err := r.retire(ctx, s, rn.name()); err != nil {
		return err
	}
	if err := r.removeFinalizer(ctx, rn.pod); err != nil {
		return err
	}
	if rn.pod.DeletionTimestamp == nil {
		// Its StatefulSet is gone and the pod is not being deleted: orphaned on
		// purpose (`kubectl delete --cascade=orphan`), nothing else deletes it,
		// and its runner is released.
		uid := rn.pod.UID
		err := r.kube.CoreV1().Pods(rn.pod.Namespace).Delete(ctx, rn.pod.Name, metav1.DeleteOptions{Preconditions: &metav1.Preconditions{UID: &uid}})
		if err != nil && !apierrors.IsNotFound(err) {
			return fmt.Errorf("deleting orphaned pod %s: %w", rn.pod.Name, err)
		}
	}
	s.log.Info("released a runner pod whose statefulset is gone", "pod", rn.pod.Name)
	r.deleteSecret(ctx, s, rn)
	return nil
}

// orphanRunner stands in for the orphan's gone StatefulSet: its runner's
// name and GitHub id as the roster entry e recorded them (the JIT id the pod
// records counts only while the entry has none, and only under the entry's
// name: stop.owned), and an unregistration request.
func orphanRunner(pod *corev1.Pod, e *roster.Runner, now time.Time) *runner {
	requested := pod.Annotations[runnerpod.AnnotationUnregistrationRequest]
	if requested == "" {
		requested = stamp(now)
	}
	annotations := map[string]string{runnerpod.AnnotationUnregistrationRequest: requested,
		runnerpod.AnnotationSyncTime: stamp(pod.CreationTimestamp.Time)} // the registration timeout runs from here
	if id := pod.Annotations[runnerpod.AnnotationJITRunnerID]; id != "" {
		annotations[runnerpod.AnnotationRunnerID] = id
	}
	sts := &appsv1.StatefulSet{ObjectMeta: metav1.ObjectMeta{Name: runnername.FromPod(e.Name), Namespace: pod.Namespace, Annotations: annotations}}
	return &runner{sts: sts, pod: pod, id: e, phase: Terminating}
}
