package reconcile

import (
	"context"
	"errors"
	"fmt"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/runnerscaler/runnerscaler/internal/githubapi"
	"github.com/runnerscaler/runnerscaler/internal/runnerpod"
	"github.com/runnerscaler/runnerscaler/internal/scope"
)

// The steps of the graceful stop, one per state (stopSteps), in the order a
// runner usually goes through them.

// identify (stopUnidentified) finds the runner's GitHub id by its name, or
// concludes that it never registered. A pod never bound to a node is deleted
// as observed: it never ran. A runner GitHub does not list (this sweep's list)
// has its pod deleted once its container has ended, or once the registration
// timeout has passed (before that it may be registering right now): whatever
// registers meanwhile is stopped by its entrypoint, and once its container has
// ended in the deleted pod, GitHub's list says whether anything is left to
// remove.
func (s *stop) identify(ctx context.Context) (next, error) {
	pod := s.rn.pod
	if pod != nil && !everRan(pod) {
		if err := s.r.deleteUnboundPod(ctx, s.rn); errors.Is(err, errPodChanged) {
			return waitFor("the pod, which changed since the sweep looked (bound?)"), nil
		} else if err != nil {
			return next{}, err
		}
		s.log.Info("runner never ran: nothing to unregister")
		return moveTo(stopReleased), nil
	}
	l, err := s.gh.byName(ctx, s.p.Scope(), runnerpod.PodName(s.rn.name()))
	if err != nil {
		s.log.Warn("cannot list runners to find the runner id; retrying next sweep", "error", err)
		return waitFor("GitHub's runner list"), nil
	}
	switch {
	case l.found:
		return derived(), s.recordID(ctx, l.ID)
	case !mayHoldJob(pod, s.p.IsEphemeral()):
		s.log.Info("runner not registered, and it cannot run again: nothing to unregister")
		return moveTo(stopReleased), nil
	case pod.DeletionTimestamp != nil:
		if !s.now.Before(pod.DeletionTimestamp.Time) && s.now.Sub(s.rn.createdAt()) >= s.r.opts.RegistrationTimeout {
			s.log.Info("runner not registered within the registration timeout, and its pod's grace period is over (its node is gone): nothing to unregister")
			return moveTo(stopReleased), nil
		}
		return waitFor("the entrypoint to stop the runner of a pod being deleted"), nil
	case !runnerEnded(pod) && s.now.Sub(s.rn.createdAt()) < s.r.opts.RegistrationTimeout:
		s.log.Info("runner not registered yet: waiting for it to register, or for the registration timeout")
		return waitFor("the runner's registration"), nil
	}
	s.log.Info("runner not registered: its pod is deleted, and GitHub's list decides once its container has ended")
	n, err := s.deletePodNow(ctx)
	if err != nil || n.wait || runnerEnded(s.rn.pod) {
		return n, err
	}
	// It may have registered since the list was read: a list read after the
	// delete decides.
	return waitFor("the entrypoint to stop a runner that may have registered since GitHub's list was read"), nil
}

// confirmIdle (stopRunning) asks every busy signal whether the runner runs a
// job; once all say idle, and no waiting job may reach it, its custom labels
// are removed (withdraw).
func (s *stop) confirmIdle(ctx context.Context) (next, error) {
	if s.backingOff() {
		return waitFor("the back-off after GitHub said busy"), nil
	}
	if reportsJob(s.rn.pod) {
		c := s.gh.cached(s.rn.runnerID())
		return s.veto(ctx, signalPodReport, c.found && !c.Busy, "the runner container reports a job")
	}
	if n, busy, err := s.workflowBusy(ctx); busy {
		return n, err
	}
	l, err := s.gh.byID(ctx, s.p.Scope(), s.rn.runnerID())
	switch {
	case err != nil:
		s.log.Warn("cannot list runners to confirm the runner is idle; retrying next sweep", "id", s.rn.runnerID(), "error", err)
		return waitFor("GitHub's runner list"), nil
	case l.busy():
		return s.veto(ctx, signalGitHub, false, "GitHub lists the runner busy")
	case l.online():
		if n, ok, err := s.idleConfirmed(ctx, l); !ok {
			return n, err
		}
	}
	// Offline or not listed (this sweep's list): no session, so GitHub hands it no job.
	if s.jobMayReach(ctx, l) {
		s.log.Info("a job that this runner's labels match waits for a runner: this idle runner stops once no such job waits", "queued", s.sw.d.Queued)
		return waitFor("no job this runner could take to wait"), nil
	}
	return s.withdraw(ctx, l)
}

// jobMayReach: a job waits — of the pool, or of another pool whose jobs this
// runner's labels match (otherJobWaits) — and GitHub could hand it to this
// runner: its listener has a session and its labels were not removed (the
// pod's record or GitHub's list, which shows a removal whose record did not
// stick). GitHub hands a waiting job to any idle runner whose labels match; one
// whose listener is stopping just then cancels it. A runner replaced for an
// outdated template (its labels may not be the job's) or for a registration
// that timed out is not held: it could keep the slot the waiting job needs.
func (s *stop) jobMayReach(ctx context.Context, l listing) bool {
	if !l.online() || lacksLabels(l.Labels, s.p.Labels) || s.rn.outdated(s.sw.template.hash) || s.rn.phase == TimedOut {
		return false
	}
	return jobsWaiting(s.sw) || s.otherJobWaits(ctx)
}

// deletePod (stopWithdrawn) deletes the pod of a runner whose labels are gone,
// once the pod's report and the link, read again now, still say idle: its
// entrypoint stops the listener — or, if a job did start, lets it finish within
// the grace period first (runner/entrypoint.sh). The delete is fenced by the
// version just read: a pod that changed since (a job started) is decided on
// again next sweep.
func (s *stop) deletePod(ctx context.Context) (next, error) {
	if s.gh.cached(s.rn.runnerID()).busy() {
		return s.veto(ctx, signalGitHub, false, "GitHub lists the runner busy")
	}
	if n, ok, err := s.checkNow(ctx); !ok {
		return n, err
	}
	checked := s.r.clock.Now()
	n, err := s.deletePodNow(ctx)
	if err != nil || n.wait {
		return n, err
	}
	s.sw.stats.windows = append(s.sw.stats.windows, s.r.clock.Since(checked))
	s.log.Info("runner idle by every signal: its pod deleted so that its entrypoint stops the listener before GitHub is asked to remove it")
	return waitFor("the entrypoint to stop the runner"), nil
}

// deleteEnded (stopEnded) deletes the pod of a runner whose container has
// ended: the kubelet would start it again, and a deleted pod's containers are
// not. Should it have started again since the kubelet reported it, its
// entrypoint stops it as in any drain.
func (s *stop) deleteEnded(ctx context.Context) (next, error) {
	return s.deletePodNow(ctx)
}

// deletePodNow deletes the runner's pod as the sweep last read it (a UID and
// resourceVersion precondition) and reads it again (our finalizer keeps it).
func (s *stop) deletePodNow(ctx context.Context) (next, error) {
	pod := s.rn.pod
	uid, rv := pod.UID, pod.ResourceVersion
	err := s.r.kube.CoreV1().Pods(pod.Namespace).Delete(ctx, pod.Name, metav1.DeleteOptions{Preconditions: &metav1.Preconditions{UID: &uid, ResourceVersion: &rv}})
	switch {
	case apierrors.IsConflict(err):
		s.log.Info("runner pod changed since the sweep read it: deciding next sweep")
		return waitFor("the pod, which changed since the sweep read it"), nil
	case apierrors.IsNotFound(err):
		return waitFor("the pod, gone since the sweep read it"), nil
	case err != nil:
		return next{}, fmt.Errorf("deleting the pod of runner %s to stop it: %w", s.rn.name(), err)
	}
	return derived(), s.r.rereadDeleted(ctx, s.rn)
}

// awaitExit (stopDraining) waits for the entrypoint of a pod being deleted to
// stop its runner. Once the pod's grace period is over and GitHub lists the
// runner offline or not at all (this sweep's list), a live kubelet would have
// ended the container: its node is gone, and GitHub's answer decides. Before
// that, offline only says the listener has not connected yet.
func (s *stop) awaitExit(ctx context.Context) (next, error) {
	if s.now.Before(s.rn.pod.DeletionTimestamp.Time) {
		return waitFor("the entrypoint to stop the runner (its pod is being deleted)"), nil
	}
	l, err := s.gh.byID(ctx, s.p.Scope(), s.rn.runnerID())
	if err != nil || l.online() {
		return waitFor("the entrypoint to stop the runner (its pod is being deleted)"), nil
	}
	s.log.Info("runner pod past its grace period and GitHub lists the runner offline: its node is gone")
	return moveTo(stopExited), nil
}

// remove (stopExited) asks GitHub to remove a runner that cannot hold a job:
// GitHub's answer alone counts. Only a runner GitHub lists under this runner's
// name is removed (owned).
//
// Its release needs no wait for the runner: what makes it unable to hold a job
// is its pod's status, read at the sweep's start (mayHoldJob) — for an
// ephemeral runner that exited after its job, its runner container ended after
// its runner started (finished: a container started again finds the run marker
// and starts no runner), so no listener is left to take another job. GitHub's
// busy flag is then only GitHub's own view, checked before the call: a list an
// earlier sweep read (shared, RunnerListMaxAge) that shows the runner busy was
// most likely read during the job that has ended since, so the runner is looked
// up again in a list of this sweep. Only that answer, or RemoveRunner's 422,
// holds the removal back (and backs the next try off).
func (s *stop) remove(ctx context.Context) (next, error) {
	if s.backingOff() {
		return waitFor("the back-off after GitHub said busy"), nil
	}
	id := s.rn.runnerID()
	l, owned, err := s.owned(ctx, id, s.gh.byID)
	if err == nil && owned && l.Busy && !l.own {
		l, owned, err = s.owned(ctx, id, s.gh.ownByID)
	}
	switch {
	case err != nil:
		s.log.Warn("cannot read GitHub's runners to check whose the runner id is; retrying next sweep", "id", id, "error", err)
		return waitFor("GitHub's runner list"), nil
	case !owned:
		return moveTo(stopReleased), nil // nothing of ours on GitHub: the objects go without a call
	case l.Busy:
		return s.veto(ctx, signalGitHub, false, "GitHub lists the runner busy")
	}
	err = s.gh.remove(ctx, s.p.Scope(), id)
	switch {
	case err == nil || errors.Is(err, githubapi.ErrNotFound):
		s.log.Info("runner unregistered", "id", id)
		return moveTo(stopReleased), nil
	case errors.Is(err, githubapi.ErrRunnerBusy):
		return s.veto(ctx, signalGitHub, false, "RemoveRunner answered 422")
	case errors.Is(err, githubapi.ErrForbidden):
		return s.forbidden(ctx, err)
	case errors.Is(err, githubapi.ErrRateLimited):
		s.log.Warn("rate limited: unregistration waits for the reset", "error", err)
		return waitFor("GitHub's rate limit"), nil
	}
	s.log.Warn("unregistering runner failed; retrying next sweep", "id", id, "error", err)
	return waitFor("RemoveRunner, which failed"), nil
}

// owned checks that GitHub lists runner id under this runner's pod name. The
// id comes from an annotation, which anyone who can write objects in a runner
// namespace can forge, this deployment's name included; removing (or
// unlabelling) another runner by its id could lose its job. It reports false
// when GitHub does not know the id (nothing to remove), or lists it under
// another name (not ours: logged, never touched). A persistent runner this
// sweep's list does not show is read alone before that is concluded: a list
// read page by page while runners come and go can miss one, and a persistent
// registration outlives its pod. (An ephemeral runner's registration ends with
// its one job.)
func (s *stop) owned(ctx context.Context, id int64, byID func(context.Context, scope.Scope, int64) (listing, error)) (listing, bool, error) {
	l, err := byID(ctx, s.p.Scope(), id)
	if err == nil && !l.found && !s.p.IsEphemeral() {
		l, err = s.gh.alone(ctx, s.p.Scope(), id)
	}
	if err != nil || !l.found {
		return l, false, err
	}
	if want := runnerpod.PodName(s.rn.name()); l.Name != want {
		s.log.Error("the runner id this runner's objects record is another GitHub runner's: not touching it",
			"id", id, "githubName", l.Name, "want", want)
		return l, false, nil
	}
	return l, true, nil
}

// forbiddenReason is what the pool status says of a runner GitHub refused to remove.
const forbiddenReason = "GitHub refused to remove the runner (403 Forbidden): grant the GitHub App " +
	"\"Self-hosted runners: read and write\" (organization), \"Administration: read and write\" (repository), " +
	"or the enterprise PAT manage_runners:enterprise; the runner keeps its slot until then"

// forbidden: the App may not remove runners. The stop never completes while
// GitHub still lists the runner, so it waits, loudly, and the runner keeps
// counting against the pool.
func (s *stop) forbidden(ctx context.Context, err error) (next, error) {
	s.sw.stats.forbidden++
	s.sw.noteStuck(s.rn.name(), forbiddenReason)
	id := s.rn.runnerID()
	l, lerr := s.gh.byID(ctx, s.p.Scope(), id)
	if lerr != nil || l.found {
		s.log.Error("GitHub refused to remove the runner (403): grant the App the self-hosted runner permission; "+
			"the runner stays until then", "id", id, "error", err)
		return waitFor("the App's permission to remove runners"), nil
	}
	s.log.Warn("GitHub refused to remove the runner (403), but no longer lists it: nothing left to unregister", "id", id)
	return moveTo(stopReleased), nil
}
