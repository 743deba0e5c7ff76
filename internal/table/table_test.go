package table_test

import (
	"context"
	"strings"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/runnerscaler/runnerscaler/internal/table"
	"github.com/runnerscaler/runnerscaler/local/testenv"
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
	if err := put("JOB#1", "second"); !table.ConditionFailed(err) {
		t.Fatalf("second conditional put: got %v, want a refused condition", err)
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

// TestCreateMakesTheActiveIndex: the table has the sparse index the sweeper reads,
// keyed as the code says, with every attribute projected.
func TestCreateMakesTheActiveIndex(t *testing.T) {
	t.Parallel()
	db, name := testenv.Table(t)
	out, err := db.DescribeTable(t.Context(), &dynamodb.DescribeTableInput{TableName: aws.String(name)})
	if err != nil {
		t.Fatal(err)
	}
	gsis := out.Table.GlobalSecondaryIndexes
	if len(gsis) != 1 || aws.ToString(gsis[0].IndexName) != table.ActiveIndex {
		t.Fatalf("indexes %+v, want one: %s", gsis, table.ActiveIndex)
	}
	keys := map[types.KeyType]string{}
	for _, k := range gsis[0].KeySchema {
		keys[k.KeyType] = aws.ToString(k.AttributeName)
	}
	if keys[types.KeyTypeHash] != table.ActiveKey || keys[types.KeyTypeRange] != table.SortKey ||
		gsis[0].Projection.ProjectionType != types.ProjectionTypeAll {
		t.Fatalf("index keys %v, projection %s; want %s/%s, ALL", keys, gsis[0].Projection.ProjectionType, table.ActiveKey, table.SortKey)
	}
}

// TestCreateRefusesATableWithoutTheIndex: a local table made by an older version
// cannot be given the index on dynalite; Create says so instead of leaving the
// sweeper to fail on every query.
func TestCreateRefusesATableWithoutTheIndex(t *testing.T) {
	t.Parallel()
	db := testenv.DynamoDBClient(t)
	name := testenv.Name("old")
	old := table.Definition(name)
	old.GlobalSecondaryIndexes, old.AttributeDefinitions = nil, old.AttributeDefinitions[:2]
	if _, err := db.CreateTable(t.Context(), old); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_, _ = db.DeleteTable(context.Background(), &dynamodb.DeleteTableInput{TableName: aws.String(name)})
	})
	if err := table.Create(t.Context(), db, name); err == nil || !strings.Contains(err.Error(), "has no index") {
		t.Fatalf("Create over a table without the index: %v, want an error naming the missing index", err)
	}
}
