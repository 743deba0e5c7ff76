package reconcile

import (
	"context"
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/runnerscaler/runnerscaler/internal/reservation"
	"github.com/runnerscaler/runnerscaler/internal/runnerpod"
)

// Whether a runner holds a job is decided from independent signals, because
// GitHub's REST view lies: it can list a runner that holds a job as idle for the
// first minute after the job was assigned and at moments during it, and then
// answers RemoveRunner with 204 — the job is lost. A runner that may hold a job
// (mayHoldJob: anything but one whose process has ended for good) is asked to be
// removed only when every signal says idle:
//
//   - GitHub's REST view: the runner list's busy flag, then RemoveRunner (422: busy);
//   - the pod's own report: the runner container is ready exactly while a job
//     runs (its readiness probe asks the job hooks and the runner's worker
//     process, see runnerpod.JobProbe); read again right before RemoveRunner;
//   - the job↔runner link: an `in_progress` delivery that named this runner, for
//     a job with no `completed` yet, whatever pool the job was routed to
//     (reservation.RunnerJobs, a strongly consistent read right before
//     RemoveRunner);
//   - an idle confirmation: GitHub listed the runner idle (and online) on two
//     reads at least Options.IdleConfirmation apart, unless the link and the
//     pod's report both show that the runner never took a job; a runner GitHub
//     lists offline has no session, so GitHub hands it no job, and needs none.
//
// When signals disagree, busy wins: any one of them vetoes the removal, and a veto
// against GitHub's idle answer is logged with both sides and counted
// (BusySignalDisagreements). Two bounds keep a veto from holding a runner
// forever: a link whose `completed` never came stops counting
// reservation.DefaultLinkLifetime after its `in_progress` (GitHub cancels a job
// at its timeout, 6 h by default); and a runner whose process has ended for good
// holds no job, so only GitHub's answer counts for it (an ephemeral runner that
// finished, a deleted pod whose entrypoint stopped it after its job).

// Veto signals, as named in the metrics (RemovalsVetoedBy<signal>).
const (
	signalGitHub     = "GitHub"
	signalPodReport  = "PodReport"
	signalJobLink    = "JobLink"
	signalIdleWindow = "IdleWindow"
)

// annotationIdleSince holds when GitHub first listed a runner being stopped as
// idle in its current idle streak (RFC 3339 with fractions of a second: the
// confirmation is not shortened by rounding) (the first of the two reads of the idle
// confirmation); a busy listing removes it.
const annotationIdleSince = "runnerscaler.dev/github-idle-since"

// DefaultIdleConfirmation is the default Options.IdleConfirmation: longer than the
// 25–60 s for which GitHub has been seen to list a runner idle after handing it a
// job, so that two idle reads this far apart cannot both fall in that lag.
const DefaultIdleConfirmation = 90 * time.Second

// JobLinks is what the reconciler reads of the job↔runner link (reservation.Store).
type JobLinks interface {
	RunnerJobs(ctx context.Context, runner string) ([]reservation.RunnerJob, error)
}

// mayHoldJob: the runner in pod may be running a job, or start one before the
// DELETE — anything but a runner whose process never started or has ended for
// good: no pod, or one never bound to a node; an
// ephemeral runner that finished (a restarted container exits at once, see
// finished); a pod being deleted whose runner container has ended (the
// kubelet restarts no container of a pod being deleted). A container the pod's
// status shows waiting to be created or not at all may be running already, a
// pod being deleted or not: the kubelet reports a start a moment after it, and
// a runner registers and takes a job within a second.
func mayHoldJob(pod *corev1.Pod, ephemeral bool) bool {
	switch {
	case !everRan(pod): // no pod, or one never bound to a node
		return false
	case pod.Status.Phase == corev1.PodSucceeded || pod.Status.Phase == corev1.PodFailed:
		return false
	case ephemeral && finished(pod, true):
		return false
	}
	return pod.DeletionTimestamp == nil || !runnerEnded(pod)
}

// runnerEnded: the pod's status shows its runner container ended — terminated,
// or waiting to be restarted after it terminated (CrashLoopBackOff).
func runnerEnded(pod *corev1.Pod) bool {
	cs := runnerStatus(pod)
	if cs == nil {
		return false
	}
	w := cs.State.Waiting
	return cs.State.Terminated != nil || (w != nil && w.Reason == "CrashLoopBackOff" && cs.LastTerminationState.Terminated != nil)
}

// drain stops a runner that every signal says is idle before GitHub is asked to
// remove it, so that a job GitHub hands it in the meantime is not lost: its pod
// is deleted (the finalizer keeps the object), and the entrypoint, on SIGTERM,
// stops the listener at once — or, if a job did start, lets it finish within
// the grace period and then stops the listener before it can take another
// (runner/entrypoint.sh). RemoveRunner comes once the runner container has
// ended. errWait until then; nil for a pod being deleted past its grace period
// whose runner GitHub lists offline or not at all (its node is gone).
func (s *stopper) drain(ctx context.Context) error {
	pod := s.rn.pod
	if pod.DeletionTimestamp != nil {
		// GitHub lists the runner offline and the pod's grace period is over:
		// a live kubelet would have ended the container by now, so its node is
		// gone. Before that, offline only says the listener has not connected
		// yet: it may be starting, and connect and take a job in a moment.
		if s.offline && !s.now.Before(pod.DeletionTimestamp.Time) {
			return nil
		}
		s.log.Info("waiting for the runner's entrypoint to stop it (its pod is being deleted)")
		return errWait
	}
	if s.mayTakeWaitingJob(pod) {
		// GitHub hands a waiting job to any idle runner: this one could take it
		// as its listener stops, which cancels it (holdWhileQueued).
		s.log.Info("a job of the pool waits for a runner: this idle runner stops once no job waits", "queued", s.sw.d.Queued)
		return errWait
	}
	if err := s.withdraw(ctx); err != nil {
		return err
	}
	// Fenced like every write: a pod that changed since the signals were read is
	// decided on again next sweep (withdraw's annotation is part of that chain).
	pod = s.rn.pod
	uid, rv := pod.UID, pod.ResourceVersion
	err := s.r.kube.CoreV1().Pods(pod.Namespace).Delete(ctx, pod.Name, metav1.DeleteOptions{Preconditions: &metav1.Preconditions{UID: &uid, ResourceVersion: &rv}})
	switch {
	case apierrors.IsConflict(err):
		s.log.Info("runner pod changed since its busy signals were read: deciding next sweep")
		return errWait
	case err != nil && !apierrors.IsNotFound(err):
		return fmt.Errorf("deleting the pod of idle runner %s to stop it: %w", s.rn.name(), err)
	}
	if !s.checked.IsZero() {
		s.sw.windows = append(s.sw.windows, s.r.clock.Since(s.checked))
		s.checked = time.Time{}
	}
	s.log.Info("runner idle by every signal: its pod deleted so that its entrypoint stops the listener before GitHub is asked to remove it")
	return errWait
}

// mayTakeWaitingJob: a job of the pool waits, and GitHub could hand it to this
// runner, whose listener runs, and whose labels were not removed (withdraw, or
// GitHub's list, which shows a removal whose record on the pod did not stick). A runner GitHub lists offline cannot take it,
// nor, maybe, one replaced for an outdated template (its labels may not be the
// job's) or for a registration that timed out: holding those could keep the
// slot the waiting job needs.
func (s *stopper) mayTakeWaitingJob(pod *corev1.Pod) bool {
	return jobsWaiting(s.sw) && runnerRunning(pod) && !s.offline && !withdrawn(pod) && !s.unlabelled &&
		!s.rn.outdated(s.sw.template.hash) && s.rn.phase != TimedOut
}

// reportSettle is how long a runner container must have been running before its
// silence counts as "never took a job": the job probe looks every second, and
// the kubelet reports its answer a moment later.
const reportSettle = 3 * time.Second

// reportsJob: the pod's own report says its runner runs a job (the runner
// container is running and ready).
func reportsJob(pod *corev1.Pod) bool {
	cs := runnerStatus(pod)
	return cs != nil && cs.State.Running != nil && cs.Ready
}

// runnerRunning: the runner container of pod is running (as its status says).
func runnerRunning(pod *corev1.Pod) bool {
	cs := runnerStatus(pod)
	return cs != nil && cs.State.Running != nil
}

// neverReportedJob: the pod's report has never said "job" since the runner
// container first started, at least reportSettle before now: it has not
// restarted, is not ready, and the pod's Ready condition has not changed since
// before the container started (it turns true while a job runs and back after
// it).
func neverReportedJob(pod *corev1.Pod, now time.Time) bool {
	cs := runnerStatus(pod)
	if cs == nil || cs.State.Running == nil || cs.Ready || cs.RestartCount > 0 ||
		now.Sub(cs.State.Running.StartedAt.Time) < reportSettle {
		return false
	}
	for _, c := range pod.Status.Conditions {
		if c.Type == corev1.PodReady {
			return c.Status != corev1.ConditionTrue && !c.LastTransitionTime.After(cs.State.Running.StartedAt.Time)
		}
	}
	return false
}

// unfinishedJob returns a job linked to the runner whose `completed` has not been
// recorded, within the link lifetime.
func unfinishedJob(jobs []reservation.RunnerJob, now time.Time) (reservation.RunnerJob, bool) {
	for _, j := range jobs {
		if j.State < reservation.Completed && now.Sub(j.At()) < reservation.DefaultLinkLifetime {
			return j, true
		}
	}
	return reservation.RunnerJob{}, false
}

// ensureIdle decides whether the runner may be asked to be removed now: for a
// runner that cannot hold a job (mayHoldJob), nil; otherwise nil when every signal says idle, errWait (after
// recording why) when one says busy or the idle confirmation is not complete.
// The pod's report and the link are read last, right before the caller's DELETE.
func (s *stopper) ensureIdle(ctx context.Context) error {
	if !mayHoldJob(s.rn.pod, s.p.IsEphemeral()) {
		return nil
	}
	if reportsJob(s.rn.pod) {
		gr, found, _ := s.gh.cached(s.id)
		return s.veto(ctx, signalPodReport, found && !gr.Busy, "the runner container reports a job")
	}
	gr, found, err := s.gh.byID(ctx, s.p.Scope(), s.id)
	if err != nil {
		s.log.Warn("cannot list runners to confirm the runner is idle; retrying next sweep", "id", s.id, "error", err)
		return errWait
	}
	s.offline = !found || gr.Status != "online"
	s.unlabelled = found && lacksLabels(gr.Labels, s.p.Labels)
	if !found {
		return nil // GitHub does not list it: RemoveRunner answers 404
	}
	if gr.Busy {
		return s.veto(ctx, signalGitHub, false, "GitHub lists the runner busy")
	}
	if gr.Status == "online" {
		if err := s.confirmIdle(ctx); err != nil {
			return err
		}
	}
	// Offline: no session, so GitHub hands it no job; it needs no idle confirmation.
	return s.checkNow(ctx)
}

// confirmIdle: GitHub has just listed the runner idle. The removal waits until an
// earlier idle listing is at least the idle confirmation old, unless the runner
// never took a job (by the link and by the pod's report).
func (s *stopper) confirmIdle(ctx context.Context) error {
	// The window is measured between GitHub's reads (a shared list may be
	// older than the sweep: see github).
	read := s.gh.readAt()
	since, ok := idleSince(s.rn.pod)
	if ok && read.Sub(since) >= s.r.opts.IdleConfirmation {
		return nil
	}
	if !ok {
		jobs, err := s.r.opts.JobLinks.RunnerJobs(ctx, runnerpod.PodName(s.rn.name()))
		if err != nil {
			s.log.Warn("cannot read the runner's jobs; retrying next sweep", "error", err)
			return errWait
		}
		if len(jobs) == 0 && neverReportedJob(s.rn.pod, s.now) {
			return nil
		}
		if err := s.r.annotatePod(ctx, s.rn, annotationIdleSince, read.UTC().Format(time.RFC3339Nano)); err != nil {
			return err
		}
		since = read
	}
	s.sw.vetoed[signalIdleWindow]++
	s.log.Info("GitHub lists the runner idle: removing it once that has held for the idle confirmation",
		"id", s.id, "idleSince", since, "confirmation", s.r.opts.IdleConfirmation)
	return errWait
}

// checkNow reads the pod and the link again, right before the DELETE: a job that
// started since the sweep listed the pods, or whose `in_progress` arrived since,
// vetoes it.
func (s *stopper) checkNow(ctx context.Context) error {
	pod, err := s.r.reread(ctx, s.rn.pod)
	if err != nil {
		s.log.Warn("cannot read the runner's pod again; retrying next sweep", "error", err)
		return errWait
	}
	if pod != nil {
		if err := s.rn.adopt(pod, false); err != nil {
			return err
		}
		if reportsJob(pod) {
			return s.veto(ctx, signalPodReport, true, "the runner container reports a job")
		}
	}
	jobs, err := s.r.opts.JobLinks.RunnerJobs(ctx, runnerpod.PodName(s.rn.name()))
	if err != nil {
		s.log.Warn("cannot read the runner's jobs; retrying next sweep", "error", err)
		return errWait
	}
	if j, ok := unfinishedJob(jobs, s.r.clock.Now()); ok {
		return s.veto(ctx, signalJobLink, true, "a job on this runner has no completed delivery", "job", j.JobID, "jobPool", j.Pool)
	}
	s.checked = s.r.clock.Now()
	return nil
}

// veto records that signal said busy and ends the tick. githubIdle: GitHub's
// list had just said idle, so the signals disagree.
func (s *stopper) veto(ctx context.Context, signal string, githubIdle bool, why string, args ...any) error {
	s.sw.vetoed[signal]++
	args = append([]any{"id", s.id, "signal", signal}, args...)
	if githubIdle {
		s.sw.disagreements++
		s.log.Warn("busy signals disagree: GitHub lists the runner idle, but "+why+"; not removing it", args...)
	} else {
		s.log.Info("runner is busy ("+why+"): waiting for its job to finish", args...)
	}
	if _, ok := podAnnotations(s.rn.pod)[annotationIdleSince]; ok {
		if err := s.r.removePodAnnotation(ctx, s.rn, annotationIdleSince); err != nil {
			return err
		}
	}
	if signal == signalGitHub {
		return s.busy(ctx)
	}
	return errWait
}

func idleSince(pod *corev1.Pod) (time.Time, bool) {
	t, err := time.Parse(time.RFC3339Nano, podAnnotations(pod)[annotationIdleSince])
	return t, err == nil
}

// forbiddenReason is what the pool status says of a runner GitHub refused to remove.
const forbiddenReason = "GitHub refused to remove the runner (403 Forbidden): grant the GitHub App " +
	"\"Self-hosted runners: read and write\" (organization), \"Administration: read and write\" (repository), " +
	"or the enterprise PAT manage_runners:enterprise; the runner keeps its slot until then"

// forbidden: the App may not remove runners. The stop never completes while
// GitHub still lists the runner — it could be handed a job before the pod goes —
// so it waits, loudly, and the runner keeps counting against the pool.
func (s *stopper) forbidden(ctx context.Context, err error) (outcome, error) {
	s.sw.forbidden++
	s.sw.noteStuck(s.rn.name(), forbiddenReason)
	_, found, lerr := s.gh.byID(ctx, s.p.Scope(), s.id)
	if lerr != nil || found {
		s.log.Error("GitHub refused to remove the runner (403): grant the App the self-hosted runner permission; "+
			"the runner stays until then", "id", s.id, "error", err)
		return stepWait, nil
	}
	s.log.Warn("GitHub refused to remove the runner (403), but no longer lists it: nothing left to unregister", "id", s.id)
	s.released = true
	return stepDone, nil
}
