package testenv

import (
	"context"
	"fmt"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"

	"github.com/runnerscaler/runnerscaler/internal/table"
)

// ConsistentOnly is db refusing every GetItem and Query of the product's
// table that does not ask for a strongly consistent read: dynalite answers
// every read consistently, so a test of a store that promises consistent
// reads runs it through ConsistentOnly to see that it asks for them.
func ConsistentOnly(db table.API) table.API { return consistentOnly{db} }

type consistentOnly struct{ table.API }

func (c consistentOnly) GetItem(ctx context.Context, in *dynamodb.GetItemInput, opts ...func(*dynamodb.Options)) (*dynamodb.GetItemOutput, error) {
	if !aws.ToBool(in.ConsistentRead) {
		return nil, fmt.Errorf("testenv: GetItem of %v without a consistent read", in.Key)
	}
	return c.API.GetItem(ctx, in, opts...)
}

func (c consistentOnly) Query(ctx context.Context, in *dynamodb.QueryInput, opts ...func(*dynamodb.Options)) (*dynamodb.QueryOutput, error) {
	if !aws.ToBool(in.ConsistentRead) {
		return nil, fmt.Errorf("testenv: Query %s without a consistent read", aws.ToString(in.KeyConditionExpression))
	}
	return c.API.Query(ctx, in, opts...)
}
