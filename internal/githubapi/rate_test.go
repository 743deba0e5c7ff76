package githubapi_test

import (
	"testing"

	"github.com/runnerscaler/runnerscaler/local/githubsim"
)

// TestStatsRateRemaining: the client keeps the rate limit left as GitHub's
// latest answer said (a metric of the sweeper).
func TestStatsRateRemaining(t *testing.T) {
	t.Parallel()
	e := newEnv(t, githubsim.Options{})
	if st := e.client.Stats(); st.RateKnown {
		t.Fatalf("stats %+v before any call, want the rate unknown", st)
	}
	addRunners(t, e, org, 1)
	if _, err := e.client.Runners(t.Context(), org); err != nil {
		t.Fatal(err)
	}
	st := e.client.Stats()
	if want := e.sim.RateRemaining(installation); !st.RateKnown || st.RateRemaining != want {
		t.Fatalf("stats %+v, want %d remaining", st, want)
	}
}
