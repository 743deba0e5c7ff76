package webhook_test

import (
	"bytes"
	"encoding/json"
	"slices"
	"testing"

	"github.com/runnerscaler/runnerscaler/internal/emf"
	"github.com/runnerscaler/runnerscaler/internal/pool"
	"github.com/runnerscaler/runnerscaler/internal/webhook"
)

// TestApprovalGate: GitHub's deliveries of a job held for an environment's
// approval — queued (with its deployment), waiting, then queued again once
// approved, a delivery of its own. The first queued reserves a runner and
// nudges the sweeper; the waiting takes the reservation back (nothing active,
// no nudge); a redelivered waiting or first queued changes nothing; the
// approval's queued makes the job count again and nudges. Each hold and release
// is counted, per pool and as a delivery outcome.
func TestApprovalGate(t *testing.T) {
	t.Parallel()
	cfg, err := pool.Parse([]byte(pools))
	if err != nil {
		t.Fatal(err)
	}
	var out bytes.Buffer
	metrics, err := emf.NewWriter(&out, "INFO")
	if err != nil {
		t.Fatal(err)
	}
	e := newEnvWith(t, cfg, secret)
	h := webhook.New([]byte(secret), cfg, e.store, webhook.WithNudger(e.nudger), webhook.WithMetrics(metrics))
	queued, waiting := fixture(t, "workflow_job/queued.with-deployment.payload.json"), fixture(t, "workflow_job/waiting.payload.json")
	steps := []struct {
		delivery string
		body     []byte
		reason   string
		active   int
		nudges   int
	}{
		{"d-q1", queued, "queued job 12877621891: applied for pool elastic", 1, 1},
		{"d-w", waiting, "waiting job 12877621891: held for pool elastic", 0, 1},
		{"d-w", waiting, "waiting job 12877621891: stale for pool elastic", 0, 1},
		{"d-q1", queued, "queued job 12877621891: stale for pool elastic", 0, 1},
		{"d-q2", queued, "queued job 12877621891: released for pool elastic", 1, 2},
		{"d-q2", queued, "queued job 12877621891: stale for pool elastic", 1, 2},
	}
	for i, s := range steps {
		hdr := headersFor("workflow_job", s.body)
		hdr["X-GitHub-Delivery"] = s.delivery
		resp := h.Serve(t.Context(), hdr, s.body)
		if resp.Status != 200 || resp.Reason != s.reason {
			t.Fatalf("step %d (%s): %d %q, want 200 %q", i, s.delivery, resp.Status, resp.Reason, s.reason)
		}
		rs, err := e.store.Active(t.Context(), "elastic")
		if err != nil {
			t.Fatal(err)
		}
		if len(rs) != s.active || len(e.nudger.pools) != s.nudges {
			t.Fatalf("step %d (%s): %d active, nudges %v; want %d active, %d nudges", i, s.delivery, len(rs), e.nudger.pools, s.active, s.nudges)
		}
	}
	var outcomes, perPool []string
	for _, line := range bytes.Split(bytes.TrimSpace(out.Bytes()), []byte("\n")) {
		var rec map[string]any
		if err := json.Unmarshal(line, &rec); err != nil {
			t.Fatalf("metric line %s: %v", line, err)
		}
		if o, ok := rec["Outcome"].(string); ok {
			outcomes = append(outcomes, o)
		}
		for _, name := range []string{"JobsHeldForApproval", "JobsReleasedByApproval"} {
			if v, ok := rec[name].(float64); ok && v == 1 && rec["Pool"] == "elastic" {
				perPool = append(perPool, name)
			}
		}
	}
	wantOutcomes := []string{webhook.OutcomeApplied, webhook.OutcomeHeld, webhook.OutcomeStale, webhook.OutcomeStale,
		webhook.OutcomeReleased, webhook.OutcomeStale}
	if !slices.Equal(outcomes, wantOutcomes) {
		t.Fatalf("delivery outcomes %v, want %v", outcomes, wantOutcomes)
	}
	if want := []string{"JobsHeldForApproval", "JobsReleasedByApproval"}; !slices.Equal(perPool, want) {
		t.Fatalf("approval metrics %v, want %v", perPool, want)
	}
}
