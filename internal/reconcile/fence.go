package reconcile

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
)

// Fenced writes. Every annotation the sweep writes on a runner's StatefulSet or pod
// goes in a merge patch that carries the resourceVersion of the object as the
// sweep last read or wrote it, so the API server refuses it (409 Conflict) when
// the object changed since; the drain's pod deletion carries the same
// precondition (busy.go). A sweeper that lost its pool's lease without noticing
// yet therefore cannot overwrite what the sweeper now holding the lease recorded:
// its write is refused, and it leaves that runner alone for the rest of its sweep
// (ErrStale).

// ErrStale is returned (wrapped) when a runner's StatefulSet or pod changed, in
// what the graceful stop acts on, since the sweep read it: another writer (such as
// a second sweeper on the pool) wrote or deleted it meanwhile. The write was not
// made; the sweep leaves that runner alone and the next sweep decides again on
// what it reads then. Retrying the same write would overwrite the other writer's
// progress.
var ErrStale = errors.New("changed by another writer since this sweep read it")

// Retryable reports whether err is one the next sweep gets past: ErrStale
// (the next sweep reads the runner again). The sweeper sweeps again at once
// for it (sweeper.Retrier).
func (r *Reconciler) Retryable(err error) bool { return errors.Is(err, ErrStale) }

// fencedObject is how one kind of object is patched and read again.
type fencedObject[T metav1.Object] struct {
	kind     string
	resource schema.GroupResource
	patch    func(ctx context.Context, name string, body []byte) (T, error)
	// reread returns the object's current version; false when it is gone or
	// another object has taken its name.
	reread func(ctx context.Context, obj T) (T, bool, error)
}

// patchAnnotations merge-patches annotations (a nil value removes the key) on obj,
// fenced by obj's resourceVersion, and returns the object the API server stored.
// A conflict whose cause is a change the stop does not act on (the kubelet or a
// controller writing status) is sent once more, fenced by the fresh version: it
// overwrites nothing another writer recorded. A conflict with the patch's own
// change (applied, its answer lost and the request sent again) is success. An
// object gone since is NotFound, as if the first patch had found it gone; any
// other conflict is ErrStale.
func patchAnnotations[T metav1.Object](ctx context.Context, o fencedObject[T], obj T, annotations map[string]any) (T, error) {
	var zero T
	out, err := fencedPatch(ctx, o, obj, annotations)
	if !apierrors.IsConflict(err) {
		return out, err
	}
	cur, found, rerr := o.reread(ctx, obj)
	switch {
	case rerr != nil:
		return zero, errors.Join(err, rerr)
	case !found:
		return zero, apierrors.NewNotFound(o.resource, obj.GetName())
	case applied(obj, cur, annotations):
		// The first patch was applied and its answer lost: the API server
		// timed out answering (504, Retry-After) and client-go sent it again,
		// which its own write then fenced out. The change is ours.
		return cur, nil
	case !sameForTheStop(obj, cur):
		return zero, fmt.Errorf("%s %s: %w (%s)", o.kind, obj.GetName(), ErrStale, changes(obj, cur))
	}
	out, err = fencedPatch(ctx, o, cur, annotations)
	if apierrors.IsConflict(err) {
		return zero, fmt.Errorf("%s %s: %w (%w)", o.kind, obj.GetName(), ErrStale, err)
	}
	return out, err
}

func fencedPatch[T metav1.Object](ctx context.Context, o fencedObject[T], obj T, annotations map[string]any) (T, error) {
	var zero T
	rv := obj.GetResourceVersion()
	if rv == "" {
		return zero, fmt.Errorf("%s %s: no resourceVersion to fence the write on", o.kind, obj.GetName())
	}
	body, err := json.Marshal(map[string]any{"metadata": map[string]any{"resourceVersion": rv, "annotations": annotations}})
	if err != nil {
		return zero, err
	}
	return o.patch(ctx, obj.GetName(), body)
}

// applied: cur is obj with annotations (a merge patch: nil removes a key)
// applied and nothing else the stop acts on changed.
func applied(obj, cur metav1.Object, annotations map[string]any) bool {
	want := maps.Clone(obj.GetAnnotations())
	if want == nil {
		want = map[string]string{}
	}
	for k, v := range annotations {
		if s, ok := v.(string); ok {
			want[k] = s
		} else {
			delete(want, k)
		}
	}
	got := cur.GetAnnotations()
	if got == nil {
		got = map[string]string{}
	}
	return cur.GetUID() == obj.GetUID() && maps.Equal(got, want) &&
		maps.Equal(cur.GetLabels(), obj.GetLabels()) && slices.Equal(cur.GetFinalizers(), obj.GetFinalizers()) &&
		(cur.GetDeletionTimestamp() == nil) == (obj.GetDeletionTimestamp() == nil)
}

// sameForTheStop: cur is obj as far as the sweep acts on it: the same object, not
// deleted since, with the same annotations (where the stop's progress lives),
// labels and finalizers.
func sameForTheStop(obj, cur metav1.Object) bool {
	return sameProgress(obj, cur) && (cur.GetDeletionTimestamp() == nil) == (obj.GetDeletionTimestamp() == nil)
}

// changes names what differs between obj and cur among what the stop acts
// on (the keys of annotations and labels, not their values), for the error
// that says another writer came first.
func changes(obj, cur metav1.Object) string {
	var out []string
	keys := func(what string, a, b map[string]string) {
		for k := range a {
			if v, ok := b[k]; !ok || v != a[k] {
				out = append(out, what+" "+k)
			}
		}
		for k := range b {
			if _, ok := a[k]; !ok {
				out = append(out, what+" "+k)
			}
		}
	}
	keys("annotation", obj.GetAnnotations(), cur.GetAnnotations())
	keys("label", obj.GetLabels(), cur.GetLabels())
	if !slices.Equal(cur.GetFinalizers(), obj.GetFinalizers()) {
		out = append(out, fmt.Sprintf("finalizers %v -> %v", obj.GetFinalizers(), cur.GetFinalizers()))
	}
	if cur.GetUID() != obj.GetUID() {
		out = append(out, "uid")
	}
	if (cur.GetDeletionTimestamp() == nil) != (obj.GetDeletionTimestamp() == nil) {
		out = append(out, "deletion")
	}
	slices.Sort(out)
	return "changed: " + strings.Join(out, ", ")
}

func sameProgress(obj, cur metav1.Object) bool {
	return cur.GetUID() == obj.GetUID() &&
		maps.Equal(cur.GetAnnotations(), obj.GetAnnotations()) &&
		maps.Equal(cur.GetLabels(), obj.GetLabels()) &&
		slices.Equal(cur.GetFinalizers(), obj.GetFinalizers())
}

func (r *Reconciler) fencedPods(ns string) fencedObject[*corev1.Pod] {
	return fencedObject[*corev1.Pod]{
		kind:     "pod",
		resource: corev1.Resource("pods"),
		patch: func(ctx context.Context, name string, body []byte) (*corev1.Pod, error) {
			return r.kube.CoreV1().Pods(ns).Patch(ctx, name, types.MergePatchType, body, metav1.PatchOptions{})
		},
		reread: func(ctx context.Context, pod *corev1.Pod) (*corev1.Pod, bool, error) {
			cur, err := r.reread(ctx, pod)
			return cur, cur != nil, err
		},
	}
}

func (r *Reconciler) fencedStatefulSets(ns string) fencedObject[*appsv1.StatefulSet] {
	return fencedObject[*appsv1.StatefulSet]{
		kind:     "statefulset",
		resource: appsv1.Resource("statefulsets"),
		patch: func(ctx context.Context, name string, body []byte) (*appsv1.StatefulSet, error) {
			return r.kube.AppsV1().StatefulSets(ns).Patch(ctx, name, types.MergePatchType, body, metav1.PatchOptions{})
		},
		reread: r.rereadStatefulSet,
	}
}

// rereadStatefulSet returns the current version of sts; false when it is gone or
// another StatefulSet has taken its name. (A list by name: the sweeper's Role has
// no statefulsets/get.)
func (r *Reconciler) rereadStatefulSet(ctx context.Context, sts *appsv1.StatefulSet) (*appsv1.StatefulSet, bool, error) {
	sel := fields.OneTermEqualSelector("metadata.name", sts.Name).String()
	list, err := r.kube.AppsV1().StatefulSets(sts.Namespace).List(ctx, metav1.ListOptions{FieldSelector: sel})
	if err != nil {
		return nil, false, fmt.Errorf("reading statefulset %s again: %w", sts.Name, err)
	}
	for i := range list.Items {
		if list.Items[i].UID == sts.UID {
			return &list.Items[i], true, nil
		}
	}
	return nil, false, nil
}

// annotatePod sets an annotation on the runner's pod and takes the pod the API
// server returns as the runner's view of it: what the sweep decides next is
// decided on the pod as it is now (bound, started), not as first listed, and its
// next write is fenced by that version.
func (r *Reconciler) annotatePod(ctx context.Context, rn *runner, key, value string) error {
	if err := r.patchPod(ctx, rn, map[string]any{key: value}); err != nil {
		return fmt.Errorf("annotating pod %s with %s: %w", rn.pod.Name, key, err)
	}
	return nil
}

// removePodAnnotation removes an annotation from the runner's pod (a merge patch
// of null) and takes the pod the API server returns as the runner's view of it.
func (r *Reconciler) removePodAnnotation(ctx context.Context, rn *runner, key string) error {
	if err := r.patchPod(ctx, rn, map[string]any{key: nil}); err != nil {
		return fmt.Errorf("removing annotation %s of pod %s: %w", key, rn.pod.Name, err)
	}
	return nil
}

func (r *Reconciler) patchPod(ctx context.Context, rn *runner, annotations map[string]any) error {
	pod, err := patchAnnotations(ctx, r.fencedPods(rn.pod.Namespace), rn.pod, annotations)
	if apierrors.IsNotFound(err) {
		// Our finalizer keeps a runner's pod until a sweep releases it: a pod gone
		// since the read was released by another sweeper.
		err = fmt.Errorf("pod %s: %w (%w)", rn.pod.Name, ErrStale, err)
	}
	if err != nil {
		rn.noteStale(err)
		return err
	}
	rn.pod = pod
	return nil
}

// annotateStatefulSet sets an annotation on the runner's StatefulSet and takes the
// StatefulSet the API server returns as the runner's view of it.
func (r *Reconciler) annotateStatefulSet(ctx context.Context, rn *runner, key, value string) error {
	sts, err := patchAnnotations(ctx, r.fencedStatefulSets(rn.sts.Namespace), rn.sts, map[string]any{key: value})
	if err != nil {
		rn.noteStale(err)
		return fmt.Errorf("annotating statefulset %s with %s: %w", rn.name(), key, err)
	}
	rn.sts = sts
	return nil
}

// adopt takes pod, the runner's pod read again, as the runner's view of it, unless
// another writer changed it since the sweep's last read or write (ErrStale): then
// what the sweep decided on is stale. deleted: this sweep has deleted the pod
// since (it is being deleted now).
func (rn *runner) adopt(pod *corev1.Pod, deleted bool) error {
	deleting := rn.pod.DeletionTimestamp != nil || deleted
	if !sameProgress(rn.pod, pod) || (pod.DeletionTimestamp != nil) != deleting {
		err := fmt.Errorf("pod %s: %w", pod.Name, ErrStale)
		rn.noteStale(err)
		return err
	}
	rn.pod = pod
	return nil
}

// noteStale: after ErrStale the sweep leaves the runner alone.
func (rn *runner) noteStale(err error) {
	if errors.Is(err, ErrStale) {
		rn.stale = true
	}
}
