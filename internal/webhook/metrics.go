package webhook

import (
	"context"
	"net/http"

	"github.com/runnerscaler/runnerscaler/internal/emf"
	"github.com/runnerscaler/runnerscaler/internal/reservation"
)

// Delivery outcomes, the Outcome dimension of the Deliveries metric, besides
// reservation.Outcome's applied, stale, held and released.
const (
	outcomeNoPool       = "no-pool"      // a workflow_job no pool matches
	outcomeIgnored      = "ignored"      // ping, other events, actions that reserve nothing
	outcomeUnauthorized = "unauthorized" // 401: missing or wrong signature
	outcomeRejected     = "rejected"     // another 4xx: too large, not JSON, no id or labels
	outcomeUnavailable  = "unavailable"  // 503: a read or write failed; GitHub can redeliver
)

// WithMetrics sets where the per-delivery metric record goes (default: none).
func WithMetrics(w *emf.Writer) Option { return func(h *Handler) { h.metrics = w } }

// tally is what a delivery's Deliveries record says: its outcome, as the step
// that recorded it set it, and whether a nudge failed.
type tally struct {
	outcome     string
	nudgeFailed bool
}

// of is t as the response finally answered: a 401, another 4xx or a 5xx
// names its outcome whatever was recorded before it; an answer that recorded
// nothing is ignored.
func (t tally) of(resp Response) tally {
	switch {
	case resp.Status == http.StatusUnauthorized:
		return tally{outcome: outcomeUnauthorized}
	case resp.Status >= 500:
		return tally{outcome: outcomeUnavailable}
	case resp.Status >= 400:
		return tally{outcome: outcomeRejected}
	case t.outcome == "":
		return tally{outcome: outcomeIgnored}
	}
	return t
}

// count writes the delivery's metric record: Deliveries (1) and NudgeFailures
// (0 or 1), under its Outcome.
func (h *Handler) count(ctx context.Context, resp Response, t tally) {
	t = t.of(resp)
	failed := 0.0
	if t.nudgeFailed {
		failed = 1
	}
	err := h.metrics.Write(emf.Record{Time: h.clock.Now(), Dimensions: map[string]string{"Outcome": t.outcome},
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
