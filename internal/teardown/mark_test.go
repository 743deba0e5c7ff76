package teardown_test

import (
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/runnerscaler/runnerscaler/internal/teardown"
	"github.com/runnerscaler/runnerscaler/local/testenv"
)

func TestMain(m *testing.M) { testenv.Main(m) }

var t0 = time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC)

// item reads the item at (pk, sk) as stored; nil when there is none.
func item(t *testing.T, db *dynamodb.Client, name, pk, sk string) map[string]types.AttributeValue {
	t.Helper()
	out, err := db.GetItem(t.Context(), &dynamodb.GetItemInput{TableName: aws.String(name), ConsistentRead: aws.Bool(true),
		Key: map[string]types.AttributeValue{"PK": &types.AttributeValueMemberS{Value: pk}, "SK": &types.AttributeValueMemberS{Value: sk}}})
	if err != nil {
		t.Fatal(err)
	}
	return out.Item
}

func draining(t *testing.T, m *teardown.Mark) bool {
	t.Helper()
	on, err := m.Draining(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	return on
}

// TestMarkHasAPartitionOfItsOwn: the mark starts and cancels a teardown in its
// own item, PK=DRAIN, SK=DRAIN, read consistently (ConsistentOnly refuses
// other reads).
func TestMarkHasAPartitionOfItsOwn(t *testing.T) {
	t.Parallel()
	db, name := testenv.Table(t)
	m := teardown.NewMark(testenv.ConsistentOnly(db), name)
	if draining(t, m) {
		t.Fatal("a new table is draining")
	}
	if err := m.SetDraining(t.Context(), true, t0); err != nil {
		t.Fatal(err)
	}
	if !draining(t, m) {
		t.Fatal("not draining after SetDraining(true)")
	}
	it := item(t, db, name, "DRAIN", "DRAIN")
	if v, ok := it["draining"].(*types.AttributeValueMemberBOOL); !ok || !v.Value {
		t.Fatalf("the item at PK=DRAIN, SK=DRAIN is %v, want draining", it)
	}
	if err := m.SetDraining(t.Context(), false, t0.Add(time.Minute)); err != nil {
		t.Fatal(err)
	}
	if draining(t, m) {
		t.Fatal("still draining after SetDraining(false)")
	}
}
