package reservation

import (
	"context"
	"fmt"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/runnerscaler/runnerscaler/internal/table"
)

// Seen is the delivery that moved a job into a state, and when it was recorded.
type Seen struct {
	State      State  `dynamodbav:"-"`
	DeliveryID string `dynamodbav:"id"`
	AtMillis   int64  `dynamodbav:"at"`
}

// At is when the delivery was recorded.
func (s Seen) At() time.Time { return time.UnixMilli(s.AtMillis).UTC() }

// seenAttribute is the item attribute holding the Seen of state.
func seenAttribute(state State) string {
	switch state {
	case Queued:
		return "seenQueued"
	case InProgress:
		return "seenInProgress"
	}
	return "seenCompleted"
}

// Trail lists the deliveries that moved the job forward, in state order: the
// first `queued`, for a job held for an approval its `waiting` and the `queued`
// that released it, then `in_progress` and `completed`. A state the job skipped
// (its delivery lost, or overtaken by a later one) is missing.
func (r Reservation) Trail() []Seen {
	var out []Seen
	if r.SeenQueued != nil {
		seen := *r.SeenQueued
		seen.State = Queued
		out = append(out, seen)
	}
	out = append(out, r.approvalTrail()...)
	for _, s := range []struct {
		state State
		seen  *Seen
	}{{InProgress, r.SeenInProgress}, {Completed, r.SeenCompleted}} {
		if s.seen != nil {
			seen := *s.seen
			seen.State = s.state
			out = append(out, seen)
		}
	}
	return out
}

// Job reads one job's item with strong consistency, whatever its state; ok is
// false when the pool has no item for the job (never seen, or removed by TTL a
// day after it stopped mattering).
func (s *Store) Job(ctx context.Context, pool string, job int64) (r Reservation, ok bool, err error) {
	return s.get(ctx, pool, job)
}

// Unfinished returns the pool's jobs still queued or in progress, whether or not
// their reservation expired (a job whose `completed` was lost stays until TTL
// removes its item). It reads the active index, so a delivery recorded a moment
// before may be missing. It is for looking at a pool (the status command); the
// sweeper counts capacity with Active.
func (s *Store) Unfinished(ctx context.Context, pool string) ([]Reservation, error) {
	items, err := s.query(ctx, &dynamodb.QueryInput{
		TableName:                aws.String(s.table),
		IndexName:                aws.String(table.ActiveIndex),
		KeyConditionExpression:   aws.String("#active = :pk"),
		FilterExpression:         aws.String("#state < :completed"),
		ExpressionAttributeNames: map[string]string{"#active": table.ActiveKey, "#state": "state"},
		ExpressionAttributeValues: map[string]types.AttributeValue{
			":pk": table.Str(table.PoolPK(pool)), ":completed": table.Num(int64(Completed)),
		},
	}, pool)
	if err != nil {
		return nil, fmt.Errorf("reading unfinished jobs: %w", err)
	}
	return decode(items, pool)
}
