// Package sweepevent is the sweeper function's invocation contract: the event it
// accepts and the report it answers with. The webhook's nudges, the operator's
// drain and the sweeper itself share these definitions, and the package imports
// nothing, so that a caller links neither the sweeper nor its clients.
package sweepevent

// Event is what the sweeper accepts: an EventBridge scheduled event (all pools),
// a nudge {"pool":"<name>","jobs":[<id>...],"finished":["<runner pod>"...]} (one
// pool), or a drain command {"drain":"start"|"cancel"}.
type Event struct {
	// Pool names the one pool a nudge sweeps.
	Pool string `json:"pool"`
	// Jobs are the jobs whose `queued` deliveries caused the nudge: the sweeper
	// reads them with strong consistency if its (eventually consistent) index read
	// lacks them, so the nudge never sweeps without the job it is for.
	Jobs []int64 `json:"jobs,omitempty"`
	// Finished names the runners (GitHub runner names, which are the runner pods'
	// names) on which a job has just completed: while jobs wait for the pool, the
	// sweeper gives their containers a few seconds to exit, then sweeps, so the
	// slot is refilled at once rather than at the next scheduled sweep. It is a
	// hint about when to look, never a reason to stop a runner: what the sweeper
	// does with a runner still follows the pod's status and GitHub's answers.
	Finished []string `json:"finished,omitempty"`
	// Source and DetailType are EventBridge's: "aws.events" and "Scheduled Event"
	// for a scheduled sweep.
	Source     string `json:"source,omitempty"`
	DetailType string `json:"detail-type,omitempty"`
	// Drain is a teardown command: DrainStart or DrainCancel.
	Drain string `json:"drain,omitempty"`
}

// Drain commands: DrainStart marks the deployment as being torn down and sweeps
// every pool, configured or removed, down to zero runners through the graceful
// stop; its report says what is left (pools that failed or were skipped are
// listed, not an error). Repeat it until nothing is. DrainCancel ends the
// teardown: the pools scale as configured again. The deployed sweeper serves
// them only when invoked through DrainAlias.
const (
	DrainStart  = "start"
	DrainCancel = "cancel"
)

// The sweeper function's Lambda aliases, its entries besides the schedule's
// unqualified invocation. The webhook nudges through NudgeAlias, the only one
// its role may invoke; the operator drains through DrainAlias, the only entry
// through which the sweeper serves a drain command.
const (
	NudgeAlias = "nudge"
	DrainAlias = "drain"
)

// Report summarises one invocation.
type Report struct {
	Swept   []string `json:"swept"`
	Skipped []string `json:"skipped,omitempty"`
	Failed  []string `json:"failed,omitempty"`
	// Draining: a teardown is in progress; Remaining counts, by pool, the runner
	// objects still in the cluster (answers to drain events only).
	Draining  bool           `json:"draining,omitempty"`
	Remaining map[string]int `json:"remaining,omitempty"`
}
