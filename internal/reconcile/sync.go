package reconcile

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/runnerscaler/runnerscaler/internal/roster"
	"github.com/runnerscaler/runnerscaler/internal/runnerpod"
)

// stop drives the graceful stop of every runner being stopped: marked ones, and
// pods deleted by someone else (held by the finalizer). Unregistered runners'
// owners are deleted.
func (r *Reconciler) stop(ctx context.Context, s *sweep) error {
	var errs []error
	for _, rn := range s.runners {
		if err := r.stopOne(ctx, s, rn); err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

func (r *Reconciler) stopOne(ctx context.Context, s *sweep, rn *runner) error {
	if rn.stale {
		return nil // another writer acts on it (ErrStale, already reported)
	}
	if rn.pod != nil && rn.pod.DeletionTimestamp != nil && !rn.marked() && hasFinalizer(rn.pod) {
		// Deleted by hand (or evicted): the whole runner goes, after GitHub released it.
		if err := r.mark(ctx, s, rn); err != nil {
			return err
		}
	}
	if !rn.marked() {
		return nil
	}
	if err := r.ensurePodMarked(ctx, rn); err != nil {
		return err
	}
	done, err := r.gracefulStop(ctx, s, rn)
	if err != nil || !done {
		return err
	}
	if err := r.deleteRunner(ctx, s, rn); err != nil {
		return err
	}
	rn.deleted = true
	return nil
}

// register annotates pods with their runner id once GitHub lists them online or
// busy; the list is fetched only when a running pod is not yet registered and its
// registration cannot wait (see registrationCanWait). It also keeps the
// registration token of token-mode runners that have not registered yet valid, so
// a container that restarts before registering does not crash-loop on an expired
// token.
func (r *Reconciler) register(ctx context.Context, s *sweep) error {
	defer r.clearTokens(ctx, s) // the registered runners' tokens, this sweep's too (token.go)
	for _, rn := range s.runners {
		if rn.marked() || rn.registered() || rn.pod == nil || rn.pod.DeletionTimestamp != nil {
			continue
		}
		if err := r.refreshToken(ctx, s, rn); err != nil {
			s.log.Warn("cannot refresh the registration token of an unregistered runner", "runner", rn.name(), "error", err)
		}
		if rn.pod.Status.Phase != corev1.PodRunning || r.registrationCanWait(s, rn) {
			continue
		}
		gr, found, err := s.gh.listed(ctx, s.p.Scope(), runnerpod.PodName(rn.name()))
		if err != nil {
			s.log.Warn("cannot list runners to record registrations", "error", err)
			return nil
		}
		if !found || gr.Status != "online" && !gr.Busy {
			continue
		}
		jit := rn.runnerID() != 0 // its id came with its JIT config
		if recorded := rn.id.GitHubID; recorded != 0 && recorded != gr.ID {
			s.log.Error("GitHub lists another runner under this runner's name: not recording it as this one",
				"runner", rn.name(), "id", gr.ID, "recorded", recorded)
			continue
		}
		if err := r.record(ctx, s, rn.id, roster.Record{GitHubID: gr.ID}); err != nil {
			return err // the next sweep records it
		}
		if err := r.annotatePod(ctx, rn, runnerpod.AnnotationRunnerID, idString(gr.ID)); err != nil {
			return err // the next sweep records it
		}
		if !jit {
			// Looked up as soon as it runs (token mode): the time is its
			// registration's, to a sweep. A JIT runner is looked up only after
			// half the registration timeout (registrationCanWait): no sample.
			s.stats.registrations = append(s.stats.registrations, s.now.Sub(rn.createdAt()))
		}
		if rn.phase == TimedOut {
			rn.phase = Running
		}
	}
	return nil
}

// registrationCanWait: the runner's id is known from its JIT config and it is
// younger than half the registration timeout. Such a runner needs GitHub's list
// only to show, before the timeout, that it registered (its unregistration uses
// the id it already has); looking it up at once would spend a call on nearly every
// sweep of a busy pool, since a runner is always starting there, and a short
// job's runner has finished long before. A runner whose id is unknown (token
// mode) is looked up at once.
func (r *Reconciler) registrationCanWait(s *sweep, rn *runner) bool {
	return rn.runnerID() != 0 && s.now.Sub(rn.createdAt()) < r.opts.RegistrationTimeout/2
}

// tokenRefresh: a token-mode runner's token is replaced when it has less than this left.
const tokenRefresh = 15 * time.Minute

// refreshToken replaces the token in an unregistered token-mode runner's Secret
// when it is about to expire. The kubelet updates the Secret's file in the pod
// within its sync period (about a minute), well inside the tokenRefresh ahead
// of the old token's expiry, so a later start registers with a valid token.
func (r *Reconciler) refreshToken(ctx context.Context, s *sweep, rn *runner) error {
	expires, err := time.Parse(time.RFC3339, rn.sts.Annotations[runnerpod.AnnotationTokenExpiresAt])
	if !s.p.UsesToken() || err != nil || expires.Sub(s.now) > tokenRefresh {
		return nil
	}
	tok, err := r.gh.RegistrationToken(ctx, s.p.Scope())
	if err != nil {
		return fmt.Errorf("registration token: %w", err)
	}
	if !tok.ExpiresAt.After(expires) {
		return nil
	}
	patch, _ := json.Marshal(map[string]any{"data": map[string]string{runnerpod.SecretToken: base64.StdEncoding.EncodeToString([]byte(tok.Token))}})
	if _, err := r.kube.CoreV1().Secrets(rn.sts.Namespace).Patch(ctx, rn.name(), types.MergePatchType, patch, metav1.PatchOptions{}); err != nil {
		return fmt.Errorf("updating the token of runner %s: %w", rn.name(), err)
	}
	if err := r.annotateStatefulSet(ctx, rn, runnerpod.AnnotationTokenExpiresAt, stamp(tok.ExpiresAt)); err != nil {
		return err
	}
	s.log.Info("registration token of an unregistered runner refreshed", "runner", rn.name(), "expiresAt", tok.ExpiresAt)
	return nil
}

// sync is ARC's syncRunnerPodsOwners: mark completed, timed-out and outdated
// runners for replacement, mark the surplus of the up-to-date ones, and return
// how many are missing (grow creates them once the stop stage has freed their
// slots).
func (r *Reconciler) sync(ctx context.Context, s *sweep) (missing int, err error) {
	var regular []*runner
	var errs []error
	for _, rn := range s.runners {
		switch {
		case rn.marked() || rn.phase == Terminating || rn.phase == Finishing:
		case rn.phase == Completed || rn.phase == TimedOut || rn.outdated(s.template.hash):
			if rn.phase == TimedOut {
				s.log.Warn("runner did not register within the registration timeout: replacing it",
					"runner", rn.name(), "reason", r.noteStuck(ctx, s, rn, true))
			}
			if err := r.mark(ctx, s, rn); err != nil {
				errs = append(errs, err) // still counts as not regular: replaced below
			}
		default:
			if rn.phase == Pending {
				r.noteStuck(ctx, s, rn, false)
			}
			regular = append(regular, rn)
		}
	}
	switch n := len(regular); {
	case n > s.d.Desired:
		errs = append(errs, r.scaleDown(ctx, s, holdWhileQueued(s, regular), n-s.d.Desired))
	case n < s.d.Desired:
		missing = s.d.Desired - n
	}
	return missing, errors.Join(errs...)
}

// noteStuck records why a runner that is not running is held up, for the pool
// status; with events, a runner with no pod is explained by its controller's events.
func (r *Reconciler) noteStuck(ctx context.Context, s *sweep, rn *runner, events bool) string {
	if rn.pod == nil && !events {
		return ""
	}
	reason := r.stuckReason(ctx, rn)
	if reason != "" {
		s.noteStuck(rn.name(), reason)
	}
	return reason
}

// holdWhileQueued narrows the runners scale-down may stop while a job of the
// pool waits for a runner (a queued reservation): GitHub hands a waiting job to
// any idle runner, at any moment, and one being stopped just then cancels it. So
// while a job waits, only runners that never started (no pod yet, or a pod not
// bound to a node) may go; the others stay until no job waits, which the next
// sweep sees once the job's runner took it (in_progress). A waiting job whose
// deliveries were lost holds scale-down for at most its reservation's lifetime.
// A draining pool, or one asked for more than its maxReplicas (whose waiting
// jobs are kept alive while it is saturated), is not held: there the surplus is
// what the operator asked to go.
func holdWhileQueued(s *sweep, regular []*runner) []*runner {
	if !jobsWaiting(s) {
		return regular
	}
	var unstarted []*runner
	for _, rn := range regular {
		if !everRan(rn.pod) {
			unstarted = append(unstarted, rn)
		}
	}
	if held := len(regular) - len(unstarted); held > 0 {
		s.log.Info("scale-down held for started runners: a job waits for a runner, and GitHub may hand it to any idle one",
			"queued", s.d.Queued, "held", held, "desired", s.d.Desired)
	}
	return unstarted
}

// jobsWaiting: a job of the pool waits for a runner, and stops of started
// runners wait for it to be taken (holdWhileQueued).
func jobsWaiting(s *sweep) bool {
	return s.d.Queued > 0 && !s.d.Saturated && !s.p.IsDraining()
}

// scaleDown marks the surplus for unregistration: pending runners first, then idle
// ones, then busy ones (whose unregistration waits for their job), newest first in
// each group, so the oldest running runners stay.
func (r *Reconciler) scaleDown(ctx context.Context, s *sweep, regular []*runner, surplus int) error {
	if len(regular) == 0 {
		return nil
	}
	busy := map[string]bool{}
	if list, err := s.gh.runners(ctx, s.p.Scope()); err == nil {
		for _, gr := range list {
			busy[gr.Name] = gr.Busy
		}
	}
	rank := func(rn *runner) int {
		switch {
		case rn.phase != Running:
			return 0
		case !busy[runnerpod.PodName(rn.name())]:
			return 1
		}
		return 2
	}
	for group := 0; group <= 2 && surplus > 0; group++ {
		for i := len(regular) - 1; i >= 0 && surplus > 0; i-- {
			if rank(regular[i]) != group {
				continue
			}
			if err := r.mark(ctx, s, regular[i]); err != nil {
				return err
			}
			surplus--
		}
	}
	return nil
}

// grow creates the missing runners within the pool's ceiling: live StatefulSets,
// stopping or not, never exceed maxReplicas (holdingSlots), so a runner waiting for its job to
// end before it stops still holds its slot (a finishing one, whose job has
// ended, holds none: finishing.go) — unless the pool is ephemeral, the
// last sync is newer than the newest reservation and recent, and no job is
// waiting: then a runner has just finished and the webhook has not caught up yet
// (ARC's EffectiveTime hold). The last condition is ours: a queued job is one no
// runner has taken, so it is real demand; without it, a pool at maxReplicas with a
// backlog starves for the whole delay each time its runners finish, because no
// new reservation moves the effective time. The pool's scope is recorded in its
// status (recordScope). It returns how many it created and whether one failed.
func (r *Reconciler) grow(ctx context.Context, s *sweep, wanted int) (grown, error) {
	recordScope(s)
	missing := min(wanted, s.p.Max()-holdingSlots(s))
	if missing <= 0 {
		if wanted > 0 {
			s.log.Info("at maxReplicas: runners being stopped still hold their slots", "missing", wanted, "max", s.p.Max())
		}
		return grown{}, nil
	}
	last, eff := s.st.LastSync, s.d.EffectiveTime
	if s.p.IsEphemeral() && !eff.IsZero() && !last.IsZero() && last.After(eff) && s.now.Before(last.Add(r.opts.RecreationDelay)) &&
		s.d.Queued == 0 {
		s.log.Info("holding creation: ephemeral runners finished and no newer reservation arrived",
			"missing", missing, "lastSync", last, "effectiveTime", eff, "until", last.Add(r.opts.RecreationDelay))
		return grown{}, nil
	}
	var g grown
	for range missing {
		if err := r.create(ctx, s); err != nil {
			g.failed = true // cleanup runs in this sweep
			return g, err
		}
		g.created++
		s.stats.created++
		s.st.LastSync = s.now
	}
	return g, nil
}

// grown is what grow did: runners created, and whether a creation failed.
type grown struct {
	created int
	failed  bool
}

// live counts the pool's StatefulSets that exist and are not being deleted.
func live(runners []*runner) int {
	n := 0
	for _, rn := range runners {
		if !rn.deleted && rn.sts.DeletionTimestamp == nil {
			n++
		}
	}
	return n
}

// holdingSlots counts the StatefulSets that hold a slot under the pool's
// ceiling: the live ones but the finishing (finishing.go), and those of
// retired runners whose deletion was cut short and is not under way again
// (finishRetired; their pod may have been made again and hold a job).
func holdingSlots(s *sweep) int {
	n := 0
	for _, rn := range s.runners {
		if !rn.deleted && rn.sts.DeletionTimestamp == nil && rn.phase != Finishing {
			n++
		}
	}
	for _, rn := range s.retired {
		if rn.sts.DeletionTimestamp == nil {
			n++
		}
	}
	return n
}
