package reconcile

import (
	"context"
	"fmt"
	"log/slog"
	"strconv"
	"time"

	corev1 "k8s.io/api/core/v1"

	"github.com/runnerscaler/runnerscaler/internal/pool"
	"github.com/runnerscaler/runnerscaler/internal/roster"
	"github.com/runnerscaler/runnerscaler/internal/runnerpod"
)

// The graceful stop of one runner (ARC's tickRunnerGracefulStop) is a state
// machine. A runner's state is derived, in stopStateOf alone, from what is
// stored on its pod and StatefulSet (annotations, the pod's deletion, its
// runner container's status) and the runner's GitHub id; each state has one
// step (stopSteps), which reads what it needs (GitHub's view of the runner,
// the pod again, the job↔runner link), makes at most the writes that move the
// runner on, and returns the next state or a wait with its reason. A sweep
// killed between two steps resumes where it stopped: the next sweep derives
// the same state from what the writes stored. Nothing is passed from one step
// to the next but the state.
//
// The rule it keeps (docs/concepts.md, "Runner lifecycle"): a runner whose
// GitHub id is known is released only by RemoveRunner answering 204 or 404, or
// by GitHub not knowing the id (or knowing it under another runner's name: not
// ours). RemoveRunner is asked only in the exited state: once the runner cannot
// hold a job (mayHoldJob), or once its pod's grace period is over and GitHub
// lists it offline (its node is gone). A runner that may hold a job is stopped
// first by deleting its pod, once every busy signal said idle, so that the
// entrypoint stops the listener. Without an id (a token-mode runner GitHub has
// not listed), "never registered" is concluded only when its pod was never
// bound to a node, or when a list read by this sweep does not show it and the
// runner cannot run again (mayHoldJob) or its pod's grace period and the
// registration timeout have both passed.
//
// Every removal goes through it: a runner scaled down, replaced (finished,
// timed out, outdated), deleted by hand or evicted, orphaned (its StatefulSet
// gone), or left by an unfinished creation (cleanup), and the runners of a
// removed or draining pool.

// stopState is where a runner's graceful stop stands (stopStateOf).
type stopState string

const (
	// stopRequested: the runner is marked for unregistration; the stop's start is not recorded yet.
	stopRequested stopState = "requested"
	// stopUnidentified: its GitHub id is unknown: it is looked up by name, or found never to have registered.
	stopUnidentified stopState = "unidentified"
	// stopRunning: its runner container may run a job: every busy signal must say idle, then its labels go.
	stopRunning stopState = "running"
	// stopWithdrawn: its custom labels were removed: its pod is deleted once the pod and the link still say idle.
	stopWithdrawn stopState = "withdrawn"
	// stopEnded: its runner container has ended in a pod not being deleted (the kubelet may start it again): the pod is deleted.
	stopEnded stopState = "ended"
	// stopDraining: its pod is being deleted while its runner container may run: the entrypoint stops the runner.
	stopDraining stopState = "draining"
	// stopExited: the runner cannot hold a job (mayHoldJob): GitHub is asked to remove it, and its answer alone counts.
	stopExited stopState = "exited"
	// stopReleased: GitHub released the runner, or it never registered: completion is recorded.
	stopReleased stopState = "released"
	// stopComplete: completion is recorded: the runner's objects may go.
	stopComplete stopState = "complete"
)

// stopSteps is the graceful stop: one step per state. stopComplete has none.
var stopSteps = map[stopState]func(*stop, context.Context) (next, error){
	stopRequested:    (*stop).start,
	stopUnidentified: (*stop).identify,
	stopRunning:      (*stop).confirmIdle,
	stopWithdrawn:    (*stop).deletePod,
	stopEnded:        (*stop).deleteEnded,
	stopDraining:     (*stop).awaitExit,
	stopExited:       (*stop).remove,
	stopReleased:     (*stop).complete,
}

// stopStateOf derives the runner's stop state from what is stored of it.
func stopStateOf(rn *runner, ephemeral bool) stopState {
	pod := rn.pod
	switch {
	case hasAnnotation(pod, runnerpod.AnnotationUnregistrationComplete):
		return stopComplete
	case pod != nil && !hasAnnotation(pod, runnerpod.AnnotationUnregistrationStart):
		return stopRequested
	case rn.runnerID() == 0:
		return stopUnidentified
	case !mayHoldJob(pod, ephemeral):
		return stopExited
	case pod.DeletionTimestamp != nil:
		return stopDraining
	case runnerEnded(pod):
		return stopEnded
	case withdrawn(pod):
		return stopWithdrawn
	}
	return stopRunning
}

// next is what a step concluded: the state the runner moved to, or a wait
// (why says what it waits for; the next sweep resumes at the same state).
type next struct {
	state stopState
	wait  bool
	why   string
}

func moveTo(s stopState) next { return next{state: s} }

func waitFor(why string) next { return next{wait: true, why: why} }

// derived: the step wrote what moves the runner on; its state is derived anew.
func derived() next { return next{} }

// stop carries one runner's graceful stop through its states within one sweep.
// Its fields are the sweep's context, never facts one step leaves for another.
type stop struct {
	r   *Reconciler
	sw  *sweep
	p   *pool.Pool
	rn  *runner
	gh  *github
	log *slog.Logger
	now time.Time
}

// maxSteps bounds the steps of one runner in one sweep: no path through the
// states visits more than this many.
const maxSteps = 12

// gracefulStop runs the runner's stop as far as it goes in this sweep: true
// when it is complete (the runner's objects may go). A runner with no pod is
// stopped too: its registration, if any, is released.
func (r *Reconciler) gracefulStop(ctx context.Context, sw *sweep, rn *runner) (bool, error) {
	s := &stop{r: r, sw: sw, p: sw.p, rn: rn, gh: sw.gh, now: sw.now, log: r.log.With("pool", sw.p.Name, "runner", rn.name())}
	state := stopStateOf(rn, s.p.IsEphemeral())
	for range maxSteps {
		if state == stopComplete {
			return true, nil
		}
		n, err := stopSteps[state](s, ctx)
		if err != nil {
			return false, fmt.Errorf("stopping runner %s (%s): %w", rn.name(), state, err)
		}
		if n.wait {
			s.log.Debug("runner stop waits", "state", state, "for", n.why)
			return false, nil
		}
		if state = n.state; state == "" {
			state = stopStateOf(rn, s.p.IsEphemeral())
		}
	}
	return false, fmt.Errorf("stopping runner %s: no end after %d steps (at %s)", rn.name(), maxSteps, state)
}

// start records the start of the stop.
func (s *stop) start(ctx context.Context) (next, error) {
	return derived(), s.r.annotatePod(ctx, s.rn, runnerpod.AnnotationUnregistrationStart, stamp(s.now))
}

// complete records that nothing is left to unregister.
func (s *stop) complete(ctx context.Context) (next, error) {
	if s.rn.pod == nil {
		return moveTo(stopComplete), nil
	}
	return derived(), s.r.annotatePod(ctx, s.rn, runnerpod.AnnotationUnregistrationComplete, stamp(s.now))
}

// recordID records the runner id GitHub lists for the runner under its name:
// on its roster entry (when it records none yet), and on its pod, so
// that a sweep killed later still knows which id to ask about once GitHub no
// longer lists the runner by name; a runner with no pod (nothing runs it) keeps
// it for this sweep.
func (s *stop) recordID(ctx context.Context, id int64) error {
	if s.rn.id.GitHubID == 0 {
		if err := s.r.record(ctx, s.sw, s.rn.id, roster.Record{GitHubID: id}); err != nil {
			return err
		}
	}
	if s.rn.pod == nil {
		if s.rn.sts.Annotations == nil {
			s.rn.sts.Annotations = map[string]string{}
		}
		s.rn.sts.Annotations[runnerpod.AnnotationRunnerID] = idString(id)
		return nil
	}
	return s.r.annotatePod(ctx, s.rn, runnerpod.AnnotationRunnerID, idString(id))
}

func stamp(t time.Time) string { return t.UTC().Format(time.RFC3339) }

func idString(id int64) string { return strconv.FormatInt(id, 10) }

func hasAnnotation(pod *corev1.Pod, key string) bool {
	_, ok := podAnnotations(pod)[key]
	return ok
}

// hasFinalizer reports whether the pod still carries the unregistration finalizer.
func hasFinalizer(pod *corev1.Pod) bool {
	for _, f := range pod.Finalizers {
		if f == runnerpod.Finalizer {
			return true
		}
	}
	return false
}
