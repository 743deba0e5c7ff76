// Package roster is the deployment's own record of the runners it created:
// one item per runner, in its pool's roster partition (table.RosterPK), named
// by the runner's GitHub name (its pod's). The sweeper adds a runner before
// anything of it exists — its Secret, its registration — and retires it when
// its last object, the Secret, goes: a retired runner stays on the roster for
// Linger, so that a late or redelivered delivery about its last job still
// counts as this deployment's, and DynamoDB's TTL then deletes the item.
//
// The roster, not a name's shape, is what makes a runner this deployment's for
// the webhook: another deployment with the same pool names in the same
// organization, or any runner someone registers with a name shaped like a
// pool's, is on no roster of this deployment, so its deliveries link, move,
// nudge and record nothing here. Only the sweeper's role may write the roster
// partitions; the webhook's may only read them (template.yaml).
package roster

import (
	"context"
	"fmt"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/runnerscaler/runnerscaler/internal/table"
)

// Linger is how long a retired runner stays on the roster: GitHub lets a
// delivery be redelivered for 3 days.
const Linger = 3 * 24 * time.Hour

// Store keeps the roster in the deployment's table.
type Store struct {
	db table.Table
}

// NewStore returns a roster over tableName.
func NewStore(db table.API, tableName string) *Store {
	return &Store{db: table.Table{DB: db, Name: tableName}}
}

// Add puts runner (its GitHub name) on pool's roster.
func (s *Store) Add(ctx context.Context, pool, runner string, now time.Time) error {
	item := table.Key(table.RosterPK(pool), runner)
	item["createdAt"] = table.Millis(now)
	_, err := s.db.PutItem(ctx, &dynamodb.PutItemInput{Item: item})
	if err != nil {
		return fmt.Errorf("adding runner %s to the roster of pool %s: %w", runner, pool, err)
	}
	return nil
}

// Retire marks runner as gone: it stays on pool's roster for Linger. A runner
// that is not on the roster stays off it.
func (s *Store) Retire(ctx context.Context, pool, runner string, now time.Time) error {
	_, err := s.db.UpdateItem(ctx, &dynamodb.UpdateItemInput{
		Key:                       table.Key(table.RosterPK(pool), runner),
		UpdateExpression:          aws.String("SET #ttl = :ttl, #retired = :now"),
		ConditionExpression:       aws.String("attribute_exists(#pk) AND attribute_not_exists(#retired)"),
		ExpressionAttributeNames:  map[string]string{"#pk": table.PartitionKey, "#ttl": table.TTLAttribute, "#retired": "retiredAt"},
		ExpressionAttributeValues: map[string]types.AttributeValue{":ttl": table.Num(now.Add(Linger).Unix()), ":now": table.Millis(now)},
	})
	if err != nil && !table.ConditionFailed(err) {
		return fmt.Errorf("retiring runner %s from the roster of pool %s: %w", runner, pool, err)
	}
	return nil
}

// Has reports whether runner is on pool's roster (strongly consistent: a
// runner is added before it can register, so a delivery naming it finds it).
func (s *Store) Has(ctx context.Context, pool, runner string) (bool, error) {
	out, err := s.db.GetItem(ctx, &dynamodb.GetItemInput{Key: table.Key(table.RosterPK(pool), runner), ConsistentRead: aws.Bool(true),
		ProjectionExpression: aws.String("#pk"), ExpressionAttributeNames: map[string]string{"#pk": table.PartitionKey}})
	if err != nil {
		return false, fmt.Errorf("reading runner %s on the roster of pool %s: %w", runner, pool, err)
	}
	return out.Item != nil, nil
}
