package table

import (
	"strconv"
	"strings"
	"time"
)

// The key schema: every item's partition key (PK) and sort key (SK) is made here.
//
//	PK                SK                   item (package that keeps it)
//	POOL#<pool>       JOB#<jobId>          a job's reservation (reservation)
//	POOL#<pool>       RERUN#<jobId>        a failed job's re-run candidate and decision (rerun)
//	POOL#<pool>       WAIT#<minute>        queue waits of the pool's jobs started that minute (queuewait)
//	POOL#<pool>       MOVED#<jobId>        a job routed to another pool that may be counted in this one (reservation)
//	RUNNER#<runner>   JOB#<jobId>          a job a runner took (reservation)
//	UNROUTED          JOB#<jobId>          a job no pool matched (reservation)
//	SWEEP#<pool>      STATUS               the pool's status (poolstate)
//	SWEEP#<pool>      LEASE                the pool's lease (lease)
//	ROSTER#<pool>     <runner>             a live runner this deployment created: its identity (roster)
//	ROSTER#<pool>#retired <runner>         a retired runner, kept for late deliveries (roster)
//	DIED#<runner>     DIED#<key>           a death of the runner the sweeper saw (rerun.Death.Key)
//	RUN#<repo>#<runId> RERUNS              a workflow run's re-run budget and calls, whatever pools its jobs ran in (rerun)
//	GROUPS            <scope>#<group>      who may use a pool's runner group (groupaccess)
//	TABLE             WEBHOOK#deliveries   the last look at the webhook's delivery log (redeliver)
//	TABLE             RELEASE#runner       the actions/runner releases the daily check saw (runnerversion)
//	DRAIN             DRAIN                the teardown's drain mark (teardown)
//
// The partitions are split by who writes them, so that an IAM policy can keep
// the webhook to its own with dynamodb:LeadingKeys: it writes POOL#, RUNNER#
// and UNROUTED, and only reads ROSTER# and GROUPS; everything the sweeper
// decides by (its lease and status, re-run budgets and calls, the runners it
// created, the deaths it saw, the drain mark) is in partitions only the
// sweeper writes. No partition key of the sweeper's begins with one of the
// webhook's prefixes (RUN# is not RUNNER#).

// PoolPK is the partition of what the webhook records about a pool's jobs:
// their reservations, re-run candidates and queue waits, and the pointers to
// jobs of other pools it counts; the active index partitions reservations by
// the same value (ActiveKey).
func PoolPK(pool string) string { return "POOL#" + pool }

// RunnerPK is the partition of the jobs a runner took.
func RunnerPK(runner string) string { return "RUNNER#" + runner }

// SweepPK is the partition of what only the sweeper writes about a pool: its
// lease and its status.
func SweepPK(pool string) string { return "SWEEP#" + pool }

// RosterPK is the partition of the live runners the sweeper created for a
// pool; a runner's item has the runner's (its pod's, its GitHub runner's) name
// as its sort key.
func RosterPK(pool string) string { return "ROSTER#" + pool }

// RetiredRosterPK is the partition of the pool's retired runners, apart from
// the live ones so that a sweep reads only those (a pool name has no '#').
func RetiredRosterPK(pool string) string { return RosterPK(pool) + "#retired" }

// DeathsPK is the partition of the deaths of a runner the sweeper saw.
func DeathsPK(runner string) string { return "DIED#" + runner }

// JobSKPrefix begins the sort key of every job item (JobSK).
const JobSKPrefix = "JOB#"

// JobSK is the sort key of a job's item, in a pool's, a runner's or the
// unrouted partition.
func JobSK(jobID int64) string { return JobSKPrefix + strconv.FormatInt(jobID, 10) }

// MovedSKPrefix begins the sort key of every pointer to a job counted in a
// pool it was not routed to (MovedSK).
const MovedSKPrefix = "MOVED#"

// MovedSK is the sort key of the pointer to a job of another pool, in the
// partition of the pool that may count it.
func MovedSK(jobID int64) string { return MovedSKPrefix + strconv.FormatInt(jobID, 10) }

// RerunSK is the sort key of a failed job's re-run decision, in its runner's pool's partition.
func RerunSK(jobID int64) string { return "RERUN#" + strconv.FormatInt(jobID, 10) }

// RunPK is the partition of what only the sweeper writes about a workflow run
// of repo ("owner/name"): its re-run budget and calls (RerunsSK), which the
// sweepers of every pool its jobs ran in share. The repository's name is
// lower-cased, as GitHub's names are case-insensitive.
func RunPK(repo string, runID int64) string {
	return "RUN#" + strings.ToLower(repo) + "#" + strconv.FormatInt(runID, 10)
}

// DeathSKPrefix begins the sort key of a runner's deaths (DeathSK).
const DeathSKPrefix = "DIED#"

// DeathSK is the sort key of a runner's death, in DeathsPK.
func DeathSK(key string) string { return DeathSKPrefix + key }

// PendingRerunsKey is the active index's partition of a pool's undecided
// re-run candidates (ActiveKey; reservations use PoolPK there).
func PendingRerunsKey(pool string) string { return "RERUNS#" + pool }

// GroupAccessSK is the sort key of the access item of runner group group of
// scope (scope.Scope.String(), e.g. organization/acme), in GroupAccessPK; the
// group's name is lower-cased, as GitHub's names are case-insensitive.
func GroupAccessSK(scope, group string) string { return scope + "#" + strings.ToLower(group) }

// WaitSKPrefix begins the sort key of every queue-wait item (WaitSK).
const WaitSKPrefix = "WAIT#"

// WaitSK is the sort key of the queue-wait item of the minute holding t, in a
// pool's partition. The minute is written in UTC with a fixed width, so the
// sort keys of the minutes sort as the minutes do.
func WaitSK(t time.Time) string {
	return WaitSKPrefix + t.UTC().Truncate(time.Minute).Format("2006-01-02T15:04Z")
}

// Partitions that do not belong to a pool or a runner, and the sort keys of the
// items in them and in a pool's sweeper partition (SweepPK).
const (
	// UnroutedPK holds the jobs that asked for a self-hosted runner but matched
	// no pool.
	UnroutedPK = "UNROUTED"
	// GroupAccessPK holds who may use each pool's runner group: the sweeper
	// writes it, the webhook reads it (GroupAccessSK).
	GroupAccessPK = "GROUPS"
	// DeploymentPK holds the items about the whole deployment.
	DeploymentPK = "TABLE"
	// DrainPK holds the drain mark alone.
	DrainPK = "DRAIN"

	// StatusSK is the pool's status item, in SweepPK.
	StatusSK = "STATUS"
	// LeaseSK is the pool's lease item, in SweepPK.
	LeaseSK = "LEASE"
	// DeliveryLogSK is the last look at the webhook's delivery log, in DeploymentPK.
	DeliveryLogSK = "WEBHOOK#deliveries"
	// RunnerReleasesSK is what the daily check saw of actions/runner's releases, in DeploymentPK.
	RunnerReleasesSK = "RELEASE#runner"
	// DrainSK is the drain mark, in DrainPK.
	DrainSK = "DRAIN"
	// RerunsSK is a workflow run's re-run budget and calls, in RunPK.
	RerunsSK = "RERUNS"
)
