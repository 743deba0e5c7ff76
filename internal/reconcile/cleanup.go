package reconcile

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"

	"github.com/runnerscaler/runnerscaler/internal/roster"
	"github.com/runnerscaler/runnerscaler/internal/runnerpod"
)

// cleanup finishes what failed or interrupted creations left: the pool's ownerless
// Secrets. create writes a runner's Secret before anything else of it, so every
// leftover has one. Only a Secret the roster ties to a live runner by UID
// (claimSecret) is acted on: a Secret of another deployment, one that carries
// the pool label and a runner's name but is not the Secret the sweeper made
// for it, or one of another pool's namespace, is foreign and left alone. A
// Secret whose StatefulSet exists is adopted; one older than the orphan grace
// is an orphan: its runner's GitHub registration, if there is one (by the id
// the roster recorded, else by the runner's name), is removed first, then the
// Secret. A Secret whose runner still has a pod (its StatefulSet deleted with
// --cascade=orphan) is left to that pod's graceful stop, which asks the busy
// signals first: cleanup itself removes only runners that have no pod.
//
// It costs a list of Secrets, so it runs only when due (cleanupDue).
func (r *Reconciler) cleanup(ctx context.Context, s *sweep, g grown) error {
	if !r.cleanupDue(s, g) {
		return nil
	}
	ns := s.p.Kubernetes.Namespace
	secs, err := r.kube.CoreV1().Secrets(ns).List(ctx, metav1.ListOptions{LabelSelector: runnerpod.LabelPool + "=" + s.p.Name})
	if err != nil {
		return fmt.Errorf("listing secrets of pool %s: %w", s.p.Name, err)
	}
	live := map[string]*appsv1.StatefulSet{}
	for _, rn := range s.runners {
		live[rn.name()] = rn.sts
	}
	podded := map[string]bool{} // the orphaned runners that have a pod, by name
	for _, rn := range s.orphans {
		podded[rn.name()] = true
	}
	var errs []error
	pending := false
	for i := range secs.Items {
		sec := &secs.Items[i]
		if len(sec.OwnerReferences) > 0 || sec.DeletionTimestamp != nil || !r.ours(sec.ObjectMeta) {
			continue
		}
		e, err := r.claimSecret(ctx, s, sec)
		if err != nil {
			errs = append(errs, err)
			pending = true
			continue
		}
		if e == nil {
			continue // foreign: left alone
		}
		if !e.Retired.IsZero() {
			// Its runner was released and retired, and the Secret's deletion
			// was cut short: it only goes.
			err := r.kube.CoreV1().Secrets(sec.Namespace).Delete(ctx, sec.Name, metav1.DeleteOptions{Preconditions: &metav1.Preconditions{UID: &sec.UID}})
			if err != nil && !apierrors.IsNotFound(err) {
				errs = append(errs, fmt.Errorf("deleting the secret of retired runner %s: %w", sec.Name, err))
				pending = true
			}
			continue
		}
		if podded[sec.Name] {
			// Its StatefulSet is gone but its pod is not: the orphan's graceful
			// stop (finishOrphans) asks every busy signal before it releases the
			// runner and deletes this Secret.
			pending = true
			continue
		}
		done, err := r.cleanupSecret(ctx, s, sec, e, live[sec.Name])
		pending = pending || !done
		errs = append(errs, err)
	}
	if err := r.retireEmpty(ctx, s, secs.Items); err != nil {
		errs = append(errs, err)
		pending = true
	}
	s.st.LastCleanup = s.now
	if pending {
		s.st.LastCleanup = time.Time{} // due again at the next sweep
	}
	return errors.Join(errs...)
}

// retireEmpty retires the live runners of which nothing was ever made and
// nothing is left: the roster recorded no object or id of them, no pod,
// StatefulSet or Secret of the namespace carries their name, and they were
// added longer than the orphan grace ago (a sweeper whose lease lapsed may
// still be creating a younger one). Such an entry is what a creation cut
// short between the roster's Add and the Secret's create leaves, or one whose
// retirement failed after its Secret could not be created: nothing else ever
// retires it.
func (r *Reconciler) retireEmpty(ctx context.Context, s *sweep, secs []corev1.Secret) error {
	named := maps.Clone(s.named)
	for i := range secs {
		named[runnerpod.PodName(secs[i].Name)] = true
	}
	var errs []error
	for name, e := range s.roster {
		if named[name] || s.now.Sub(e.Created) < r.opts.OrphanGrace ||
			e.SecretUID != "" || e.StatefulSetUID != "" || len(e.PodUIDs) > 0 || e.GitHubID != 0 {
			continue // young, or something of it was made: its objects' ends retire it
		}
		if err := r.opts.Roster.Retire(ctx, s.p.Name, name, s.now); err != nil {
			errs = append(errs, err)
			continue
		}
		s.log.Info("retired a runner of which nothing is left (a creation cut short)", "runner", name)
	}
	return errors.Join(errs...)
}

// cleanupDue: in a sweep where a creation failed, and in every sweep of a
// draining pool; in the sweeps that follow
// creations, within the recreation delay (a sweeper killed between creation steps
// records nothing, but the sweeps after it see its Secret); and at least every
// CleanupInterval, measured by the injected clock and recorded in the pool status
// (LastCleanup; zero when the last cleanup left something to look at again). Not
// in a sweep whose creations all succeeded (the fast path), nor in a steady one.
func (r *Reconciler) cleanupDue(s *sweep, g grown) bool {
	switch {
	case g.failed, s.p.IsDraining(): // a draining pool is done only when nothing is left
		return true
	case g.created > 0:
		return false
	case s.now.Sub(s.st.LastCleanup) >= r.opts.CleanupInterval:
		return true
	}
	return !s.st.LastSync.IsZero() && s.now.Sub(s.st.LastSync) <= r.opts.RecreationDelay
}

// cleanupSecret adopts an ownerless Secret whose StatefulSet exists, or finishes
// an orphaned one. done is false when the Secret must be looked at again.
func (r *Reconciler) cleanupSecret(ctx context.Context, s *sweep, sec *corev1.Secret, e *roster.Runner, sts *appsv1.StatefulSet) (bool, error) {
	if sts != nil {
		still, err := r.stillThere(ctx, sts)
		if err != nil || !still {
			// Gone or going since the sweep looked (deleted with
			// --cascade=orphan, perhaps): owned by it, the Secret would go with
			// it, under its pod's runner. The next cleanup sees what is left.
			return false, err
		}
		runnerpod.Own(sec, sts)
		if _, err := r.kube.CoreV1().Secrets(sec.Namespace).Update(ctx, sec, metav1.UpdateOptions{}); err != nil {
			return false, fmt.Errorf("adopting secret %s: %w", sec.Name, err)
		}
		return true, nil
	}
	if s.now.Sub(writtenAt(sec)) < r.opts.OrphanGrace {
		return false, nil // a sweeper whose lease lapsed may still be creating it
	}
	return r.releaseSecret(ctx, s, sec, e)
}

// stillThere: sts exists as the sweep saw it (same UID) and is not being
// deleted, as read now (a list by name: the sweeper's Role has no
// statefulsets/get). Between this read and the adoption a deletion can still
// come; the window is one request long.
func (r *Reconciler) stillThere(ctx context.Context, sts *appsv1.StatefulSet) (bool, error) {
	list, err := r.kube.AppsV1().StatefulSets(sts.Namespace).List(ctx, metav1.ListOptions{
		FieldSelector: fields.OneTermEqualSelector("metadata.name", sts.Name).String()})
	if err != nil {
		return false, fmt.Errorf("reading statefulset %s before adopting its secret: %w", sts.Name, err)
	}
	for _, cur := range list.Items {
		if cur.UID == sts.UID && cur.DeletionTimestamp == nil {
			return true, nil
		}
	}
	return false, nil
}

// releaseSecret finishes an orphaned Secret's runner through the graceful
// stop, as a runner with no pod (secretRunner): its registration, if GitHub
// lists one under the runner's name (by the id the roster recorded, else by
// name), is removed, and then the Secret goes. A runner GitHub does not release
// (busy, or an error) keeps the Secret, the record, for the next cleanup.
func (r *Reconciler) releaseSecret(ctx context.Context, s *sweep, sec *corev1.Secret, e *roster.Runner) (bool, error) {
	rn := secretRunner(sec, e)
	done, err := r.gracefulStop(ctx, s, rn)
	if err != nil || !done {
		return false, err
	}
	if err := r.retire(ctx, s, sec.Name); err != nil {
		return false, err
	}
	err = r.kube.CoreV1().Secrets(sec.Namespace).Delete(ctx, sec.Name, metav1.DeleteOptions{Preconditions: &metav1.Preconditions{UID: &sec.UID}})
	if err != nil && !apierrors.IsNotFound(err) {
		return false, fmt.Errorf("deleting orphaned secret %s: %w", sec.Name, err)
	}
	s.log.Info("removed what an unfinished runner creation left", "runner", sec.Name, "runnerId", rn.runnerID())
	return true, nil
}

// secretRunner stands in for the runner of an orphaned Secret, its roster
// entry e: its name, the runner id the roster recorded, no pod.
func secretRunner(sec *corev1.Secret, e *roster.Runner) *runner {
	annotations := map[string]string{runnerpod.AnnotationUnregistrationRequest: sec.Annotations[runnerpod.AnnotationSyncTime]}
	sts := &appsv1.StatefulSet{ObjectMeta: metav1.ObjectMeta{Name: sec.Name, Namespace: sec.Namespace, Annotations: annotations}}
	return &runner{sts: sts, id: e, phase: Terminating}
}

// writtenAt is when create wrote the Secret, by the sweeper's clock (the API
// server's creation time for Secrets written before that was recorded).
func writtenAt(sec *corev1.Secret) time.Time {
	if t, err := time.Parse(time.RFC3339, sec.Annotations[runnerpod.AnnotationSyncTime]); err == nil {
		return t
	}
	return sec.CreationTimestamp.Time
}
