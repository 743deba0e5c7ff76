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

// The graceful stop of one runner (ARC's tickRunnerGracefulStop) is an ordered
// list of steps (stopper.steps). Each step is idempotent and keeps its progress in
// the pod's annotations, so a sweep killed between two steps resumes where it
// stopped: a step whose work is already recorded is done at once.
//
// The rule it keeps (README, "Runner lifecycle"): a runner whose GitHub id is
// known is released only by RemoveRunner answering 204 or 404 — container state
// (exited, restarted, crash-looping) decides when to ask, never whether. Without
// an id (a token-mode runner GitHub has not listed), "never registered" is
// concluded only when the pod was never bound to a node, or after the
// registration timeout since the pod was created.

// outcome is what a step of the graceful stop, or the whole stop in one sweep,
// concluded; a step that fails returns its error instead.
type outcome int

const (
	stepDone outcome = iota // done: the next step runs (after the last one, the runner may go)
	stepWait                // the runner cannot go further in this sweep: the next sweep resumes here
)

// stopStep is one named step of the graceful stop.
type stopStep struct {
	name string
	run  func(context.Context) (outcome, error)
}

// steps is the graceful stop, in order.
func (s *stopper) steps() []stopStep {
	return []stopStep{
		{"start", s.start},           // record the start of unregistration
		{"find-id", s.findID},        // learn the runner id, or that it never registered
		{"unregister", s.unregister}, // RemoveRunner once every busy signal says idle: 204/404 done, busy wait, 403 loud
		{"complete", s.complete},     // record completion
	}
}

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
	r   *Reconciler
	sw  *sweep
	p   *pool.Pool
	rn  *runner
	gh  *github
	log *slog.Logger
	now time.Time
	id  int64
	// released: GitHub released the runner (RemoveRunner answered 204 or 404, or
	// no longer lists it), or it never registered: nothing is left to unregister.
	released bool
	// checked is when the last busy signal was read before RemoveRunner or the
	// drain (zero when none was needed).
	checked time.Time
	// offline: GitHub's list, read this tick, shows the runner offline or not at all.
	offline bool
	// unlabelled: GitHub's list, read this tick, shows the runner without any
	// of its pool's custom labels (lacksLabels).
	unlabelled bool
}

// gracefulStop runs the runner's stop steps in order as far as they go in this
// sweep: stepDone when every step is done (the runner may go), stepWait when a step
// waits or fails. A runner with no pod is stopped too: its JIT registration, if
// any, is released (the pod may never have been admitted).
func (r *Reconciler) gracefulStop(ctx context.Context, sw *sweep, rn *runner) (outcome, error) {
	if _, ok := podAnnotations(rn.pod)[runnerpod.AnnotationUnregistrationComplete]; ok {
		return stepDone, nil
	}
	s := &stopper{r: r, sw: sw, p: sw.p, rn: rn, gh: sw.gh, now: sw.now, log: r.log.With("pool", sw.p.Name, "runner", rn.name())}
	for _, step := range s.steps() {
		out, err := step.run(ctx)
		if err != nil {
			return stepWait, fmt.Errorf("stopping runner %s (step %s): %w", rn.name(), step.name, err)
		}
		if out == stepWait {
			return stepWait, nil
		}
	}
	return stepDone, nil
}

// errWait ends a tick inside a step (busy.go): the runner cannot be unregistered yet.
var errWait = errors.New("wait")

// endTick is the outcome of a step that ends the tick with err: stepWait, and err
// unless it is errWait (or nil).
func endTick(err error) (outcome, error) {
	if errors.Is(err, errWait) {
		return stepWait, nil
	}
	return stepWait, err
}

func (s *stopper) start(ctx context.Context) (outcome, error) {
	if s.rn.pod == nil {
		return stepDone, nil
	}
	if _, ok := s.rn.pod.Annotations[runnerpod.AnnotationUnregistrationStart]; !ok {
		if err := s.r.annotatePod(ctx, s.rn, runnerpod.AnnotationUnregistrationStart, stamp(s.now)); err != nil {
			return stepWait, err
		}
	}
	return stepDone, nil
}

func (s *stopper) findID(ctx context.Context) (outcome, error) {
	if s.id = s.rn.runnerID(); s.id != 0 {
		return stepDone, nil
	}
	if !everRan(s.rn.pod) {
		if err := s.r.deleteUnboundPod(ctx, s.rn); errors.Is(err, errPodChanged) {
			s.log.Info("runner pod changed since the sweep looked (bound?): deciding next sweep")
			return stepWait, nil
		} else if err != nil {
			return stepWait, err
		}
		s.log.Info("runner never ran: nothing to unregister")
		s.released = true
		return stepDone, nil
	}
	gr, found, err := s.gh.byName(ctx, s.p.Scope(), runnerpod.PodName(s.rn.name()))
	if err != nil {
		s.log.Warn("cannot list runners to find the runner id; retrying next sweep", "error", err)
		return stepWait, nil
	}
	if found {
		// The id is recorded before RemoveRunner: once GitHub released the
		// runner it is no longer listed by name, and a sweep killed before
		// "complete" must still know which id to ask about (404: done) rather
		// than wait out the registration timeout.
		if s.rn.pod != nil {
			if err := s.r.annotatePod(ctx, s.rn, runnerpod.AnnotationRunnerID, idString(gr.ID)); err != nil {
				return stepWait, err
			}
		}
		s.id = gr.ID
		return stepDone, nil
	}
	if s.rn.pod.DeletionTimestamp != nil && runnerEnded(s.rn.pod) {
		// A deleting pod's containers are not started again: a runner GitHub
		// does not list now (a list this sweep read, see github) never will be.
		s.log.Info("runner never registered and its container has ended in a pod being deleted: nothing to unregister")
		s.released = true
		return stepDone, nil
	}
	if s.now.Sub(s.rn.createdAt()) < s.r.opts.RegistrationTimeout {
		s.log.Info("runner not registered yet: waiting for the registration timeout before concluding it never will")
		return stepWait, nil
	}
	s.log.Info("runner never registered within the registration timeout: nothing to unregister")
	s.released = true
	return stepDone, nil
}

// ownsID checks, right before RemoveRunner, that GitHub lists runner s.id under
// this runner's pod name. The id comes from an annotation, which anyone who can
// write objects in a runner namespace can forge, this deployment's name
// included; removing another runner by its id could lose its job (GitHub's
// busy flag lies just after an assignment). It reports false when GitHub lists
// no runner with the id (nothing to remove), or lists it under another name
// (not ours: logged, never removed). It returns the runner as GitHub lists it.
func (s *stopper) ownsID(ctx context.Context) (githubapi.Runner, bool, error) {
	gr, found, err := s.gh.byID(ctx, s.p.Scope(), s.id)
	if err != nil || !found {
		return gr, false, err
	}
	if want := runnerpod.PodName(s.rn.name()); gr.Name != want {
		s.log.Error("the runner id this runner's objects record is another GitHub runner's: not removing it",
			"id", s.id, "githubName", gr.Name, "want", want)
		return gr, false, nil
	}
	return gr, true, nil
}

// unregister asks GitHub to remove the runner once every busy signal says idle
// (busy.go) and the runner's process has ended (drain); for a runner whose
// process has ended for good only GitHub's answer counts.
func (s *stopper) unregister(ctx context.Context) (outcome, error) {
	if s.released {
		return stepDone, nil
	}
	if s.backingOff() {
		return stepWait, nil
	}
	if gr, found, _ := s.gh.cached(s.id); found && gr.Busy {
		return endTick(s.veto(ctx, signalGitHub, false, "GitHub lists the runner busy")) // no DELETE
	}
	if err := s.ensureIdle(ctx); err != nil {
		return endTick(err)
	}
	if mayHoldJob(s.rn.pod, s.p.IsEphemeral()) {
		if err := s.drain(ctx); err != nil {
			return endTick(err)
		}
	}
	gr, owned, err := s.ownsID(ctx)
	switch {
	case err != nil:
		s.log.Warn("cannot list runners to check whose the runner id is; retrying next sweep", "id", s.id, "error", err)
		return stepWait, nil
	case !owned:
		s.released = true // nothing of ours on GitHub: the objects go without a call
		return stepDone, nil
	case gr.Busy:
		return endTick(s.veto(ctx, signalGitHub, false, "GitHub lists the runner busy")) // no DELETE
	}
	err = s.gh.remove(ctx, s.p.Scope(), s.id)
	if !s.checked.IsZero() {
		s.sw.windows = append(s.sw.windows, s.r.clock.Since(s.checked))
	}
	switch {
	case err == nil || errors.Is(err, githubapi.ErrNotFound):
		s.log.Info("runner unregistered", "id", s.id)
		s.released = true
		return stepDone, nil
	case errors.Is(err, githubapi.ErrRunnerBusy):
		return endTick(s.veto(ctx, signalGitHub, false, "RemoveRunner answered 422"))
	case errors.Is(err, githubapi.ErrForbidden):
		return s.forbidden(ctx, err)
	case errors.Is(err, githubapi.ErrRateLimited):
		s.log.Warn("rate limited: unregistration waits for the reset", "error", err)
		return stepWait, nil
	default:
		s.log.Warn("unregistering runner failed; retrying next sweep", "id", s.id, "error", err)
		return stepWait, nil
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

func (s *stopper) complete(ctx context.Context) (outcome, error) {
	if s.rn.pod == nil {
		return stepDone, nil
	}
	if err := s.r.annotatePod(ctx, s.rn, runnerpod.AnnotationUnregistrationComplete, stamp(s.now)); err != nil {
		return stepWait, err
	}
	return stepDone, nil
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
