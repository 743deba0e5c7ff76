package teardown

import (
	"context"
	"fmt"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/runnerscaler/runnerscaler/internal/table"
)

// Mark is the deployment's drain mark: while it says draining, every sweep
// drains every pool — a teardown in progress. It lives in the table so that
// scheduled sweeps and nudges between two drain invocations do not scale up
// again. Its item has a partition of its own (PK=DRAIN, SK=DRAIN), so that an
// IAM policy can keep a function away from it (dynamodb:LeadingKeys).
type Mark struct {
	db table.Table
}

// NewMark returns the drain mark of tableName.
func NewMark(db table.API, tableName string) *Mark {
	return &Mark{db: table.Table{DB: db, Name: tableName}}
}

// Attributes of the mark's item.
const (
	drainingAttr = "draining"
	sinceAttr    = "since"
)

// Draining reports whether a teardown is in progress. The mark is read
// consistently: a sweep right after the drain started must see it.
func (m *Mark) Draining(ctx context.Context) (bool, error) {
	out, err := m.db.GetItem(ctx, &dynamodb.GetItemInput{Key: table.Key(table.DrainPK, table.DrainSK), ConsistentRead: aws.Bool(true)})
	if err != nil {
		return false, fmt.Errorf("reading the drain mark: %w", err)
	}
	v, ok := out.Item[drainingAttr].(*types.AttributeValueMemberBOOL)
	return ok && v.Value, nil
}

// SetDraining starts (true) or cancels (false) a teardown.
func (m *Mark) SetDraining(ctx context.Context, on bool, now time.Time) error {
	item := table.Key(table.DrainPK, table.DrainSK)
	item[drainingAttr] = &types.AttributeValueMemberBOOL{Value: on}
	item[sinceAttr] = table.Str(now.UTC().Format(time.RFC3339))
	if _, err := m.db.PutItem(ctx, &dynamodb.PutItemInput{Item: item}); err != nil {
		return fmt.Errorf("writing the drain mark: %w", err)
	}
	return nil
}
