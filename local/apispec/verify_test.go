package apispec_test

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/runnerscaler/runnerscaler/internal/scope"
	"github.com/runnerscaler/runnerscaler/local/apispec"
	"github.com/runnerscaler/runnerscaler/local/githubsim"
)

// recordingTB keeps what Verify reports, and its cleanups, instead of failing
// the test.
type recordingTB struct {
	testing.TB
	errors   []string
	cleanups []func()
}

func (r *recordingTB) Errorf(format string, args ...any) {
	r.errors = append(r.errors, fmt.Sprintf(format, args...))
}
func (r *recordingTB) Cleanup(f func()) { r.cleanups = append(r.cleanups, f) }

func (r *recordingTB) end() {
	for i := len(r.cleanups) - 1; i >= 0; i-- {
		r.cleanups[i]()
	}
}

func get(t *testing.T, url, auth string) {
	t.Helper()
	req, err := http.NewRequestWithContext(t.Context(), "GET", url, nil)
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Authorization", auth)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
}

// Verify fails the test for a request that is no GitHub operation (the
// simulator's mux answers it with a text 404), and only for that: the
// conforming exchange, the simulator-only path and the deliveries pass.
func TestVerifyFailsTheTestForANonConformingExchange(t *testing.T) {
	sim := githubsim.New(githubsim.Options{PATs: []string{"ghp_x"}})
	rec := &recordingTB{TB: t}
	apispec.Verify(rec, sim)
	srv := httptest.NewServer(sim.Handler())
	defer srv.Close()
	var delivered int
	sim.OnDelivery(func(string, string, []byte) int { delivered++; return http.StatusOK })

	get(t, srv.URL+"/orgs/acme/actions/runners?per_page=100", "token ghp_x")
	get(t, srv.URL+"/_runner/no-such-path", "") // not GitHub's API: not checked
	get(t, srv.URL+"/orgs/acme/actions/robots", "token ghp_x")
	rn, err := sim.Register(githubsim.Registration{Token: mustToken(t, sim, srv.URL), Scope: scope.Scope{Organization: "acme"}.String(),
		Name: "r-1", Labels: []string{"gpu"}})
	if err != nil {
		t.Fatal(err)
	}
	sim.QueueJob(githubsim.JobSpec{Repository: "acme/app", Organization: "acme", Labels: []string{"gpu"}})
	if _, ok, err := sim.AcquireJob(rn.ID); !ok || err != nil {
		t.Fatalf("acquire: %v %v", ok, err)
	}
	if delivered != 2 {
		t.Fatalf("%d deliveries, want 2", delivered)
	}

	rec.end()
	if len(rec.errors) != 1 || !strings.Contains(rec.errors[0], "GET /orgs/acme/actions/robots") ||
		!strings.Contains(rec.errors[0], apispec.ErrUnknownOperation.Error()) {
		t.Fatalf("Verify reported %q, want one unknown operation", rec.errors)
	}
}

func mustToken(t *testing.T, sim *githubsim.Server, url string) string {
	t.Helper()
	req, err := http.NewRequestWithContext(t.Context(), "POST", url+"/orgs/acme/actions/runners/registration-token", nil)
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Authorization", "token ghp_x")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var body struct{ Token string }
	if err := json.NewDecoder(resp.Body).Decode(&body); err != nil || body.Token == "" {
		t.Fatalf("registration token: %d %v", resp.StatusCode, err)
	}
	return body.Token
}
