package redeliver_test

import (
	"maps"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/runnerscaler/runnerscaler/internal/redeliver"
	"github.com/runnerscaler/runnerscaler/internal/table"
	"github.com/runnerscaler/runnerscaler/local/testenv"
)

func TestMain(m *testing.M) { testenv.Main(m) }

// TestRoundTrip: what Put writes, Get reads back, in one item of the
// deployment's partition; before any Put, Get says so; a clean check replaces
// a failing one.
func TestRoundTrip(t *testing.T) {
	t.Parallel()
	db, name := testenv.Table(t)
	s := redeliver.NewStore(db, name)
	if _, ok, err := s.Get(t.Context()); err != nil || ok {
		t.Fatalf("Get before any Put = %v, %v; want not found", ok, err)
	}
	at := time.Date(2026, 11, 30, 2, 15, 0, 0, time.UTC)
	in := redeliver.Undelivered{CheckedAt: at, Window: 30 * time.Minute, ByStatus: map[int]int{401: 3, 502: 1, 0: 2},
		Latest:      &redeliver.FailedDelivery{At: at.Add(-2 * time.Minute), StatusCode: 401, Action: "queued", GUID: "0b9c-guid"},
		Redelivered: 3}
	if err := s.Put(t.Context(), in); err != nil {
		t.Fatal(err)
	}
	got, ok, err := s.Get(t.Context())
	if err != nil || !ok {
		t.Fatalf("Get = %v, %v", ok, err)
	}
	if !got.CheckedAt.Equal(at) || got.Window != in.Window || !maps.Equal(got.ByStatus, in.ByStatus) ||
		got.Redelivered != 3 || got.Latest == nil || !got.Latest.At.Equal(in.Latest.At) ||
		got.Latest.StatusCode != 401 || got.Latest.Action != "queued" || got.Latest.GUID != "0b9c-guid" {
		t.Fatalf("read back %+v (latest %+v), want %+v", got, got.Latest, in)
	}
	out, err := db.GetItem(t.Context(), &dynamodb.GetItemInput{TableName: aws.String(name), Key: map[string]types.AttributeValue{
		table.PartitionKey: &types.AttributeValueMemberS{Value: "TABLE"},
		table.SortKey:      &types.AttributeValueMemberS{Value: "WEBHOOK#deliveries"},
	}})
	if err != nil || out.Item == nil {
		t.Fatalf("the item at PK=TABLE, SK=WEBHOOK#deliveries: %v, %v", out, err)
	}
	if _, indexed := out.Item[table.ActiveKey]; indexed {
		t.Error("the item carries the active index's key")
	}
	clean := redeliver.Undelivered{CheckedAt: at.Add(time.Minute), Window: 30 * time.Minute, ByStatus: map[int]int{}}
	if err := s.Put(t.Context(), clean); err != nil {
		t.Fatal(err)
	}
	if got, _, err := s.Get(t.Context()); err != nil || got.Count() != 0 || got.Latest != nil || !got.CheckedAt.Equal(clean.CheckedAt) {
		t.Fatalf("after a clean check: %+v, %v; want it replaced", got, err)
	}
}
