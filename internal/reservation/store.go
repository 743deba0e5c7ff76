// Package reservation keeps one capacity reservation per workflow job per pool in
// DynamoDB (PK=POOL#<pool>, SK=JOB#<jobId>).
//
// A job's life is one pure function, transition (lifecycle.go): the job's item
// as read and one delivery in, the item after it and what the delivery did
// out. The store reads the item, decides, and writes the result with one
// conditional UpdateItem whose condition is the item as read (write.go).
// A job's state only moves forward — queued < in_progress < completed — so
// redelivered and reordered deliveries are harmless: a `completed` that arrives first creates a completed item and the late
// `queued` changes nothing; a redelivery of the same state changes nothing. This is
// stricter than ARC v0.22, which removed the oldest reservation on any `completed`
// and double-counted a redelivered `queued`.
//
// A job that deploys to an environment with required reviewers gets `queued`,
// `waiting`, then `queued` again once approved; no payload field orders the two
// `queued`, their delivery ids (kept by redeliveries) tell them apart. The rule
// (approval.go) is: a job is held — it holds no runner — while it is queued, a
// `waiting` was recorded, and fewer than two distinct `queued` deliveries were.
// Its inputs only grow, so every order of the five deliveries, redeliveries
// included, ends as GitHub's order does, and the job counts once. A held item
// lives as long as GitHub lets a job wait for an approval, and the `queued` that
// releases it restarts its reservation as a job queued then.
//
// A reservation is active while its job is queued or in progress (and not held)
// and its expiration time is in the future. Expiry is a backstop for lost
// `completed` deliveries: an `in_progress` restarts the clock, and the sweeper
// extends reservations of jobs that still wait because their pool is at
// maxReplicas (Extend).
//
// A job's item outlives its creation by at least the retention: every write
// sets its TTL to a retention after a time no earlier than the delivery, and a
// delivery comes after the job's creation. A job younger than the retention
// therefore still has its item, if any delivery of it was recorded, and a late
// `queued` finds the later state there and changes nothing. Past that age the
// item may be gone, and a `queued` — redelivered (GitHub redelivers for days)
// or replayed — would bring back a reservation for a job long finished; Record
// refuses it (TooOld) when the delivery says when the job was created. GitHub
// cancels a job that waits a day for a self-hosted runner, so a job queued
// soon after its creation is not waiting any more at that age; a caller whose
// job may have been held before it was queued (an environment's protection
// rules) leaves Delivery.Created zero.
//
// A sweep reads what is unfinished, not the day of completed jobs kept for
// deduplication: the same conditional write that moves a job forward sets
// table.ActiveKey while it is queued or in progress and removes it with
// `completed`, so the sparse index table.ActiveIndex holds the pool's unfinished
// jobs only, and Active queries it. What stays in the index beyond the active
// reservations are jobs whose `completed` was lost (expired, filtered out, gone
// with the item's TTL a day later): as many as lost deliveries, not as many as jobs.
package reservation

import (
	"context"
	"fmt"
	"slices"
	"strconv"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/feature/dynamodb/attributevalue"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"k8s.io/utils/clock"

	"github.com/runnerscaler/runnerscaler/internal/table"
)

// State is a job's life-cycle state; larger values are later.
type State int

// Job states, in the only order they may be recorded.
const (
	Queued     State = 1
	InProgress State = 2
	Completed  State = 3
	// Waiting is the state of a `waiting` delivery only, never a stored one: a
	// job held for its environment's approval stays Queued, with its hold
	// recorded (see approval.go). It is numbered after Completed so that the
	// stored values keep their meaning; in a job's life it comes between Queued
	// and InProgress.
	Waiting State = 4
)

// ParseState maps a workflow_job action to a State; ok is false for other actions.
func ParseState(action string) (s State, ok bool) {
	switch action {
	case "queued":
		return Queued, true
	case "waiting":
		return Waiting, true
	case "in_progress":
		return InProgress, true
	case "completed":
		return Completed, true
	}
	return 0, false
}

func (s State) String() string {
	switch s {
	case Queued:
		return "queued"
	case InProgress:
		return "in_progress"
	case Completed:
		return "completed"
	case Waiting:
		return "waiting"
	}
	return "state(" + strconv.Itoa(int(s)) + ")"
}

// DefaultRetention is how long an item stays after it stops mattering (completion
// or expiration) before DynamoDB's TTL may delete it; while it exists, late or
// redelivered deliveries of its job change nothing. It is also the age past
// which a job's `queued` is refused (TooOld).
const DefaultRetention = 24 * time.Hour

// Delivery is one workflow_job delivery routed to a pool.
type Delivery struct {
	Pool       string
	JobID      int64
	RunID      int64
	Repository string
	DeliveryID string
	State      State
	// Amount is the capacity the job reserves (the pool trigger's amount).
	Amount int
	// Duration is how long the reservation lives without news (the trigger's duration).
	Duration time.Duration
	// RunnerID and RunnerName name the runner that took the job, as `in_progress`
	// and `completed` deliveries carry them (zero and empty before a runner took it).
	RunnerID   int64
	RunnerName string
	// Created is when GitHub created the job (workflow_job.created_at); zero
	// when the delivery does not tell, and then its age is not checked.
	Created time.Time
	// AwaitsApproval marks a `queued` whose job already waits for its
	// environment's approval (its workflow_job.status is "waiting"): it holds
	// the job as a `waiting` does (approval.go).
	AwaitsApproval bool
	// Labels, Organization and Enterprise are the job's `runs-on` labels and
	// scope, kept on the item for a spill to check that another pool takes the
	// job (move.go); none is written when Labels is empty.
	Labels       []string
	Organization string
	Enterprise   string
}

// Reservation is a stored job item.
type Reservation struct {
	Pool           string    `dynamodbav:"pool"`
	JobID          int64     `dynamodbav:"jobId"`
	RunID          int64     `dynamodbav:"runId"`
	Repository     string    `dynamodbav:"repository"`
	DeliveryID     string    `dynamodbav:"deliveryId"`
	State          State     `dynamodbav:"state"`
	Amount         int       `dynamodbav:"amount"`
	EffectiveTime  time.Time `dynamodbav:"-"`
	ExpirationTime time.Time `dynamodbav:"-"`
	// Extensions counts how often the sweeper extended the reservation of a waiting job.
	Extensions int `dynamodbav:"extensions"`
	// RunnerID and RunnerName: the runner that took the job (see Delivery), as the
	// latest applied delivery that named one said.
	RunnerID   int64  `dynamodbav:"runnerId,omitempty"`
	RunnerName string `dynamodbav:"runnerName,omitempty"`
	// Seen: the delivery that moved the job into each state, by state (see Trail).
	SeenQueued     *Seen `dynamodbav:"seenQueued,omitempty"`
	SeenInProgress *Seen `dynamodbav:"seenInProgress,omitempty"`
	SeenCompleted  *Seen `dynamodbav:"seenCompleted,omitempty"`
	// SeenWaiting is the `waiting` delivery that held the job for an approval,
	// and SeenApproved the distinct `queued` that released it (see Held).
	SeenWaiting  *Seen `dynamodbav:"seenWaiting,omitempty"`
	SeenApproved *Seen `dynamodbav:"seenApproved,omitempty"`
	// QueuedDeliveries are the ids of the job's distinct `queued` deliveries
	// (a redelivery keeps its id), written once a second one reaches the item;
	// until then the first one's id is SeenQueued's.
	QueuedDeliveries []string `dynamodbav:"queuedDeliveries,stringset,omitempty"`
	// CountedIn is the pool that counts the job when it is not its home pool
	// (Pool), and MovedBy why (move.go); "" while its home counts it.
	CountedIn string     `dynamodbav:"countedIn,omitempty"`
	MovedBy   MoveReason `dynamodbav:"movedBy,omitempty"`
	// TTL is when DynamoDB may delete the item, in epoch seconds.
	TTL int64 `dynamodbav:"expiresAt,omitempty"`
	// Labels, Organization and Enterprise: as the delivery said (Delivery);
	// items written without them have no Labels, and are never spilled.
	Labels       []string `dynamodbav:"labels,omitempty"`
	Organization string   `dynamodbav:"organization,omitempty"`
	Enterprise   string   `dynamodbav:"enterprise,omitempty"`

	EffectiveMillis  int64 `dynamodbav:"effectiveTime"`
	ExpirationMillis int64 `dynamodbav:"expirationTime"`
	// HeldCheckedMillis is when the sweeper last found GitHub still holding
	// the held job for its approval (Checked; 0: never asked).
	HeldCheckedMillis int64 `dynamodbav:"heldCheckedAt,omitempty"`
	// Version counts the writes to the item (write.go).
	Version int64 `dynamodbav:"version"`
}

// Outcome says what Record did.
type Outcome int

const (
	// Applied means the delivery moved the job's state forward (or created it).
	Applied Outcome = iota + 1
	// Stale means the job was already in this or a later state: nothing changed.
	Stale
	// TooOld means a `queued` delivery of a job created more than the retention
	// ago that releases no held job: nothing was written (see the package comment).
	TooOld
	// Held means a `waiting` delivery held the job for its environment's
	// approval: it counts for no runner until its approval's `queued` (Held).
	Held
	// Released means the delivery was the approval's `queued` of a held job: it
	// counts again, as a job queued now.
	Released
)

// String is "applied", "held", "released", or "stale" for both outcomes that
// changed nothing.
func (o Outcome) String() string {
	switch o {
	case Applied:
		return "applied"
	case Held:
		return "held"
	case Released:
		return "released"
	}
	return "stale"
}

// API is the part of the DynamoDB client the store uses.
type API = table.API

// Store reads and writes reservations in one table.
type Store struct {
	db        API
	table     string
	clock     clock.PassiveClock
	retention time.Duration
	// known reports whether a pool is configured (WithPools); nil: every pool is.
	known func(pool string) bool
}

// Option tunes a Store.
type Option func(*Store)

// New returns a store over tableName. The clock decides effective and expiration
// times.
func New(db API, tableName string, clk clock.PassiveClock, opts ...Option) *Store {
	s := &Store{db: db, table: tableName, clock: clk, retention: DefaultRetention}
	for _, o := range opts {
		o(s)
	}
	return s
}

// Active returns the reservations that hold capacity in the pool now: state
// queued or in_progress, expiration time strictly after now, counted in the pool
// (move.go) — the pool's own jobs that no other pool counts, and the jobs of
// other pools whose pointers are in its partition and whose items, read with
// strong consistency, name it. It deletes the pool's pointers to completed jobs.
//
// It queries the active index, whose reads are eventually consistent: a
// reservation written a moment before may be missing, and a scheduled sweep then
// counts it one sweep later. The jobs in nudged must not be missed — the jobs whose
// deliveries asked for this sweep: each one the index lacks is read from the table
// with a strongly consistent GetItem (and returned if it holds capacity). So is
// each job the index shows counted in another pool: it may have moved home.
func (s *Store) Active(ctx context.Context, pool string, nudged ...int64) ([]Reservation, error) {
	now := s.clock.Now()
	items, err := s.query(ctx, indexQuery(s.table, pool, now), pool)
	if err != nil {
		return nil, err
	}
	rs, err := decode(items, pool)
	if err != nil {
		return nil, err
	}
	// A job the index shows counted in another pool may have moved home since:
	// read like a nudged one, it is not counted nowhere while the index lags.
	seen := make(map[int64]bool, len(rs))
	reread := slices.Clone(nudged)
	for _, r := range rs {
		if s.counter(r) != pool {
			reread = append(reread, r.JobID)
			continue
		}
		seen[r.JobID] = true
	}
	for _, job := range reread {
		if seen[job] {
			continue
		}
		seen[job] = true
		r, ok, err := s.get(ctx, pool, job)
		if err != nil {
			return nil, err
		}
		if ok && s.activeIn(r, pool, now) {
			rs = append(rs, r)
		}
	}
	return s.withMovedIn(ctx, pool, s.countedHere(rs, pool), now)
}

// activeIn reports whether r holds capacity in pool at now: unfinished, not
// expired, not held for an approval, and counted in pool.
func (s *Store) activeIn(r Reservation, pool string, now time.Time) bool {
	return r.State < Completed && r.ExpirationMillis > now.UnixMilli() && !r.Held() && s.counter(r) == pool
}

// counter is the pool that counts r: its CountsIn, or its home when that
// names a pool the pools file no longer has (WithPools), whose sweeper is gone.
func (s *Store) counter(r Reservation) string {
	if c := r.CountsIn(); s.known == nil || s.known(c) {
		return c
	}
	return r.Pool
}

// countedHere keeps the reservations of rs that pool counts (counter).
func (s *Store) countedHere(rs []Reservation, pool string) []Reservation {
	return slices.DeleteFunc(rs, func(r Reservation) bool { return s.counter(r) != pool })
}

// WithPools tells the store which pools the pools file has: a job whose count
// moved to a pool it no longer has counts in its home pool again. Without it,
// every pool is taken to exist.
func WithPools(known func(pool string) bool) Option { return func(s *Store) { s.known = known } }

// indexQuery reads the pool's entries in the active index, but jobs whose
// reservation expired (lost `completed`) and held ones.
func indexQuery(tableName, pool string, now time.Time) *dynamodb.QueryInput {
	in := &dynamodb.QueryInput{
		TableName:              aws.String(tableName),
		IndexName:              aws.String(table.ActiveIndex),
		KeyConditionExpression: aws.String("#active = :pk"),
		ExpressionAttributeNames: map[string]string{
			"#active": table.ActiveKey,
		},
		ExpressionAttributeValues: map[string]types.AttributeValue{
			":pk": table.Str(table.PoolPK(pool)),
		},
	}
	activeFilter(in, now)
	return in
}

// activeFilter sets in's filter to the reservations that hold capacity at now:
// not expired, not held for an approval (the held mark write.go derives from
// Held). The index holds unfinished jobs only.
func activeFilter(in *dynamodb.QueryInput, now time.Time) {
	in.FilterExpression = aws.String("#exp > :now AND attribute_not_exists(#held)")
	in.ExpressionAttributeNames["#exp"], in.ExpressionAttributeNames["#held"] = "expirationTime", heldAttr
	in.ExpressionAttributeValues[":now"] = table.Millis(now)
}

// get reads one job item with strong consistency; ok is false if there is none.
func (s *Store) get(ctx context.Context, pool string, job int64) (Reservation, bool, error) {
	out, err := s.db.GetItem(ctx, &dynamodb.GetItemInput{
		TableName: aws.String(s.table), Key: table.Key(table.PoolPK(pool), table.JobSK(job)), ConsistentRead: aws.Bool(true),
	})
	if err != nil {
		return Reservation{}, false, fmt.Errorf("reading reservation of job %d in pool %s: %w", job, pool, err)
	}
	if out.Item == nil {
		return Reservation{}, false, nil
	}
	rs, err := decode([]map[string]types.AttributeValue{out.Item}, pool)
	if err != nil {
		return Reservation{}, false, err
	}
	return rs[0], true, nil
}

func (s *Store) query(ctx context.Context, in *dynamodb.QueryInput, pool string) ([]map[string]types.AttributeValue, error) {
	var items []map[string]types.AttributeValue
	pages := dynamodb.NewQueryPaginator(s.db, in)
	for pages.HasMorePages() {
		page, err := pages.NextPage(ctx)
		if err != nil {
			return nil, fmt.Errorf("querying reservations of pool %s: %w", pool, err)
		}
		items = append(items, page.Items...)
	}
	return items, nil
}

func decode(items []map[string]types.AttributeValue, pool string) ([]Reservation, error) {
	var rs []Reservation
	if err := attributevalue.UnmarshalListOfMaps(items, &rs); err != nil {
		return nil, fmt.Errorf("decoding reservations of pool %s: %w", pool, err)
	}
	for i := range rs {
		rs[i].EffectiveTime = time.UnixMilli(rs[i].EffectiveMillis).UTC()
		rs[i].ExpirationTime = time.UnixMilli(rs[i].ExpirationMillis).UTC()
	}
	return rs, nil
}

// Extend moves the expiration time of a still-queued job to until (when that is
// later), so that a job waiting because its pool is at maxReplicas keeps its
// reservation. It does nothing for jobs that moved on or were already extended
// further. It reports whether it changed the item.
func (s *Store) Extend(ctx context.Context, pool string, jobID int64, until time.Time) (bool, error) {
	_, err := s.db.UpdateItem(ctx, &dynamodb.UpdateItemInput{
		TableName:           aws.String(s.table),
		Key:                 table.Key(table.PoolPK(pool), table.JobSK(jobID)),
		UpdateExpression:    aws.String("SET #exp = :until, #ttl = :ttl ADD #ext :one, #version :one"),
		ConditionExpression: aws.String("#state = :queued AND #exp < :until"),
		ExpressionAttributeNames: map[string]string{
			"#exp": "expirationTime", "#ttl": table.TTLAttribute, "#state": "state", "#ext": "extensions", "#version": versionAttr,
		},
		ExpressionAttributeValues: map[string]types.AttributeValue{
			":until":  table.Millis(until),
			":ttl":    table.Num(until.Add(s.retention).Unix()),
			":queued": table.Num(int64(Queued)),
			":one":    table.Num(1),
		},
	})
	switch {
	case table.ConditionFailed(err):
		return false, nil
	case err != nil:
		return false, fmt.Errorf("extending reservation of job %d in pool %s: %w", jobID, pool, err)
	}
	return true, nil
}
