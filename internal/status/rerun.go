package status

import (
	"fmt"
	"time"
)

// Rerun is what became of a job that failed or was cancelled on one of the
// deployment's runners: re-run by this deployment because its runner died
// under it (and how, when the sweeper says), not re-run (and why: someone
// else's re-run of its run is one reason), refused by GitHub, or pending the
// sweeper's decision.
type Rerun struct {
	// Outcome: "rerun", "not-rerun", "refused" or "pending".
	Outcome string    `json:"outcome"`
	Cause   string    `json:"cause,omitempty"`
	Reason  string    `json:"reason,omitempty"`
	Failed  time.Time `json:"failed,omitzero"`
	Decided time.Time `json:"decided,omitzero"`
	Tries   int       `json:"tries,omitempty"`
}

func rerunCell(r *Rerun) string {
	switch r.Outcome {
	case "rerun":
		cell := fmt.Sprintf("re-run %s after it failed: its runner died under it (%s)", short(r.Decided.Sub(r.Failed)), r.Cause)
		if r.Reason != "" {
			cell += "; " + r.Reason
		}
		return cell
	case "not-rerun":
		if r.Cause != "" {
			return fmt.Sprintf("not re-run: %s (its runner died: %s)", r.Reason, r.Cause)
		}
		return "not re-run: " + r.Reason
	case "refused":
		return fmt.Sprintf("GitHub refused the re-run after %d tries: %s (its runner died: %s)", r.Tries, r.Reason, r.Cause)
	}
	if r.Reason != "" {
		return fmt.Sprintf("deciding: GitHub refused it for now (%s), %d tries", r.Reason, r.Tries)
	}
	return "deciding: waiting to see whether its runner died under it"
}
