package sweeper

import (
	"testing"

	"github.com/runnerscaler/runnerscaler/internal/reconcile"
)

// TestFollowUpReadsTheReconcilersPhases: the phase names leftWaiting reads in
// the pool status are the ones the reconciler records there.
func TestFollowUpReadsTheReconcilersPhases(t *testing.T) {
	t.Parallel()
	for ours, theirs := range map[string]reconcile.Phase{phasePending: reconcile.Pending, phaseRunning: reconcile.Running,
		phaseStopping: reconcile.Stopping, phaseTerminating: reconcile.Terminating} {
		if ours != string(theirs) {
			t.Errorf("the follow-up reads phase %q, the reconciler records %q", ours, theirs)
		}
	}
}
