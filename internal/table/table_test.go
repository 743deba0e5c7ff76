package table_test

import (
	"errors"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/runnerscaler/runnerscaler/internal/table"
	"github.com/runnerscaler/runnerscaler/internal/testenv"
)

func TestMain(m *testing.M) { testenv.Main(m) }

func TestConditionalPutAndQuery(t *testing.T) {
	t.Parallel()
	db, name := testenv.Table(t)
	ctx := t.Context()
	// Creating it again is not an error: the local stack calls Create on every start.
	if err := table.Create(ctx, db, name); err != nil {
		t.Fatalf("second Create: %v", err)
	}
	put := func(sk, v string) error {
		_, err := db.PutItem(ctx, &dynamodb.PutItemInput{
			TableName: aws.String(name),
			Item: map[string]types.AttributeValue{
				table.PartitionKey: &types.AttributeValueMemberS{Value: "POOL#a"},
				table.SortKey:      &types.AttributeValueMemberS{Value: sk},
				"v":                &types.AttributeValueMemberS{Value: v},
			},
			ConditionExpression: aws.String("attribute_not_exists(PK)"),
		})
		return err
	}
	if err := put("JOB#1", "first"); err != nil {
		t.Fatalf("first conditional put: %v", err)
	}
	err := put("JOB#1", "second")
	var ccf *types.ConditionalCheckFailedException
	if !errors.As(err, &ccf) {
		t.Fatalf("second conditional put: got %v, want ConditionalCheckFailedException", err)
	}
	if err := put("JOB#2", "other"); err != nil {
		t.Fatalf("put JOB#2: %v", err)
	}

	out, err := db.Query(ctx, &dynamodb.QueryInput{
		TableName:              aws.String(name),
		KeyConditionExpression: aws.String("PK = :pk AND begins_with(SK, :job)"),
		ExpressionAttributeValues: map[string]types.AttributeValue{
			":pk":  &types.AttributeValueMemberS{Value: "POOL#a"},
			":job": &types.AttributeValueMemberS{Value: "JOB#"},
		},
	})
	if err != nil {
		t.Fatalf("query: %v", err)
	}
	if len(out.Items) != 2 {
		t.Fatalf("query returned %d items, want 2", len(out.Items))
	}
	if v := out.Items[0]["v"].(*types.AttributeValueMemberS).Value; v != "first" {
		t.Errorf("JOB#1 holds %q, want the first write to survive", v)
	}
}
