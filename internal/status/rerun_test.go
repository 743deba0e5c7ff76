package status

import (
	"strings"
	"testing"
	"time"
)

// The re-run row says only what happened: a re-run asked from a later attempt,
// or known from an earlier call whose answer was lost, says so; a run someone
// else re-ran is not shown as re-run.
func TestRerunCellSaysWhatHappened(t *testing.T) {
	t.Parallel()
	failed := time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)
	for _, tc := range []struct {
		name      string
		r         Rerun
		want, not string
	}{
		{"re-run from a later attempt", Rerun{Outcome: "rerun", Cause: "OOMKilled", Failed: failed, Decided: failed.Add(time.Minute),
			Reason: "re-run as job 9 of attempt 2, the run's latest after this deployment's re-runs of its other jobs"}, "re-run as job 9 of attempt 2", ""},
		{"an earlier call's answer lost", Rerun{Outcome: "rerun", Cause: "OOMKilled", Failed: failed, Decided: failed.Add(time.Minute),
			Reason: "re-run already: the run is at attempt 2, after this deployment's call for this job from attempt 1 (its answer was lost)"},
			"its answer was lost", ""},
		{"re-run by someone else", Rerun{Outcome: "not-rerun", Cause: "OOMKilled", Failed: failed, Decided: failed.Add(time.Minute),
			Reason: "someone else re-ran the workflow run: its attempt 2 was not asked by this deployment"}, "not re-run: someone else re-ran", "re-run 1m"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			got := rerunCell(&tc.r)
			if !strings.Contains(got, tc.want) || (tc.not != "" && strings.Contains(got, tc.not)) {
				t.Fatalf("rerunCell = %q, want %q in it and not %q", got, tc.want, tc.not)
			}
		})
	}
}
