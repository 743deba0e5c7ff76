package sweeper_test

import (
	"net/http/httptest"
	"slices"
	"testing"
	"time"

	"github.com/runnerscaler/runnerscaler/internal/githubapi"
	"github.com/runnerscaler/runnerscaler/internal/groupaccess"
	"github.com/runnerscaler/runnerscaler/internal/pool"
	"github.com/runnerscaler/runnerscaler/internal/scope"
	"github.com/runnerscaler/runnerscaler/internal/sweeper"
	"github.com/runnerscaler/runnerscaler/local/githubsim"
)

const groupedPool = `
pools:
  - name: gpu
    organization: acme
    group: gpus
    maxReplicas: 1
    kubernetes: {namespace: ns, image: r}
`

// TestScheduledSweepRefreshesGroupAccess: a scheduled sweep reads the grouped
// pool's runner group from GitHub into the table, where the webhook finds it;
// a nudge does not; the next scheduled sweeps read nothing until
// groupaccess.RefreshEvery has passed, and then ask with the stored ETags,
// which GitHub answers 304.
func TestScheduledSweepRefreshesGroupAccess(t *testing.T) {
	t.Parallel()
	e := newEnv(t, nil)
	cfg, err := pool.Parse([]byte(groupedPool))
	if err != nil {
		t.Fatal(err)
	}
	acme := scope.Scope{Organization: "acme"}
	sim := githubsim.New(githubsim.Options{PATs: []string{"ghp_sweeper"}})
	sim.AddGroup(acme, "gpus", []string{"acme/ml"})
	srv := httptest.NewServer(sim.Handler())
	t.Cleanup(srv.Close)
	gh, err := githubapi.New(githubapi.Config{BaseURL: srv.URL + "/", Auth: githubapi.Auth{Token: "ghp_sweeper"}})
	if err != nil {
		t.Fatal(err)
	}
	store := groupaccess.NewStore(e.db, e.table)
	refresher := groupaccess.NewRefresher(store, gh, e.clock, nil)
	s, err := sweeper.New(cfg, e.rs, e.status, e.leases, nil, e.clock, nil, sweeper.Options{GroupAccess: refresher})
	if err != nil {
		t.Fatal(err)
	}

	if _, err := s.Handle(t.Context(), sweeper.Event{Pool: "gpu"}); err != nil {
		t.Fatal(err)
	}
	if _, ok, err := store.Get(t.Context(), acme, "gpus"); err != nil || ok || gh.Stats().Calls != 0 {
		t.Fatalf("after a nudge: stored %v (%v), %d GitHub calls; want nothing read", ok, err, gh.Stats().Calls)
	}
	if _, err := s.Handle(t.Context(), scheduled); err != nil {
		t.Fatal(err)
	}
	a, ok, err := store.Get(t.Context(), acme, "gpus")
	if err != nil || !ok || a.Visibility != groupaccess.Selected || !slices.Equal(a.Repositories(), []string{"acme/ml"}) || !a.ReadAt.Equal(e.clock.Now()) {
		t.Fatalf("after a scheduled sweep: %+v, %v, %v; want the group's selected repositories, read now", a, ok, err)
	}
	first := gh.Stats()

	e.clock.Step(groupaccess.RefreshEvery - time.Second)
	if _, err := s.Handle(t.Context(), scheduled); err != nil {
		t.Fatal(err)
	}
	if gh.Stats().Calls != first.Calls {
		t.Fatalf("a scheduled sweep within %s made %d GitHub calls; want none", groupaccess.RefreshEvery, gh.Stats().Calls-first.Calls)
	}
	e.clock.Step(time.Second)
	if _, err := s.Handle(t.Context(), scheduled); err != nil {
		t.Fatal(err)
	}
	if st := gh.Stats(); st.Calls-first.Calls != 2 || st.NotModified-first.NotModified != 2 {
		t.Fatalf("the sweep %s later: %d calls, %d answered 304; want the group and its page asked again, both 304",
			groupaccess.RefreshEvery, st.Calls-first.Calls, st.NotModified-first.NotModified)
	}
	if a, _, _ := store.Get(t.Context(), acme, "gpus"); !a.ReadAt.Equal(e.clock.Now()) || !slices.Equal(a.Repositories(), []string{"acme/ml"}) {
		t.Fatalf("after the 304s: %+v; want the same repositories, read now", a)
	}
}
