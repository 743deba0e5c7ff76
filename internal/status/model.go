package status

import "time"

// Input is one pool as gathered: its spec, its unfinished jobs, what the last
// sweep recorded and its runners as the cluster shows them now.
type Input struct {
	Pool        string
	MinReplicas int
	MaxReplicas int
	// Jobs are the pool's queued and in-progress jobs, expired reservations included.
	Jobs []Job
	// Sweep is the last sweep's record; nil when the pool was never swept.
	Sweep *Sweep
	// Runners are the pool's runners (one StatefulSet each), Busy not yet set.
	Runners []Runner
	// MovedIn are the unfinished jobs routed to other pools that the pool
	// counts (their Pool is their home).
	MovedIn []Job
	// Waits are the queue waits of the pool's jobs that started within
	// WaitWindow (package queuewait), in any order.
	Waits      []time.Duration
	WaitWindow time.Duration
}

// Job is one workflow job the product recorded.
type Job struct {
	ID         int64  `json:"id"`
	RunID      int64  `json:"runId,omitempty"`
	Pool       string `json:"pool"`
	Repository string `json:"repository"`
	// State is queued, in_progress or completed.
	State string `json:"state"`
	// Amount is the capacity the job reserves.
	Amount int `json:"amount"`
	// FirstSeen is when its first delivery was recorded (the effective time).
	FirstSeen time.Time `json:"firstSeen"`
	// Expires is when its reservation stops counting unless news arrive.
	Expires time.Time `json:"expires"`
	// AgeSeconds is how long ago it was first seen (set by Build and Trace).
	AgeSeconds float64 `json:"ageSeconds"`
	// Waiting says why a queued job has no runner yet (set by Build).
	Waiting string `json:"waiting,omitempty"`
	// HeldSince is when a `waiting` held the job for its environment's
	// approval: it holds no runner until the approval's `queued` (zero: not held).
	HeldSince time.Time `json:"heldForApprovalSince,omitzero"`
	// RunnerID and RunnerName: the runner that took it (from in_progress or completed).
	RunnerID   int64  `json:"runnerId,omitempty"`
	RunnerName string `json:"runnerName,omitempty"`
	// Extensions counts how often the sweeper extended its reservation.
	Extensions int `json:"extensions,omitempty"`
	// CountedIn is the pool that counts the job when it is not Pool, and
	// MovedBy why: MovedByRunner or MovedBySpill ("": Pool counts it).
	CountedIn string `json:"countedIn,omitempty"`
	MovedBy   string `json:"movedBy,omitempty"`
	// Deliveries are those that moved it forward, in state order.
	Deliveries []Delivery `json:"deliveries,omitempty"`
}

// Delivery is the delivery that moved a job into State.
type Delivery struct {
	State string    `json:"state"`
	ID    string    `json:"id"`
	At    time.Time `json:"at"`
}

// Sweep is what the last sweep of a pool recorded (its status item).
type Sweep struct {
	At       time.Time `json:"at"`
	Failed   bool      `json:"failed"`
	Desired  int       `json:"desired"`
	Reason   string    `json:"reason"`
	Extended int       `json:"extended,omitempty"`
	// Stuck: why runners that are not running were held up, by runner.
	Stuck map[string]string `json:"stuck,omitempty"`
	// Deferred: what the sweep did not ask GitHub near the rate limit.
	Deferred string `json:"deferred,omitempty"`
	// Foreign: the objects of the pool's namespace that claim to be its
	// runners' but are tied to none by the roster; the sweep left them alone.
	Foreign []string     `json:"foreign,omitempty"`
	Errors  []SweepError `json:"recentErrors,omitempty"`
}

// SweepError is one recent failed sweep.
type SweepError struct {
	At    time.Time `json:"at"`
	Error string    `json:"error"`
}

// Runner phases as the status shows them.
const (
	PhasePending     = "pending"
	PhaseRunning     = "running"
	PhaseStopping    = "stopping"
	PhaseTerminating = "terminating"
	PhaseCompleted   = "completed"
)

// Runner is one runner: its StatefulSet and pod.
type Runner struct {
	// Name is the runner's name on GitHub and its pod's name.
	Name string `json:"name"`
	// StatefulSet owns the pod.
	StatefulSet string `json:"statefulSet"`
	Phase       string `json:"phase"`
	// GitHubID is the runner's id on GitHub (0: not known yet).
	GitHubID int64 `json:"githubId,omitempty"`
	// Busy: a job in progress names this runner; Job is that job.
	Busy bool  `json:"busy"`
	Job  int64 `json:"job,omitempty"`
	// Created is when the sweeper created it.
	Created time.Time `json:"created"`
	// Reason says why a runner that is not running is held up ("" when nothing is known).
	Reason string `json:"reason,omitempty"`
	// WorkflowPod (container mode) is the runner's workflow pod, its phase and,
	// while it is pending, why: "p-abcde-0-workflow Pending (Unschedulable: …)"
	// ("" when it has none).
	WorkflowPod string `json:"workflowPod,omitempty"`
}

// Pool is one pool's part of a Report.
type Pool struct {
	Name        string `json:"name"`
	MinReplicas int    `json:"minReplicas"`
	MaxReplicas int    `json:"maxReplicas"`
	// Desired is the last sweep's decision (0 when never swept).
	Desired  int `json:"desired"`
	Running  int `json:"running"`
	Pending  int `json:"pending"`
	Stopping int `json:"stopping"`
	// Saturated: the active reservations ask for more than maxReplicas.
	Saturated bool `json:"saturated"`
	// Queued are the jobs waiting for a runner, oldest first, each with why.
	Queued []Job `json:"queued"`
	// WaitingForApproval are the jobs held for their environment's approval,
	// longest held first; they hold no runner and are not in Queued.
	WaitingForApproval []Job `json:"waitingForApproval"`
	InProgress         []Job `json:"inProgress"`
	// Moves are the jobs routed to the pool that another pool counts, and the
	// jobs of other pools it counts.
	Moves []Move `json:"moves,omitempty"`
	// QueueWait is how long the jobs that started lately waited for a runner.
	QueueWait QueueWait `json:"queueWait"`
	// LastSweep is nil when the pool was never swept.
	LastSweep *Sweep   `json:"lastSweep,omitempty"`
	Runners   []Runner `json:"runners"`
	// RunnerVersion is the pool's actions/runner version as GitHub judges it
	// (nil: not gathered).
	RunnerVersion *RunnerVersion `json:"runnerVersion,omitempty"`
}

// QueueWait sums up the waits of a pool's jobs that started within the last
// WindowSeconds, each from the job's creation to its start as GitHub stamps
// them (to the second).
type QueueWait struct {
	WindowSeconds float64 `json:"windowSeconds"`
	// Jobs counts the waits. P50Seconds and P95Seconds are their nearest-rank
	// percentiles: waits that some job had; both 0 when Jobs is 0.
	Jobs       int     `json:"jobs"`
	P50Seconds float64 `json:"p50Seconds"`
	P95Seconds float64 `json:"p95Seconds"`
}

// Report is every pool at one instant.
type Report struct {
	At time.Time `json:"at"`
	// Webhook is what GitHub's delivery log, as the sweeper last read it, says
	// of the deliveries to the webhook (set by NewWebhook).
	Webhook Webhook `json:"webhook"`
	Pools   []Pool  `json:"pools"`
	// Unrouted are recent jobs no pool matched, with why.
	Unrouted []Job `json:"unrouted,omitempty"`
}

// Trace is one job followed from its deliveries to its runner.
type Trace struct {
	Job Job `json:"job"`
	// Active: the reservation holds capacity now (unfinished, not expired).
	Active bool `json:"active"`
	// Runner is the runner that took the job, as the cluster shows it now; nil
	// when none took it or it is gone (RunnerGone).
	Runner     *Runner `json:"runner,omitempty"`
	RunnerGone bool    `json:"runnerGone,omitempty"`
	// Rerun: what became of the job when it failed on one of our runners.
	Rerun *Rerun `json:"rerun,omitempty"`
}

// DeliveryCheck is what a scheduled sweep recorded of GitHub's log of the App's
// webhook deliveries: the workflow_job deliveries within Window before At that
// no attempt got through.
type DeliveryCheck struct {
	At     time.Time
	Window time.Duration
	// ByStatus counts them by their latest attempt's status code (0: no response).
	ByStatus map[int]int
	// Redeliverable says, for each status code of ByStatus, whether the sweeper
	// redelivers deliveries that ended with it (redeliver.Retryable).
	Redeliverable map[int]bool
	// Latest is the one whose latest attempt is the newest; nil when none failed.
	Latest *FailedDelivery
	// Redelivered counts the redeliveries that sweep asked for.
	Redelivered int
}

// FailedDelivery is the latest attempt of a delivery that did not get through.
type FailedDelivery struct {
	At         time.Time `json:"at"`
	StatusCode int       `json:"statusCode"`
	Action     string    `json:"action"`
	GUID       string    `json:"guid"`
}

// What the report says of the webhook's deliveries (Webhook.State).
const (
	// WebhookNotChecked: no scheduled sweep has recorded the delivery log (none
	// ran yet, or the deployment has no GitHub App to read it with).
	WebhookNotChecked = "not-checked"
	// WebhookOK: no workflow_job delivery failed within the window.
	WebhookOK = "ok"
	// WebhookFailing: some did not get through.
	WebhookFailing = "failing"
)

// Webhook is the deployment-level part of a Report: whether GitHub gets its
// deliveries through to the webhook at all. When it does not, no reservation
// exists and the pools cannot show why a job waits.
type Webhook struct {
	State string `json:"state"`
	// Stale: the last check is older than StaleAfter.
	Stale     bool      `json:"stale,omitempty"`
	CheckedAt time.Time `json:"checkedAt,omitzero"`
	// AgeSeconds is how long before the report the check was made.
	AgeSeconds    float64 `json:"ageSeconds,omitempty"`
	WindowSeconds float64 `json:"windowSeconds,omitempty"`
	// Failed counts the deliveries that did not get through; ByStatus by their
	// latest attempt's status code (0: no response).
	Failed      int             `json:"failed"`
	ByStatus    map[int]int     `json:"byStatus,omitempty"`
	Latest      *FailedDelivery `json:"latest,omitempty"`
	Redelivered int             `json:"redelivered,omitempty"`
	// Hints say what the status codes seen usually mean, the latest's first.
	Hints []DeliveryHint `json:"hints,omitempty"`
}

// DeliveryHint explains a class of status codes.
type DeliveryHint struct {
	Statuses []int  `json:"statuses"`
	Hint     string `json:"hint"`
}
