package drain_test

import (
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/runnerscaler/runnerscaler/internal/drain"
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

func draining(t *testing.T, m *drain.Mark) bool {
	t.Helper()
	on, err := m.Draining(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	return on
}

// TestMarkHasAPartitionOfItsOwn: the mark starts and cancels a teardown in its
// own item, PK=DRAIN, SK=DRAIN, and writes nothing where older versions kept it.
func TestMarkHasAPartitionOfItsOwn(t *testing.T) {
	t.Parallel()
	db, name := testenv.Table(t)
	m := drain.NewMark(db, name)
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
	if old := item(t, db, name, "TABLE", "DRAIN"); old != nil {
		t.Fatalf("an item at the older key PK=TABLE, SK=DRAIN was written: %v", old)
	}
}

// TestMarkOfAnOlderVersion: a deployment upgraded during a teardown has the mark
// where older versions kept it (PK=TABLE, SK=DRAIN): it still drains, also after
// a new start, and a cancel ends it.
func TestMarkOfAnOlderVersion(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name       string
		startAgain bool
	}{{"cancelled", false}, {"started again, then cancelled", true}} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			db, name := testenv.Table(t)
			// As the older code wrote it.
			if _, err := db.PutItem(t.Context(), &dynamodb.PutItemInput{TableName: aws.String(name), Item: map[string]types.AttributeValue{
				"PK": &types.AttributeValueMemberS{Value: "TABLE"}, "SK": &types.AttributeValueMemberS{Value: "DRAIN"},
				"draining": &types.AttributeValueMemberBOOL{Value: true}, "since": &types.AttributeValueMemberS{Value: t0.Format(time.RFC3339)},
			}}); err != nil {
				t.Fatal(err)
			}
			m := drain.NewMark(db, name)
			if !draining(t, m) {
				t.Fatal("the older item says draining, Draining says not")
			}
			if tc.startAgain {
				if err := m.SetDraining(t.Context(), true, t0.Add(time.Minute)); err != nil {
					t.Fatal(err)
				}
			}
			if err := m.SetDraining(t.Context(), false, t0.Add(2*time.Minute)); err != nil {
				t.Fatal(err)
			}
			if draining(t, m) {
				t.Fatal("still draining after SetDraining(false)")
			}
			old := item(t, db, name, "TABLE", "DRAIN")
			if v, ok := old["draining"].(*types.AttributeValueMemberBOOL); !ok || v.Value {
				t.Fatalf("the older item after a cancel is %v, want draining false", old)
			}
		})
	}
}
