// Package reservation keeps one capacity reservation per workflow job per pool in
// DynamoDB (PK=POOL#<pool>, SK=JOB#<jobId>).
//
// A job's state only moves forward — queued < in_progress < completed — through a
// single conditional UpdateItem, so redelivered and reordered deliveries are
// harmless: a `completed` that arrives first creates a completed item and the late
// `queued` changes nothing; a redelivery of the same state changes nothing. This is
// stricter than ARC v0.22, which removed the oldest reservation on any `completed`
// and double-counted a redelivered `queued`.
//
// A reservation is active while its job is queued or in progress and its expiration
// time is in the future. Expiry is a backstop for lost `completed` deliveries: an
// `in_progress` restarts the clock, and the sweeper extends reservations of jobs that
// still wait because their pool is at maxReplicas (Extend).
package reservation

import (
	"context"
	"errors"
	"fmt"
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
)

// ParseState maps a workflow_job action to a State; ok is false for other actions
// (waiting, for example, reserves nothing).
func ParseState(action string) (s State, ok bool) {
	switch action {
	case "queued":
		return Queued, true
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
	}
	return "state(" + strconv.Itoa(int(s)) + ")"
}

// DefaultRetention is how long an item stays after it stops mattering (completion
// or expiration) before DynamoDB's TTL may delete it; while it exists, late or
// redelivered deliveries of its job change nothing.
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

	EffectiveMillis  int64 `dynamodbav:"effectiveTime"`
	ExpirationMillis int64 `dynamodbav:"expirationTime"`
}

// Outcome says what Record did.
type Outcome int

const (
	// Applied means the delivery moved the job's state forward (or created it).
	Applied Outcome = iota + 1
	// Stale means the job was already in this or a later state: nothing changed.
	Stale
)

func (o Outcome) String() string {
	if o == Applied {
		return "applied"
	}
	return "stale"
}

// API is the part of the DynamoDB client the store uses.
type API interface {
	UpdateItem(ctx context.Context, in *dynamodb.UpdateItemInput, opts ...func(*dynamodb.Options)) (*dynamodb.UpdateItemOutput, error)
	Query(ctx context.Context, in *dynamodb.QueryInput, opts ...func(*dynamodb.Options)) (*dynamodb.QueryOutput, error)
}

// Store reads and writes reservations in one table.
type Store struct {
	db        API
	table     string
	clock     clock.PassiveClock
	retention time.Duration
}

// New returns a store over tableName. The clock decides effective and expiration times.
func New(db API, tableName string, clk clock.PassiveClock) *Store {
	return &Store{db: db, table: tableName, clock: clk, retention: DefaultRetention}
}

// PoolKey is the partition key of everything the product stores about a pool.
func PoolKey(pool string) string { return "POOL#" + pool }

func jobKey(jobID int64) string { return "JOB#" + strconv.FormatInt(jobID, 10) }

// Record applies d if it moves the job's state forward. The effective time is set
// when the item is created (the first delivery seen) and never changed; the
// expiration time is restarted by every applied delivery. Errors are DynamoDB
// failures after the SDK's retries; the caller should report them so GitHub can
// redeliver.
func (s *Store) Record(ctx context.Context, d Delivery) (Outcome, error) {
	now := s.clock.Now()
	expiration := now.Add(d.Duration)
	ttlBase := expiration
	if d.State == Completed {
		ttlBase = now
	}
	_, err := s.db.UpdateItem(ctx, &dynamodb.UpdateItemInput{
		TableName: aws.String(s.table),
		Key:       key(PoolKey(d.Pool), jobKey(d.JobID)),
		UpdateExpression: aws.String("SET #state = :state, #amount = :amount, #exp = :exp, #ttl = :ttl, " +
			"#eff = if_not_exists(#eff, :now), #pool = :pool, #job = :job, #run = :run, #repo = :repo, #delivery = :delivery"),
		ConditionExpression: aws.String("attribute_not_exists(#state) OR #state < :state"),
		ExpressionAttributeNames: map[string]string{
			"#state": "state", "#amount": "amount", "#exp": "expirationTime", "#ttl": table.TTLAttribute,
			"#eff": "effectiveTime", "#pool": "pool", "#job": "jobId", "#run": "runId", "#repo": "repository",
			"#delivery": "deliveryId",
		},
		ExpressionAttributeValues: map[string]types.AttributeValue{
			":state":    num(int64(d.State)),
			":amount":   num(int64(d.Amount)),
			":exp":      num(expiration.UnixMilli()),
			":ttl":      num(ttlBase.Add(s.retention).Unix()),
			":now":      num(now.UnixMilli()),
			":pool":     &types.AttributeValueMemberS{Value: d.Pool},
			":job":      num(d.JobID),
			":run":      num(d.RunID),
			":repo":     &types.AttributeValueMemberS{Value: d.Repository},
			":delivery": &types.AttributeValueMemberS{Value: d.DeliveryID},
		},
	})
	var ccf *types.ConditionalCheckFailedException
	switch {
	case errors.As(err, &ccf):
		return Stale, nil
	case err != nil:
		return 0, fmt.Errorf("recording %s of job %d in pool %s: %w", d.State, d.JobID, d.Pool, err)
	}
	return Applied, nil
}

// Active returns the pool's reservations that hold capacity now: state queued or
// in_progress, expiration time strictly after now.
func (s *Store) Active(ctx context.Context, pool string) ([]Reservation, error) {
	now := s.clock.Now()
	in := &dynamodb.QueryInput{
		TableName:              aws.String(s.table),
		KeyConditionExpression: aws.String("#pk = :pk AND begins_with(#sk, :job)"),
		FilterExpression:       aws.String("#state < :completed AND #exp > :now"),
		ExpressionAttributeNames: map[string]string{
			"#pk": table.PartitionKey, "#sk": table.SortKey, "#state": "state", "#exp": "expirationTime",
		},
		ExpressionAttributeValues: map[string]types.AttributeValue{
			":pk":        &types.AttributeValueMemberS{Value: PoolKey(pool)},
			":job":       &types.AttributeValueMemberS{Value: "JOB#"},
			":completed": num(int64(Completed)),
			":now":       num(now.UnixMilli()),
		},
		ConsistentRead: aws.Bool(true),
	}
	var out []Reservation
	pages := dynamodb.NewQueryPaginator(s.db, in)
	for pages.HasMorePages() {
		page, err := pages.NextPage(ctx)
		if err != nil {
			return nil, fmt.Errorf("querying reservations of pool %s: %w", pool, err)
		}
		var rs []Reservation
		if err := attributevalue.UnmarshalListOfMaps(page.Items, &rs); err != nil {
			return nil, fmt.Errorf("decoding reservations of pool %s: %w", pool, err)
		}
		for i := range rs {
			rs[i].EffectiveTime = time.UnixMilli(rs[i].EffectiveMillis).UTC()
			rs[i].ExpirationTime = time.UnixMilli(rs[i].ExpirationMillis).UTC()
		}
		out = append(out, rs...)
	}
	return out, nil
}

// Extend moves the expiration time of a still-queued job to until (when that is
// later), so that a job waiting because its pool is at maxReplicas keeps its
// reservation. It does nothing for jobs that moved on or were already extended
// further. It reports whether it changed the item.
func (s *Store) Extend(ctx context.Context, pool string, jobID int64, until time.Time) (bool, error) {
	_, err := s.db.UpdateItem(ctx, &dynamodb.UpdateItemInput{
		TableName:           aws.String(s.table),
		Key:                 key(PoolKey(pool), jobKey(jobID)),
		UpdateExpression:    aws.String("SET #exp = :until, #ttl = :ttl ADD #ext :one"),
		ConditionExpression: aws.String("#state = :queued AND #exp < :until"),
		ExpressionAttributeNames: map[string]string{
			"#exp": "expirationTime", "#ttl": table.TTLAttribute, "#state": "state", "#ext": "extensions",
		},
		ExpressionAttributeValues: map[string]types.AttributeValue{
			":until":  num(until.UnixMilli()),
			":ttl":    num(until.Add(s.retention).Unix()),
			":queued": num(int64(Queued)),
			":one":    num(1),
		},
	})
	var ccf *types.ConditionalCheckFailedException
	switch {
	case errors.As(err, &ccf):
		return false, nil
	case err != nil:
		return false, fmt.Errorf("extending reservation of job %d in pool %s: %w", jobID, pool, err)
	}
	return true, nil
}

func key(pk, sk string) map[string]types.AttributeValue {
	return map[string]types.AttributeValue{
		table.PartitionKey: &types.AttributeValueMemberS{Value: pk},
		table.SortKey:      &types.AttributeValueMemberS{Value: sk},
	}
}

func num(v int64) *types.AttributeValueMemberN {
	return &types.AttributeValueMemberN{Value: strconv.FormatInt(v, 10)}
}
