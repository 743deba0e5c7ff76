package table

import (
	"context"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
)

// API is the part of the DynamoDB client the product's stores use.
type API interface {
	GetItem(ctx context.Context, in *dynamodb.GetItemInput, opts ...func(*dynamodb.Options)) (*dynamodb.GetItemOutput, error)
	PutItem(ctx context.Context, in *dynamodb.PutItemInput, opts ...func(*dynamodb.Options)) (*dynamodb.PutItemOutput, error)
	UpdateItem(ctx context.Context, in *dynamodb.UpdateItemInput, opts ...func(*dynamodb.Options)) (*dynamodb.UpdateItemOutput, error)
	DeleteItem(ctx context.Context, in *dynamodb.DeleteItemInput, opts ...func(*dynamodb.Options)) (*dynamodb.DeleteItemOutput, error)
	Query(ctx context.Context, in *dynamodb.QueryInput, opts ...func(*dynamodb.Options)) (*dynamodb.QueryOutput, error)
}

// Table is the product's table as a store reads and writes it: each call sets
// the input's TableName to Name and passes it to DB. A Table is itself an API
// (and a dynamodb.QueryAPIClient, for paginators).
type Table struct {
	DB   API
	Name string
}

// GetItem reads one item.
func (t Table) GetItem(ctx context.Context, in *dynamodb.GetItemInput, opts ...func(*dynamodb.Options)) (*dynamodb.GetItemOutput, error) {
	in.TableName = aws.String(t.Name)
	return t.DB.GetItem(ctx, in, opts...)
}

// PutItem writes one item whole.
func (t Table) PutItem(ctx context.Context, in *dynamodb.PutItemInput, opts ...func(*dynamodb.Options)) (*dynamodb.PutItemOutput, error) {
	in.TableName = aws.String(t.Name)
	return t.DB.PutItem(ctx, in, opts...)
}

// UpdateItem changes attributes of one item, creating it if absent.
func (t Table) UpdateItem(ctx context.Context, in *dynamodb.UpdateItemInput, opts ...func(*dynamodb.Options)) (*dynamodb.UpdateItemOutput, error) {
	in.TableName = aws.String(t.Name)
	return t.DB.UpdateItem(ctx, in, opts...)
}

// DeleteItem deletes one item.
func (t Table) DeleteItem(ctx context.Context, in *dynamodb.DeleteItemInput, opts ...func(*dynamodb.Options)) (*dynamodb.DeleteItemOutput, error) {
	in.TableName = aws.String(t.Name)
	return t.DB.DeleteItem(ctx, in, opts...)
}

// Query reads one page of a partition (of the table or of an index).
func (t Table) Query(ctx context.Context, in *dynamodb.QueryInput, opts ...func(*dynamodb.Options)) (*dynamodb.QueryOutput, error) {
	in.TableName = aws.String(t.Name)
	return t.DB.Query(ctx, in, opts...)
}
