package githubapi_test

import (
	"errors"
	"fmt"
	"slices"
	"testing"

	"github.com/runnerscaler/runnerscaler/internal/githubapi"
	"github.com/runnerscaler/runnerscaler/internal/groupaccess"
	"github.com/runnerscaler/runnerscaler/internal/scope"
	"github.com/runnerscaler/runnerscaler/local/githubsim"
)

// TestRunnerGroupAccessConditional: a selected group's repositories are read
// page by page; read again with the last answer, an unchanged group costs
// only 304s (no rate limit, counted in NotModified) and gives the same
// access; a repository added shows on the next read, the unchanged group
// still answered 304.
func TestRunnerGroupAccessConditional(t *testing.T) {
	t.Parallel()
	e := newEnv(t, githubsim.Options{})
	ctx := t.Context()
	repos := make([]string, 150)
	for i := range repos {
		repos[i] = fmt.Sprintf("acme/app-%03d", i)
	}
	id := e.sim.AddGroup(org, "Restricted", repos)

	a, err := e.client.RunnerGroupAccess(ctx, org, "restricted", groupaccess.Access{})
	if err != nil {
		t.Fatal(err)
	}
	if a.GroupID != id || a.Visibility != groupaccess.Selected || a.ETag == "" || len(a.Pages) != 2 ||
		!slices.Equal(a.Repositories(), repos) {
		t.Fatalf("first read: id %d, visibility %q, etag %q, %d pages, %d repositories; want group %d, selected, 150 repositories in 2 pages",
			a.GroupID, a.Visibility, a.ETag, len(a.Pages), len(a.Repositories()), id)
	}

	before, units := e.client.Stats(), e.sim.RateRemaining(installation)
	again, err := e.client.RunnerGroupAccess(ctx, org, "restricted", a)
	if err != nil {
		t.Fatal(err)
	}
	st := e.client.Stats()
	if st.Calls-before.Calls != 3 || st.NotModified-before.NotModified != 3 || e.sim.RateRemaining(installation) != units {
		t.Fatalf("unchanged group: %d calls, %d not modified, %d rate units; want 3 requests (group, 2 pages), all 304, none charged",
			st.Calls-before.Calls, st.NotModified-before.NotModified, units-e.sim.RateRemaining(installation))
	}
	if !slices.Equal(again.Repositories(), repos) || again.Visibility != groupaccess.Selected || again.ETag != a.ETag {
		t.Fatalf("after 304s: %+v; want the same access", again)
	}

	if err := e.sim.SetGroupAccess(org, "Restricted", githubsim.VisibilitySelected, append(repos, "acme/zeta")); err != nil {
		t.Fatal(err)
	}
	before = e.client.Stats()
	changed, err := e.client.RunnerGroupAccess(ctx, org, "restricted", again)
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Contains(changed.Repositories(), "acme/zeta") || len(changed.Repositories()) != 151 ||
		e.client.Stats().NotModified-before.NotModified != 1 {
		t.Fatalf("after adding a repository: %d repositories, %d not modified; want 151 with acme/zeta, the group unchanged (each page's total_count changed)",
			len(changed.Repositories()), e.client.Stats().NotModified-before.NotModified)
	}
}

// TestRunnerGroupAccessVisibilities: a private or all group lists no
// repositories (one request); an unknown group is ErrNotFound; an enterprise
// group is not read; near the rate limit the read is deferred, without a
// request, also for a group whose id was never looked up.
func TestRunnerGroupAccessVisibilities(t *testing.T) {
	t.Parallel()
	e := newEnv(t, githubsim.Options{})
	ctx := t.Context()
	e.sim.AddGroup(org, "private-only", nil)
	if err := e.sim.SetGroupAccess(org, "private-only", githubsim.VisibilityPrivate, nil); err != nil {
		t.Fatal(err)
	}
	e.sim.AddGroup(org, "everyone", nil)
	for name, want := range map[string]groupaccess.Visibility{"private-only": groupaccess.Private, "everyone": groupaccess.All} {
		a, err := e.client.RunnerGroupAccess(ctx, org, name, groupaccess.Access{})
		if err != nil || a.Visibility != want || len(a.Pages) != 0 {
			t.Fatalf("%s: %+v, %v; want visibility %s and no repositories", name, a, err, want)
		}
	}
	if _, err := e.client.RunnerGroupAccess(ctx, org, "nope", groupaccess.Access{}); !errors.Is(err, githubapi.ErrNotFound) {
		t.Fatalf("unknown group: %v; want ErrNotFound", err)
	}
	ent := scope.Scope{Enterprise: "acme-corp"}
	calls := e.client.Stats().Calls
	if _, err := e.client.RunnerGroupAccess(ctx, ent, "g", groupaccess.Access{}); !errors.Is(err, errors.ErrUnsupported) || e.client.Stats().Calls != calls {
		t.Fatalf("enterprise group: %v, %d calls; want ErrUnsupported without a request", err, e.client.Stats().Calls-calls)
	}
	e.sim.LeaveRateLimit(400)
	if _, err := e.client.JITConfig(ctx, org, "r-1", []string{"x"}, 1); err != nil { // a call that is never deferred learns the rate left
		t.Fatal(err)
	}
	if _, err := e.client.Runners(ctx, org); !errors.Is(err, githubapi.ErrDeferred) {
		t.Fatalf("runners list near the limit: %v; want deferred (the rate left is known)", err)
	}
	e.sim.AddGroup(org, "never-looked-up", nil)
	calls = e.client.Stats().Calls
	for _, name := range []string{"everyone", "never-looked-up"} {
		if _, err := e.client.RunnerGroupAccess(ctx, org, name, groupaccess.Access{}); !errors.Is(err, githubapi.ErrDeferred) {
			t.Fatalf("access of group %s near the limit: %v; want deferred", name, err)
		}
	}
	if n := e.client.Stats().Calls - calls; n != 0 {
		t.Fatalf("deferred reads sent %d requests; want none, not even the lookup of a group's id", n)
	}
}

// TestRunnerGroupAccessFindsAGroupMadeAgain: a group deleted and made again
// under its name has a new id; the read that finds the old id gone forgets it,
// and the next finds the new group.
func TestRunnerGroupAccessFindsAGroupMadeAgain(t *testing.T) {
	t.Parallel()
	e := newEnv(t, githubsim.Options{})
	ctx := t.Context()
	e.sim.AddGroup(org, "g", []string{"acme/a"})
	if _, err := e.client.RunnerGroupAccess(ctx, org, "g", groupaccess.Access{}); err != nil {
		t.Fatal(err)
	}
	newID := e.sim.ReplaceGroup(org, "g", []string{"acme/b"})
	if _, err := e.client.RunnerGroupAccess(ctx, org, "g", groupaccess.Access{}); !errors.Is(err, githubapi.ErrNotFound) {
		t.Fatalf("read with the old id: %v; want ErrNotFound", err)
	}
	a, err := e.client.RunnerGroupAccess(ctx, org, "g", groupaccess.Access{})
	if err != nil || a.GroupID != newID || !slices.Equal(a.Repositories(), []string{"acme/b"}) {
		t.Fatalf("after forgetting: %+v, %v; want group %d with acme/b", a, err, newID)
	}
}
