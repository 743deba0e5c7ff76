package reconcile_test

import (
	"strings"
	"testing"
	"time"

	"github.com/runnerscaler/runnerscaler/internal/scope"
)

const readCall = "GET /orgs/{org}/actions/runners/{runner_id}"

// TestNearTheRateLimitARunnerIsReadAlone: with under 10% of the hour's
// requests left, the sweep does not read the scope's runner list (20 pages for
// 2,000 runners); a runner it removes is read alone (one request) right
// before RemoveRunner, and the pool status says what was deferred. Once the
// window resets, lists are read again.
func TestNearTheRateLimitARunnerIsReadAlone(t *testing.T) {
	t.Parallel()
	e := newEnv(t, true)
	e.mustSweep(1, time.Time{})
	name := e.statefulSets()[0]
	e.start(name)
	e.mustSweep(1, time.Time{})
	e.sim.LeaveRateLimit(100) // of 5,000: the next answer tells the client
	if _, err := e.gh.Runners(t.Context(), scope.Scope{Organization: "acme"}); err != nil {
		t.Fatal(err)
	}
	lists := e.sim.Calls()[listCall]
	e.mustSweep(0, time.Time{})
	if got := e.statefulSets(); len(got) != 0 {
		t.Fatalf("statefulsets %v after the scale-down, want none", got)
	}
	calls := e.sim.Calls()
	if calls[listCall] != lists {
		t.Errorf("%d list calls near the rate limit, want none", calls[listCall]-lists)
	}
	if calls[readCall] < 1 || calls[removeCall] != 1 {
		t.Errorf("calls %v: want the runner read alone, then removed once", calls)
	}
	if !strings.Contains(e.status.Deferred, "list runners deferred: ") || !strings.Contains(e.status.Deferred, "of 5000 GitHub requests left") {
		t.Errorf("pool status deferred %q, want what was deferred and why", e.status.Deferred)
	}
	if got := e.gh.Stats().Deferred; got < 1 {
		t.Errorf("client stats deferred %d, want at least 1", got)
	}
	e.clock.Step(time.Hour) // a new window, which the client knows from the last one's reset
	if _, err := e.gh.Runners(t.Context(), scope.Scope{Organization: "acme"}); err != nil {
		t.Fatalf("a list after the window reset: %v", err)
	}
	e.mustSweep(0, time.Time{})
	if e.status.Deferred != "" {
		t.Errorf("pool status deferred %q after the reset, want none", e.status.Deferred)
	}
}
