package githubsim_test

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	clocktesting "k8s.io/utils/clock/testing"

	"github.com/runnerscaler/runnerscaler/internal/githubapi"
	"github.com/runnerscaler/runnerscaler/internal/scope"
	"github.com/runnerscaler/runnerscaler/local/apispec"
	"github.com/runnerscaler/runnerscaler/local/githubsim"
)

const budgetPAT = "ghp_budget"

// budgetEnv is a simulator with a budget, a PAT and a fake clock; every
// exchange is checked against GitHub's description when the test ends.
type budgetEnv struct {
	sim   *githubsim.Server
	url   string
	clock *clocktesting.FakeClock
}

func newBudgetEnv(t *testing.T, b githubsim.Budget) *budgetEnv {
	t.Helper()
	clk := clocktesting.NewFakeClock(t0)
	sim := githubsim.New(githubsim.Options{PATs: []string{budgetPAT}, Clock: clk, Budget: &b})
	apispec.Verify(t, sim)
	srv := httptest.NewServer(sim.Handler())
	t.Cleanup(srv.Close)
	return &budgetEnv{sim: sim, url: srv.URL, clock: clk}
}

// call sends method path with the PAT (and If-None-Match etag when set), a
// JIT config request's body for a POST, and returns the answer.
func (e *budgetEnv) call(t *testing.T, method, path, etag string) *http.Response {
	t.Helper()
	var body []byte
	if method == http.MethodPost {
		body = fmt.Appendf(nil, `{"name":"r-%d","runner_group_id":1,"labels":["x"]}`, time.Now().UnixNano())
	}
	req, err := http.NewRequestWithContext(t.Context(), method, e.url+path, bytes.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Authorization", "token "+budgetPAT)
	req.Header.Set("Content-Type", "application/json")
	if etag != "" {
		req.Header.Set("If-None-Match", etag)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { resp.Body.Close() })
	return resp
}

const jitPath = "/orgs/acme/actions/runners/generate-jitconfig"

// TestBudgetPointsPerEndpointMinute: a POST costs 5 points and a GET 1 of an
// endpoint's 900 a minute: the 181st JIT config of a minute is refused as
// GitHub refuses it (429, retry-after until the minute is over, the primary
// window's headers, a secondary-limit message), while another endpoint still
// answers, and the next minute the endpoint answers again. The product's
// client reads the answer as a secondary limit until then.
func TestBudgetPointsPerEndpointMinute(t *testing.T) {
	t.Parallel()
	e := newBudgetEnv(t, githubsim.GitHubBudget())
	for i := range 180 {
		if resp := e.call(t, http.MethodPost, jitPath, ""); resp.StatusCode != http.StatusCreated {
			t.Fatalf("JIT config %d: %d, want 201", i+1, resp.StatusCode)
		}
	}
	e.clock.Step(20 * time.Second)
	resp := e.call(t, http.MethodPost, jitPath, "")
	var body struct {
		Message          string `json:"message"`
		DocumentationURL string `json:"documentation_url"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&body); err != nil {
		t.Fatal(err)
	}
	if resp.StatusCode != http.StatusTooManyRequests || resp.Header.Get("Retry-After") != "40" ||
		resp.Header.Get("X-RateLimit-Remaining") != "4820" || !strings.HasSuffix(body.DocumentationURL, "#about-secondary-rate-limits") {
		t.Fatalf("181st JIT config: %d, retry-after %q, remaining %q, %+v; want 429, 40, 4820 and the secondary limit's documentation",
			resp.StatusCode, resp.Header.Get("Retry-After"), resp.Header.Get("X-RateLimit-Remaining"), body)
	}
	if got := e.call(t, http.MethodGet, "/orgs/acme/actions/runners", "").StatusCode; got != http.StatusOK {
		t.Fatalf("another endpoint in the same minute: %d, want 200", got)
	}
	if got := e.sim.Refusals()[githubsim.LimitPoints]; got != 1 {
		t.Fatalf("%d refusals by points, want 1", got)
	}

	gh, err := githubapi.New(githubapi.Config{BaseURL: e.url, Clock: e.clock, Auth: githubapi.Auth{Token: budgetPAT}})
	if err != nil {
		t.Fatal(err)
	}
	_, err = gh.JITConfig(t.Context(), scope.Scope{Organization: "acme"}, "product-1", []string{"x"}, 1)
	var limited *githubapi.RateLimitError
	if !errors.As(err, &limited) || !limited.Secondary || !limited.Reset.Equal(t0.Add(time.Minute)) {
		t.Fatalf("the product's client: %v; want a secondary rate limit until %v", err, t0.Add(time.Minute))
	}

	e.clock.Step(40 * time.Second)
	if got := e.call(t, http.MethodPost, jitPath, "").StatusCode; got != http.StatusCreated {
		t.Fatalf("JIT config the next minute: %d, want 201", got)
	}
}

// TestBudgetCoreSparesNotModified: the primary budget counts every answered
// request but a 304 to a conditional one; past it, the answer is 403 with
// x-ratelimit-remaining 0 (GitHub's primary limit).
func TestBudgetCoreSparesNotModified(t *testing.T) {
	t.Parallel()
	b := githubsim.GitHubBudget()
	b.Core = 3
	e := newBudgetEnv(t, b)
	first := e.call(t, http.MethodGet, "/orgs/acme/actions/runners", "")
	etag := first.Header.Get("ETag")
	for range 5 {
		if got := e.call(t, http.MethodGet, "/orgs/acme/actions/runners", etag).StatusCode; got != http.StatusNotModified {
			t.Fatalf("conditional list: %d, want 304", got)
		}
	}
	for i := range 2 {
		if resp := e.call(t, http.MethodGet, "/orgs/acme/actions/runners", ""); resp.StatusCode != http.StatusOK {
			t.Fatalf("list %d: %d, want 200 (the 304s cost nothing)", i+2, resp.StatusCode)
		}
	}
	resp := e.call(t, http.MethodGet, "/orgs/acme/actions/runners", "")
	if resp.StatusCode != http.StatusForbidden || resp.Header.Get("X-RateLimit-Remaining") != "0" || resp.Header.Get("X-RateLimit-Reset") == "" {
		t.Fatalf("fourth counted request: %d, remaining %q; want 403, 0 and a reset", resp.StatusCode, resp.Header.Get("X-RateLimit-Remaining"))
	}
	if got := e.sim.Refusals()[githubsim.LimitCore]; got != 1 {
		t.Fatalf("%d refusals by the core limit, want 1", got)
	}
}

// TestBudgetRegistrationsPerHour: past the hour's registrations a JIT config is
// refused until the hour is over, whatever the per-minute points allow.
func TestBudgetRegistrationsPerHour(t *testing.T) {
	t.Parallel()
	b := githubsim.GitHubBudget()
	b.RegistrationsPerHour, b.Status = 2, http.StatusForbidden
	e := newBudgetEnv(t, b)
	for range 2 {
		if got := e.call(t, http.MethodPost, jitPath, "").StatusCode; got != http.StatusCreated {
			t.Fatalf("JIT config: %d, want 201", got)
		}
	}
	e.clock.Step(10 * time.Minute)
	resp := e.call(t, http.MethodPost, jitPath, "")
	if resp.StatusCode != http.StatusForbidden || resp.Header.Get("Retry-After") != "3000" {
		t.Fatalf("third registration of the hour: %d, retry-after %q; want 403 and 3000", resp.StatusCode, resp.Header.Get("Retry-After"))
	}
	if got := e.sim.Refusals()[githubsim.LimitRegistrations]; got != 1 {
		t.Fatalf("%d refusals by registrations, want 1", got)
	}
	e.clock.Step(50 * time.Minute)
	if got := e.call(t, http.MethodPost, jitPath, "").StatusCode; got != http.StatusCreated {
		t.Fatalf("JIT config the next hour: %d, want 201", got)
	}
}

// TestBudgetAgentRegistrationsPerHour: runner agents registering with a
// registration token count against the scope's registrations of the hour.
func TestBudgetAgentRegistrationsPerHour(t *testing.T) {
	t.Parallel()
	b := githubsim.GitHubBudget()
	b.RegistrationsPerHour = 2
	e := newBudgetEnv(t, b)
	org := scope.Scope{Organization: "acme"}
	gh, err := githubapi.New(githubapi.Config{BaseURL: e.url, Auth: githubapi.Auth{Token: budgetPAT}, Clock: e.clock})
	if err != nil {
		t.Fatal(err)
	}
	tok, err := gh.RegistrationToken(t.Context(), org)
	if err != nil {
		t.Fatalf("registration token: %v", err)
	}
	reg := func(name string) error {
		_, err := e.sim.Register(githubsim.Registration{Token: tok.Token, Scope: org.String(), Name: name, Labels: []string{"x"}, Ephemeral: true})
		return err
	}
	for _, name := range []string{"a", "b"} {
		if err := reg(name); err != nil {
			t.Fatalf("registration %s: %v", name, err)
		}
	}
	if err := reg("c"); !errors.Is(err, githubsim.ErrRegistrationLimit) {
		t.Fatalf("third registration of the hour: %v, want ErrRegistrationLimit", err)
	}
	e.clock.Step(time.Hour)
	if tok, err = gh.RegistrationToken(t.Context(), org); err != nil { // the last one expired with the hour
		t.Fatal(err)
	}
	if err := reg("c"); err != nil {
		t.Fatalf("registration the next hour: %v", err)
	}
}

func TestBudgetValidate(t *testing.T) {
	t.Parallel()
	if err := githubsim.GitHubBudget().Validate(); err != nil {
		t.Fatalf("GitHub's budget: %v", err)
	}
	b := githubsim.GitHubBudget()
	b.Concurrent, b.Status = 0, 500
	err := b.Validate()
	if err == nil || !strings.Contains(err.Error(), "Budget.Concurrent is 0") || !strings.Contains(err.Error(), "Budget.Status is 500") {
		t.Fatalf("error %v, want one naming Concurrent and Status", err)
	}
}
