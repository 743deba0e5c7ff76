package reconcile

import (
	"context"
	"sync"

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
// most once (and only when needed), and calls are counted for the metrics.
type github struct {
	api   GitHub
	mu    sync.Mutex
	list  []githubapi.Runner
	err   error
	done  bool
	calls int
}

func (g *github) runners(ctx context.Context, s scope.Scope) ([]githubapi.Runner, error) {
	g.mu.Lock()
	defer g.mu.Unlock()
	if !g.done {
		g.list, g.err = g.api.Runners(ctx, s)
		g.done = true
		g.calls++
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
	g.count()
	return g.api.RemoveRunner(ctx, s, id)
}

func (g *github) count() {
	g.mu.Lock()
	g.calls++
	g.mu.Unlock()
}

func (g *github) callCount() int {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.calls
}
