package queuewait_test

import (
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	clocktesting "k8s.io/utils/clock/testing"

	"github.com/runnerscaler/runnerscaler/internal/pool"
	"github.com/runnerscaler/runnerscaler/internal/queuewait"
	"github.com/runnerscaler/runnerscaler/internal/table"
	"github.com/runnerscaler/runnerscaler/local/testenv"
)

func TestMain(m *testing.M) { testenv.Main(m) }

var t0 = time.Date(2026, 12, 1, 12, 0, 30, 0, time.UTC)

// TestOf: the wait is started minus created; an unknown time gives no wait; a
// start GitHub stamps before the creation is a wait of zero.
func TestOf(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name             string
		created, started time.Time
		want             time.Duration
		ok               bool
	}{
		{"waited", t0, t0.Add(7 * time.Second), 7 * time.Second, true},
		{"started at once", t0, t0, 0, true},
		{"started before created: clamped", t0, t0.Add(-2 * time.Second), 0, true},
		{"no created_at", time.Time{}, t0, 0, false},
		{"no started_at", t0, time.Time{}, 0, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			got, ok := queuewait.Of(tc.created, tc.started)
			if got != tc.want || ok != tc.ok {
				t.Fatalf("Of(%v, %v) = %v, %v; want %v, %v", tc.created, tc.started, got, ok, tc.want, tc.ok)
			}
		})
	}
}

// TestRecentReadsTheLastHourOfItsPool: waits added over 61 minutes; Recent
// returns those of the current minute and the 59 before it, of its own pool
// only, in the order they were added.
func TestRecentReadsTheLastHourOfItsPool(t *testing.T) {
	t.Parallel()
	db, name := testenv.Table(t)
	clk := clocktesting.NewFakePassiveClock(t0)
	s := queuewait.New(db, name, clk)
	var want []time.Duration
	for i := range 61 {
		clk.SetTime(t0.Add(time.Duration(i) * time.Minute))
		wait := time.Duration(i)*time.Second + 250*time.Millisecond
		if kept, err := s.Add(t.Context(), "p", wait); err != nil || !kept {
			t.Fatalf("Add at minute %d: %v, %v", i, kept, err)
		}
		if i >= 1 {
			want = append(want, wait)
		}
	}
	if kept, err := s.Add(t.Context(), "other", time.Hour); err != nil || !kept {
		t.Fatalf("Add to another pool: %v, %v", kept, err)
	}
	got, err := s.Recent(t.Context(), "p")
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(got, want) {
		t.Fatalf("Recent = %v\nwant %v (minutes 1 to 60)", got, want)
	}
}

// TestAddKeepsAtMostMaxPerMinute: the minute's item stops at MaxPerMinute
// waits, stays under 1 KB (one write unit) with the longest waits it can hold,
// and the next minute starts afresh.
func TestAddKeepsAtMostMaxPerMinute(t *testing.T) {
	t.Parallel()
	db, name := testenv.Table(t)
	clk := clocktesting.NewFakePassiveClock(t0)
	s := queuewait.New(db, name, clk)
	longest := strings.Repeat("p", pool.MaxNameLength)
	long := 24*time.Hour - time.Millisecond // 8 digits of milliseconds
	for i := range queuewait.MaxPerMinute {
		if kept, err := s.Add(t.Context(), longest, long); err != nil || !kept {
			t.Fatalf("Add %d: %v, %v", i, kept, err)
		}
	}
	kept, err := s.Add(t.Context(), longest, time.Second)
	if err != nil || kept {
		t.Fatalf("Add past the bound: kept %v, %v; want not kept, no error", kept, err)
	}
	out, err := db.UpdateItem(t.Context(), &dynamodb.UpdateItemInput{
		TableName: aws.String(name), Key: table.Key(table.PoolPK(longest), table.WaitSK(t0)),
		UpdateExpression:         aws.String("SET #ttl = #ttl"),
		ExpressionAttributeNames: map[string]string{"#ttl": table.TTLAttribute},
		ReturnConsumedCapacity:   types.ReturnConsumedCapacityTotal,
	})
	if err != nil {
		t.Fatal(err)
	}
	if out.ConsumedCapacity == nil || aws.ToFloat64(out.ConsumedCapacity.CapacityUnits) != 1 {
		t.Fatalf("a full minute's item costs %v write units to update, want 1", out.ConsumedCapacity)
	}
	clk.SetTime(t0.Add(time.Minute))
	if kept, err := s.Add(t.Context(), longest, time.Second); err != nil || !kept {
		t.Fatalf("Add in the next minute: %v, %v", kept, err)
	}
	got, err := s.Recent(t.Context(), longest)
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != queuewait.MaxPerMinute+1 || got[0] != long || got[len(got)-1] != time.Second {
		t.Fatalf("Recent holds %d waits (first %v, last %v), want %d: the full minute and the next one's",
			len(got), got[0], got[len(got)-1], queuewait.MaxPerMinute+1)
	}
}
