package reconcile

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strconv"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"

	"github.com/runnerscaler/runnerscaler/internal/githubapi"
	"github.com/runnerscaler/runnerscaler/internal/pool"
	"github.com/runnerscaler/runnerscaler/internal/runnerpod"
)

// step is a state of the graceful stop of one runner (ARC's
// tickRunnerGracefulStop). All progress is in the pod's annotations, so a sweep
// killed between two steps resumes where it stopped.
//
// The rule it keeps (README, "Runner lifecycle"): a runner whose GitHub id is
// known is released only by RemoveRunner answering 204 or 404 — container state
// (exited, restarted, crash-looping) decides when to ask, never whether. Without
// an id (a token-mode runner GitHub has not listed), "never registered" is
// concluded only when the pod was never bound to a node, or after the
// registration timeout since the pod was created.
type step int

const (
	stepStart      step = iota // record the start of unregistration
	stepFindID                 // learn the runner id (annotation, else the scope's runner list)
	stepUnregister             // RemoveRunner: 204/404 done, 422 wait, 403 loud
	stepComplete               // record completion
	stepDone
)

// stopResult is what one tick of the graceful stop concluded.
type stopResult int

const (
	stopWait stopResult = iota // come back next sweep
	stopDone                   // the runner is unregistered (or never was): the pod may go
)

// annotationRetry holds "<attempts>/<answered>/<next>": RemoveRunner answered busy
// that many times, last at answered, and is not asked again before next — unless
// the runner container has stopped since (its job is over).
const annotationRetry = "runnerscaler.dev/unregistration-retry"

// Busy back-off: the first retry after this, doubling up to busyBackoffMax.
const (
	busyBackoff    = 15 * time.Second
	busyBackoffMax = 5 * time.Minute
)

// stopper carries one runner's graceful stop through its steps.
type stopper struct {
	r    *Reconciler
	sw   *sweep
	p    *pool.Pool
	rn   *runner
	gh   *github
	log  *slog.Logger
	now  time.Time
	id   int64
	next step
	// checked is when the last busy signal was read before RemoveRunner or the
	// drain (zero when none was needed).
	checked time.Time
	// offline: GitHub's list, read this tick, shows the runner offline or not at all.
	offline bool
}

// gracefulStop ticks the runner's stop machine as far as it can go in this sweep.
// A runner with no pod is stopped too: its JIT registration, if any, is released
// (the pod may never have been admitted).
func (r *Reconciler) gracefulStop(ctx context.Context, sw *sweep, rn *runner) (stopResult, error) {
	if _, ok := podAnnotations(rn.pod)[runnerpod.AnnotationUnregistrationComplete]; ok {
		return stopDone, nil
	}
	p := sw.p
	s := &stopper{r: r, sw: sw, p: p, rn: rn, gh: sw.gh, now: sw.now, log: r.log.With("pool", p.Name, "runner", rn.name())}
	steps := map[step]func(context.Context) (step, error){
		stepStart: s.start, stepFindID: s.findID, stepUnregister: s.unregister, stepComplete: s.complete,
	}
	for s.next != stepDone {
		next, err := steps[s.next](ctx)
		if errors.Is(err, errWait) {
			return stopWait, nil
		}
		if err != nil {
			return stopWait, err
		}
		s.next = next
	}
	return stopDone, nil
}

// errWait ends a tick: the runner cannot be unregistered yet.
var errWait = errors.New("wait")

func (s *stopper) start(ctx context.Context) (step, error) {
	if s.rn.pod == nil {
		return stepFindID, nil
	}
	if _, ok := s.rn.pod.Annotations[runnerpod.AnnotationUnregistrationStart]; !ok {
		if err := s.r.annotatePod(ctx, s.rn, runnerpod.AnnotationUnregistrationStart, stamp(s.now)); err != nil {
			return 0, err
		}
	}
	return stepFindID, nil
}

func (s *stopper) findID(ctx context.Context) (step, error) {
	if s.id = s.rn.runnerID(); s.id != 0 {
		return stepUnregister, nil
	}
	if !everRan(s.rn.pod) {
		if err := s.r.deleteUnboundPod(ctx, s.rn); errors.Is(err, errPodChanged) {
			s.log.Info("runner pod changed since the sweep looked (bound?): deciding next sweep")
			return 0, errWait
		} else if err != nil {
			return 0, err
		}
		s.log.Info("runner never ran: nothing to unregister")
		return stepComplete, nil
	}
	gr, found, err := s.gh.byName(ctx, s.p.Scope(), runnerpod.PodName(s.rn.name()))
	if err != nil {
		s.log.Warn("cannot list runners to find the runner id; retrying next sweep", "error", err)
		return 0, errWait
	}
	if found {
		// The id is recorded before RemoveRunner: once GitHub released the
		// runner it is no longer listed by name, and a sweep killed before
		// "complete" must still know which id to ask about (404: done) rather
		// than wait out the registration timeout.
		if s.rn.pod != nil {
			if err := s.r.annotatePod(ctx, s.rn, runnerpod.AnnotationRunnerID, idString(gr.ID)); err != nil {
				return 0, err
			}
		}
		s.id = gr.ID
		return stepUnregister, nil
	}
	if s.now.Sub(s.rn.createdAt()) < s.r.opts.RegistrationTimeout {
		s.log.Info("runner not registered yet: waiting for the registration timeout before concluding it never will")
		return 0, errWait
	}
	s.log.Info("runner never registered within the registration timeout: nothing to unregister")
	return stepComplete, nil
}

// unregister asks GitHub to remove the runner once every busy signal says idle
// (busy.go) and the runner's process has ended (drain); for a runner whose
// process has ended for good only GitHub's answer counts.
func (s *stopper) unregister(ctx context.Context) (step, error) {
	if s.backingOff() {
		return 0, errWait
	}
	if gr, found, _ := s.gh.cached(s.id); found && gr.Busy {
		return 0, s.veto(ctx, signalGitHub, false, "GitHub lists the runner busy") // no DELETE
	}
	if err := s.ensureIdle(ctx); err != nil {
		return 0, err
	}
	if mayHoldJob(s.rn.pod, s.p.IsEphemeral()) {
		if err := s.drain(ctx); err != nil {
			return 0, err
		}
	}
	err := s.gh.remove(ctx, s.p.Scope(), s.id)
	if !s.checked.IsZero() {
		s.sw.windows = append(s.sw.windows, s.r.clock.Since(s.checked))
	}
	switch {
	case err == nil || errors.Is(err, githubapi.ErrNotFound):
		s.log.Info("runner unregistered", "id", s.id)
		return stepComplete, nil
	case errors.Is(err, githubapi.ErrRunnerBusy):
		return 0, s.veto(ctx, signalGitHub, false, "RemoveRunner answered 422")
	case errors.Is(err, githubapi.ErrForbidden):
		return s.forbidden(ctx, err)
	case errors.Is(err, githubapi.ErrRateLimited):
		s.log.Warn("rate limited: unregistration waits for the reset", "error", err)
		return 0, errWait
	default:
		s.log.Warn("unregistering runner failed; retrying next sweep", "id", s.id, "error", err)
		return 0, errWait
	}
}

// backingOff: GitHub said busy recently and the runner container has not stopped
// since, so asking again now would only spend a call. A container that stopped
// after the busy answer is asked about at once: its job is over.
func (s *stopper) backingOff() bool {
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
	for _, term := range []*corev1.ContainerStateTerminated{cs.State.Terminated, cs.LastTerminationState.Terminated} {
		if term != nil && !term.FinishedAt.Time.Before(t) {
			return true
		}
	}
	return false
}

// busy: the runner is running a job. Record that we wait for it (ARC's
// completion-wait for ephemeral runners, which exit when their job ends) and when
// to ask again, with a doubling back-off.
func (s *stopper) busy(ctx context.Context) error {
	if s.rn.pod == nil {
		return errWait
	}
	if _, ok := s.rn.pod.Annotations[runnerpod.AnnotationRunnerCompletionWaitStart]; !ok && s.p.IsEphemeral() {
		if err := s.r.annotatePod(ctx, s.rn, runnerpod.AnnotationRunnerCompletionWaitStart, stamp(s.now)); err != nil {
			return err
		}
	}
	n, _, _ := retryState(s.rn.pod.Annotations)
	wait := min(busyBackoff<<min(n, 10), busyBackoffMax)
	if err := s.r.annotatePod(ctx, s.rn, annotationRetry, fmt.Sprintf("%d/%s/%s", n+1, stamp(s.now), stamp(s.now.Add(wait)))); err != nil {
		return err
	}
	return errWait
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

func (s *stopper) complete(ctx context.Context) (step, error) {
	if s.rn.pod == nil {
		return stepDone, nil
	}
	return stepDone, s.r.annotatePod(ctx, s.rn, runnerpod.AnnotationUnregistrationComplete, stamp(s.now))
}

func stamp(t time.Time) string { return t.UTC().Format(time.RFC3339) }

func idString(id int64) string { return strconv.FormatInt(id, 10) }

// hasFinalizer reports whether the pod still carries the unregistration finalizer.
func hasFinalizer(pod *corev1.Pod) bool {
	for _, f := range pod.Finalizers {
		if f == runnerpod.Finalizer {
			return true
		}
	}
	return false
}
