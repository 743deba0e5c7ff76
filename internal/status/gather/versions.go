package gather

import (
	"context"
	"fmt"

	"github.com/runnerscaler/runnerscaler/internal/pool"
	"github.com/runnerscaler/runnerscaler/internal/runnerversion"
	"github.com/runnerscaler/runnerscaler/internal/status"
)

// RunnerReleases reads what the sweeper's daily check saw of actions/runner's
// releases (runnerversion.Store).
type RunnerReleases interface {
	Get(ctx context.Context) (runnerversion.Known, error)
}

// WithRunnerReleases makes the report judge each pool's actions/runner
// version against what the daily check saw (default: no versions shown).
func WithRunnerReleases(r RunnerReleases) Option { return func(g *Gatherer) { g.releases = r } }

// runnerVersions sets each pool's RunnerVersion (nothing without WithRunnerReleases).
func (g *Gatherer) runnerVersions(ctx context.Context, r *status.Report) error {
	if g.releases == nil {
		return nil
	}
	k, err := g.releases.Get(ctx)
	if err != nil {
		return err
	}
	for i := range r.Pools {
		p := g.pools.Pool(r.Pools[i].Name)
		if p == nil {
			continue
		}
		v, err := runnerVersion(p, k, r)
		if err != nil {
			return err
		}
		r.Pools[i].RunnerVersion = v
	}
	return nil
}

func runnerVersion(p *pool.Pool, k runnerversion.Known, r *status.Report) (*status.RunnerVersion, error) {
	v, err := runnerversion.PoolVersion(p.RunnerVersion)
	if err != nil {
		return nil, fmt.Errorf("pool %s: %w", p.Name, err)
	}
	a := runnerversion.Assess(v, k, r.At)
	return &status.RunnerVersion{Version: a.Version, Stated: p.RunnerVersion != "", Latest: a.Latest, State: string(a.State),
		Deadline: a.Deadline, DeadlineExact: a.DeadlineExact, DaysLeft: a.DaysLeft, Reason: a.Reason,
		CheckedAt: k.CheckedAt, CheckError: k.Error}, nil
}
