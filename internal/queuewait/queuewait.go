// Package queuewait measures how long workflow jobs wait for a runner — from
// the job's creation (workflow_job.created_at) to its start (the started_at of
// its `in_progress` delivery) — and keeps the last hour of those waits per pool
// where `runnerscaler status` reads them cheaply.
//
// The waits of a pool are kept in one item per minute (PK=POOL#<pool>,
// SK=WAIT#<minute>, package table), the minute being when the webhook recorded
// the job's start: a list of waits in milliseconds, at most MaxPerMinute of
// them, which DynamoDB's TTL removes two hours after its minute. Adding a wait
// is one conditional UpdateItem of an item under 1 KB (one write unit); reading
// the last hour is one Query of at most 60 such items.
package queuewait

import (
	"context"
	"fmt"
	"strconv"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"k8s.io/utils/clock"

	"github.com/runnerscaler/runnerscaler/internal/table"
)

// Of is the wait of a job created at created and started at started, as
// GitHub's timestamps say; ok is false when either is unknown (zero). GitHub
// writes both to the second and from clocks that may disagree by a little: a
// start before the creation is a wait of zero, not a sample to drop, since
// dropping those would bias the distribution towards longer waits.
func Of(created, started time.Time) (wait time.Duration, ok bool) {
	if created.IsZero() || started.IsZero() {
		return 0, false
	}
	return max(started.Sub(created), 0), true
}

// Window is how far back Recent reads: the current minute and the 59 before it.
const Window = time.Hour

// MaxPerMinute bounds the waits a pool's item keeps per minute, which keeps the
// item under 1 KB (one write unit): a wait under a day is a number of at most 8
// digits, 6 bytes with its list entry. Further waits of that minute are not
// kept (the metric still has them).
const MaxPerMinute = 100

// retention is how long after its minute an item may be deleted.
const retention = 2 * time.Hour

// waitsAttribute holds the minute's waits, in milliseconds.
const waitsAttribute = "waits"

// Store keeps the recent waits of each pool in one table.
type Store struct {
	db    table.Table
	clock clock.PassiveClock
}

// New returns a store over tableName; the clock says which minute a wait
// belongs to and which minutes are recent.
func New(db table.API, tableName string, clk clock.PassiveClock) *Store {
	return &Store{db: table.Table{DB: db, Name: tableName}, clock: clk}
}

// Add keeps wait among the pool's waits of the current minute. kept is false,
// with nothing written, when the minute already holds MaxPerMinute waits. An
// error is a DynamoDB failure after the SDK's retries.
func (s *Store) Add(ctx context.Context, pool string, wait time.Duration) (kept bool, err error) {
	now := s.clock.Now()
	_, err = s.db.UpdateItem(ctx, &dynamodb.UpdateItemInput{
		Key:                 table.Key(table.PoolPK(pool), table.WaitSK(now)),
		UpdateExpression:    aws.String("SET #waits = list_append(if_not_exists(#waits, :none), :wait), #ttl = :ttl"),
		ConditionExpression: aws.String("attribute_not_exists(#waits) OR size(#waits) < :max"),
		ExpressionAttributeNames: map[string]string{
			"#waits": waitsAttribute, "#ttl": table.TTLAttribute,
		},
		ExpressionAttributeValues: map[string]types.AttributeValue{
			":none": &types.AttributeValueMemberL{Value: []types.AttributeValue{}},
			":wait": &types.AttributeValueMemberL{Value: []types.AttributeValue{table.Num(wait.Milliseconds())}},
			":ttl":  table.Num(now.Truncate(time.Minute).Add(retention).Unix()),
			":max":  table.Num(MaxPerMinute),
		},
	})
	switch {
	case table.ConditionFailed(err):
		return false, nil
	case err != nil:
		return false, fmt.Errorf("keeping a queue wait of pool %s: %w", pool, err)
	}
	return true, nil
}

// Recent returns the waits the pool's jobs started with within the Window,
// oldest minute first, in the order they were added within a minute. It reads
// with eventual consistency: a wait added a moment before may be missing.
func (s *Store) Recent(ctx context.Context, pool string) ([]time.Duration, error) {
	now := s.clock.Now()
	pages := dynamodb.NewQueryPaginator(s.db, &dynamodb.QueryInput{
		KeyConditionExpression:   aws.String("#pk = :pk AND #sk BETWEEN :from AND :to"),
		ProjectionExpression:     aws.String("#waits"),
		ExpressionAttributeNames: map[string]string{"#pk": table.PartitionKey, "#sk": table.SortKey, "#waits": waitsAttribute},
		ExpressionAttributeValues: map[string]types.AttributeValue{
			":pk":   table.Str(table.PoolPK(pool)),
			":from": table.Str(table.WaitSK(now.Add(-Window + time.Minute))),
			":to":   table.Str(table.WaitSK(now)),
		},
	})
	var waits []time.Duration
	for pages.HasMorePages() {
		page, err := pages.NextPage(ctx)
		if err != nil {
			return nil, fmt.Errorf("reading queue waits of pool %s: %w", pool, err)
		}
		for _, item := range page.Items {
			waits = append(waits, decode(item)...)
		}
	}
	return waits, nil
}

// decode reads an item's waits, skipping entries that are not whole numbers.
func decode(item map[string]types.AttributeValue) []time.Duration {
	list, ok := item[waitsAttribute].(*types.AttributeValueMemberL)
	if !ok {
		return nil
	}
	out := make([]time.Duration, 0, len(list.Value))
	for _, v := range list.Value {
		n, ok := v.(*types.AttributeValueMemberN)
		if !ok {
			continue
		}
		if ms, err := strconv.ParseInt(n.Value, 10, 64); err == nil {
			out = append(out, time.Duration(ms)*time.Millisecond)
		}
	}
	return out
}
