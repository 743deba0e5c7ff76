package teardown

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"

	"github.com/runnerscaler/runnerscaler/internal/githubapi"
	"github.com/runnerscaler/runnerscaler/internal/pool"
	"github.com/runnerscaler/runnerscaler/internal/runnername"
	"github.com/runnerscaler/runnerscaler/internal/scope"
)

// Leftovers finds the deployment's runners GitHub still lists, once nothing of
// them is left in the cluster (Registrations). Each is described in one line;
// an error means GitHub could not be asked.
type Leftovers interface {
	Left(ctx context.Context) ([]string, error)
}

// ErrLeftOnGitHub: nothing is left in the cluster, but GitHub still lists
// runners named like the deployment's. The sweeper removes a runner from
// GitHub only through its objects in the cluster, so another round would not
// remove these: they are removed on GitHub.
var ErrLeftOnGitHub = errors.New("teardown: GitHub still lists runners of the deployment")

// RunnerLister lists the runners registered at a scope (githubapi.Client).
type RunnerLister interface {
	Runners(ctx context.Context, s scope.Scope) ([]githubapi.Runner, error)
}

// Registrations looks for a deployment's runners on GitHub: at each pool's
// scope, the runners named like the pool's (package runnername). A runner of
// another deployment with the same pool names at the same scope looks the
// same, and a pool no longer in the pools file is not looked for.
type Registrations struct {
	gh    RunnerLister
	pools []pool.Pool
}

// NewRegistrations looks for the runners of pools through gh.
func NewRegistrations(gh RunnerLister, pools *pool.Config) *Registrations {
	return &Registrations{gh: gh, pools: pools.Pools}
}

// Left lists, one list call per scope (and page), the runners named like a
// pool's at that pool's scope, as "<scope>: <name> (id N, <status>)", sorted.
func (r *Registrations) Left(ctx context.Context) ([]string, error) {
	byScope := map[scope.Scope][]string{}
	for i := range r.pools {
		s := r.pools[i].Scope()
		byScope[s] = append(byScope[s], r.pools[i].Name)
	}
	var left []string
	for _, s := range slices.SortedFunc(maps.Keys(byScope), func(a, b scope.Scope) int { return cmp.Compare(a.String(), b.String()) }) {
		runners, err := r.gh.Runners(ctx, s)
		if err != nil {
			return nil, fmt.Errorf("listing the runners of %s on GitHub: %w", s, err)
		}
		for _, rn := range runners {
			if slices.ContainsFunc(byScope[s], func(p string) bool { return runnername.IsPodOf(p, rn.Name) }) {
				left = append(left, fmt.Sprintf("%s: %s (id %d, %s)", s, rn.Name, rn.ID, rn.Status))
			}
		}
	}
	slices.Sort(left)
	return slices.Compact(left), nil
}

// finish ends a drain whose sweep left nothing in the cluster: it says so,
// and what GitHub lists of the deployment's runners, or that GitHub was not
// checked. It fails with ErrLeftOnGitHub when GitHub lists some, and with
// GitHub's error when GitHub could not be asked (a drain run again asks again).
func (d *Drainer) finish(ctx context.Context, round int) error {
	if d.GitHub == nil {
		fmt.Fprintf(d.out, "round %d: drained, nothing left in the cluster; GitHub not checked: no credentials\n", round)
		return nil
	}
	left, err := d.GitHub.Left(ctx)
	switch {
	case err != nil:
		fmt.Fprintf(d.out, "round %d: nothing left in the cluster; GitHub not checked: %v\n", round, err)
		return fmt.Errorf("teardown: nothing left in the cluster, but GitHub could not be checked: %w", err)
	case len(left) > 0:
		fmt.Fprintf(d.out, "round %d: nothing left in the cluster, but GitHub still lists %d runners named like this deployment's "+
			"(remove them on GitHub: Settings → Actions → Runners):\n  %s\n", round, len(left), strings.Join(left, "\n  "))
		return fmt.Errorf("%w: %s", ErrLeftOnGitHub, strings.Join(left, "; "))
	}
	fmt.Fprintf(d.out, "round %d: drained, nothing left in the cluster or on GitHub\n", round)
	return nil
}
