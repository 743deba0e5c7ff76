package reconcile

import (
	"context"
	"sync"
	"sync/atomic"

	"github.com/runnerscaler/runnerscaler/internal/githubapi"
	"github.com/runnerscaler/runnerscaler/internal/scope"
)

// GitHub is what the reconciler needs of GitHub (githubapi.Client).
type GitHub interface {
	Runners(ctx context.Context, s scope.Scope) ([]githubapi.Runner, error)
	RemoveRunner(ctx context.Context, s scope.Scope, id int64) error
	JITConfig(ctx context.Context, s scope.Scope, name string, labels []string, groupID int64) (githubapi.JITConfig, error)
	RegistrationToken(ctx context.Context, s scope.Scope) (githubapi.RegistrationToken, error)
	RunnerGroupID(ctx context.Context, s scope.Scope, name string) (int64, error)
}

// github is one pool sweep's view of GitHub: the scope's runner list is fetched at
// most once (and only when needed), and the requests sent for the sweep are
// counted for the metrics (see counting).
type github struct {
	api      GitHub
	mu       sync.Mutex
	list     []githubapi.Runner
	err      error
	done     bool
	requests atomic.Int64
}

// counting returns ctx counting in g every request sent to GitHub with it:
// each page, installation lookup and installation-token creation included.
func (g *github) counting(ctx context.Context) context.Context {
	return githubapi.WithCallCounter(ctx, &g.requests)
}

func (g *github) runners(ctx context.Context, s scope.Scope) ([]githubapi.Runner, error) {
	g.mu.Lock()
	defer g.mu.Unlock()
	if !g.done {
		g.list, g.err = g.api.Runners(ctx, s)
		g.done = true
	}
	return g.list, g.err
}

// loaded reports whether this sweep already fetched the list (without fetching it).
func (g *github) loaded() bool {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.done && g.err == nil
}

func (g *github) byName(ctx context.Context, s scope.Scope, name string) (githubapi.Runner, bool, error) {
	list, err := g.runners(ctx, s)
	for _, r := range list {
		if r.Name == name {
			return r, true, nil
		}
	}
	return githubapi.Runner{}, false, err
}

func (g *github) byID(ctx context.Context, s scope.Scope, id int64) (githubapi.Runner, bool, error) {
	list, err := g.runners(ctx, s)
	for _, r := range list {
		if r.ID == id {
			return r, true, nil
		}
	}
	return githubapi.Runner{}, false, err
}

// cached finds the runner in the list this sweep already fetched, without fetching it.
func (g *github) cached(id int64) (githubapi.Runner, bool, error) {
	g.mu.Lock()
	defer g.mu.Unlock()
	if !g.done || g.err != nil {
		return githubapi.Runner{}, false, g.err
	}
	for _, r := range g.list {
		if r.ID == id {
			return r, true, nil
		}
	}
	return githubapi.Runner{}, false, nil
}

func (g *github) remove(ctx context.Context, s scope.Scope, id int64) error {
	return g.api.RemoveRunner(ctx, s, id)
}

// callCount is the number of requests sent to GitHub for the sweep.
func (g *github) callCount() int { return int(g.requests.Load()) }
