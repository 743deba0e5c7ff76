package sweeper

import (
	"context"

	"github.com/runnerscaler/runnerscaler/internal/pool"
	"github.com/runnerscaler/runnerscaler/internal/poolstate"
	"github.com/runnerscaler/runnerscaler/internal/scaling"
)

// The phases of the pool status the follow-up reads (reconcile's Phase names):
// runners that take jobs or will (pending, running), and runners whose stop is
// under way and still hold their slots (stopping, terminating).
const (
	phasePending     = "pending"
	phaseRunning     = "running"
	phaseStopping    = "stopping"
	phaseTerminating = "terminating"
)

// leftWaiting: the sweep left jobs of the pool waiting while it has fewer
// runners up or starting than it wants, and runners being stopped: their stop
// holds the slots the waiting jobs need, and it goes on at a later sweep — a
// finished runner whose container ends a moment after its job, a pod deleted
// whose entrypoint stops the listener, a removal GitHub answered busy for.
func leftWaiting(d scaling.Decision, st poolstate.Status) bool {
	stopping := st.Phases[phaseStopping] + st.Phases[phaseTerminating]
	return d.Queued > 0 && stopping > 0 && st.Phases[phasePending]+st.Phases[phaseRunning] < d.Desired
}

// followUp sweeps p again, every FollowUpEvery, while its last sweep left jobs
// waiting behind runners being stopped (leftWaiting), for up to FollowUpFor.
// The stop of a runner often needs one sweep more than the nudge that began
// it, and nothing else may come to sweep the pool soon: the schedule is a
// minute away (or, in a closed loop driven by nudges alone, never), and in a
// saturated pool whose jobs all wait for those slots no job starts or ends to
// nudge it again — the jobs would wait for an unrelated event. A follow-up
// that finds the lease held marks the pool dirty (acquire), so the holder
// sweeps again instead. The nudge's outcome stays its first sweep's: a failed
// follow-up is logged, and the next nudge or tick sweeps again.
func (s *Sweeper) followUp(ctx context.Context, p *pool.Pool, holder string, spilled *spillTargets) outcome {
	log := s.log.With("pool", p.Name, "holder", holder)
	start := s.clock.Now()
	for n := 1; ; n++ {
		if s.clock.Since(start) >= s.opts.FollowUpFor || nearDeadline(ctx) {
			log.InfoContext(ctx, "follow-up sweeps: jobs still wait behind runners being stopped; the next nudge or tick sweeps again",
				"followUps", n-1, "for", s.clock.Since(start))
			return swept
		}
		select {
		case <-ctx.Done():
			return swept
		case <-s.clock.After(s.opts.FollowUpEvery):
		}
		log.InfoContext(ctx, "follow-up sweep: the last sweep left jobs waiting behind runners being stopped", "followUp", n)
		o, left := s.sweepLeased(ctx, p, holder, true, nil, nil, spilled)
		if o != swept || !left {
			return swept
		}
	}
}
