package teardown_test

import (
	"context"
	"errors"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/runnerscaler/runnerscaler/internal/githubapi"
	"github.com/runnerscaler/runnerscaler/internal/pool"
	"github.com/runnerscaler/runnerscaler/internal/scope"
	"github.com/runnerscaler/runnerscaler/internal/sweepevent"
	"github.com/runnerscaler/runnerscaler/internal/teardown"
	"github.com/runnerscaler/runnerscaler/local/githubsim"
)

// drained is the sweeper's answer once nothing is left in the cluster.
var drained = sweepevent.Report{Draining: true}

// TestDrainWithoutGitHubSaysItDidNotCheck: without credentials for GitHub,
// the drain ends when the cluster is empty and says GitHub was not checked,
// never that nothing is left there.
func TestDrainWithoutGitHubSaysItDidNotCheck(t *testing.T) {
	t.Parallel()
	var out strings.Builder
	if err := drainer(&script{answers: []any{drained}}, &out).Drain(t.Context()); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(out.String(), "GitHub not checked: no credentials") || strings.Contains(out.String(), "on GitHub") {
		t.Fatalf("output %q: want GitHub not checked, and no claim about it", out.String())
	}
}

const pat = "ghp_teardown"

// TestDrainReportsARunnerLeftOnGitHub: the cluster is empty, but GitHub (the
// simulator) still lists a runner named like one of each pool's, at the pool's
// scope: the drain names them and fails with ErrLeftOnGitHub. Runners named
// otherwise, or listed at another scope, are not the deployment's. Once they
// are removed, the drain ends with nothing left on GitHub either.
func TestDrainReportsARunnerLeftOnGitHub(t *testing.T) {
	t.Parallel()
	sim := githubsim.New(githubsim.Options{PATs: []string{pat}})
	srv := httptest.NewServer(sim.Handler())
	t.Cleanup(srv.Close)
	gh, err := githubapi.New(githubapi.Config{BaseURL: srv.URL + "/", Auth: githubapi.Auth{Token: pat}})
	if err != nil {
		t.Fatal(err)
	}
	pools, err := pool.Parse([]byte(`
pools:
  - name: linux
    organization: acme
    maxReplicas: 2
    kubernetes: {namespace: runners, image: runner:1}
  - name: app
    repository: acme/app
    maxReplicas: 2
    kubernetes: {namespace: runners, image: runner:1}
`))
	if err != nil {
		t.Fatal(err)
	}
	org, repo := scope.Scope{Organization: "acme"}, scope.Scope{Repository: "acme/app"}
	register := func(s scope.Scope, name string) int64 {
		t.Helper()
		jit, err := gh.JITConfig(t.Context(), s, name, []string{"self-hosted"}, 1)
		if err != nil {
			t.Fatalf("registering %s at %s: %v", name, s, err)
		}
		return jit.RunnerID
	}
	leftOrg, leftRepo := register(org, "linux-bcdfg-0"), register(repo, "app-hjklm-0")
	register(org, "linux-by-hand")  // not named like a pool's runner
	register(org, "app-npqrs-0")    // the app pool's shape, at another scope
	register(repo, "other-tvwxz-0") // no pool of that name

	var out strings.Builder
	d := drainer(&script{answers: []any{drained}}, &out)
	d.GitHub = teardown.NewRegistrations(gh, pools)
	err = d.Drain(t.Context())
	if !errors.Is(err, teardown.ErrLeftOnGitHub) {
		t.Fatalf("Drain: %v, want ErrLeftOnGitHub\n%s", err, out.String())
	}
	for _, want := range []string{"GitHub still lists 2 runners", "organization/acme: linux-bcdfg-0 (id", "repository/acme/app: app-hjklm-0 (id"} {
		if !strings.Contains(out.String(), want) || !strings.Contains(err.Error(), strings.TrimPrefix(want, "GitHub still lists 2 runners")) {
			t.Errorf("output %q / error %v lacks %q", out.String(), err, want)
		}
	}
	for _, other := range []string{"linux-by-hand", "app-npqrs-0", "other-tvwxz-0", "nothing left in the cluster or on GitHub"} {
		if strings.Contains(out.String(), other) {
			t.Errorf("output names %q:\n%s", other, out.String())
		}
	}

	for s, id := range map[scope.Scope]int64{org: leftOrg, repo: leftRepo} {
		if err := gh.RemoveRunner(t.Context(), s, id); err != nil {
			t.Fatal(err)
		}
	}
	out.Reset()
	if err := d.Drain(t.Context()); err != nil || !strings.Contains(out.String(), "drained, nothing left in the cluster or on GitHub") {
		t.Fatalf("Drain after the removals: %v\n%s", err, out.String())
	}
}

type failingLister struct{}

func (failingLister) Runners(context.Context, scope.Scope) ([]githubapi.Runner, error) {
	return nil, errors.New("401 Bad credentials")
}

// TestDrainWhenGitHubCannotBeAsked: GitHub's error ends the drain, which does
// not claim that nothing is left there.
func TestDrainWhenGitHubCannotBeAsked(t *testing.T) {
	t.Parallel()
	pools, err := pool.Parse([]byte("pools:\n  - name: linux\n    organization: acme\n    maxReplicas: 1\n    kubernetes: {namespace: r, image: i}\n"))
	if err != nil {
		t.Fatal(err)
	}
	var out strings.Builder
	d := drainer(&script{answers: []any{drained}}, &out)
	d.GitHub = teardown.NewRegistrations(failingLister{}, pools)
	err = d.Drain(t.Context())
	if err == nil || !strings.Contains(err.Error(), "Bad credentials") || strings.Contains(out.String(), "or on GitHub") {
		t.Fatalf("Drain: %v\n%s; want GitHub's error and no claim about GitHub", err, out.String())
	}
}
