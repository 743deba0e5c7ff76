// Package drain keeps the deployment's drain mark: while it says draining, every
// sweep drains every pool — a teardown in progress. It lives in the table so that
// scheduled sweeps and nudges between two drain invocations do not scale up
// again. Its item has a partition of its own (PK=DRAIN, SK=DRAIN), so that an IAM
// policy can keep a function away from it (dynamodb:LeadingKeys). Versions before
// kept it in the deployment's partition (PK=TABLE, SK=DRAIN); a deployment upgraded
// during a teardown has it there, so that item is read too until a cancel clears it.
package drain

import (
	"context"
	"fmt"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/runnerscaler/runnerscaler/internal/table"
)

// API is the part of the DynamoDB client the mark uses.
type API interface {
	GetItem(ctx context.Context, in *dynamodb.GetItemInput, opts ...func(*dynamodb.Options)) (*dynamodb.GetItemOutput, error)
	PutItem(ctx context.Context, in *dynamodb.PutItemInput, opts ...func(*dynamodb.Options)) (*dynamodb.PutItemOutput, error)
}

// Mark reads and writes the drain mark.
type Mark struct {
	db    API
	table string
}

// NewMark returns the drain mark of tableName.
func NewMark(db API, tableName string) *Mark { return &Mark{db: db, table: tableName} }

// Attributes of the mark's item.
const (
	drainingAttr = "draining"
	sinceAttr    = "since"
)

// Draining reports whether a teardown is in progress: the mark says so, or the
// item where older versions kept it does. Both are read consistently: a sweep
// right after the drain started must see it.
func (m *Mark) Draining(ctx context.Context) (bool, error) {
	for _, key := range []map[string]types.AttributeValue{
		table.Key(table.DrainPK, table.DrainSK), table.Key(table.LegacyDrainPK, table.LegacyDrainSK),
	} {
		out, err := m.db.GetItem(ctx, &dynamodb.GetItemInput{TableName: aws.String(m.table), Key: key, ConsistentRead: aws.Bool(true)})
		if err != nil {
			return false, fmt.Errorf("reading the drain mark: %w", err)
		}
		if v, ok := out.Item[drainingAttr].(*types.AttributeValueMemberBOOL); ok && v.Value {
			return true, nil
		}
	}
	return false, nil
}

// SetDraining starts (true) or cancels (false) a teardown. A cancel also ends a
// teardown that the older item records.
func (m *Mark) SetDraining(ctx context.Context, on bool, now time.Time) error {
	item := markItem(table.Key(table.DrainPK, table.DrainSK), on, now)
	if _, err := m.db.PutItem(ctx, &dynamodb.PutItemInput{TableName: aws.String(m.table), Item: item}); err != nil {
		return fmt.Errorf("writing the drain mark: %w", err)
	}
	if on {
		return nil
	}
	// Only an older item that says draining is overwritten: none is created.
	_, err := m.db.PutItem(ctx, &dynamodb.PutItemInput{
		TableName:                 aws.String(m.table),
		Item:                      markItem(table.Key(table.LegacyDrainPK, table.LegacyDrainSK), false, now),
		ConditionExpression:       aws.String("#draining = :true"),
		ExpressionAttributeNames:  map[string]string{"#draining": drainingAttr},
		ExpressionAttributeValues: map[string]types.AttributeValue{":true": &types.AttributeValueMemberBOOL{Value: true}},
	})
	if err != nil && !table.ConditionFailed(err) {
		return fmt.Errorf("clearing the drain mark where older versions kept it: %w", err)
	}
	return nil
}

// markItem is the mark's item at key.
func markItem(key map[string]types.AttributeValue, on bool, now time.Time) map[string]types.AttributeValue {
	key[drainingAttr] = &types.AttributeValueMemberBOOL{Value: on}
	key[sinceAttr] = table.Str(now.UTC().Format(time.RFC3339))
	return key
}
