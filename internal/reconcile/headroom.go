package reconcile

import (
	"context"
	"errors"
	"fmt"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/runnerscaler/runnerscaler/internal/headroom"
	"github.com/runnerscaler/runnerscaler/internal/scaling"
)

// headroom keeps the pool's placeholder StatefulSet (package headroom) at the
// count scaling.Headroom wants: created (once the priority class it needs,
// which the operator creates, is found), resized, replaced when the runner's
// template changed, deleted when the pool wants none; and deletes this deployment's placeholders of pools no longer in
// the pools file in the pool's namespace. It costs one list of the namespace's
// placeholder StatefulSets per sweep of a pool that wants placeholders; a pool
// that wants none is looked at on its first sweep by this reconciler and then
// once every CleanupInterval, and on every sweep while it drains.
func (r *Reconciler) headroom(ctx context.Context, s *sweep) error {
	want := scaling.Headroom(s.p, s.now)
	if want == 0 && !r.headroomDue(s) {
		return nil
	}
	list, err := r.kube.AppsV1().StatefulSets(s.p.Kubernetes.Namespace).List(ctx, metav1.ListOptions{LabelSelector: headroom.LabelPool})
	if err != nil {
		return fmt.Errorf("listing headroom placeholders in %s: %w", s.p.Kubernetes.Namespace, err)
	}
	var own *appsv1.StatefulSet
	var errs []error
	for i := range list.Items {
		sts := &list.Items[i]
		owner := sts.Labels[headroom.LabelPool]
		_, configured := r.templates[owner]
		switch {
		case !r.ours(sts.ObjectMeta): // another deployment's: never touched
		case owner == s.p.Name:
			own = sts
		case !configured:
			s.log.Info("deleting the headroom placeholders of a pool removed from the pools file", "placeholders", sts.Name)
			errs = append(errs, r.deletePlaceholders(ctx, sts))
		}
	}
	errs = append(errs, r.placeholders(ctx, s, own, want))
	err = errors.Join(errs...)
	switch {
	case want > 0:
		r.headroomChecked.Delete(s.p.Name) // once it wants none, the next sweep looks
	case err == nil:
		r.headroomChecked.Store(s.p.Name, s.now)
	}
	return err
}

// headroomDue: a pool that wants no placeholder is looked at for leftovers
// (its own, after its schedule ended or its headroom was removed, and removed
// pools') while it drains, on its first sweep and once every CleanupInterval.
func (r *Reconciler) headroomDue(s *sweep) bool {
	if s.p.IsDraining() {
		return true
	}
	last, ok := r.headroomChecked.Load(s.p.Name)
	return !ok || s.now.Sub(last.(time.Time)) >= r.opts.CleanupInterval
}

// placeholders brings the pool's own placeholder StatefulSet cur (nil: none)
// to want pods.
func (r *Reconciler) placeholders(ctx context.Context, s *sweep, cur *appsv1.StatefulSet, want int) error {
	if cur != nil && cur.DeletionTimestamp != nil {
		return nil // the next sweep creates it again if it is still wanted
	}
	if want == 0 {
		if cur == nil {
			return nil
		}
		s.log.Info("headroom placeholders removed: the pool wants none", "placeholders", cur.Name)
		return r.deletePlaceholders(ctx, cur)
	}
	next := headroom.StatefulSet(s.p, s.template.tmpl, want, r.opts.Deployment)
	switch {
	case cur != nil && !headroom.Current(cur, next):
		s.log.Info("headroom placeholders replaced: the runner's template changed", "placeholders", cur.Name)
		if err := r.deletePlaceholders(ctx, cur); err != nil {
			return err
		}
	case cur != nil && (cur.Spec.Replicas == nil || int(*cur.Spec.Replicas) != want):
		patch := fmt.Appendf(nil, `{"spec":{"replicas":%d}}`, want)
		if _, err := r.kube.AppsV1().StatefulSets(cur.Namespace).Patch(ctx, cur.Name, types.MergePatchType, patch, metav1.PatchOptions{}); err != nil {
			return fmt.Errorf("resizing headroom placeholders %s to %d: %w", cur.Name, want, err)
		}
		s.log.Info("headroom placeholders resized", "placeholders", cur.Name, "from", *cur.Spec.Replicas, "to", want)
		return nil
	case cur != nil:
		return nil
	}
	if err := r.checkPriorityClass(ctx); err != nil {
		return err
	}
	if _, err := r.kube.AppsV1().StatefulSets(next.Namespace).Create(ctx, next, metav1.CreateOptions{}); err != nil {
		return fmt.Errorf("creating headroom placeholders %s: %w", next.Name, err)
	}
	s.log.Info("headroom placeholders created", "placeholders", next.Name, "replicas", want)
	return nil
}

// deletePlaceholders deletes a placeholder StatefulSet; the garbage collector
// deletes its pods.
func (r *Reconciler) deletePlaceholders(ctx context.Context, sts *appsv1.StatefulSet) error {
	background := metav1.DeletePropagationBackground
	err := r.kube.AppsV1().StatefulSets(sts.Namespace).Delete(ctx, sts.Name, metav1.DeleteOptions{
		PropagationPolicy: &background, Preconditions: &metav1.Preconditions{UID: &sts.UID}})
	if err != nil && !apierrors.IsNotFound(err) {
		return fmt.Errorf("deleting headroom placeholders %s: %w", sts.Name, err)
	}
	return nil
}

// ErrNoPriorityClass is returned (wrapped, naming the class and its manifest)
// when a pool wants headroom placeholders and their PriorityClass does not
// exist, or the sweeper may not read it. The operator creates it
// (infra/priorityclass.yaml): the sweeper may only read it, since RBAC cannot
// narrow `create` to one name. The pool gets no placeholders, its status's
// errors say why, and the next sweep looks again; its runners are not held up.
var ErrNoPriorityClass = errors.New("the headroom placeholders' PriorityClass is missing")

// checkPriorityClass reads the placeholders' PriorityClass, once per
// reconciler once it was found usable. A missing or unreadable class is
// ErrNoPriorityClass; a class of that name that would not rank placeholders
// below runner pods (value 0 or more) is an error too: placeholders would hold
// nodes that runners cannot take.
func (r *Reconciler) checkPriorityClass(ctx context.Context) error {
	if r.priorityClassReady.Load() {
		return nil
	}
	pc, err := r.kube.SchedulingV1().PriorityClasses().Get(ctx, headroom.PriorityClassName, metav1.GetOptions{})
	switch {
	case apierrors.IsNotFound(err):
		return fmt.Errorf("%w: priority class %s does not exist; apply infra/priorityclass.yaml (docs/getting-started.md)",
			ErrNoPriorityClass, headroom.PriorityClassName)
	case apierrors.IsForbidden(err):
		return fmt.Errorf("%w: the sweeper may not read priority class %s (%v); apply infra/rbac.yaml's ClusterRole and infra/priorityclass.yaml",
			ErrNoPriorityClass, headroom.PriorityClassName, err)
	case err != nil:
		return fmt.Errorf("reading priority class %s: %w", headroom.PriorityClassName, err)
	case pc.Value >= 0:
		return fmt.Errorf("priority class %s has value %d: runner pods (priority 0 by default) could not preempt the placeholders; want a negative value",
			pc.Name, pc.Value)
	}
	r.priorityClassReady.Store(true)
	return nil
}
