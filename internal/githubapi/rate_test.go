package githubapi_test

import (
	"errors"
	"testing"
	"time"

	"github.com/runnerscaler/runnerscaler/internal/githubapi"
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

// TestDeferredNearTheRateLimit: with under 10% of the hour's requests left,
// a runner list is not sent (ErrDeferred, naming what is left), while what
// moves jobs is: a JIT config, a runner read alone. Once the window the last
// answer described has ended, lists are sent again.
func TestDeferredNearTheRateLimit(t *testing.T) {
	t.Parallel()
	e := newEnv(t, githubsim.Options{})
	ctx := t.Context()
	addRunners(t, e, org, 1)
	if _, err := e.client.Runners(ctx, org); err != nil {
		t.Fatal(err)
	}
	e.sim.LeaveRateLimit(400) // of 5,000
	jit, err := e.client.JITConfig(ctx, org, "r-1", []string{"x"}, 1)
	if err != nil {
		t.Fatalf("JIT config near the limit: %v", err)
	}
	calls := e.client.Stats().Calls
	_, err = e.client.Runners(ctx, org)
	var d *githubapi.DeferredError
	if !errors.Is(err, githubapi.ErrDeferred) || !errors.As(err, &d) || d.Limit != 5000 || d.Remaining >= 400 {
		t.Fatalf("list near the limit: %v, want deferred with what is left of 5000", err)
	}
	if st := e.client.Stats(); st.Calls != calls || st.Deferred != 1 {
		t.Fatalf("stats %+v: want no request sent and one deferral", st)
	}
	if r, err := e.client.Runner(ctx, org, jit.RunnerID); err != nil || r.Name != "r-1" {
		t.Fatalf("runner read alone near the limit: %+v, %v", r, err)
	}
	if _, err := e.client.Runner(ctx, org, jit.RunnerID+1000); !errors.Is(err, githubapi.ErrNotFound) {
		t.Fatalf("an unknown runner read alone: %v, want ErrNotFound", err)
	}
	e.clock.Step(time.Hour)
	if _, err := e.client.Runners(ctx, org); err != nil {
		t.Fatalf("list in the next window: %v", err)
	}
}
