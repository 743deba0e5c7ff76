package reservation

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"sync/atomic"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/runnerscaler/runnerscaler/internal/table"
)

// migration is the state of the one-off migration to the active index, which the
// rest of this file carries out. Reservations written before the index existed
// lack its attribute, so until the index marker (table.IndexMarkerSK) is a
// migration window old, Active reads whole partitions with strong consistency —
// as it did before the index, so it misses nothing — and gives the attribute to
// the unfinished items that lack it. The first call on a table without a marker
// writes it with the time of that call.
//
// The migration can be deleted once every deployment has run it (its marker is
// older than the window): delete this file and migrate_test.go, the Store's
// migration field with its value in New, and the two lines of Active that call
// migrating.
type migration struct {
	window time.Duration
	// done is set once the index marker is older than the window; the marker
	// never moves, so from then on Active reads only the index.
	done atomic.Bool
}

// DefaultMigrationWindow is how long after the index marker's time Active keeps
// reading whole partitions. It covers a deployment: CloudFormation updates the
// sweeper before the webhook, whose old code writes items without the index
// attribute until its own update is done.
const DefaultMigrationWindow = 15 * time.Minute

// WithMigrationWindow sets the migration window (default DefaultMigrationWindow).
func WithMigrationWindow(d time.Duration) Option { return func(s *Store) { s.migration.window = d } }

// migrating answers Active (answered) while the migration window lasts: the
// whole partition, strongly consistent, and the index attribute for the
// unfinished items without it. After the window it answers nothing, and reads
// nothing once it has seen the window end.
func (s *Store) migrating(ctx context.Context, pool string, now time.Time) (rs []Reservation, answered bool, err error) {
	indexed, err := s.indexReady(ctx, now)
	if err != nil {
		return nil, true, err
	}
	if indexed {
		return nil, false, nil
	}
	items, err := s.query(ctx, partitionQuery(s.table, pool, now), pool)
	if err != nil {
		return nil, true, err
	}
	for _, it := range items {
		if _, ok := it[table.ActiveKey]; !ok {
			if err := s.backfill(ctx, pool, it[table.SortKey]); err != nil {
				return nil, true, err
			}
		}
	}
	if rs, err = decode(items, pool); err != nil {
		return nil, true, err
	}
	rs, err = s.withMovedIn(ctx, pool, s.countedHere(rs, pool), now)
	return rs, true, err
}

// partitionQuery reads every job item of the pool, completed ones included, with
// strong consistency: what Active did before the index, and still does during the
// migration window.
func partitionQuery(tableName, pool string, now time.Time) *dynamodb.QueryInput {
	in := &dynamodb.QueryInput{
		TableName:              aws.String(tableName),
		KeyConditionExpression: aws.String("#pk = :pk AND begins_with(#sk, :job)"),
		ExpressionAttributeNames: map[string]string{
			"#pk": table.PartitionKey, "#sk": table.SortKey,
		},
		ExpressionAttributeValues: map[string]types.AttributeValue{
			":pk":  table.Str(table.PoolPK(pool)),
			":job": table.Str(table.JobSKPrefix),
		},
		ConsistentRead: aws.Bool(true),
	}
	activeFilter(in, now)
	return in
}

// backfill gives an unfinished item written before the index its index attribute.
// The condition keeps a `completed` recorded meanwhile out of the index.
func (s *Store) backfill(ctx context.Context, pool string, sk types.AttributeValue) error {
	_, err := s.db.UpdateItem(ctx, &dynamodb.UpdateItemInput{
		TableName:                aws.String(s.table),
		Key:                      map[string]types.AttributeValue{table.PartitionKey: table.Str(table.PoolPK(pool)), table.SortKey: sk},
		UpdateExpression:         aws.String("SET #active = :pk"),
		ConditionExpression:      aws.String("#state < :completed AND attribute_not_exists(#active)"),
		ExpressionAttributeNames: map[string]string{"#active": table.ActiveKey, "#state": "state"},
		ExpressionAttributeValues: map[string]types.AttributeValue{
			":pk":        table.Str(table.PoolPK(pool)),
			":completed": table.Num(int64(Completed)),
		},
	})
	if err != nil && !table.ConditionFailed(err) {
		return fmt.Errorf("adding a reservation of pool %s to the active index: %w", pool, err)
	}
	return nil
}

// indexReady reports whether the migration window is over: the index marker is
// at least the window old. Without a marker it writes one (now): the table may
// hold items from before the index.
func (s *Store) indexReady(ctx context.Context, now time.Time) (bool, error) {
	if s.migration.done.Load() {
		return true, nil
	}
	since, err := s.indexedSince(ctx, now)
	if err != nil {
		return false, err
	}
	if now.Before(since.Add(s.migration.window)) {
		return false, nil
	}
	s.migration.done.Store(true)
	return true, nil
}

func (s *Store) indexedSince(ctx context.Context, now time.Time) (time.Time, error) {
	for range 2 {
		out, err := s.db.GetItem(ctx, &dynamodb.GetItemInput{
			TableName: aws.String(s.table), Key: table.Key(table.DeploymentPK, table.IndexMarkerSK), ConsistentRead: aws.Bool(true),
		})
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
		item := table.Key(table.DeploymentPK, table.IndexMarkerSK)
		item[table.IndexedSince] = table.Millis(now)
		_, err = s.db.PutItem(ctx, &dynamodb.PutItemInput{
			TableName: aws.String(s.table), Item: item,
			ConditionExpression:      aws.String("attribute_not_exists(#pk)"),
			ExpressionAttributeNames: map[string]string{"#pk": table.PartitionKey},
		})
		switch {
		case err == nil:
			return now, nil
		case !table.ConditionFailed(err):
			return time.Time{}, fmt.Errorf("writing the active index marker: %w", err)
		}
		// Another sweeper wrote it first: read theirs.
	}
	return time.Time{}, errors.New("the active index marker is written but cannot be read")
}
