// Package table defines the one DynamoDB table the product keeps its state in:
// reservations, pool status and leases, all under PK=POOL#<pool>. The SAM template
// declares the same schema; a test checks they agree.
package table

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
)

// Attribute names of the key schema and of the TTL attribute.
const (
	PartitionKey = "PK"
	SortKey      = "SK"
	// TTLAttribute holds epoch seconds after which DynamoDB may delete the item.
	TTLAttribute = "expiresAt"
)

// CreateAPI is the part of the DynamoDB client Create uses.
type CreateAPI interface {
	CreateTable(ctx context.Context, in *dynamodb.CreateTableInput, opts ...func(*dynamodb.Options)) (*dynamodb.CreateTableOutput, error)
	DescribeTable(ctx context.Context, in *dynamodb.DescribeTableInput, opts ...func(*dynamodb.Options)) (*dynamodb.DescribeTableOutput, error)
}

// Create creates the table (on-demand billing) and waits until it is active. It is
// used by the local stack and the tests; in AWS the SAM template creates the table.
// An existing table is not an error.
func Create(ctx context.Context, api CreateAPI, name string) error {
	_, err := api.CreateTable(ctx, &dynamodb.CreateTableInput{
		TableName:   aws.String(name),
		BillingMode: types.BillingModePayPerRequest,
		AttributeDefinitions: []types.AttributeDefinition{
			{AttributeName: aws.String(PartitionKey), AttributeType: types.ScalarAttributeTypeS},
			{AttributeName: aws.String(SortKey), AttributeType: types.ScalarAttributeTypeS},
		},
		KeySchema: []types.KeySchemaElement{
			{AttributeName: aws.String(PartitionKey), KeyType: types.KeyTypeHash},
			{AttributeName: aws.String(SortKey), KeyType: types.KeyTypeRange},
		},
	})
	var inUse *types.ResourceInUseException
	if err != nil && !errors.As(err, &inUse) {
		return fmt.Errorf("creating table %s: %w", name, err)
	}
	w := dynamodb.NewTableExistsWaiter(api, func(o *dynamodb.TableExistsWaiterOptions) {
		o.MinDelay, o.MaxDelay = 50*time.Millisecond, 500*time.Millisecond // the local server is instant
	})
	if err := w.Wait(ctx, &dynamodb.DescribeTableInput{TableName: aws.String(name)}, time.Minute); err != nil {
		return fmt.Errorf("waiting for table %s: %w", name, err)
	}
	return nil
}
