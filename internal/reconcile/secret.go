package reconcile

import (
	"context"
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/types"

	"github.com/runnerscaler/runnerscaler/internal/runnerpod"
)

// deleteSecret deletes the Secret of a runner whose StatefulSet was deleted,
// rather than leave it to the garbage collector alone: a Secret whose owner
// reference was never written (a sweep that ended between the StatefulSet's
// creation and step 4 of create, its cleanup and status with it) has nothing to
// be collected with, and would wait for a cleanup, which may be CleanupInterval
// away. Only the runner's own Secret goes (runnerSecret), with its UID as
// precondition. A failure is logged and makes cleanup due at once, in this sweep:
// cleanup finishes ownerless Secrets.
func (r *Reconciler) deleteSecret(ctx context.Context, s *sweep, rn *runner) {
	sec, err := r.runnerSecret(ctx, s, rn)
	if err == nil && sec != nil {
		err = r.kube.CoreV1().Secrets(sec.Namespace).Delete(ctx, sec.Name, metav1.DeleteOptions{Preconditions: &metav1.Preconditions{UID: &sec.UID}})
		if apierrors.IsNotFound(err) {
			err = nil
		}
	}
	if err != nil {
		s.log.Warn("cannot delete the secret of a deleted runner; cleanup removes it", "runner", rn.name(), "error", err)
		s.st.LastCleanup = time.Time{}
	}
}

// runnerSecret reads the Secret of the runner rn (a list by name: the
// sweeper's Role has no secrets/get). It returns nil when there is none to
// delete: none, one already being deleted, or one that is not the runner's —
// not the Secret whose UID its roster entry recorded, or, while the entry
// recorded none (a creation cut short), not this deployment's (ours) or owned
// by anything but the runner's StatefulSet.
func (r *Reconciler) runnerSecret(ctx context.Context, s *sweep, rn *runner) (*corev1.Secret, error) {
	name := rn.name()
	list, err := r.kube.CoreV1().Secrets(s.p.Kubernetes.Namespace).List(ctx, metav1.ListOptions{
		LabelSelector: labels.SelectorFromSet(labels.Set{runnerpod.LabelPool: s.p.Name}).String(),
		FieldSelector: fields.OneTermEqualSelector("metadata.name", name).String(),
	})
	if err != nil {
		return nil, fmt.Errorf("reading secret of runner %s: %w", name, err)
	}
	for i := range list.Items {
		sec := &list.Items[i]
		if sec.Name != name || sec.DeletionTimestamp != nil {
			continue
		}
		if recorded := rn.id.SecretUID; recorded != "" {
			if string(sec.UID) == recorded {
				return sec, nil
			}
			continue
		}
		if r.ours(sec.ObjectMeta) && ownedOnlyBy(sec, name, types.UID(rn.id.StatefulSetUID)) {
			return sec, nil
		}
	}
	return nil, nil
}

// ownedOnlyBy: every owner of sec (there may be none) is the StatefulSet name,
// of UID owner when it is given.
func ownedOnlyBy(sec *corev1.Secret, name string, owner types.UID) bool {
	for _, ref := range sec.OwnerReferences {
		if ref.Kind != "StatefulSet" || ref.Name != name || owner != "" && ref.UID != owner {
			return false
		}
	}
	return true
}
