package wiring

import (
	"github.com/runnerscaler/runnerscaler/internal/groupaccess"
	"github.com/runnerscaler/runnerscaler/internal/nudge"
	"github.com/runnerscaler/runnerscaler/internal/rerun"
	"github.com/runnerscaler/runnerscaler/internal/reservation"
	"github.com/runnerscaler/runnerscaler/internal/webhook"
)

// The handler finds the optional UnroutedRecorder by a type assertion on its
// Recorder: these lines make a signature drift in either side a build error
// rather than a capability silently lost.
var (
	_ webhook.Recorder         = (*reservation.Store)(nil)
	_ webhook.UnroutedRecorder = (*reservation.Store)(nil)
	_ webhook.Nudger           = (*nudge.Lambda)(nil)
	_ webhook.Failures         = (*rerun.Store)(nil)
	_ webhook.GroupAccess      = (*groupaccess.Store)(nil)
)
