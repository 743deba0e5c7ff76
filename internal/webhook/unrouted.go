package webhook

import (
	"context"

	"github.com/runnerscaler/runnerscaler/internal/reservation"
)

// UnroutedRecorder keeps the jobs that asked for a self-hosted runner but matched
// no pool, so that `runnerscaler status` can say why they wait
// (reservation.Store). It is optional: with a Recorder that lacks it, such jobs
// only show in the log.
type UnroutedRecorder interface {
	RecordUnrouted(ctx context.Context, u reservation.Unrouted) error
}
