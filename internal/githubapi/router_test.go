package githubapi_test

import (
	"errors"
	"net/http/httptest"
	"testing"
	"time"

	clocktesting "k8s.io/utils/clock/testing"

	"github.com/runnerscaler/runnerscaler/internal/githubapi"
	"github.com/runnerscaler/runnerscaler/internal/scope"
	"github.com/runnerscaler/runnerscaler/local/apispec"
	"github.com/runnerscaler/runnerscaler/local/githubsim"
)

const pat = "ghp_enterprise-admin"

var (
	orgA       = scope.Scope{Organization: "org-a"}
	orgB       = scope.Scope{Organization: "org-b"}
	repoB      = scope.Scope{Repository: "org-b/app"}
	enterprise = scope.Scope{Enterprise: "corp"}
)

// newTenancy starts a simulator where the App is installed on org-a (11) and
// org-b (22), each installation acting on its own organization only, and a
// classic PAT administers the enterprise; auth configures the router.
func newTenancy(t *testing.T, auth githubapi.Auth) (*githubsim.Server, *githubapi.Router) {
	t.Helper()
	k, _ := key(t)
	clk := clocktesting.NewFakeClock(time.Now())
	sim := githubsim.New(githubsim.Options{AppID: appID, AppKey: &k.PublicKey, Clock: clk,
		Accounts: map[int64]string{11: "org-a", 22: "org-b"}, PATs: []string{pat}})
	apispec.Verify(t, sim)
	srv := httptest.NewServer(sim.Handler())
	t.Cleanup(srv.Close)
	r, err := githubapi.NewRouter(githubapi.Config{BaseURL: srv.URL, Clock: clk, Auth: auth})
	if err != nil {
		t.Fatal(err)
	}
	return sim, r
}

func appAuth(t *testing.T) githubapi.Auth {
	_, pemKey := key(t)
	return githubapi.Auth{AppID: appID, PrivateKey: pemKey}
}

// TestRouterServesEachScopeWithItsCredentials: two organizations under two
// installations of one App and an enterprise under a PAT, from one router.
func TestRouterServesEachScopeWithItsCredentials(t *testing.T) {
	t.Parallel()
	auth := appAuth(t)
	auth.Token = pat
	sim, r := newTenancy(t, auth)
	ctx := t.Context()
	for _, sc := range []scope.Scope{orgA, orgB, repoB, enterprise, orgA, orgB} {
		jit, err := r.JITConfig(ctx, sc, "r-"+sc.Name(), []string{"x"}, githubapi.DefaultRunnerGroupID)
		if err != nil {
			t.Fatalf("%s: %v", sc, err)
		}
		got, ok := sim.Runner(jit.RunnerID)
		if !ok || got.Scope.String() != sc.String() {
			t.Fatalf("%s: runner %d is in %v", sc, jit.RunnerID, got.Scope)
		}
		if err := r.RemoveRunner(ctx, sc, jit.RunnerID); err != nil {
			t.Fatalf("%s: removing: %v", sc, err)
		}
	}
	want := map[string]int64{orgA.String(): 11, orgB.String(): 22, repoB.String(): 22}
	if got := r.Installations(); len(got) != len(want) || got[orgA.String()] != 11 || got[orgB.String()] != 22 || got[repoB.String()] != 22 {
		t.Errorf("installations %v, want %v", got, want)
	}
	calls := sim.Calls()
	if n := calls["GET /orgs/{org}/installation"]; n != 2 {
		t.Errorf("%d organization installation lookups, want 2 (cached)", n)
	}
	if n := calls["POST /app/installations/{installation_id}/access_tokens"]; n != 2 {
		t.Errorf("%d installation tokens made, want one per installation (2)", n)
	}
	if sim.RateRemaining(11) == 5000 || sim.RateRemaining(22) == 5000 {
		t.Error("an installation was never used")
	}
}

// TestOneInstallationCannotServeAnother is the failure the router avoids: with a
// single configured installation, another organization's calls are refused.
func TestOneInstallationCannotServeAnother(t *testing.T) {
	t.Parallel()
	auth := appAuth(t)
	auth.InstallationID = 11
	_, r := newTenancy(t, auth)
	if _, err := r.RegistrationToken(t.Context(), orgA); err != nil {
		t.Fatalf("org-a: %v", err)
	}
	if _, err := r.RegistrationToken(t.Context(), orgB); !errors.Is(err, githubapi.ErrForbidden) {
		t.Fatalf("org-b with org-a's installation: %v, want ErrForbidden", err)
	}
}

func TestEnterpriseNeedsAToken(t *testing.T) {
	t.Parallel()
	sim, r := newTenancy(t, appAuth(t))
	if err := r.Serves(enterprise); !errors.Is(err, githubapi.ErrNoCredentials) {
		t.Fatalf("Serves(enterprise) = %v, want ErrNoCredentials", err)
	}
	if err := r.Serves(orgA); err != nil {
		t.Fatalf("Serves(org-a) = %v", err)
	}
	before := len(sim.Calls())
	if _, err := r.RegistrationToken(t.Context(), enterprise); !errors.Is(err, githubapi.ErrNoCredentials) {
		t.Fatalf("enterprise token: %v, want ErrNoCredentials", err)
	}
	if len(sim.Calls()) != before {
		t.Error("a call was made for a scope nothing can serve")
	}
	// And GitHub itself refuses an App installation on enterprise runners.
	c, err := githubapi.New(githubapi.Config{BaseURL: simURL(t, sim), Auth: githubapi.Auth{AppID: appID, InstallationID: 11, PrivateKey: appAuth(t).PrivateKey}})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.RegistrationToken(t.Context(), enterprise); !errors.Is(err, githubapi.ErrForbidden) {
		t.Fatalf("enterprise with an installation token: %v, want ErrForbidden", err)
	}
}

func simURL(t *testing.T, sim *githubsim.Server) string {
	srv := httptest.NewServer(sim.Handler())
	t.Cleanup(srv.Close)
	return srv.URL
}

func TestNotInstalledIsNotCached(t *testing.T) {
	t.Parallel()
	sim, r := newTenancy(t, appAuth(t))
	other := scope.Scope{Organization: "org-c"}
	for range 2 {
		if _, err := r.Runners(t.Context(), other); !errors.Is(err, githubapi.ErrNotFound) {
			t.Fatalf("org-c: %v, want ErrNotFound", err)
		}
	}
	if n := sim.Calls()["GET /orgs/{org}/installation"]; n != 2 {
		t.Errorf("%d lookups, want 2: a failed lookup is not cached", n)
	}
}

// TestReinstalledAppIsFoundAgain: the App uninstalled and installed again has a
// new installation id; the router forgets the old one after a rejected call.
func TestReinstalledAppIsFoundAgain(t *testing.T) {
	t.Parallel()
	sim, r := newTenancy(t, appAuth(t))
	ctx := t.Context()
	if _, err := r.Runners(ctx, orgA); err != nil {
		t.Fatal(err)
	}
	sim.Reinstall(11, 33)
	if _, err := r.Runners(ctx, orgA); !errors.Is(err, githubapi.ErrUnauthorized) {
		t.Fatalf("after reinstall: %v, want ErrUnauthorized once", err)
	}
	if _, err := r.Runners(ctx, orgA); err != nil {
		t.Fatalf("second call after reinstall: %v", err)
	}
	if got := r.Installations()[orgA.String()]; got != 33 {
		t.Errorf("installation %d, want 33", got)
	}
}

func TestNewRouterValidates(t *testing.T) {
	t.Parallel()
	_, pemKey := key(t)
	for name, a := range map[string]githubapi.Auth{
		"nothing":                  {},
		"app id without key":       {AppID: 1},
		"key without app id":       {PrivateKey: pemKey},
		"installation without app": {InstallationID: 3, Token: "t"},
	} {
		if _, err := githubapi.NewRouter(githubapi.Config{Auth: a}); err == nil {
			t.Errorf("%s: no error", name)
		}
	}
}
