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
	"errors"
	"fmt"
	"strconv"
	"sync/atomic"
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
	// RunnerID and RunnerName name the runner that took the job, as `in_progress`
	// and `completed` deliveries carry them (zero and empty before a runner took it).
	RunnerID   int64
	RunnerName string
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
	GetItem(ctx context.Context, in *dynamodb.GetItemInput, opts ...func(*dynamodb.Options)) (*dynamodb.GetItemOutput, error)
	PutItem(ctx context.Context, in *dynamodb.PutItemInput, opts ...func(*dynamodb.Options)) (*dynamodb.PutItemOutput, error)
}

// DefaultMigrationWindow is how long after the index marker's time Active keeps
// reading whole partitions (see Active). It covers a deployment: CloudFormation
// updates the sweeper before the webhook, whose old code writes items without the
// index attribute until its own update is done.
const DefaultMigrationWindow = 15 * time.Minute

// Store reads and writes reservations in one table.
type Store struct {
	db        API
	table     string
	clock     clock.PassiveClock
	retention time.Duration
	window    time.Duration
	// indexed is set once the index marker is older than the window; the marker
	// never moves, so from then on Active reads only the index.
	indexed atomic.Bool
}

// Option tunes a Store.
type Option func(*Store)

// WithMigrationWindow sets the migration window (default DefaultMigrationWindow).
func WithMigrationWindow(d time.Duration) Option { return func(s *Store) { s.window = d } }

// New returns a store over tableName. The clock decides effective and expiration
// times, and when the migration window ends.
func New(db API, tableName string, clk clock.PassiveClock, opts ...Option) *Store {
	s := &Store{db: db, table: tableName, clock: clk, retention: DefaultRetention, window: DefaultMigrationWindow}
	for _, o := range opts {
		o(s)
	}
	return s
}

// PoolKey is the partition key of everything the product stores about a pool.
func PoolKey(pool string) string { return "POOL#" + pool }

func jobKey(jobID int64) string { return "JOB#" + strconv.FormatInt(jobID, 10) }

// Record applies d if it moves the job's state forward. The effective time is set
// when the item is created (the first delivery seen) and never changed; the
// expiration time is restarted by every applied delivery. The same write puts the
// item in the active index (queued, in_progress) or takes it out (completed), so
// the index follows the state under the same condition, and so do the runner
// that took the job (when d names one) and the delivery's place in the job's
// trail (Trail): a stale delivery changes none of them. Errors are DynamoDB
// failures after the SDK's retries; the caller should report them so GitHub can
// redeliver.
func (s *Store) Record(ctx context.Context, d Delivery) (Outcome, error) {
	now := s.clock.Now()
	expiration := now.Add(d.Duration)
	ttlBase := expiration
	update := "SET #state = :state, #amount = :amount, #exp = :exp, #ttl = :ttl, " +
		"#eff = if_not_exists(#eff, :now), #pool = :pool, #job = :job, #run = :run, #repo = :repo, #delivery = :delivery"
	values := map[string]types.AttributeValue{
		":state":    num(int64(d.State)),
		":amount":   num(int64(d.Amount)),
		":exp":      num(expiration.UnixMilli()),
		":now":      num(now.UnixMilli()),
		":pool":     &types.AttributeValueMemberS{Value: d.Pool},
		":job":      num(d.JobID),
		":run":      num(d.RunID),
		":repo":     &types.AttributeValueMemberS{Value: d.Repository},
		":delivery": &types.AttributeValueMemberS{Value: d.DeliveryID},
	}
	names := map[string]string{
		"#state": "state", "#amount": "amount", "#exp": "expirationTime", "#ttl": table.TTLAttribute,
		"#eff": "effectiveTime", "#pool": "pool", "#job": "jobId", "#run": "runId", "#repo": "repository",
		"#delivery": "deliveryId", "#active": table.ActiveKey,
	}
	update += trailUpdate(d, now, names, values)
	if d.State == Completed {
		ttlBase = now
		update += " REMOVE #active"
	} else {
		update += ", #active = :active"
		values[":active"] = &types.AttributeValueMemberS{Value: PoolKey(d.Pool)}
	}
	values[":ttl"] = num(ttlBase.Add(s.retention).Unix())
	_, err := s.db.UpdateItem(ctx, &dynamodb.UpdateItemInput{
		TableName:                 aws.String(s.table),
		Key:                       key(PoolKey(d.Pool), jobKey(d.JobID)),
		UpdateExpression:          aws.String(update),
		ConditionExpression:       aws.String("attribute_not_exists(#state) OR #state < :state"),
		ExpressionAttributeNames:  names,
		ExpressionAttributeValues: values,
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
//
// It queries the active index, whose reads are eventually consistent: a
// reservation written a moment before may be missing, and a scheduled sweep then
// counts it one sweep later. The jobs in nudged must not be missed — the jobs whose
// deliveries asked for this sweep: each one the index lacks is read from the table
// with a strongly consistent GetItem (and returned if it holds capacity).
//
// Migration: items written before the index existed lack its attribute. Until the
// index marker (table.IndexMarkerSK) is older than the migration window, Active
// reads the whole partition with strong consistency instead — as it did before the
// index, so it misses nothing — and gives the attribute to the unfinished items
// that lack it. The first call on a table without a marker writes it with the time
// of that call.
func (s *Store) Active(ctx context.Context, pool string, nudged ...int64) ([]Reservation, error) {
	now := s.clock.Now()
	indexed, err := s.indexReady(ctx, now)
	if err != nil {
		return nil, err
	}
	if !indexed {
		return s.activeBackfilling(ctx, pool, now)
	}
	items, err := s.query(ctx, indexQuery(s.table, pool, now), pool)
	if err != nil {
		return nil, err
	}
	rs, err := decode(items, pool)
	if err != nil {
		return nil, err
	}
	seen := make(map[int64]bool, len(rs))
	for _, r := range rs {
		seen[r.JobID] = true
	}
	for _, job := range nudged {
		if seen[job] {
			continue
		}
		seen[job] = true
		r, ok, err := s.get(ctx, pool, job)
		if err != nil {
			return nil, err
		}
		if ok && r.State < Completed && r.ExpirationMillis > now.UnixMilli() {
			rs = append(rs, r)
		}
	}
	return rs, nil
}

// indexQuery reads the pool's entries in the active index; the filter drops jobs
// whose reservation expired (lost `completed`) and completed items that kept the
// attribute because an older webhook recorded their completion.
func indexQuery(tableName, pool string, now time.Time) *dynamodb.QueryInput {
	return &dynamodb.QueryInput{
		TableName:              aws.String(tableName),
		IndexName:              aws.String(table.ActiveIndex),
		KeyConditionExpression: aws.String("#active = :pk"),
		FilterExpression:       aws.String("#state < :completed AND #exp > :now"),
		ExpressionAttributeNames: map[string]string{
			"#active": table.ActiveKey, "#state": "state", "#exp": "expirationTime",
		},
		ExpressionAttributeValues: map[string]types.AttributeValue{
			":pk":        &types.AttributeValueMemberS{Value: PoolKey(pool)},
			":completed": num(int64(Completed)),
			":now":       num(now.UnixMilli()),
		},
	}
}

// partitionQuery reads every job item of the pool, completed ones included, with
// strong consistency: what Active did before the index, and still does during the
// migration window.
func partitionQuery(tableName, pool string, now time.Time) *dynamodb.QueryInput {
	return &dynamodb.QueryInput{
		TableName:              aws.String(tableName),
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
}

// activeBackfilling is Active during the migration window: the whole partition,
// strongly consistent, and the index attribute for the unfinished items without it.
func (s *Store) activeBackfilling(ctx context.Context, pool string, now time.Time) ([]Reservation, error) {
	items, err := s.query(ctx, partitionQuery(s.table, pool, now), pool)
	if err != nil {
		return nil, err
	}
	for _, it := range items {
		if _, ok := it[table.ActiveKey]; !ok {
			if err := s.backfill(ctx, pool, it[table.SortKey]); err != nil {
				return nil, err
			}
		}
	}
	return decode(items, pool)
}

// backfill gives an unfinished item written before the index its index attribute.
// The condition keeps a `completed` recorded meanwhile out of the index.
func (s *Store) backfill(ctx context.Context, pool string, sk types.AttributeValue) error {
	_, err := s.db.UpdateItem(ctx, &dynamodb.UpdateItemInput{
		TableName: aws.String(s.table),
		Key: map[string]types.AttributeValue{
			table.PartitionKey: &types.AttributeValueMemberS{Value: PoolKey(pool)}, table.SortKey: sk,
		},
		UpdateExpression:         aws.String("SET #active = :pk"),
		ConditionExpression:      aws.String("#state < :completed AND attribute_not_exists(#active)"),
		ExpressionAttributeNames: map[string]string{"#active": table.ActiveKey, "#state": "state"},
		ExpressionAttributeValues: map[string]types.AttributeValue{
			":pk":        &types.AttributeValueMemberS{Value: PoolKey(pool)},
			":completed": num(int64(Completed)),
		},
	})
	var ccf *types.ConditionalCheckFailedException
	if err != nil && !errors.As(err, &ccf) {
		return fmt.Errorf("adding a reservation of pool %s to the active index: %w", pool, err)
	}
	return nil
}

// indexReady reports whether the migration window is over: the index marker is
// at least the window old. Without a marker it writes one (now): the table may
// hold items from before the index.
func (s *Store) indexReady(ctx context.Context, now time.Time) (bool, error) {
	if s.indexed.Load() {
		return true, nil
	}
	since, err := s.indexedSince(ctx, now)
	if err != nil {
		return false, err
	}
	if now.Before(since.Add(s.window)) {
		return false, nil
	}
	s.indexed.Store(true)
	return true, nil
}

func (s *Store) indexedSince(ctx context.Context, now time.Time) (time.Time, error) {
	markerKey := key(table.IndexMarkerPK, table.IndexMarkerSK)
	for range 2 {
		out, err := s.db.GetItem(ctx, &dynamodb.GetItemInput{TableName: aws.String(s.table), Key: markerKey, ConsistentRead: aws.Bool(true)})
		if err != nil {
			return time.Time{}, fmt.Errorf("reading the active index marker: %w", err)
		}
		if v, ok := out.Item[table.IndexedSince].(*types.AttributeValueMemberN); ok {
			ms, err := strconv.ParseInt(v.Value, 10, 64)
			if err != nil {
				return time.Time{}, fmt.Errorf("active index marker %q: %w", v.Value, err)
			}
			return time.UnixMilli(ms), nil
		}
		item := key(table.IndexMarkerPK, table.IndexMarkerSK)
		item[table.IndexedSince] = num(now.UnixMilli())
		_, err = s.db.PutItem(ctx, &dynamodb.PutItemInput{
			TableName: aws.String(s.table), Item: item,
			ConditionExpression:      aws.String("attribute_not_exists(#pk)"),
			ExpressionAttributeNames: map[string]string{"#pk": table.PartitionKey},
		})
		var ccf *types.ConditionalCheckFailedException
		switch {
		case err == nil:
			return now, nil
		case !errors.As(err, &ccf):
			return time.Time{}, fmt.Errorf("writing the active index marker: %w", err)
		}
		// Another sweeper wrote it first: read theirs.
	}
	return time.Time{}, errors.New("the active index marker is written but cannot be read")
}

// get reads one job item with strong consistency; ok is false if there is none.
func (s *Store) get(ctx context.Context, pool string, job int64) (Reservation, bool, error) {
	out, err := s.db.GetItem(ctx, &dynamodb.GetItemInput{
		TableName: aws.String(s.table), Key: key(PoolKey(pool), jobKey(job)), ConsistentRead: aws.Bool(true),
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
