package sweeper

import (
	"context"
	"errors"
	"fmt"

	"github.com/runnerscaler/runnerscaler/internal/pool"
)

// served keeps the removed pools whose scope this deployment serves: the scope
// of a pool of its pools file, or the one recorded in the removed pool's status
// while the pool was in the file (poolstate.Status.Scope, written by the
// reconciler). A removed pool is rebuilt from what its runners' objects record,
// and anyone who can write an object in a runner namespace can write that, this
// deployment's name included: a removed pool in any other scope is reported in
// the error and left alone — not swept, so nothing of it reaches GitHub or is
// deleted. The GitHub credentials' reach is no test: one App installed on
// several organizations reaches scopes this deployment was never given.
func (s *Sweeper) served(ctx context.Context, removed []*pool.Pool) ([]*pool.Pool, error) {
	scopes := map[string]bool{}
	for i := range s.pools.Pools {
		scopes[s.pools.Pools[i].Scope().String()] = true
	}
	var out []*pool.Pool
	var errs []error
	for _, p := range removed {
		sc := p.Scope().String()
		if scopes[sc] {
			out = append(out, p)
			continue
		}
		st, err := s.status.Get(ctx, p.Name)
		switch {
		case err != nil:
			errs = append(errs, fmt.Errorf("pool %s: %w", p.Name, err))
		case st.Scope != sc:
			errs = append(errs, fmt.Errorf("pool %s: its runners in namespace %s record scope %s, which this deployment does not serve "+
				"(no pool of the file has it, and the pool's status records %q): left alone", p.Name, p.Kubernetes.Namespace, sc, st.Scope))
		default:
			out = append(out, p)
		}
	}
	return out, errors.Join(errs...)
}
