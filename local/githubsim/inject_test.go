package githubsim_test

import (
	"net/http"
	"net/http/httptest"
	"testing"

	clocktesting "k8s.io/utils/clock/testing"

	"github.com/runnerscaler/runnerscaler/local/githubsim"
)

// TestInjectedAnswersHitTokenCalls: TokenCalls counts the calls made with a
// token, the only ones an injected answer can hit, and not the App's own calls
// (its JWT endpoints, here the delivery log): a chaos run that sizes its
// injections by another count fails more token calls than it means to.
func TestInjectedAnswersHitTokenCalls(t *testing.T) {
	t.Parallel()
	sim := githubsim.New(githubsim.Options{PATs: []string{budgetPAT}, Clock: clocktesting.NewFakeClock(t0)})
	srv := httptest.NewServer(sim.Handler())
	t.Cleanup(srv.Close)
	e := &budgetEnv{sim: sim, url: srv.URL}
	list := "/orgs/acme/actions/runners"
	appCall := func() {
		req, err := http.NewRequestWithContext(t.Context(), http.MethodGet, srv.URL+"/app/hook/deliveries", nil)
		if err != nil {
			t.Fatal(err)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
	}
	for range 3 {
		appCall()
		if got := e.call(t, http.MethodGet, list, "").StatusCode; got != http.StatusOK {
			t.Fatalf("list answered %d, want 200", got)
		}
	}
	if n := sim.TokenCalls(); n != 3 {
		t.Fatalf("TokenCalls %d after 3 token calls and 3 of the App's own, want 3", n)
	}
	sim.InjectStatus(http.StatusBadGateway, 2)
	var got []int
	for range 3 {
		appCall() // the App's own call does not use an injection up
		got = append(got, e.call(t, http.MethodGet, list, "").StatusCode)
	}
	if want := []int{http.StatusBadGateway, http.StatusBadGateway, http.StatusOK}; got[0] != want[0] || got[1] != want[1] || got[2] != want[2] {
		t.Fatalf("token calls after 2 injected 502s answered %v, want %v", got, want)
	}
}
