package reservation_test

import (
	"slices"
	"strconv"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/runnerscaler/runnerscaler/internal/reservation"
	"github.com/runnerscaler/runnerscaler/internal/table"
)

// legacyPut writes a job item as the code before the index did: no index attribute.
func legacyPut(t *testing.T, db *dynamodb.Client, name string, job int64, st reservation.State, at time.Time, d time.Duration) {
	t.Helper()
	n := func(v int64) types.AttributeValue { return table.Num(v) }
	_, err := db.PutItem(t.Context(), &dynamodb.PutItemInput{TableName: aws.String(name), Item: map[string]types.AttributeValue{
		table.PartitionKey: table.Str(table.PoolPK("p")),
		table.SortKey:      table.Str(table.JobSK(job)),
		"pool":             table.Str("p"), "jobId": n(job), "state": n(int64(st)), "amount": n(1),
		"effectiveTime": n(at.UnixMilli()), "expirationTime": n(at.Add(d).UnixMilli()),
		table.TTLAttribute: n(at.Add(d + 24*time.Hour).Unix()),
	}})
	if err != nil {
		t.Fatal(err)
	}
}

// TestMigrationWindow: on a table whose items predate the index (no marker), Active
// reads whole partitions with strong consistency — missing no reservation written
// before the index or by an old webhook still running — and adds the unfinished
// ones to the index, until the window after the first such read has passed; then
// it reads the index alone.
func TestMigrationWindow(t *testing.T) {
	t.Parallel()
	m := &meteredDB{}
	s, clk, db, name := newStoreOver(t, func(db *dynamodb.Client) reservation.API { m.Client = db; return m })
	marker := table.Key(table.DeploymentPK, table.IndexMarkerSK)
	if _, err := db.DeleteItem(t.Context(), &dynamodb.DeleteItemInput{TableName: aws.String(name), Key: marker}); err != nil {
		t.Fatal(err)
	}
	legacyPut(t, db, name, 1, reservation.Queued, t0, time.Hour)
	legacyPut(t, db, name, 2, reservation.InProgress, t0, time.Hour)
	legacyPut(t, db, name, 3, reservation.Completed, t0, time.Hour)

	if got := activeIDs(t, s, "p"); !slices.Equal(got, []int64{1, 2}) {
		t.Fatalf("first sweep after the upgrade: active = %v, want the older reservations [1 2]", got)
	}
	if got := indexedIDs(t, db, name, "p"); !slices.Equal(got, []int64{1, 2}) {
		t.Fatalf("after the first sweep the index holds %v, want [1 2] added", got)
	}
	out, err := db.GetItem(t.Context(), &dynamodb.GetItemInput{TableName: aws.String(name), Key: marker, ConsistentRead: aws.Bool(true)})
	if err != nil || out.Item[table.IndexedSince].(*types.AttributeValueMemberN).Value != strconv.FormatInt(t0.UnixMilli(), 10) {
		t.Fatalf("marker %v, %v; want since = the first sweep", out.Item, err)
	}

	// An old webhook still running writes job 4 and completes job 2 (which keeps its
	// index attribute); a new one records job 5.
	clk.SetTime(t0.Add(5 * time.Minute))
	legacyPut(t, db, name, 4, reservation.Queued, clk.Now(), time.Hour)
	if _, err := db.UpdateItem(t.Context(), &dynamodb.UpdateItemInput{TableName: aws.String(name),
		Key:                       table.Key(table.PoolPK("p"), table.JobSK(2)),
		UpdateExpression:          aws.String("SET #state = :completed"),
		ExpressionAttributeNames:  map[string]string{"#state": "state"},
		ExpressionAttributeValues: map[string]types.AttributeValue{":completed": &types.AttributeValueMemberN{Value: "3"}},
	}); err != nil {
		t.Fatal(err)
	}
	record(t, s, reservation.Delivery{Pool: "p", JobID: 5, State: reservation.Queued, Amount: 1, Duration: time.Hour}, reservation.Applied)
	if got := activeIDs(t, s, "p"); !slices.Equal(got, []int64{1, 4, 5}) {
		t.Fatalf("within the window: active = %v, want [1 4 5]", got)
	}

	clk.SetTime(t0.Add(reservation.DefaultMigrationWindow))
	legacyPut(t, db, name, 6, reservation.Queued, clk.Now(), time.Hour)
	m.reset()
	if got := activeIDs(t, s, "p"); !slices.Equal(got, []int64{1, 4, 5}) {
		t.Fatalf("after the window: active = %v, want [1 4 5] (job 6, written without the attribute after the window, is not read)", got)
	}
	if m.tableScanned != 0 || m.indexScanned != 4 {
		t.Fatalf("after the window Active read %d table and %d index items; want only the index: 1, 2 (completed by an old webhook), 4, 5",
			m.tableScanned, m.indexScanned)
	}
}
