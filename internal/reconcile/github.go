package reconcile

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"k8s.io/utils/clock"

	"github.com/runnerscaler/runnerscaler/internal/githubapi"
	"github.com/runnerscaler/runnerscaler/internal/scope"
)

// GitHub is what the reconciler needs of GitHub (githubapi.Client).
type GitHub interface {
	Runners(ctx context.Context, s scope.Scope) ([]githubapi.Runner, error)
	Runner(ctx context.Context, s scope.Scope, id int64) (githubapi.Runner, error)
	RemoveRunner(ctx context.Context, s scope.Scope, id int64) error
	RemoveRunnerLabels(ctx context.Context, s scope.Scope, id int64) error
	JITConfig(ctx context.Context, s scope.Scope, name string, labels []string, groupID int64) (githubapi.JITConfig, error)
	RegistrationToken(ctx context.Context, s scope.Scope) (githubapi.RegistrationToken, error)
	RunnerGroupID(ctx context.Context, s scope.Scope, name string) (int64, error)
}

// github is one pool sweep's view of GitHub: the scope's runner list is read
// only when needed, and the requests sent for the sweep are counted for the
// metrics (see counting).
//
// With shared lists (Options.RunnerListMaxAge), a list another pool's sweep
// read up to that long ago may serve this one, but only for answers that make
// the sweeper wait: a runner listed, online or busy. An answer that lets it
// act sooner — a runner not listed (nothing to unregister), or listed
// offline (no idle confirmation needed) — comes from a list read during this
// sweep, read again when the one at hand is older (byID, byName). Without
// shared lists every list is this sweep's own, read once.
type github struct {
	api    GitHub
	shared *sharedLists // nil: not shared
	start  time.Time    // the sweep's start: a list read since is the sweep's own
	mu     sync.Mutex
	list   []githubapi.Runner
	at     time.Time // when list was read
	err    error
	done   bool
	// requests counts what the sweep sent to GitHub.
	requests atomic.Int64
	// deferred counts runners read alone because the list was deferred.
	deferred atomic.Int64
}

// counting returns ctx counting in g every request sent to GitHub with it:
// each page, installation lookup and installation-token creation included.
func (g *github) counting(ctx context.Context) context.Context {
	return githubapi.WithCallCounter(ctx, &g.requests)
}

// runners is the scope's list, shared or the sweep's own.
func (g *github) runners(ctx context.Context, s scope.Scope) ([]githubapi.Runner, error) {
	g.mu.Lock()
	defer g.mu.Unlock()
	if !g.done {
		g.readLocked(ctx, s, time.Time{})
	}
	return g.list, g.err
}

// own is the scope's list as read during this sweep.
func (g *github) own(ctx context.Context, s scope.Scope) ([]githubapi.Runner, error) {
	g.mu.Lock()
	defer g.mu.Unlock()
	if !g.done || g.err == nil && g.at.Before(g.start) {
		g.readLocked(ctx, s, g.start)
	}
	return g.list, g.err
}

func (g *github) readLocked(ctx context.Context, s scope.Scope, notBefore time.Time) {
	if g.shared == nil {
		g.list, g.err = g.api.Runners(ctx, s)
		g.at = g.start
	} else {
		g.list, g.at, g.err = g.shared.get(ctx, g.api, s, notBefore)
	}
	g.done = true
}

// deferral says why the sweep's list was not read, when GitHub's rate limit
// deferred it ("" otherwise), and how many runners were read alone instead.
func (g *github) deferral() string {
	g.mu.Lock()
	err := g.err
	g.mu.Unlock()
	var d *githubapi.DeferredError
	if !errors.As(err, &d) {
		return ""
	}
	return fmt.Sprintf("%s; runners read alone before removal: %d; registrations and cleanup wait", d, g.deferred.Load())
}

// readAt is when the list this sweep has was read (zero before one is).
func (g *github) readAt() time.Time {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.at
}

// loaded reports whether this sweep already has a list (without reading one).
func (g *github) loaded() bool {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.done && g.err == nil
}

// listing is GitHub's view of one runner: what a runner list (or a read of
// the runner alone) said of it, when that was read, and whether this sweep
// read it. An answer that makes the sweeper wait (listed online, busy or idle)
// may come from any listing; one that lets it act sooner (not listed, or
// offline) comes only from this sweep's own (find).
type listing struct {
	githubapi.Runner
	found bool
	at    time.Time
	own   bool
}

// busy: GitHub lists the runner busy.
func (l listing) busy() bool { return l.found && l.Busy }

// online: GitHub lists the runner online (its listener has a session).
func (l listing) online() bool { return l.found && l.Status == "online" }

// find looks the runner up; an answer that would let the sweeper act sooner
// (not listed, or offline) is taken from this sweep's own list (see github).
func (g *github) find(ctx context.Context, s scope.Scope, match func(githubapi.Runner) bool) (listing, error) {
	list, err := g.runners(ctx, s)
	gr, found := search(list, match)
	if err != nil || found && gr.Status == "online" {
		return g.listing(gr, found), err
	}
	list, err = g.own(ctx, s)
	gr, found = search(list, match)
	return g.listing(gr, found), err
}

func (g *github) listing(gr githubapi.Runner, found bool) listing {
	at := g.readAt()
	return listing{Runner: gr, found: found, at: at, own: !at.Before(g.start)}
}

func search(list []githubapi.Runner, match func(githubapi.Runner) bool) (githubapi.Runner, bool) {
	for _, r := range list {
		if match(r) {
			return r, true
		}
	}
	return githubapi.Runner{}, false
}

func (g *github) byName(ctx context.Context, s scope.Scope, name string) (listing, error) {
	return g.find(ctx, s, func(r githubapi.Runner) bool { return r.Name == name })
}

// byID finds runner id (see find). When the list is deferred (the
// installation is near its rate limit: githubapi.ErrDeferred), the runner is
// read alone, which is as fresh as a list read by this sweep.
func (g *github) byID(ctx context.Context, s scope.Scope, id int64) (listing, error) {
	l, err := g.find(ctx, s, func(r githubapi.Runner) bool { return r.ID == id })
	if !errors.Is(err, githubapi.ErrDeferred) {
		return l, err
	}
	g.deferred.Add(1)
	return g.alone(ctx, s, id)
}

// ownByID is byID from a list read during this sweep (own), whatever the
// answer: for a listing read before the runner's pod showed it cannot hold a job.
func (g *github) ownByID(ctx context.Context, s scope.Scope, id int64) (listing, error) {
	list, err := g.own(ctx, s)
	if errors.Is(err, githubapi.ErrDeferred) {
		g.deferred.Add(1)
		return g.alone(ctx, s, id)
	}
	gr, found := search(list, func(r githubapi.Runner) bool { return r.ID == id })
	return g.listing(gr, found), err
}

// alone reads runner id by itself (GET .../runners/{id}): GitHub's answer now,
// which no page of a list read while runners come and go can miss.
func (g *github) alone(ctx context.Context, s scope.Scope, id int64) (listing, error) {
	gr, err := g.api.Runner(ctx, s, id)
	if errors.Is(err, githubapi.ErrNotFound) {
		return listing{at: g.start, own: true}, nil
	}
	return listing{Runner: gr, found: err == nil, at: g.start, own: true}, err
}

// listed looks the runner up in the scope's list, shared or not, for a caller
// that acts only when it is listed (see github).
func (g *github) listed(ctx context.Context, s scope.Scope, name string) (githubapi.Runner, bool, error) {
	list, err := g.runners(ctx, s)
	gr, found := search(list, func(r githubapi.Runner) bool { return r.Name == name })
	return gr, found, err
}

// cached finds the runner in the list this sweep already has, without reading one.
func (g *github) cached(id int64) listing {
	g.mu.Lock()
	done, list, lerr := g.done, g.list, g.err
	g.mu.Unlock()
	if !done || lerr != nil {
		return listing{}
	}
	gr, found := search(list, func(r githubapi.Runner) bool { return r.ID == id })
	return g.listing(gr, found)
}

func (g *github) remove(ctx context.Context, s scope.Scope, id int64) error {
	return g.api.RemoveRunner(ctx, s, id)
}

func (g *github) removeLabels(ctx context.Context, s scope.Scope, id int64) error {
	return g.api.RemoveRunnerLabels(ctx, s, id)
}

// callCount is the number of requests sent to GitHub for the sweep.
func (g *github) callCount() int { return int(g.requests.Load()) }

// sharedLists keeps the last runner list read of each scope, so that the
// sweeps of the pools of one scope (300 pools of one organization read the
// same 20 pages) share it while it is at most maxAge old. Reads of one scope
// are one at a time: a sweep that needs the list while another reads it waits
// for that read. A failed read is not kept.
type sharedLists struct {
	clock  clock.PassiveClock
	maxAge time.Duration
	mu     sync.Mutex
	scopes map[scope.Scope]*scopeList
}

type scopeList struct {
	mu    sync.Mutex // held while the list is read
	list  []githubapi.Runner
	at    time.Time
	valid bool
}

func newSharedLists(clk clock.PassiveClock, maxAge time.Duration) *sharedLists {
	return &sharedLists{clock: clk, maxAge: maxAge, scopes: map[scope.Scope]*scopeList{}}
}

// get returns the scope's list read at or after notBefore and at most maxAge
// ago, reading it when the one kept is older, and when it was read.
func (l *sharedLists) get(ctx context.Context, api GitHub, s scope.Scope, notBefore time.Time) ([]githubapi.Runner, time.Time, error) {
	l.mu.Lock()
	sl := l.scopes[s]
	if sl == nil {
		sl = &scopeList{}
		l.scopes[s] = sl
	}
	l.mu.Unlock()
	sl.mu.Lock()
	defer sl.mu.Unlock()
	now := l.clock.Now()
	if sl.valid && !sl.at.Before(notBefore) && now.Sub(sl.at) <= l.maxAge {
		return sl.list, sl.at, nil
	}
	list, err := api.Runners(ctx, s)
	if err != nil {
		return nil, now, err
	}
	sl.list, sl.at, sl.valid = list, now, true
	return list, now, nil
}
