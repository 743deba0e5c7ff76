package githubsim_test

import (
	"crypto/rand"
	"crypto/rsa"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strconv"
	"testing"
	"time"

	"github.com/golang-jwt/jwt/v4"
	clocktesting "k8s.io/utils/clock/testing"

	"github.com/runnerscaler/runnerscaler/internal/scope"
	"github.com/runnerscaler/runnerscaler/local/githubsim"
)

var t0 = time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC)

type env struct {
	sim   *githubsim.Server
	url   string
	clock *clocktesting.FakeClock
	key   *rsa.PrivateKey
}

func newEnv(t *testing.T) *env {
	t.Helper()
	k, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		t.Fatal(err)
	}
	clk := clocktesting.NewFakeClock(t0)
	sim := githubsim.New(githubsim.Options{AppID: 7, AppKey: &k.PublicKey, Installations: []int64{9}, Clock: clk})
	srv := httptest.NewServer(sim.Handler())
	t.Cleanup(srv.Close)
	return &env{sim: sim, url: srv.URL, clock: clk, key: k}
}

func (e *env) jwt(t *testing.T, iss string, iat time.Time, life time.Duration) string {
	t.Helper()
	tok := jwt.NewWithClaims(jwt.SigningMethodRS256, jwt.RegisteredClaims{
		Issuer: iss, IssuedAt: jwt.NewNumericDate(iat), ExpiresAt: jwt.NewNumericDate(iat.Add(life)),
	})
	s, err := tok.SignedString(e.key)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func (e *env) do(t *testing.T, method, path, auth string) *http.Response {
	t.Helper()
	req, err := http.NewRequestWithContext(t.Context(), method, e.url+path, nil)
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Authorization", auth)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { resp.Body.Close() })
	return resp
}

func (e *env) installationToken(t *testing.T) string {
	t.Helper()
	resp := e.do(t, "POST", "/app/installations/9/access_tokens", "Bearer "+e.jwt(t, "7", t0, 10*time.Minute))
	if resp.StatusCode != 201 {
		t.Fatalf("access token: %d", resp.StatusCode)
	}
	var body struct{ Token string }
	if err := json.NewDecoder(resp.Body).Decode(&body); err != nil || body.Token == "" {
		t.Fatalf("access token: %q, %v", body.Token, err)
	}
	return body.Token
}

func TestJWTChecks(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	cases := []struct {
		name string
		auth string
		path string
		want int
	}{
		{"valid", "Bearer " + e.jwt(t, "7", t0, 10*time.Minute), "/app/installations/9/access_tokens", 201},
		{"wrong iss", "Bearer " + e.jwt(t, "8", t0, 10*time.Minute), "/app/installations/9/access_tokens", 401},
		{"expired", "Bearer " + e.jwt(t, "7", t0.Add(-20*time.Minute), 10*time.Minute), "/app/installations/9/access_tokens", 401},
		{"issued in the future", "Bearer " + e.jwt(t, "7", t0.Add(5*time.Minute), 5*time.Minute), "/app/installations/9/access_tokens", 401},
		{"too long", "Bearer " + e.jwt(t, "7", t0, time.Hour), "/app/installations/9/access_tokens", 401},
		{"unknown installation", "Bearer " + e.jwt(t, "7", t0, 10*time.Minute), "/app/installations/10/access_tokens", 404},
		{"no JWT", "", "/app/installations/9/access_tokens", 401},
	}
	for _, tc := range cases {
		if got := e.do(t, "POST", tc.path, tc.auth).StatusCode; got != tc.want {
			t.Errorf("%s: %d, want %d", tc.name, got, tc.want)
		}
	}
}

func TestInstallationTokenExpires(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	tok := e.installationToken(t)
	resp := e.do(t, "GET", "/orgs/acme/actions/runners", "token "+tok)
	if resp.StatusCode != 200 || resp.Header.Get("X-RateLimit-Remaining") != "4999" {
		t.Fatalf("valid token: %d remaining %s", resp.StatusCode, resp.Header.Get("X-RateLimit-Remaining"))
	}
	e.clock.Step(time.Hour)
	if got := e.do(t, "GET", "/orgs/acme/actions/runners", "token "+tok).StatusCode; got != 401 {
		t.Fatalf("token after its hour: %d, want 401", got)
	}
	if got := e.do(t, "GET", "/orgs/acme/actions/runners", "token ghs_made_up").StatusCode; got != 401 {
		t.Fatalf("unknown token: %d, want 401", got)
	}
}

func TestRemovalOnlyFailsWhileBusy(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	tok := e.installationToken(t)
	reg := e.do(t, "POST", "/orgs/acme/actions/runners/registration-token", "token "+tok)
	regToken := decodeRegistrationToken(t, reg)
	r, err := e.sim.Register(githubsim.Registration{Token: regToken, Scope: scope.Scope{Organization: "acme"}.String(), Name: "a"})
	if err != nil {
		t.Fatal(err)
	}
	setBusy(t, e.sim, r.ID, true)
	del := fmt.Sprintf("/orgs/acme/actions/runners/%d", r.ID)
	if got := e.do(t, "DELETE", del, "token "+tok).StatusCode; got != 422 {
		t.Fatalf("busy: %d, want 422", got)
	}
	setBusy(t, e.sim, r.ID, false)
	if got := e.do(t, "DELETE", "/orgs/other/actions/runners/"+strconv.FormatInt(r.ID, 10), "token "+tok).StatusCode; got != 404 {
		t.Fatalf("other scope: %d, want 404", got)
	}
	if got := e.do(t, "DELETE", del, "token "+tok).StatusCode; got != 204 {
		t.Fatalf("idle: %d, want 204", got)
	}
	if got := e.do(t, "DELETE", del, "token "+tok).StatusCode; got != 404 {
		t.Fatalf("gone: %d, want 404", got)
	}
}

func TestRegistrationCredentials(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	tok := e.installationToken(t)
	reg := e.do(t, "POST", "/repos/acme/app/actions/runners/registration-token", "token "+tok)
	regToken := decodeRegistrationToken(t, reg)
	repo := scope.Scope{Repository: "acme/app"}.String()
	if _, err := e.sim.Register(githubsim.Registration{Token: regToken, Scope: "organization/acme", Name: "a"}); !errors.Is(err, githubsim.ErrInvalidCredential) {
		t.Fatalf("token for another scope: %v", err)
	}
	r, err := e.sim.Register(githubsim.Registration{Token: regToken, Scope: repo, Name: "a", Ephemeral: true})
	if err != nil {
		t.Fatal(err)
	}
	setBusy(t, e.sim, r.ID, true)
	if err := e.sim.FinishJob(r.ID); err != nil {
		t.Fatal(err)
	}
	if _, ok := e.sim.Runner(r.ID); ok {
		t.Fatal("an ephemeral runner must disappear after its job")
	}
	e.clock.Step(time.Hour)
	if _, err := e.sim.Register(githubsim.Registration{Token: regToken, Scope: repo, Name: "b"}); !errors.Is(err, githubsim.ErrInvalidCredential) {
		t.Fatalf("expired registration token: %v", err)
	}
}

// decodeRegistrationToken decodes a registration-token response.
func decodeRegistrationToken(t *testing.T, resp *http.Response) string {
	t.Helper()
	var rt struct{ Token string }
	if err := json.NewDecoder(resp.Body).Decode(&rt); err != nil || resp.StatusCode != 201 || rt.Token == "" {
		t.Fatalf("registration token: %d %q, %v", resp.StatusCode, rt.Token, err)
	}
	return rt.Token
}

// setBusy marks runner id busy (it took a job) or idle.
func setBusy(t *testing.T, sim *githubsim.Server, id int64, busy bool) {
	t.Helper()
	if err := sim.SetBusy(id, busy); err != nil {
		t.Fatalf("marking runner %d busy=%v: %v", id, busy, err)
	}
}
