package webhook

import (
	"context"
	"log/slog"
	"time"

	"github.com/runnerscaler/runnerscaler/internal/emf"
	"github.com/runnerscaler/runnerscaler/internal/queuewait"
)

// QueueWaitMetric is the metric of each job's wait for a runner (package
// queuewait), in seconds, under its pool's Pool dimension and, for an alarm
// on a percentile of every pool's waits, without dimensions.
const QueueWaitMetric = "QueueWaitSeconds"

// QueueWaits keeps each pool's recent queue waits (queuewait.Store), which
// `runnerscaler status` reads. kept is false when the wait was not kept for a
// reason other than an error (the store's bound).
type QueueWaits interface {
	Add(ctx context.Context, pool string, wait time.Duration) (kept bool, err error)
}

// WithQueueWaits sets where each job's queue wait is kept (default: nowhere;
// the metric is written either way).
func WithQueueWaits(w QueueWaits) Option { return func(h *Handler) { h.waits = w } }

// queueWait measures the wait of a job whose `in_progress` was just applied to
// pool p — once per job, since a redelivered or overtaken `in_progress` is not
// applied — writes its metric and keeps it. A job whose delivery lacks either
// time, or that deploys to an environment (its created_at includes the wait for
// the environment's protection rules), has no wait. Neither a failed metric
// line nor a failed write fails the delivery: its reservation is already
// durable, and a redelivery would not be applied again. The log line's
// attributes say the wait and what became of it.
func (h *Handler) queueWait(ctx context.Context, pool string, j job) []slog.Attr {
	wait, ok := queuewait.Of(j.created, j.started)
	if !ok {
		return nil
	}
	attrs := []slog.Attr{slog.Float64("queueWaitSeconds", wait.Seconds())}
	err := h.metrics.Write(emf.Record{Time: h.clock.Now(), Dimensions: map[string]string{"Pool": pool}, Rollup: true,
		Metrics: []emf.Metric{{Name: QueueWaitMetric, Unit: emf.Seconds, Value: wait.Seconds()}}})
	if err != nil {
		h.log.WarnContext(ctx, "cannot write the queue wait's metric", "error", err)
	}
	if h.waits == nil {
		return attrs
	}
	switch kept, err := h.waits.Add(ctx, pool, wait); {
	case err != nil:
		attrs = append(attrs, slog.String("queueWaitKept", "failed: "+err.Error()))
	case !kept:
		attrs = append(attrs, slog.String("queueWaitKept", "no: the pool's minute holds its most waits"))
	}
	return attrs
}
