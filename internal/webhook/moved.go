package webhook

import (
	"context"
	"log/slog"

	"github.com/runnerscaler/runnerscaler/internal/emf"
)

// followRunner moves the count of a job routed to p that a runner of
// runnerPool took (in_progress, or a completed that came first) to runnerPool
// (reservation.Store.FollowRunner): GitHub gives a job to any runner whose
// labels cover it, so a runner created for one pool's job can take another
// pool's. The pool that counted the job stops counting it, and runnerPool
// counts it while it runs. The move is repeated whole by a redelivery (a job
// already counted in runnerPool is not moved), so a failure fails the delivery
// and GitHub redelivers. Which deliveries follow their runner, and whom a
// move nudges, is the plan's to say (follows, followNudge).
func (h *Handler) followRunner(ctx context.Context, dp deliveryPlan, t *tally) ([]slog.Attr, error) {
	p, runnerPool := dp.pool, dp.runnerPool
	from, moved, err := h.store.FollowRunner(ctx, p.Name, dp.job.id, runnerPool.Name)
	if err != nil || !moved {
		return nil, err
	}
	attrs := []slog.Attr{slog.String("countMovedFrom", from), slog.String("countedIn", runnerPool.Name)}
	if runnerPool.Name != p.Name {
		h.countOnAnotherPoolsRunner(ctx, runnerPool.Name)
	}
	if dp.followNudge != nil {
		attrs = append(attrs, h.nudge(ctx, *dp.followNudge, t))
	}
	return attrs, nil
}

// countOnAnotherPoolsRunner writes JobsOnAnotherPoolsRunner (1) under the pool
// whose runner took a job routed to another pool.
func (h *Handler) countOnAnotherPoolsRunner(ctx context.Context, runnerPool string) {
	err := h.metrics.Write(emf.Record{Time: h.clock.Now(), Dimensions: map[string]string{"Pool": runnerPool},
		Metrics: []emf.Metric{{Name: "JobsOnAnotherPoolsRunner", Unit: emf.Count, Value: 1}}})
	if err != nil {
		h.log.WarnContext(ctx, "cannot write the moved job's metric", "error", err)
	}
}
