package poolstate

import (
	"context"
	"fmt"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/runnerscaler/runnerscaler/internal/table"
)

// The deployment's drain mark (PK=TABLE, SK=DRAIN): while it says draining, every
// sweep drains every pool — a teardown in progress. It lives in the table so that
// scheduled sweeps and nudges between two drain invocations do not scale up again.
const drainSK = "DRAIN"

// DrainMark reads and writes the drain mark.
type DrainMark struct {
	db    API
	table string
}

// NewDrainMark returns the drain mark of tableName.
func NewDrainMark(db API, tableName string) *DrainMark { return &DrainMark{db: db, table: tableName} }

func (d *DrainMark) key() map[string]types.AttributeValue {
	return map[string]types.AttributeValue{
		table.PartitionKey: &types.AttributeValueMemberS{Value: table.IndexMarkerPK},
		table.SortKey:      &types.AttributeValueMemberS{Value: drainSK},
	}
}

// Draining reports whether a teardown is in progress (read consistently: a sweep
// right after the drain started must see it).
func (d *DrainMark) Draining(ctx context.Context) (bool, error) {
	out, err := d.db.GetItem(ctx, &dynamodb.GetItemInput{TableName: aws.String(d.table), Key: d.key(), ConsistentRead: aws.Bool(true)})
	if err != nil {
		return false, fmt.Errorf("reading the drain mark: %w", err)
	}
	v, ok := out.Item["draining"].(*types.AttributeValueMemberBOOL)
	return ok && v.Value, nil
}

// SetDraining starts (true) or cancels (false) a teardown.
func (d *DrainMark) SetDraining(ctx context.Context, on bool, now time.Time) error {
	item := d.key()
	item["draining"] = &types.AttributeValueMemberBOOL{Value: on}
	item["since"] = &types.AttributeValueMemberS{Value: now.UTC().Format(time.RFC3339)}
	if _, err := d.db.PutItem(ctx, &dynamodb.PutItemInput{TableName: aws.String(d.table), Item: item}); err != nil {
		return fmt.Errorf("writing the drain mark: %w", err)
	}
	return nil
}
