// Package table defines the one DynamoDB table the product keeps its state in:
// its key schema (keys.go: which item lives under which key), a sparse global
// secondary index of the reservations that may hold capacity, and what every
// package that reads or writes it shares (attr.go: attribute values, refused
// conditional writes; store.go: the client and table name a store calls). The SAM template declares the same schema; a test checks
// they agree.
package table

import (
	"context"
	"errors"
	"fmt"
	"slices"
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

// The active index: a sparse global secondary index (partition ActiveKey, sort
// SortKey, all attributes projected). Reservations of queued or in-progress
// jobs carry ActiveKey (POOL#<pool>), and the write that records `completed`
// removes it; so a sweep reads its pool's unfinished jobs, not the completed
// ones kept for a day. Undecided re-run candidates carry it too, under
// PendingRerunsKey (RERUNS#<pool>), until they are decided.
const (
	ActiveIndex = "active"
	ActiveKey   = "activePK"
)

// Definition is the table's schema as CreateTable takes it (on-demand billing);
// the SAM template must declare the same.
func Definition(name string) *dynamodb.CreateTableInput {
	return &dynamodb.CreateTableInput{
		TableName:   aws.String(name),
		BillingMode: types.BillingModePayPerRequest,
		AttributeDefinitions: []types.AttributeDefinition{
			{AttributeName: aws.String(PartitionKey), AttributeType: types.ScalarAttributeTypeS},
			{AttributeName: aws.String(SortKey), AttributeType: types.ScalarAttributeTypeS},
			{AttributeName: aws.String(ActiveKey), AttributeType: types.ScalarAttributeTypeS},
		},
		KeySchema: []types.KeySchemaElement{
			{AttributeName: aws.String(PartitionKey), KeyType: types.KeyTypeHash},
			{AttributeName: aws.String(SortKey), KeyType: types.KeyTypeRange},
		},
		GlobalSecondaryIndexes: []types.GlobalSecondaryIndex{{
			IndexName: aws.String(ActiveIndex),
			KeySchema: []types.KeySchemaElement{
				{AttributeName: aws.String(ActiveKey), KeyType: types.KeyTypeHash},
				{AttributeName: aws.String(SortKey), KeyType: types.KeyTypeRange},
			},
			Projection: &types.Projection{ProjectionType: types.ProjectionTypeAll},
		}},
	}
}

// CreateAPI is the part of the DynamoDB client Create uses.
type CreateAPI interface {
	CreateTable(ctx context.Context, in *dynamodb.CreateTableInput, opts ...func(*dynamodb.Options)) (*dynamodb.CreateTableOutput, error)
	DescribeTable(ctx context.Context, in *dynamodb.DescribeTableInput, opts ...func(*dynamodb.Options)) (*dynamodb.DescribeTableOutput, error)
}

// Create creates the table with its index and waits until it is active. It is used by the local stack and the tests; in AWS the
// SAM template creates the table. An existing table is not an error, unless it
// lacks the active index (it was created by an older version: dynalite cannot add
// an index to a table, so delete it).
func Create(ctx context.Context, api CreateAPI, name string) error {
	_, err := api.CreateTable(ctx, Definition(name))
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
	out, err := api.DescribeTable(ctx, &dynamodb.DescribeTableInput{TableName: aws.String(name)})
	if err != nil {
		return fmt.Errorf("describing table %s: %w", name, err)
	}
	if !slices.ContainsFunc(out.Table.GlobalSecondaryIndexes, func(i types.GlobalSecondaryIndexDescription) bool {
		return aws.ToString(i.IndexName) == ActiveIndex
	}) {
		return fmt.Errorf("table %s has no index %q: it was created by an older version; delete it", name, ActiveIndex)
	}
	return nil
}
