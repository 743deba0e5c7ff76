package reconcile

import (
	"context"
	"errors"
	"time"

	"github.com/runnerscaler/runnerscaler/internal/reservation"
	"github.com/runnerscaler/runnerscaler/internal/runnerpod"
)

// An ephemeral runner runs one job. Once GitHub reports that job completed,
// the runner takes no other: a JIT config registers once, and the entrypoint
// does not start a runner again in a pod where one has run (see finished). Its
// container still runs for a moment (the runner's own exit, then the kubelet's
// next look, up to a second later), and until then it would hold its slot: the
// job waiting for that slot would wait for the exit too. So a runner whose
// job is completed is finishing: for FinishingFor from when a sweep found it
// so, it is not counted against the pool's desired count or its maxReplicas
// ceiling (sync, holdingSlots), and its replacement is created at once. Everything
// else about it is unchanged: it is stopped, unregistered and deleted only
// once its container has exited (Completed), by the usual rules, or, past
// FinishingFor, counted and treated again as the running runner it then
// still is.
//
// What makes a runner finishing is the job↔runner link the webhook records
// from GitHub's signed deliveries, read with strong consistency: at least one
// job linked to the runner, and every linked job completed. A nudge only
// names the runners to look at (sweep.d.Finished); the link decides. The
// sweeper writes the finding on the runner's StatefulSet (the object the
// roster ties to the runner by UID), so later sweeps, by other nudges,
// count it out too until FinishingFor ends.
//
// The pool may so have, for FinishingFor at most, more pods than its
// maxReplicas: the finishing ones, none of which can take a job.

// DefaultFinishingFor is how long a finishing runner holds no slot: well over
// the kubelet's one-second look at containers, so that a runner that exits as
// it should is stopped before the window ends.
const DefaultFinishingFor = 15 * time.Second

// noteFinishing marks the runners the sweep was told finished their job
// (d.Finished, GitHub runner names) finishing, when they are: running
// ephemeral runners of the pool, on its roster, not being stopped, whose
// every linked job is completed. A link that cannot be read, or a mark that
// cannot be written, leaves the runner counted as it was: its slot frees
// when its container has exited, as without the mark. It returns the marks
// another writer's change refused (ErrStale).
func (r *Reconciler) noteFinishing(ctx context.Context, s *sweep) error {
	if !s.p.IsEphemeral() || len(s.d.Finished) == 0 {
		return nil
	}
	var errs []error
	named := map[string]bool{}
	for _, n := range s.d.Finished {
		named[n] = true
	}
	for _, rn := range s.runners {
		if !named[runnerpod.PodName(rn.name())] || rn.phase != Running || rn.marked() || rn.stale {
			continue
		}
		jobs, err := r.opts.JobLinks.RunnerJobs(ctx, runnerpod.PodName(rn.name()))
		if err != nil {
			s.log.Warn("cannot read a finished runner's jobs: its slot frees when its container exits", "runner", rn.name(), "error", err)
			continue
		}
		if !allCompleted(jobs, rn.createdAt()) {
			continue
		}
		if err := r.annotateStatefulSet(ctx, rn, runnerpod.AnnotationJobCompleted, s.now.UTC().Format(time.RFC3339Nano)); err != nil {
			if errors.Is(err, ErrStale) {
				errs = append(errs, err) // the sweeper sweeps again at once (Retryable)
				continue
			}
			s.log.Warn("cannot mark a finished runner: its slot frees when its container exits", "runner", rn.name(), "error", err)
			continue
		}
		rn.phase = Finishing
		s.log.Info("runner finished its job: its slot goes to a replacement while its container exits", "runner", rn.name())
	}
	return errors.Join(errs...)
}

// allCompleted: every job linked is completed, and at least one of them was
// first recorded once the runner existed (created). Links are kept by runner
// name, and names are random: a runner may have the name of one retired less
// than the links' retention ago, whose links are then read as its own — and a
// late or redelivered `completed` of that runner's job, which the webhook takes
// for a token-mode runner's until its id is recorded, names it. Such a link
// proves nothing about this runner's job; an unfinished one still holds it.
func allCompleted(jobs []reservation.RunnerJob, created time.Time) bool {
	own := 0
	for _, j := range jobs {
		if j.State < reservation.Completed {
			return false
		}
		if !firstRecorded(j).Before(created) {
			own++
		}
	}
	return own > 0
}

// firstRecorded is when the link's first delivery was recorded.
func firstRecorded(j reservation.RunnerJob) time.Time {
	if j.StartedMillis != 0 {
		return time.UnixMilli(j.StartedMillis)
	}
	return j.At()
}

// finishingAt is when a sweep found the runner's job completed (zero: never).
func (rn *runner) finishingAt() time.Time {
	t, err := time.Parse(time.RFC3339Nano, rn.sts.Annotations[runnerpod.AnnotationJobCompleted])
	if err != nil {
		return time.Time{}
	}
	return t
}

// finishing: a sweep found the runner's job completed less than FinishingFor
// ago. A stamp ahead of the clock by FinishingFor or more is no sweep's (an
// object copied or restored from elsewhere, a hand edit; Lambda clocks differ
// by far less) and counts for nothing: no stamp keeps a runner out of the
// count, and so from scale-down, for more than twice FinishingFor.
func (r *Reconciler) finishing(rn *runner, now time.Time) bool {
	at := rn.finishingAt()
	age := now.Sub(at)
	return !at.IsZero() && age > -r.opts.FinishingFor && age < r.opts.FinishingFor
}
