package githubapi_test

import (
	"crypto/rand"
	"crypto/rsa"
	"crypto/x509"
	"encoding/pem"
	"errors"
	"fmt"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	clocktesting "k8s.io/utils/clock/testing"

	"github.com/runnerscaler/runnerscaler/internal/githubapi"
	"github.com/runnerscaler/runnerscaler/internal/scope"
	"github.com/runnerscaler/runnerscaler/local/apispec"
	"github.com/runnerscaler/runnerscaler/local/githubsim"
)

var (
	keyOnce sync.Once
	appKey  *rsa.PrivateKey
	keyPEM  []byte
)

func key(t *testing.T) (*rsa.PrivateKey, []byte) {
	t.Helper()
	keyOnce.Do(func() {
		k, err := rsa.GenerateKey(rand.Reader, 2048)
		if err != nil {
			panic(err)
		}
		appKey = k
		keyPEM = pem.EncodeToMemory(&pem.Block{Type: "RSA PRIVATE KEY", Bytes: x509.MarshalPKCS1PrivateKey(k)})
	})
	return appKey, keyPEM
}

type env struct {
	sim    *githubsim.Server
	client *githubapi.Client
	clock  *clocktesting.FakeClock
	url    string
}

const appID, installation = 4242, 77

var org = scope.Scope{Organization: "acme"}

// newEnv starts a simulator and an App-authenticated client, sharing a fake clock
// that starts at the real time (ghinstallation signs its JWTs with the real time).
func newEnv(t *testing.T, opts githubsim.Options) *env {
	t.Helper()
	k, pemKey := key(t)
	clk := clocktesting.NewFakeClock(time.Now())
	opts.AppID, opts.AppKey, opts.Installations, opts.Clock = appID, &k.PublicKey, []int64{installation}, clk
	if opts.TokenLifetime == 0 {
		opts.TokenLifetime = 24 * time.Hour // tests below move the clock by hours
	}
	sim := githubsim.New(opts)
	apispec.Verify(t, sim)
	srv := httptest.NewServer(sim.Handler())
	t.Cleanup(srv.Close)
	c, err := githubapi.New(githubapi.Config{BaseURL: srv.URL + "/", Clock: clk,
		Auth: githubapi.Auth{AppID: appID, InstallationID: installation, PrivateKey: pemKey}})
	if err != nil {
		t.Fatal(err)
	}
	return &env{sim: sim, client: c, clock: clk, url: srv.URL}
}

func TestRegistrationTokenIsCached(t *testing.T) {
	t.Parallel()
	e := newEnv(t, githubsim.Options{})
	ctx := t.Context()
	for _, sc := range []scope.Scope{org, {Repository: "acme/app"}, {Enterprise: "acme-corp"}} {
		a, err := e.client.RegistrationToken(ctx, sc)
		if err != nil {
			t.Fatalf("%s: %v", sc, err)
		}
		b, err := e.client.RegistrationToken(ctx, sc)
		if err != nil || a != b {
			t.Fatalf("%s: second call %v, %v; want the cached token", sc, b, err)
		}
	}
	calls := e.sim.Calls()
	if calls["POST /orgs/{org}/actions/runners/registration-token"] != 1 || calls["POST /repos/{owner}/{repo}/actions/runners/registration-token"] != 1 ||
		calls["POST /enterprises/{enterprise}/actions/runners/registration-token"] != 1 {
		t.Fatalf("calls %v, want one per scope", calls)
	}
	// Within 5 minutes of expiry (1h) the token is renewed.
	e.clock.Step(56 * time.Minute)
	if _, err := e.client.RegistrationToken(ctx, org); err != nil {
		t.Fatal(err)
	}
	if n := e.sim.Calls()["POST /orgs/{org}/actions/runners/registration-token"]; n != 2 {
		t.Fatalf("registration-token calls %d after 56 minutes, want 2", n)
	}
	if n := e.sim.Calls()["POST /app/installations/{installation_id}/access_tokens"]; n != 1 {
		t.Fatalf("access_tokens calls %d, want 1 (installation token reused)", n)
	}
}

func TestJITConfigRegistersRunner(t *testing.T) {
	t.Parallel()
	e := newEnv(t, githubsim.Options{})
	jit, err := e.client.JITConfig(t.Context(), org, "pool-abc12-0", []string{"linux-big"}, githubapi.DefaultRunnerGroupID)
	if err != nil {
		t.Fatal(err)
	}
	r, ok := e.sim.Runner(jit.RunnerID)
	if !ok || r.Online || r.Name != "pool-abc12-0" {
		t.Fatalf("runner after generate-jitconfig: %+v %v, want offline pool-abc12-0", r, ok)
	}
	if r, err = e.sim.Register(githubsim.Registration{JITConfig: jit.EncodedConfig}); err != nil || !r.Online {
		t.Fatalf("registering with the JIT config: %+v, %v", r, err)
	}
	if _, err := e.sim.Register(githubsim.Registration{JITConfig: jit.EncodedConfig}); !errors.Is(err, githubsim.ErrInvalidCredential) {
		t.Fatalf("JIT config reused: %v, want ErrInvalidCredential", err)
	}
	if _, err := e.client.JITConfig(t.Context(), org, "x", []string{"l"}, 99); !errors.Is(err, githubapi.ErrNotFound) {
		t.Fatalf("unknown runner group: %v, want ErrNotFound", err)
	}
}

func addRunners(t *testing.T, e *env, sc scope.Scope, n int) {
	t.Helper()
	tok, err := e.client.RegistrationToken(t.Context(), sc)
	if err != nil {
		t.Fatal(err)
	}
	for i := range n {
		if _, err := e.sim.Register(githubsim.Registration{Token: tok.Token, Scope: sc.String(), Name: fmt.Sprintf("r-%d", i), Labels: []string{"x"}}); err != nil {
			t.Fatal(err)
		}
	}
}

func TestRunnersPaginationAndETag(t *testing.T) {
	t.Parallel()
	e := newEnv(t, githubsim.Options{})
	addRunners(t, e, org, 250)
	runners, err := e.client.Runners(t.Context(), org)
	if err != nil || len(runners) != 250 {
		t.Fatalf("Runners = %d, %v; want 250", len(runners), err)
	}
	if n := e.sim.Calls()["GET /orgs/{org}/actions/runners"]; n != 3 {
		t.Fatalf("%d list calls, want 3 pages", n)
	}
	before := e.sim.RateRemaining(installation)
	again, err := e.client.Runners(t.Context(), org)
	if err != nil || len(again) != 250 {
		t.Fatalf("cached Runners = %d, %v", len(again), err)
	}
	if after := e.sim.RateRemaining(installation); after != before {
		t.Fatalf("rate remaining %d -> %d across an unchanged list, want unchanged (304s)", before, after)
	}
	if st := e.client.Stats(); st.NotModified != 3 {
		t.Fatalf("stats %+v, want 3 not-modified", st)
	}
	// A change is seen: page 3 changes, pages 1–2 stay 304.
	if err := e.sim.SetBusy(runners[249].ID, true); err != nil {
		t.Fatal(err)
	}
	changed, _ := e.client.Runners(t.Context(), org)
	if !changed[249].Busy {
		t.Fatalf("busy flag of the last runner not seen after it changed")
	}
}

func TestRemoveRunnerOutcomes(t *testing.T) {
	t.Parallel()
	e := newEnv(t, githubsim.Options{})
	addRunners(t, e, org, 3)
	rs, err := e.client.Runners(t.Context(), org)
	if err != nil {
		t.Fatal(err)
	}
	ctx := t.Context()
	if err := e.client.RemoveRunner(ctx, org, rs[0].ID); err != nil {
		t.Fatalf("remove idle runner: %v", err)
	}
	if err := e.client.RemoveRunner(ctx, org, rs[0].ID); !errors.Is(err, githubapi.ErrNotFound) {
		t.Fatalf("remove again: %v, want ErrNotFound", err)
	}
	if err := e.sim.SetBusy(rs[1].ID, true); err != nil {
		t.Fatal(err)
	}
	if err := e.client.RemoveRunner(ctx, org, rs[1].ID); !errors.Is(err, githubapi.ErrRunnerBusy) {
		t.Fatalf("remove busy runner: %v, want ErrRunnerBusy", err)
	}
	if _, ok := e.sim.Runner(rs[1].ID); !ok {
		t.Fatal("a busy runner was removed")
	}
	e.sim.InjectStatus(403, 1)
	if err := e.client.RemoveRunner(ctx, org, rs[2].ID); !errors.Is(err, githubapi.ErrForbidden) || errors.Is(err, githubapi.ErrRateLimited) {
		t.Fatalf("403: %v, want ErrForbidden (not a rate limit)", err)
	}
	e.sim.InjectStatus(502, 1)
	if err := e.client.RemoveRunner(ctx, org, rs[2].ID); !errors.Is(err, githubapi.ErrServer) {
		t.Fatalf("502: %v, want ErrServer", err)
	}
	if after, _ := e.client.Runners(ctx, org); len(after) != 2 {
		t.Fatalf("runners after removal: %d, want 2 (the list cache must not hide the removal)", len(after))
	}
}

// TestPrimaryRateLimit: when the installation's limit is exhausted the client gets
// a *RateLimitError with GitHub's reset time and makes no call until then.
func TestPrimaryRateLimit(t *testing.T) {
	t.Parallel()
	e := newEnv(t, githubsim.Options{})
	ctx := t.Context()
	if _, err := e.client.Runners(ctx, org); err != nil {
		t.Fatal(err)
	}
	e.sim.ExhaustRateLimit()
	_, err := e.client.RegistrationToken(ctx, org)
	var rl *githubapi.RateLimitError
	if !errors.As(err, &rl) || !errors.Is(err, githubapi.ErrRateLimited) || rl.Local || rl.Secondary {
		t.Fatalf("exhausted: %v, want a primary *RateLimitError from GitHub", err)
	}
	if d := rl.Reset.Sub(e.clock.Now()); d <= 0 || d > time.Hour {
		t.Fatalf("reset %v is not within the hour", rl.Reset)
	}
	calls := e.sim.Calls()["POST /orgs/{org}/actions/runners/registration-token"]
	for range 3 {
		_, err := e.client.Runners(ctx, scope.Scope{Repository: "acme/other"})
		if !errors.As(err, &rl) || !rl.Local {
			t.Fatalf("before reset: %v, want a local *RateLimitError", err)
		}
	}
	if got := e.sim.Calls(); got["POST /orgs/{org}/actions/runners/registration-token"] != calls || got["GET /repos/{owner}/{repo}/actions/runners"] != 0 {
		t.Fatalf("calls were made while rate limited: %v", got)
	}
	e.clock.SetTime(rl.Reset.Add(time.Second))
	if _, err := e.client.RegistrationToken(ctx, org); err != nil {
		t.Fatalf("after reset: %v", err)
	}
}

func TestSecondaryRateLimit(t *testing.T) {
	t.Parallel()
	e := newEnv(t, githubsim.Options{})
	e.sim.InjectSecondaryLimit(90 * time.Second)
	_, err := e.client.Runners(t.Context(), org)
	var rl *githubapi.RateLimitError
	if !errors.As(err, &rl) || !rl.Secondary || !rl.Reset.Equal(e.clock.Now().Add(90*time.Second)) {
		t.Fatalf("secondary: %v, want Reset = now + Retry-After", err)
	}
	e.clock.Step(91 * time.Second)
	if _, err := e.client.Runners(t.Context(), org); err != nil {
		t.Fatalf("after Retry-After: %v", err)
	}
}

func TestWrongAppKeyIsRejected(t *testing.T) {
	t.Parallel()
	e := newEnv(t, githubsim.Options{})
	other, _ := rsa.GenerateKey(rand.Reader, 2048)
	wrong := pem.EncodeToMemory(&pem.Block{Type: "RSA PRIVATE KEY", Bytes: x509.MarshalPKCS1PrivateKey(other)})
	c, err := githubapi.New(githubapi.Config{BaseURL: e.url, Clock: e.clock,
		Auth: githubapi.Auth{AppID: appID, InstallationID: installation, PrivateKey: wrong}})
	if err != nil {
		t.Fatal(err)
	}
	_, err = c.Runners(t.Context(), org)
	if !errors.Is(err, githubapi.ErrUnauthorized) {
		t.Fatalf("wrong key: %v, want ErrUnauthorized", err)
	}
	if strings.Contains(err.Error(), "BEGIN RSA") {
		t.Fatal("error leaks the key")
	}
}

// TestInstallationTokenRefresh: tokens live 61 s, ghinstallation refreshes a
// minute early, so the next call after one second fetches a new token — and both
// tokens are accepted while valid.
func TestInstallationTokenRefresh(t *testing.T) {
	t.Parallel()
	e := newEnv(t, githubsim.Options{TokenLifetime: 61 * time.Second})
	if _, err := e.client.Runners(t.Context(), org); err != nil {
		t.Fatal(err)
	}
	time.Sleep(1100 * time.Millisecond) // ghinstallation decides freshness by the real clock
	if _, err := e.client.Runners(t.Context(), org); err != nil {
		t.Fatal(err)
	}
	if n := e.sim.Calls()["POST /app/installations/{installation_id}/access_tokens"]; n != 2 {
		t.Fatalf("access_tokens calls %d, want 2 (a refresh)", n)
	}
}

func TestPAT(t *testing.T) {
	t.Parallel()
	e := newEnv(t, githubsim.Options{PATs: []string{"ghp_good"}})
	good, _ := githubapi.New(githubapi.Config{BaseURL: e.url, Auth: githubapi.Auth{Token: "ghp_good"}})
	if _, err := good.Runners(t.Context(), org); err != nil {
		t.Fatalf("PAT: %v", err)
	}
	bad, _ := githubapi.New(githubapi.Config{BaseURL: e.url, Auth: githubapi.Auth{Token: "ghp_bad"}})
	if _, err := bad.Runners(t.Context(), org); !errors.Is(err, githubapi.ErrUnauthorized) {
		t.Fatalf("bad PAT: %v, want ErrUnauthorized", err)
	}
	if _, err := githubapi.New(githubapi.Config{Auth: githubapi.Auth{Token: "x", AppID: 1}}); err == nil {
		t.Fatal("mixed auth accepted")
	}
	if _, err := githubapi.New(githubapi.Config{Auth: githubapi.Auth{AppID: 1}}); err == nil {
		t.Fatal("App without key accepted")
	}
}

func TestRunnerGroupID(t *testing.T) {
	t.Parallel()
	e := newEnv(t, githubsim.Options{})
	id := e.sim.AddGroup(org, "Linux-Large", []string{"acme/app"})
	got, err := e.client.RunnerGroupID(t.Context(), org, "linux-large")
	if err != nil || got != id {
		t.Fatalf("group id %d, %v; want %d", got, err, id)
	}
	if _, err := e.client.RunnerGroupID(t.Context(), org, "nope"); !errors.Is(err, githubapi.ErrNotFound) {
		t.Fatalf("unknown group: %v", err)
	}
	if got, _ := e.client.RunnerGroupID(t.Context(), org, ""); got != githubapi.DefaultRunnerGroupID {
		t.Fatalf("empty group name: %d, want the default group", got)
	}
}

// TestListBudget measures the calls and rate-limit units of listing 1,000 runners
// across 10 organizations, cold and warm (the numbers in the closing note).
func TestListBudget(t *testing.T) {
	t.Parallel()
	e := newEnv(t, githubsim.Options{})
	var scopes []scope.Scope
	for i := range 10 {
		sc := scope.Scope{Organization: fmt.Sprintf("org-%d", i)}
		scopes = append(scopes, sc)
		addRunners(t, e, sc, 100)
	}
	measure := func() (calls, units int) {
		c0, r0 := e.client.Stats().Calls, e.sim.RateRemaining(installation)
		for _, sc := range scopes {
			rs, err := e.client.Runners(t.Context(), sc)
			if err != nil || len(rs) != 100 {
				t.Fatalf("%s: %d runners, %v", sc, len(rs), err)
			}
		}
		return e.client.Stats().Calls - c0, r0 - e.sim.RateRemaining(installation)
	}
	coldCalls, coldUnits := measure()
	warmCalls, warmUnits := measure()
	t.Logf("1,000 runners in 10 scopes: cold %d calls / %d rate units, warm %d calls / %d units", coldCalls, coldUnits, warmCalls, warmUnits)
	if coldCalls != 10 || coldUnits != 10 || warmCalls != 10 || warmUnits != 0 {
		t.Fatalf("cold %d/%d warm %d/%d, want 10/10 and 10/0", coldCalls, coldUnits, warmCalls, warmUnits)
	}
}

// TestRunnerCacheIsSafeForConcurrentUse: sweeps of several pools store, read
// and invalidate pages at once (without its lock the runtime stops the test
// with "concurrent map writes", and -race reports the race).
func TestRunnerCacheIsSafeForConcurrentUse(t *testing.T) {
	t.Parallel()
	c := githubapi.NewRunnerCache()
	var wg sync.WaitGroup
	for g := range 16 {
		wg.Go(func() {
			scope := fmt.Sprint("organization/o", g%4)
			for i := range 500 {
				c.StorePage(scope, i%3+1, githubapi.CachedPage{ETag: fmt.Sprint(i)})
				if p, ok := c.Page(scope, i%3+1); ok && p.ETag == "" {
					t.Errorf("page of %s without its ETag", scope)
				}
				if i%50 == 0 {
					c.Invalidate(scope)
				}
			}
		})
	}
	wg.Wait()
	c.StorePage("organization/o", 1, githubapi.CachedPage{ETag: "e"})
	if p, ok := c.Page("organization/o", 1); !ok || p.ETag != "e" {
		t.Fatalf("page after the storm: %+v %v, want the one stored", p, ok)
	}
}

// TestLatestJobsReadsEveryPage: a run of 130 jobs is listed in two pages of
// 100; LatestJobs returns them all, the job of the second page included.
func TestLatestJobsReadsEveryPage(t *testing.T) {
	t.Parallel()
	e := newEnv(t, githubsim.Options{})
	first := e.sim.QueueJob(githubsim.JobSpec{Repository: "acme/app", Organization: "acme", Labels: []string{"x"}})
	last := first
	for range 129 {
		last = e.sim.QueueJob(githubsim.JobSpec{Repository: "acme/app", Organization: "acme", Labels: []string{"x"}, RunID: first.RunID})
	}
	jobs, err := e.client.LatestJobs(t.Context(), org, "acme/app", first.RunID)
	if err != nil || len(jobs) != 130 {
		t.Fatalf("LatestJobs = %d jobs, %v; want 130", len(jobs), err)
	}
	if !slices.ContainsFunc(jobs, func(j githubapi.Job) bool { return j.ID == last.ID }) {
		t.Fatalf("job %d, on the second page, is not among the jobs listed", last.ID)
	}
	if n := e.sim.Calls()["GET /repos/{owner}/{repo}/actions/runs/{run_id}/jobs"]; n != 2 {
		t.Fatalf("%d list calls, want 2 pages", n)
	}
}
