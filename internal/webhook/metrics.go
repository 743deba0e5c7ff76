package webhook

import (
	"context"
	"log/slog"
	"net/http"
	"strings"

	"github.com/runnerscaler/runnerscaler/internal/emf"
	"github.com/runnerscaler/runnerscaler/internal/reservation"
)

// Delivery outcomes: the Outcome dimension of the Deliveries metric.
const (
	OutcomeApplied      = "applied"      // the delivery moved its job forward
	OutcomeStale        = "stale"        // duplicate or overtaken: nothing changed
	OutcomeHeld         = "held"         // a `waiting` held its job for an approval: it holds no runner
	OutcomeReleased     = "released"     // the approval's `queued` of a held job: it counts again
	OutcomeNoPool       = "no-pool"      // a workflow_job no pool matches
	OutcomeIgnored      = "ignored"      // ping, other events, actions that reserve nothing
	OutcomeUnauthorized = "unauthorized" // 401: missing or wrong signature
	OutcomeRejected     = "rejected"     // another 4xx: too large, not JSON, no id or labels
	OutcomeUnavailable  = "unavailable"  // 503: the write failed; GitHub can redeliver
)

// WithMetrics sets where the per-delivery metric record goes (default: none).
func WithMetrics(w *emf.Writer) Option { return func(h *Handler) { h.metrics = w } }

// outcomeOf classifies a delivery for the metrics from its response and the
// attributes of its log line (outcome and nudge, as workflowJob sets them).
func outcomeOf(resp Response, attrs []slog.Attr) (outcome string, nudgeFailed bool) {
	for _, a := range attrs {
		switch a.Key {
		case "outcome":
			outcome = a.Value.String()
		case "nudge":
			nudgeFailed = strings.HasPrefix(a.Value.String(), "failed")
		}
	}
	switch {
	case resp.Status == http.StatusUnauthorized:
		return OutcomeUnauthorized, false
	case resp.Status >= 500:
		return OutcomeUnavailable, false
	case resp.Status >= 400:
		return OutcomeRejected, false
	case outcome != "":
		return outcome, nudgeFailed
	}
	return OutcomeIgnored, false
}

// count writes the delivery's metric record: Deliveries (1) and NudgeFailures
// (0 or 1), under its Outcome.
func (h *Handler) count(ctx context.Context, resp Response, attrs []slog.Attr) {
	outcome, nudgeFailed := outcomeOf(resp, attrs)
	failed := 0.0
	if nudgeFailed {
		failed = 1
	}
	err := h.metrics.Write(emf.Record{Time: h.clock.Now(), Dimensions: map[string]string{"Outcome": outcome},
		Metrics: []emf.Metric{{Name: "Deliveries", Unit: emf.Count, Value: 1}, {Name: "NudgeFailures", Unit: emf.Count, Value: failed}}})
	if err != nil {
		h.log.WarnContext(ctx, "cannot write the delivery's metrics", "error", err)
	}
}

// countApproval writes, for a delivery that held a job for its environment's
// approval or released one, the pool's JobsHeldForApproval or
// JobsReleasedByApproval (1); other outcomes write nothing.
func (h *Handler) countApproval(ctx context.Context, pool string, outcome reservation.Outcome) {
	var name string
	switch outcome {
	case reservation.Held:
		name = "JobsHeldForApproval"
	case reservation.Released:
		name = "JobsReleasedByApproval"
	default:
		return
	}
	err := h.metrics.Write(emf.Record{Time: h.clock.Now(), Dimensions: map[string]string{"Pool": pool},
		Metrics: []emf.Metric{{Name: name, Unit: emf.Count, Value: 1}}})
	if err != nil {
		h.log.WarnContext(ctx, "cannot write the approval's metric", "error", err)
	}
}
