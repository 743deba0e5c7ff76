package reconcile

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"

	"github.com/runnerscaler/runnerscaler/internal/reservation"
	"github.com/runnerscaler/runnerscaler/internal/runnerpod"
)

// Whether a runner holds a job is decided from independent signals, because
// GitHub's REST view lies: it can list a runner that holds a job as idle for the
// first minute after the job was assigned and at moments during it, and then
// answers RemoveRunner with 204 — the job is lost. So a runner that may hold a
// job (mayHoldJob: its runner container may be running) is never asked to be
// removed: it is stopped by deleting its pod, whose entrypoint stops the
// listener — or lets a job that did start finish first — and only once the
// container has ended is GitHub asked to remove it. The pod is deleted only when
// every signal says idle (stopRunning, then stopWithdrawn right before the
// delete):
//
//   - GitHub's REST view: the runner list's busy flag;
//   - the pod's own report: the runner container is ready exactly while a job
//     runs (its readiness probe asks the job hooks and the runner's worker
//     process, see runnerpod.JobProbe); read again right before the delete;
//   - the job↔runner link: an `in_progress` delivery that named this runner, for
//     a job with no `completed` yet, whatever pool the job was routed to
//     (reservation.RunnerJobs, a strongly consistent read right before the
//     delete);
//   - an idle confirmation: GitHub listed the runner idle (and online) on two
//     reads at least Options.IdleConfirmation apart, unless the link and the
//     pod's report both show that the runner never took a job; a runner GitHub
//     lists offline has no session, so GitHub hands it no job, and needs none;
//   - in container mode, the runner's workflow pod: while one exists, read
//     again right before the delete, the runner is busy (workflow.go).
//
// When signals disagree, busy wins: any one of them vetoes the stop, and a veto
// against GitHub's idle answer is logged with both sides and counted
// (BusySignalDisagreements). A link whose `completed` never came stops counting
// reservation.DefaultLinkLifetime after its `in_progress` (GitHub cancels a job
// at its timeout, 6 h by default), so a lost delivery holds a runner for that
// long at most.

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

// JobLinks is what the reconciler reads of the job↔runner link, and of a
// linked job's own record (reservation.Store).
type JobLinks interface {
	RunnerJobs(ctx context.Context, runner string) ([]reservation.RunnerJob, error)
	// Job reads the job's item in pool, whatever its state (ok: there is one).
	Job(ctx context.Context, pool string, job int64) (reservation.Reservation, bool, error)
}

// mayHoldJob is the one answer to "may the runner in pod be running a job, or
// start one before the sweeper acts": yes while its runner container may be
// running, whatever its restart history — a container whose last exit came
// before its runner started (notStarted) is started again, registers and takes
// a job like a first start. A runner container the pod's status shows running
// holds, unless the runner is spent (its last end says its runner ran: a start
// after that runs no runner). No only when the runner cannot run again: no pod,
// or one never bound to a node; a pod that has ended (Succeeded, Failed); an
// ephemeral runner that is spent, or that finished and is not running (a
// container started again finds the run marker and exits without starting the
// runner); a pod being deleted whose runner container has ended (the kubelet
// starts no container of a pod being deleted). A container the pod's status
// shows waiting, to be created or restarted, may be running already: the
// kubelet reports a start a moment after it, and a runner registers and takes
// a job within a second.
func mayHoldJob(pod *corev1.Pod, ephemeral bool) bool {
	switch {
	case !everRan(pod): // no pod, or one never bound to a node
		return false
	case pod.Status.Phase == corev1.PodSucceeded || pod.Status.Phase == corev1.PodFailed:
		return false
	case ephemeral && spent(runnerStatus(pod)):
		return false
	case runnerRunning(pod):
		return true
	case ephemeral && finished(pod, true):
		return false
	}
	return pod.DeletionTimestamp == nil || !runnerEnded(pod)
}

// runnerEnded: the pod's status shows its runner container not running after it
// ran: terminated, or waiting to be started again after it terminated.
func runnerEnded(pod *corev1.Pod) bool {
	cs := runnerStatus(pod)
	return cs != nil && cs.State.Running == nil && lastEnd(cs) != nil
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
// recorded, within the link lifetime (linkUnfinished), and that its own record
// does not show completed either: GitHub sends some `completed` deliveries
// without the runner's name (a job cancelled as it was handed over), which
// complete the job's item but not the link. Only the job's item in the pool
// the link names is read, and only for a link that is unfinished.
func (s *stop) unfinishedJob(ctx context.Context, jobs []reservation.RunnerJob) (reservation.RunnerJob, bool, error) {
	for _, j := range linkUnfinished(jobs, s.r.clock.Now()) {
		if j.Pool != "" {
			rec, ok, err := s.r.opts.JobLinks.Job(ctx, j.Pool, j.JobID)
			if err != nil {
				return reservation.RunnerJob{}, false, err
			}
			if ok && rec.State >= reservation.Completed {
				continue
			}
		}
		return j, true, nil
	}
	return reservation.RunnerJob{}, false, nil
}

// linkUnfinished returns the jobs linked to the runner whose `completed` the
// link has not recorded, within the link lifetime.
func linkUnfinished(jobs []reservation.RunnerJob, now time.Time) []reservation.RunnerJob {
	var out []reservation.RunnerJob
	for _, j := range jobs {
		if j.State < reservation.Completed && now.Sub(j.At()) < reservation.DefaultLinkLifetime {
			out = append(out, j)
		}
	}
	return out
}

// idleConfirmed: GitHub has just listed the runner idle (l). True once an
// earlier idle listing is at least the idle confirmation old, or the runner
// never took a job (by the link and by the pod's report); otherwise the first
// idle listing is recorded and the stop waits.
func (s *stop) idleConfirmed(ctx context.Context, l listing) (next, bool, error) {
	// The window is measured between GitHub's reads (a shared list may be
	// older than the sweep: see github).
	since, ok := idleSince(s.rn.pod)
	if ok && l.at.Sub(since) >= s.r.opts.IdleConfirmation {
		return next{}, true, nil
	}
	if !ok {
		jobs, err := s.r.opts.JobLinks.RunnerJobs(ctx, runnerpod.PodName(s.rn.name()))
		if err != nil {
			s.log.Warn("cannot read the runner's jobs; retrying next sweep", "error", err)
			return waitFor("the job link"), false, nil
		}
		if len(jobs) == 0 && neverReportedJob(s.rn.pod, s.now) {
			return next{}, true, nil
		}
		if err := s.r.annotatePod(ctx, s.rn, annotationIdleSince, l.at.UTC().Format(time.RFC3339Nano)); err != nil {
			return next{}, false, err
		}
		since = l.at
	}
	s.sw.stats.vetoed[signalIdleWindow]++
	s.log.Info("GitHub lists the runner idle: stopping it once that has held for the idle confirmation",
		"id", s.rn.runnerID(), "idleSince", since, "confirmation", s.r.opts.IdleConfirmation)
	return waitFor("the idle confirmation"), false, nil
}

// checkNow reads the pod and the link again, right before the pod's deletion:
// a job that started since the sweep listed the pods, or whose `in_progress`
// arrived since, vetoes it. ok: both say idle, and the runner's pod is the one
// just read.
func (s *stop) checkNow(ctx context.Context) (next, bool, error) {
	pod, err := s.r.reread(ctx, s.rn.pod)
	if err != nil {
		s.log.Warn("cannot read the runner's pod again; retrying next sweep", "error", err)
		return waitFor("the pod, read again"), false, nil
	}
	if pod == nil {
		return waitFor("the pod, gone since the sweep listed it (another sweeper released it)"), false, nil
	}
	if err := s.rn.adopt(pod, false); err != nil {
		return next{}, false, err
	}
	if reportsJob(pod) {
		n, err := s.veto(ctx, signalPodReport, true, "the runner container reports a job")
		return n, false, err
	}
	if n, busy, err := s.workflowPodNow(ctx); busy {
		return n, false, err
	}
	jobs, err := s.r.opts.JobLinks.RunnerJobs(ctx, runnerpod.PodName(s.rn.name()))
	if err != nil {
		s.log.Warn("cannot read the runner's jobs; retrying next sweep", "error", err)
		return waitFor("the job link"), false, nil
	}
	if j, ok, err := s.unfinishedJob(ctx, jobs); err != nil {
		s.log.Warn("cannot read the runner's job; retrying next sweep", "error", err)
		return waitFor("the job's record"), false, nil
	} else if ok {
		n, err := s.veto(ctx, signalJobLink, true, "a job on this runner has no completed delivery", "job", j.JobID, "jobPool", j.Pool)
		return n, false, err
	}
	return next{}, true, nil
}

// veto records that signal said busy, and waits. githubIdle: GitHub's list had
// just said idle, so the signals disagree. A busy answer from GitHub itself
// backs the next question off (busy).
func (s *stop) veto(ctx context.Context, signal string, githubIdle bool, why string, args ...any) (next, error) {
	s.sw.stats.vetoed[signal]++
	args = append([]any{"id", s.rn.runnerID(), "signal", signal}, args...)
	if githubIdle {
		s.sw.stats.disagreements++
		s.log.Warn("busy signals disagree: GitHub lists the runner idle, but "+why+"; not stopping it", args...)
	} else {
		s.log.Info("runner is busy ("+why+"): waiting for its job to finish", args...)
	}
	if hasAnnotation(s.rn.pod, annotationIdleSince) {
		if err := s.r.removePodAnnotation(ctx, s.rn, annotationIdleSince); err != nil {
			return next{}, err
		}
	}
	if signal == signalGitHub {
		return waitFor(why), s.busy(ctx)
	}
	return waitFor(why), nil
}

// annotationRetry holds "<attempts>/<answered>/<next>": GitHub said busy that
// many times, last at answered, and is not asked again before next — unless
// the runner container has stopped since (its job is over).
const annotationRetry = "runnerscaler.dev/unregistration-retry"

// Busy back-off: the first retry after this, doubling up to busyBackoffMax.
const (
	busyBackoff    = 15 * time.Second
	busyBackoffMax = 5 * time.Minute
)

// backingOff: GitHub said busy recently and the runner container has not stopped
// since, so asking again now would only spend a call. A container that stopped
// after the busy answer is asked about at once: its job is over.
func (s *stop) backingOff() bool {
	_, answered, next := retryState(podAnnotations(s.rn.pod))
	if !s.now.Before(next) {
		return false
	}
	return !stoppedSince(s.rn.pod, answered)
}

// stoppedSince: the runner container is not running now and last stopped at or
// after t (times have a second's precision).
func stoppedSince(pod *corev1.Pod, t time.Time) bool {
	cs := runnerStatus(pod)
	if cs == nil || cs.State.Running != nil {
		return false
	}
	end := lastEnd(cs)
	return end != nil && !end.FinishedAt.Time.Before(t)
}

// busy: GitHub says the runner runs a job. Record that we wait for it (ARC's
// completion-wait for ephemeral runners, which exit when their job ends) and when
// to ask again, with a doubling back-off.
func (s *stop) busy(ctx context.Context) error {
	if s.rn.pod == nil {
		return nil
	}
	if !hasAnnotation(s.rn.pod, runnerpod.AnnotationRunnerCompletionWaitStart) && s.p.IsEphemeral() {
		if err := s.r.annotatePod(ctx, s.rn, runnerpod.AnnotationRunnerCompletionWaitStart, stamp(s.now)); err != nil {
			return err
		}
	}
	n, _, _ := retryState(s.rn.pod.Annotations)
	wait := min(busyBackoff<<min(n, 10), busyBackoffMax)
	return s.r.annotatePod(ctx, s.rn, annotationRetry, fmt.Sprintf("%d/%s/%s", n+1, stamp(s.now), stamp(s.now.Add(wait))))
}

// retryState parses annotationRetry: attempts so far, when GitHub last said busy,
// and the earliest next try.
func retryState(a map[string]string) (int, time.Time, time.Time) {
	parts := strings.Split(a[annotationRetry], "/")
	if len(parts) != 3 {
		return 0, time.Time{}, time.Time{}
	}
	attempts, _ := strconv.Atoi(parts[0])
	answered, _ := time.Parse(time.RFC3339, parts[1])
	next, _ := time.Parse(time.RFC3339, parts[2])
	return attempts, answered, next
}

func idleSince(pod *corev1.Pod) (time.Time, bool) {
	t, err := time.Parse(time.RFC3339Nano, podAnnotations(pod)[annotationIdleSince])
	return t, err == nil
}
