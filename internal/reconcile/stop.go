package reconcile

import (
	"context"
	"errors"
	"log/slog"
	"strconv"
	"time"

	corev1 "k8s.io/api/core/v1"

	"github.com/runnerscaler/runnerscaler/internal/githubapi"
	"github.com/runnerscaler/runnerscaler/internal/pool"
	"github.com/runnerscaler/runnerscaler/internal/runnerpod"
)

// step is a state of the graceful stop of one runner pod (ARC's
// tickRunnerGracefulStop). All progress is in the pod's annotations, so a sweep
// killed between two steps resumes where it stopped.
type step int

const (
	stepStart      step = iota // record the start of unregistration
	stepCompleted              // the runner container already exited 0: nothing to unregister
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

// stopper carries one pod's graceful stop through its steps.
type stopper struct {
	r    *Reconciler
	p    *pool.Pool
	rn   *runner
	gh   *github
	log  *slog.Logger
	now  time.Time
	id   int64
	next step
}

// gracefulStop ticks the pod's stop machine as far as it can go in this sweep.
func (r *Reconciler) gracefulStop(ctx context.Context, p *pool.Pool, rn *runner, gh *github, now time.Time) (stopResult, error) {
	if rn.pod == nil {
		return stopDone, nil
	}
	if _, ok := rn.pod.Annotations[runnerpod.AnnotationUnregistrationComplete]; ok {
		return stopDone, nil
	}
	s := &stopper{r: r, p: p, rn: rn, gh: gh, now: now, log: r.log.With("pool", p.Name, "runner", rn.name())}
	steps := map[step]func(context.Context) (step, error){
		stepStart: s.start, stepCompleted: s.completed, stepFindID: s.findID,
		stepUnregister: s.unregister, stepComplete: s.complete,
	}
	for s.next != stepDone {
		fn := steps[s.next]
		next, err := fn(ctx)
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
	if _, ok := s.rn.pod.Annotations[runnerpod.AnnotationUnregistrationStart]; !ok {
		if err := s.r.annotatePod(ctx, s.rn, runnerpod.AnnotationUnregistrationStart, stamp(s.now)); err != nil {
			return 0, err
		}
	}
	return stepCompleted, nil
}

func (s *stopper) completed(context.Context) (step, error) {
	if completed(s.rn.pod) {
		s.log.Info("runner container completed: nothing to unregister")
		return stepComplete, nil
	}
	return stepFindID, nil
}

func (s *stopper) findID(ctx context.Context) (step, error) {
	if s.id = s.rn.runnerID(); s.id != 0 {
		return stepUnregister, nil
	}
	gr, found, err := s.gh.byName(ctx, s.p.Scope(), runnerpod.PodName(s.rn.name()))
	if err != nil {
		s.log.Warn("cannot list runners to find the runner id; retrying next sweep", "error", err)
		return 0, errWait
	}
	if !found {
		s.log.Info("runner never registered: nothing to unregister")
		return stepComplete, nil
	}
	s.id = gr.ID
	return stepUnregister, nil
}

func (s *stopper) unregister(ctx context.Context) (step, error) {
	err := s.gh.remove(ctx, s.p.Scope(), s.id)
	switch {
	case err == nil || errors.Is(err, githubapi.ErrNotFound):
		s.log.Info("runner unregistered", "id", s.id)
		return stepComplete, nil
	case errors.Is(err, githubapi.ErrRunnerBusy):
		return 0, s.busy(ctx)
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

// busy: the runner is running a job. An ephemeral runner will exit when it ends, so
// record that we wait for its completion; a persistent one is retried next sweep.
func (s *stopper) busy(ctx context.Context) error {
	if _, ok := s.rn.pod.Annotations[runnerpod.AnnotationRunnerCompletionWaitStart]; !ok && s.p.IsEphemeral() {
		if err := s.r.annotatePod(ctx, s.rn, runnerpod.AnnotationRunnerCompletionWaitStart, stamp(s.now)); err != nil {
			return err
		}
	}
	s.log.Info("runner is busy: waiting for its job to finish", "id", s.id)
	return errWait
}

// forbidden: the App may not remove runners. ARC treats this as done; we do too,
// unless GitHub lists the runner as busy — a job is never cut short.
func (s *stopper) forbidden(ctx context.Context, err error) (step, error) {
	s.log.Error("GitHub refused to remove the runner (403): check the App's self-hosted runner permission", "id", s.id, "error", err)
	if gr, found, lerr := s.gh.byID(ctx, s.p.Scope(), s.id); lerr != nil || (found && gr.Busy) {
		return 0, errWait
	}
	return stepComplete, nil
}

func (s *stopper) complete(ctx context.Context) (step, error) {
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
