package reservation

import (
	"context"
	"fmt"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/feature/dynamodb/attributevalue"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/runnerscaler/runnerscaler/internal/table"
)

// pointer is a pool's pointer to a job of another pool (move.go).
type pointer struct {
	Home  string `dynamodbav:"home"`
	JobID int64  `dynamodbav:"jobId"`
}

// movedIn reads the pool's pointers and, with strong consistency, the home item
// of each: counted are the items whose countedIn names pool, finished are the
// jobs whose home item is completed. A pointer whose home is gone, or counts the
// job elsewhere, is in neither.
func (s *Store) movedIn(ctx context.Context, pool string) (counted []Reservation, finished []int64, err error) {
	items, err := s.query(ctx, &dynamodb.QueryInput{
		TableName:                aws.String(s.table),
		KeyConditionExpression:   aws.String("#pk = :pk AND begins_with(#sk, :moved)"),
		ExpressionAttributeNames: map[string]string{"#pk": table.PartitionKey, "#sk": table.SortKey},
		ExpressionAttributeValues: map[string]types.AttributeValue{
			":pk": table.Str(table.PoolPK(pool)), ":moved": table.Str(table.MovedSKPrefix),
		},
		ConsistentRead: aws.Bool(true),
	}, pool)
	if err != nil {
		return nil, nil, err
	}
	var ps []pointer
	if err := attributevalue.UnmarshalListOfMaps(items, &ps); err != nil {
		return nil, nil, fmt.Errorf("decoding the moved jobs of pool %s: %w", pool, err)
	}
	for _, p := range ps {
		r, ok, err := s.get(ctx, p.Home, p.JobID)
		switch {
		case err != nil:
			return nil, nil, err
		case !ok:
		case r.State >= Completed:
			finished = append(finished, p.JobID)
		case s.counter(r) == pool:
			counted = append(counted, r)
		}
	}
	return counted, finished, nil
}

// withMovedIn adds to rs, pool's own active reservations, the jobs of other
// pools that pool counts and that hold capacity at now, and deletes the pointers
// of pool to jobs that are completed: no move follows a job's completion that
// could make such a pointer count again.
func (s *Store) withMovedIn(ctx context.Context, pool string, rs []Reservation, now time.Time) ([]Reservation, error) {
	counted, finished, err := s.movedIn(ctx, pool)
	if err != nil {
		return nil, err
	}
	for _, r := range counted {
		if s.activeIn(r, pool, now) {
			rs = append(rs, r)
		}
	}
	for _, job := range finished {
		_, err := s.db.DeleteItem(ctx, &dynamodb.DeleteItemInput{
			TableName: aws.String(s.table), Key: table.Key(table.PoolPK(pool), table.MovedSK(job)),
		})
		if err != nil {
			return nil, fmt.Errorf("deleting pool %s's pointer to finished job %d: %w", pool, job, err)
		}
	}
	return rs, nil
}

// MovedIn returns the unfinished jobs of other pools that pool counts (move.go),
// whether or not their reservation expired, with strongly consistent reads. It
// only reads: it is for looking at a pool (the status command).
func (s *Store) MovedIn(ctx context.Context, pool string) ([]Reservation, error) {
	counted, _, err := s.movedIn(ctx, pool)
	return counted, err
}
