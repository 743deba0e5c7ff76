package table

import (
	"strconv"
	"time"
)

// The key schema: every item's partition key (PK) and sort key (SK) is made here.
//
//	PK                SK                   item (package that keeps it)
//	POOL#<pool>       JOB#<jobId>          a job's reservation (reservation)
//	POOL#<pool>       STATUS               the pool's status (poolstate)
//	POOL#<pool>       LEASE                the pool's lease (lease)
//	POOL#<pool>       WAIT#<minute>        queue waits of the pool's jobs started that minute (queuewait)
//	RUNNER#<runner>   JOB#<jobId>          a job a runner took (reservation)
//	UNROUTED          JOB#<jobId>          a job no pool matched (reservation)
//	TABLE             INDEX#active         the active index's marker (reservation)
//	TABLE             WEBHOOK#deliveries   the last look at the webhook's delivery log (deliverylog)
//	DRAIN             DRAIN                the teardown's drain mark (drain)
//	TABLE             DRAIN                the drain mark where older versions kept it (drain reads it)
//
// The drain mark has a partition of its own so that an IAM policy can keep a
// function away from it with dynamodb:LeadingKeys.

// PoolPK is the partition of everything stored about a pool; the active index
// partitions by the same value (ActiveKey).
func PoolPK(pool string) string { return "POOL#" + pool }

// RunnerPK is the partition of the jobs a runner took.
func RunnerPK(runner string) string { return "RUNNER#" + runner }

// JobSKPrefix begins the sort key of every job item (JobSK).
const JobSKPrefix = "JOB#"

// JobSK is the sort key of a job's item, in a pool's, a runner's or the
// unrouted partition.
func JobSK(jobID int64) string { return JobSKPrefix + strconv.FormatInt(jobID, 10) }

// WaitSKPrefix begins the sort key of every queue-wait item (WaitSK).
const WaitSKPrefix = "WAIT#"

// WaitSK is the sort key of the queue-wait item of the minute holding t, in a
// pool's partition. The minute is written in UTC with a fixed width, so the
// sort keys of the minutes sort as the minutes do.
func WaitSK(t time.Time) string {
	return WaitSKPrefix + t.UTC().Truncate(time.Minute).Format("2006-01-02T15:04Z")
}

// Partitions that do not belong to a pool or a runner, and the sort keys of the
// items in them and in a pool's partition.
const (
	// UnroutedPK holds the jobs that asked for a self-hosted runner but matched
	// no pool.
	UnroutedPK = "UNROUTED"
	// DeploymentPK holds the items about the whole deployment.
	DeploymentPK = "TABLE"
	// DrainPK holds the drain mark alone.
	DrainPK = "DRAIN"

	// StatusSK is the pool's status item, in its partition.
	StatusSK = "STATUS"
	// LeaseSK is the pool's lease item, in its partition.
	LeaseSK = "LEASE"
	// IndexMarkerSK is the active index's marker, in DeploymentPK.
	IndexMarkerSK = "INDEX#" + ActiveIndex
	// DeliveryLogSK is the last look at the webhook's delivery log, in DeploymentPK.
	DeliveryLogSK = "WEBHOOK#deliveries"
	// DrainSK is the drain mark, in DrainPK.
	DrainSK = "DRAIN"
)

// LegacyDrainPK and LegacyDrainSK are where versions before DrainPK kept the drain
// mark; a deployment upgraded during a teardown has it there.
const (
	LegacyDrainPK = DeploymentPK
	LegacyDrainSK = "DRAIN"
)
