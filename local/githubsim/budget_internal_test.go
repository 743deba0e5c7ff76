package githubsim

import (
	"testing"
	"time"
)

// TestBudgetConcurrent: an identity's requests in flight are bounded; a
// released one makes room, and another identity has its own bound.
func TestBudgetConcurrent(t *testing.T) {
	t.Parallel()
	b := GitHubBudget()
	b.Concurrent = 2
	bg := newBudget(b)
	now := time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC)
	const route = "GET /orgs/{org}/actions/runners"
	first, _, _ := bg.admit("installation/1", route, now)
	second, _, _ := bg.admit("installation/1", route, now)
	if first == nil || second == nil {
		t.Fatal("two requests in flight refused, want both admitted")
	}
	if release, limit, wait := bg.admit("installation/1", route, now); release != nil || limit != LimitConcurrent || wait != time.Minute {
		t.Fatalf("third in flight: admitted %v, limit %q, wait %v; want refused by %q for a minute", release != nil, limit, wait, LimitConcurrent)
	}
	if release, _, _ := bg.admit("installation/2", route, now); release == nil {
		t.Fatal("another installation's request refused")
	}
	first()
	if release, _, _ := bg.admit("installation/1", route, now); release == nil {
		t.Fatal("a request after one was served refused")
	}
}
