package reservation_test

import (
	"context"
	"slices"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/runnerscaler/runnerscaler/internal/reservation"
	"github.com/runnerscaler/runnerscaler/internal/table"
)

// meteredDB counts what the store reads, and can hide jobs from index queries as
// an index that has not caught up with their writes yet.
type meteredDB struct {
	*dynamodb.Client
	mu sync.Mutex
	// hidden jobs are left out of every index query's result.
	hidden map[int64]bool
	// indexScanned and tableScanned sum ScannedCount of index and table queries.
	indexScanned, tableScanned int
	gets                       []int64
}

func (m *meteredDB) Query(ctx context.Context, in *dynamodb.QueryInput, opts ...func(*dynamodb.Options)) (*dynamodb.QueryOutput, error) {
	out, err := m.Client.Query(ctx, in, opts...)
	if err != nil {
		return out, err
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if in.IndexName == nil {
		m.tableScanned += int(out.ScannedCount)
		return out, nil
	}
	m.indexScanned += int(out.ScannedCount)
	out.Items = slices.DeleteFunc(out.Items, func(it map[string]types.AttributeValue) bool { return m.hidden[jobID(it)] })
	return out, nil
}

func (m *meteredDB) GetItem(ctx context.Context, in *dynamodb.GetItemInput, opts ...func(*dynamodb.Options)) (*dynamodb.GetItemOutput, error) {
	sk := in.Key[table.SortKey].(*types.AttributeValueMemberS).Value
	id, _ := strconv.ParseInt(sk[len(table.JobSKPrefix):], 10, 64)
	m.mu.Lock()
	m.gets = append(m.gets, id)
	m.mu.Unlock()
	return m.Client.GetItem(ctx, in, opts...)
}

// reset zeroes the counters.
func (m *meteredDB) reset() {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.indexScanned, m.tableScanned, m.gets = 0, 0, nil
}

func jobID(item map[string]types.AttributeValue) int64 {
	v, _ := item["jobId"].(*types.AttributeValueMemberN)
	if v == nil {
		return 0
	}
	n, _ := strconv.ParseInt(v.Value, 10, 64)
	return n
}

// indexedIDs lists the jobs the active index holds for pool, whatever their state.
func indexedIDs(t *testing.T, db *dynamodb.Client, name, pool string) []int64 {
	t.Helper()
	var ids []int64
	pages := dynamodb.NewQueryPaginator(db, &dynamodb.QueryInput{
		TableName: aws.String(name), IndexName: aws.String(table.ActiveIndex),
		KeyConditionExpression:    aws.String("#a = :pk"),
		ExpressionAttributeNames:  map[string]string{"#a": table.ActiveKey},
		ExpressionAttributeValues: map[string]types.AttributeValue{":pk": table.Str(table.PoolPK(pool))},
	})
	for pages.HasMorePages() {
		page, err := pages.NextPage(t.Context())
		if err != nil {
			t.Fatalf("querying the active index: %v", err)
		}
		for _, it := range page.Items {
			ids = append(ids, jobID(it))
		}
	}
	slices.Sort(ids)
	return ids
}

func ids(rs []reservation.Reservation) []int64 {
	out := make([]int64, len(rs))
	for i, r := range rs {
		out[i] = r.JobID
	}
	slices.Sort(out)
	return out
}

// TestActiveReadsOnlyUnfinishedJobs: after completed jobs in every order
// (in order, completed first, redelivered, late queued), Active returns exactly the
// unfinished jobs and reads nothing else but the unfinished ones, expired included:
// the completed jobs, kept for a day, cost the sweep nothing. The whole-partition
// query it replaces read all 34 items.
func TestActiveReadsOnlyUnfinishedJobs(t *testing.T) {
	t.Parallel()
	m := &meteredDB{}
	s, clk, db, name := newStoreOver(t, func(db *dynamodb.Client) reservation.API { m.Client = db; return m })
	for job := int64(100); job < 130; job++ {
		var seq []reservation.State
		switch job % 4 {
		case 0:
			seq = []reservation.State{reservation.Queued, reservation.InProgress, reservation.Completed}
		case 1:
			seq = []reservation.State{reservation.Completed, reservation.Queued, reservation.InProgress}
		case 2:
			seq = []reservation.State{reservation.Queued, reservation.Completed, reservation.Completed, reservation.Queued}
		case 3:
			seq = []reservation.State{reservation.InProgress, reservation.Completed, reservation.Queued}
		}
		for _, st := range seq {
			if _, err := s.Record(t.Context(), delivery(job, st)); err != nil {
				t.Fatal(err)
			}
		}
	}
	record(t, s, delivery(1, reservation.Queued), reservation.Applied)
	record(t, s, delivery(1, reservation.Queued), reservation.Stale)
	record(t, s, delivery(2, reservation.InProgress), reservation.Applied)
	record(t, s, delivery(2, reservation.Queued), reservation.Stale)
	record(t, s, delivery(3, reservation.Queued), reservation.Applied)
	record(t, s, delivery(3, reservation.InProgress), reservation.Applied)
	short := delivery(4, reservation.Queued) // its completed is lost: it expires
	short.Duration = time.Minute
	record(t, s, short, reservation.Applied)
	clk.SetTime(t0.Add(2 * time.Minute))

	m.reset()
	rs, err := s.Active(t.Context(), "p")
	if err != nil {
		t.Fatal(err)
	}
	if got := ids(rs); !slices.Equal(got, []int64{1, 2, 3}) {
		t.Fatalf("active = %v, want [1 2 3]", got)
	}
	if m.tableScanned != 0 || m.indexScanned != 4 {
		t.Fatalf("Active read %d table items and %d index items; want 0 and 4 (3 active, 1 expired), not the 30 completed",
			m.tableScanned, m.indexScanned)
	}
	if got := indexedIDs(t, db, name, "p"); !slices.Equal(got, []int64{1, 2, 3, 4}) {
		t.Fatalf("index holds %v, want the unfinished jobs [1 2 3 4]", got)
	}
}

// TestNudgedJobSeenWhileTheIndexLags: a job the index does not show yet is still
// returned when it is named as nudged, read with strong consistency; a nudged job
// that is finished is not; a nudged job the index shows costs no extra read.
func TestNudgedJobSeenWhileTheIndexLags(t *testing.T) {
	t.Parallel()
	m := &meteredDB{hidden: map[int64]bool{1: true, 2: true}}
	s, _, _, _ := newStoreOver(t, func(db *dynamodb.Client) reservation.API { m.Client = db; return m })
	record(t, s, delivery(1, reservation.Queued), reservation.Applied)
	record(t, s, delivery(2, reservation.Completed), reservation.Applied)
	record(t, s, delivery(3, reservation.Queued), reservation.Applied)

	if got := activeIDs(t, s, "p"); !slices.Equal(got, []int64{3}) {
		t.Fatalf("without nudged jobs: active = %v, want [3] (the index lags behind job 1)", got)
	}
	m.reset()
	rs, err := s.Active(t.Context(), "p", 1, 1, 2, 3)
	if err != nil {
		t.Fatal(err)
	}
	if got := ids(rs); !slices.Equal(got, []int64{1, 3}) {
		t.Fatalf("nudged for 1, 2, 3: active = %v, want [1 3]", got)
	}
	for _, r := range rs {
		if r.JobID == 1 && (r.State != reservation.Queued || r.Amount != 1 || !r.EffectiveTime.Equal(t0) ||
			!r.ExpirationTime.Equal(t0.Add(10*time.Minute))) {
			t.Fatalf("job 1 read past the index: %+v", r)
		}
	}
	if slices.Sort(m.gets); !slices.Equal(m.gets, []int64{1, 2}) {
		t.Fatalf("strongly consistent reads of jobs %v, want [1 2]: only the nudged jobs the index lacks, once each", m.gets)
	}
}
