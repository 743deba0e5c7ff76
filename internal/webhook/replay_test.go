package webhook_test

import (
	"strings"
	"testing"
	"time"

	clocktesting "k8s.io/utils/clock/testing"

	"github.com/runnerscaler/runnerscaler/internal/pool"
	"github.com/runnerscaler/runnerscaler/internal/reservation"
)

// queuedCreated is the queued fixture's workflow_job.created_at.
var queuedCreated = time.Date(2021, 9, 13, 2, 21, 13, 0, time.UTC)

// TestQueuedOfAJobOlderThanTheRetention: GitHub lets a delivery be redelivered
// for days, while the table forgets a finished job a retention after it
// stopped mattering. A queued delivery of a job created more than the
// retention ago is answered 200 stale and records nothing (a replay after the
// item is gone would otherwise reserve a runner for a job long finished); one
// of a job created within the retention still reserves and nudges.
func TestQueuedOfAJobOlderThanTheRetention(t *testing.T) {
	t.Parallel()
	cfg, err := pool.Parse([]byte(pools))
	if err != nil {
		t.Fatal(err)
	}
	body := fixture(t, "workflow_job/queued.payload.json")
	for _, tc := range []struct {
		name   string
		age    time.Duration
		reason string
		items  int
	}{
		{"at the retention", reservation.DefaultRetention, "queued job 289782451: applied for pool octo", 1},
		{"beyond the retention", reservation.DefaultRetention + time.Second,
			"queued job 289782451: stale: job created 2021-09-13T02:21:13Z, over 24h ago; not recorded for pool octo", 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			e := newEnvAt(t, cfg, secret, clocktesting.NewFakePassiveClock(queuedCreated.Add(tc.age)))
			resp := e.handler.Serve(t.Context(), headersFor("workflow_job", body), body)
			if resp.Status != 200 || !strings.Contains(resp.Reason, tc.reason) {
				t.Fatalf("response %d %q, want 200 containing %q", resp.Status, resp.Reason, tc.reason)
			}
			if n := e.items(t); n != tc.items {
				t.Fatalf("%d items written, want %d", n, tc.items)
			}
			if len(e.nudger.pools) != tc.items {
				t.Fatalf("nudges %v, want %d", e.nudger.pools, tc.items)
			}
		})
	}
}

// TestQueuedOfAGatedJobIsNotAgeChecked: a job that deploys to an environment
// may wait for its protection rules for days before it is queued, so its
// queued reserves whatever its age.
func TestQueuedOfAGatedJobIsNotAgeChecked(t *testing.T) {
	t.Parallel()
	cfg, err := pool.Parse([]byte(pools))
	if err != nil {
		t.Fatal(err)
	}
	// The queued of the approved job: its status says queued, not waiting.
	body := []byte(strings.Replace(string(fixture(t, "workflow_job/queued.with-deployment.payload.json")),
		`"status": "waiting"`, `"status": "queued"`, 1))
	if !strings.Contains(string(body), `"status": "queued"`) {
		t.Fatal("fixture edit did not apply")
	}
	created := time.Date(2023, 4, 19, 21, 12, 12, 0, time.UTC) // its workflow_job.created_at
	e := newEnvAt(t, cfg, secret, clocktesting.NewFakePassiveClock(created.Add(20*24*time.Hour)))
	resp := e.handler.Serve(t.Context(), headersFor("workflow_job", body), body)
	if resp.Status != 200 || !strings.Contains(resp.Reason, "applied for pool elastic") || e.items(t) != 1 {
		t.Fatalf("response %d %q, %d items; want it applied", resp.Status, resp.Reason, e.items(t))
	}
}

// TestInvalidCreatedAt: a created_at that is not an RFC 3339 time is a 400,
// with nothing written.
func TestInvalidCreatedAt(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	body := []byte(strings.Replace(string(fixture(t, "workflow_job/queued.payload.json")),
		`"created_at": "2021-09-13T02:21:13Z"`, `"created_at": "yesterday"`, 1))
	if !strings.Contains(string(body), `"yesterday"`) {
		t.Fatal("fixture edit did not apply")
	}
	resp := e.handler.Serve(t.Context(), headersFor("workflow_job", body), body)
	if resp.Status != 400 || resp.Reason != "workflow_job 289782451: created_at is not an RFC 3339 time" || e.items(t) != 0 {
		t.Fatalf("response %d %q, %d items; want 400 and nothing written", resp.Status, resp.Reason, e.items(t))
	}
}
