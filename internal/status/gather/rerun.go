package gather

import (
	"context"

	"github.com/runnerscaler/runnerscaler/internal/rerun"
	"github.com/runnerscaler/runnerscaler/internal/runnername"
	"github.com/runnerscaler/runnerscaler/internal/status"
)

// Reruns reads the sweeper's re-run decisions (rerun.Store).
type Reruns interface {
	Get(ctx context.Context, pool string, job int64) (rerun.Candidate, bool, error)
}

// WithReruns makes Trace show what became of a job that failed on one of the
// deployment's runners (package rerun; default: nothing shown).
func WithReruns(r Reruns) Option { return func(g *Gatherer) { g.reruns = r } }

// rerunOf is the re-run decision about job, which ran on runner: it is kept in
// the runner's pool, whatever pool the job was routed to. nil when there is
// none (the job did not fail on a runner of ours, or it is unknown here).
func (g *Gatherer) rerunOf(ctx context.Context, runner string, job int64) (*status.Rerun, error) {
	if g.reruns == nil || runner == "" {
		return nil, nil
	}
	for i := range g.pools.Pools {
		p := &g.pools.Pools[i]
		if !runnername.IsPodOf(p.Name, runner) {
			continue
		}
		c, ok, err := g.reruns.Get(ctx, p.Name, job)
		if err != nil || !ok {
			return nil, err
		}
		return &status.Rerun{Outcome: outcomeName(c.Decision), Cause: c.Cause, Reason: c.Reason, Failed: c.Completed(),
			Decided: c.Decided(), Tries: c.Tries}, nil
	}
	return nil, nil
}

func outcomeName(o rerun.Decision) string {
	if o == rerun.Pending {
		return "pending"
	}
	return string(o)
}
