package reconcile

import (
	"context"
	"slices"
	"sync"
	"testing"
	"time"

	clocktesting "k8s.io/utils/clock/testing"

	"github.com/runnerscaler/runnerscaler/internal/githubapi"
	"github.com/runnerscaler/runnerscaler/internal/scope"
)

// listingGitHub serves a runner list that the test changes, and counts reads.
type listingGitHub struct {
	GitHub
	mu    sync.Mutex
	list  []githubapi.Runner
	reads int
}

func (g *listingGitHub) Runners(context.Context, scope.Scope) ([]githubapi.Runner, error) {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.reads++
	return slices.Clone(g.list), nil
}

func (g *listingGitHub) set(list ...githubapi.Runner) {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.list = list
}

func (g *listingGitHub) readCount() int {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.reads
}

// A list one pool's sweep read serves the next pool of the scope while it is
// young enough, but only for answers that make the sweeper wait: a runner not
// listed, or listed offline, is looked up again in a list read during the
// asking sweep, which finds what changed since.
func TestSharedRunnerListServesOnlyAnswersThatWait(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	org := scope.Scope{Organization: "acme"}
	clk := clocktesting.NewFakeClock(time.Unix(1_700_000_000, 0))
	api := &listingGitHub{}
	api.set(githubapi.Runner{ID: 1, Name: "a", Status: "online"}, githubapi.Runner{ID: 2, Name: "b", Status: "offline"})
	shared := newSharedLists(clk, 10*time.Second)
	view := func() *github { return &github{api: api, shared: shared, start: clk.Now()} }

	first := view()
	if l, err := first.byID(ctx, org, 1); err != nil || !l.found {
		t.Fatalf("first sweep: runner 1 found %v, %v", l.found, err)
	}
	if n := api.readCount(); n != 1 {
		t.Fatalf("%d reads for the first sweep, want 1", n)
	}

	// GitHub changes: runner 3 registers, runner 2 comes online.
	api.set(githubapi.Runner{ID: 1, Name: "a", Status: "online"}, githubapi.Runner{ID: 2, Name: "b", Status: "online"},
		githubapi.Runner{ID: 3, Name: "c", Status: "online"})
	clk.Step(time.Second)
	second := view()
	if l, err := second.byID(ctx, org, 1); err != nil || !l.found || l.Status != "online" {
		t.Fatalf("second sweep: runner 1 = %+v found %v, %v", l.Runner, l.found, err)
	}
	if n := api.readCount(); n != 1 {
		t.Fatalf("%d reads after an online runner was asked for, want 1: the shared list serves it", n)
	}
	if _, found, err := second.listed(ctx, org, "c"); err != nil || found {
		t.Fatalf("listed(c) = found %v, %v: a caller that only acts on a listed runner is served the shared list", found, err)
	}
	if n := api.readCount(); n != 1 {
		t.Fatalf("%d reads after listed, want 1", n)
	}
	if l, err := second.byName(ctx, org, "c"); err != nil || !l.found || l.ID != 3 {
		t.Fatalf("byName(c) = %+v found %v, %v: absence must come from this sweep's own read", l.Runner, l.found, err)
	}
	if n := api.readCount(); n != 2 {
		t.Fatalf("%d reads after an absent runner was asked for, want 2", n)
	}
	if l, err := second.byID(ctx, org, 2); err != nil || !l.found || l.Status != "online" {
		t.Fatalf("byID(2) = %+v found %v, %v: this sweep's own list says online", l.Runner, l.found, err)
	}
	if n := api.readCount(); n != 2 {
		t.Fatalf("%d reads, want 2: the sweep's own list is read once", n)
	}

	// A fourth sweep asks about a runner listed offline in the list the third
	// read before it began: it reads its own, which says online.
	api.set(githubapi.Runner{ID: 4, Name: "d", Status: "offline"})
	clk.Step(11 * time.Second) // past the maximum age: the third sweep reads
	third := view()
	if _, err := third.runners(ctx, org); err != nil {
		t.Fatal(err)
	}
	api.set(githubapi.Runner{ID: 4, Name: "d", Status: "online"})
	clk.Step(time.Second)
	fourth := view()
	if l, err := fourth.byID(ctx, org, 4); err != nil || !l.found || l.Status != "online" {
		t.Fatalf("byID(4) = %+v found %v, %v: offline must come from this sweep's own read", l.Runner, l.found, err)
	}
	if n := api.readCount(); n != 4 {
		t.Fatalf("%d reads, want 4", n)
	}

	// Past the maximum age nothing is shared.
	clk.Step(11 * time.Second)
	if _, err := view().runners(ctx, org); err != nil {
		t.Fatal(err)
	}
	if n := api.readCount(); n != 5 {
		t.Fatalf("%d reads, want 5: a list older than the maximum age is read again", n)
	}
}

// Without shared lists each sweep reads its own list, once, whatever it asks.
func TestUnsharedRunnerListIsTheSweepsOwn(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	org := scope.Scope{Organization: "acme"}
	clk := clocktesting.NewFakeClock(time.Unix(1_700_000_000, 0))
	api := &listingGitHub{}
	api.set(githubapi.Runner{ID: 2, Name: "b", Status: "offline"})
	g := &github{api: api, start: clk.Now()}
	for range 2 {
		if l, err := g.byName(ctx, org, "missing"); err != nil || l.found {
			t.Fatalf("byName(missing) found %v, %v", l.found, err)
		}
		if l, err := g.byID(ctx, org, 2); err != nil || !l.found {
			t.Fatalf("byID(2) found %v, %v", l.found, err)
		}
	}
	if n := api.readCount(); n != 1 {
		t.Fatalf("%d reads, want 1", n)
	}
	if _, err := (&github{api: api, start: clk.Now()}).runners(ctx, org); err != nil {
		t.Fatal(err)
	}
	if n := api.readCount(); n != 2 {
		t.Fatalf("%d reads, want 2: another sweep reads its own", n)
	}
}
