package webhook_test

import (
	"bytes"
	"encoding/json"
	"slices"
	"strings"
	"testing"

	"github.com/runnerscaler/runnerscaler/internal/emf"
	"github.com/runnerscaler/runnerscaler/internal/pool"
	"github.com/runnerscaler/runnerscaler/internal/webhook"
)

// TestApprovalGate: GitHub's deliveries of a job held for an environment's
// approval — queued (with its deployment), waiting, then queued again once
// approved, a delivery of its own. A first queued whose status says queued
// reserves a runner and nudges the sweeper, and the waiting takes it back; one
// whose status already says waiting (GitHub's fixture) holds the job itself.
// Redeliveries change nothing; the approval's queued makes the job count again
// and nudges. Each hold and release is counted, per pool and as a delivery
// outcome.
func TestApprovalGate(t *testing.T) {
	t.Parallel()
	waitingFirst := fixture(t, "workflow_job/queued.with-deployment.payload.json")
	queuedFirst := []byte(strings.Replace(string(waitingFirst), `"status": "waiting"`, `"status": "queued"`, 1))
	if bytes.Equal(queuedFirst, waitingFirst) {
		t.Fatal("fixture edit did not apply")
	}
	waiting, approved := fixture(t, "workflow_job/waiting.payload.json"), queuedFirst
	cases := []struct {
		name     string
		steps    []approvalStep
		outcomes []string
	}{
		{"first queued says queued", []approvalStep{
			{"d-q1", queuedFirst, "queued job 12877621891: applied for pool elastic", 1, 1},
			{"d-w", waiting, "waiting job 12877621891: held for pool elastic", 0, 1},
			{"d-w", waiting, "waiting job 12877621891: stale for pool elastic", 0, 1},
			{"d-q1", queuedFirst, "queued job 12877621891: stale for pool elastic", 0, 1},
			{"d-q2", approved, "queued job 12877621891: released for pool elastic", 1, 2},
			{"d-q2", approved, "queued job 12877621891: stale for pool elastic", 1, 2},
		}, []string{"applied", "held", "stale", "stale",
			"released", "stale"}},
		{"first queued says waiting", []approvalStep{
			{"d-q1", waitingFirst, "queued job 12877621891: held for pool elastic", 0, 0},
			{"d-w", waiting, "waiting job 12877621891: stale for pool elastic", 0, 0},
			{"d-q2", approved, "queued job 12877621891: released for pool elastic", 1, 1},
			{"d-q1", waitingFirst, "queued job 12877621891: stale for pool elastic", 1, 1},
		}, []string{"held", "stale", "released", "stale"}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			outcomes, perPool := runApprovalSteps(t, c.steps)
			if !slices.Equal(outcomes, c.outcomes) {
				t.Fatalf("delivery outcomes %v, want %v", outcomes, c.outcomes)
			}
			if want := []string{"JobsHeldForApproval", "JobsReleasedByApproval"}; !slices.Equal(perPool, want) {
				t.Fatalf("approval metrics %v, want %v", perPool, want)
			}
		})
	}
}

// approvalStep is one delivery and what must hold after it: the response's
// reason, the pool's active reservations, the nudges sent so far.
type approvalStep struct {
	delivery string
	body     []byte
	reason   string
	active   int
	nudges   int
}

// runApprovalSteps delivers steps to a fresh handler and returns the
// Deliveries outcomes and the per-pool approval metrics it wrote, in order.
func runApprovalSteps(t *testing.T, steps []approvalStep) (outcomes, perPool []string) {
	t.Helper()
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
	return outcomes, perPool
}
