package webhook

import (
	"context"
	"log/slog"
	"slices"
	"strings"

	"github.com/runnerscaler/runnerscaler/internal/reservation"
)

// UnroutedRecorder keeps the jobs that asked for a self-hosted runner but matched
// no pool, so that `runnerscaler status` can say why they wait
// (reservation.Store). It is optional: with a Recorder that lacks it, such jobs
// only show in the log.
type UnroutedRecorder interface {
	RecordUnrouted(ctx context.Context, u reservation.Unrouted) error
}

// keepUnrouted records a job no pool matched, if it asked for a self-hosted
// runner: jobs for GitHub-hosted runners (most of an organization's, usually)
// are none of this deployment's business and cost no write. A failure only
// shows in the log line: the delivery is still acknowledged, as it reserves
// nothing.
func (h *Handler) keepUnrouted(ctx context.Context, j job, state reservation.State, delivery, why string) []slog.Attr {
	rec, ok := h.store.(UnroutedRecorder)
	if !ok || !slices.ContainsFunc(j.route.Labels, func(l string) bool { return strings.EqualFold(l, "self-hosted") }) {
		return nil
	}
	err := rec.RecordUnrouted(ctx, reservation.Unrouted{JobID: j.id, Repository: j.route.Repository, Labels: j.route.Labels,
		Reason: why, DeliveryID: delivery, State: state, Created: j.created})
	if err != nil {
		return []slog.Attr{slog.String("unrouted", "not kept: "+err.Error())}
	}
	return nil
}
