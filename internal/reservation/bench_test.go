package reservation

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	clocktesting "k8s.io/utils/clock/testing"

	"github.com/runnerscaler/runnerscaler/local/testenv"
)

// capacityMeter asks DynamoDB for the capacity each read consumes and adds it up.
type capacityMeter struct {
	API
	mu         sync.Mutex
	rcu, items float64
}

func (m *capacityMeter) Query(ctx context.Context, in *dynamodb.QueryInput, opts ...func(*dynamodb.Options)) (*dynamodb.QueryOutput, error) {
	c := *in
	c.ReturnConsumedCapacity = types.ReturnConsumedCapacityTotal
	out, err := m.API.Query(ctx, &c, opts...)
	if err == nil {
		m.add(out.ConsumedCapacity, float64(out.ScannedCount))
	}
	return out, err
}

func (m *capacityMeter) GetItem(ctx context.Context, in *dynamodb.GetItemInput, opts ...func(*dynamodb.Options)) (*dynamodb.GetItemOutput, error) {
	c := *in
	c.ReturnConsumedCapacity = types.ReturnConsumedCapacityTotal
	out, err := m.API.GetItem(ctx, &c, opts...)
	if err == nil {
		m.add(out.ConsumedCapacity, 1)
	}
	return out, err
}

func (m *capacityMeter) add(cc *types.ConsumedCapacity, items float64) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if cc == nil || cc.CapacityUnits == nil {
		m.rcu = -1e9 // the server reported no capacity: make it obvious in the table
		return
	}
	m.rcu += *cc.CapacityUnits
	m.items += items
}

// measure returns the read capacity units and items fn's reads consumed.
func (m *capacityMeter) measure(fn func()) (rcu, items float64) {
	m.mu.Lock()
	m.rcu, m.items = 0, 0
	m.mu.Unlock()
	fn()
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.rcu, m.items
}

const benchActive = 20

// BenchmarkSweepRead: the read capacity units one sweep's reservation read
// consumes in a pool with 20 active jobs (10 queued, 10 in progress) as its
// completed jobs, kept a day, grow from 1,000 to 10,000 — before the index
// (full-partition: the strongly consistent query of the whole partition) and
// with it (active-index: what Active reads). The capacity is the server's own count
// (ReturnConsumedCapacity TOTAL): dynalite, like DynamoDB, sums the sizes of the
// items a request reads, rounds up to 4 KB units, and halves them for eventually
// consistent reads (the index's). A query reads at most 1 MB per page; the sum is
// over all pages.
func BenchmarkSweepRead(b *testing.B) {
	db, name := testenv.Table(b)
	clk := clocktesting.NewFakePassiveClock(time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC))
	meter := &capacityMeter{API: db}
	s := New(meter, name, clk)
	ctx := b.Context()
	// A job's deliveries as the webhook records them (item sizes as in production).
	record := func(job int64, states ...State) error {
		for _, st := range states {
			_, err := s.Record(ctx, Delivery{Pool: "p", JobID: job, RunID: job / 3, Repository: "octo-org/octo-repo",
				DeliveryID: fmt.Sprintf("%08x-0000-11ef-8a5e-%012x", job, int64(st)), State: st, Amount: 1, Duration: time.Hour})
			if err != nil {
				return err
			}
		}
		return nil
	}
	if err := concurrently(benchActive, func(i int) error {
		if i%2 == 0 {
			return record(int64(1+i), Queued)
		}
		return record(int64(1+i), Queued, InProgress)
	}); err != nil {
		b.Fatal(err)
	}
	completed := 0
	for _, n := range []int{1_000, 10_000} {
		if err := concurrently(n-completed, func(i int) error {
			return record(int64(1_000_000+completed+i), Queued, InProgress, Completed)
		}); err != nil {
			b.Fatal(err)
		}
		completed = n
		b.Run(fmt.Sprintf("completed=%d", n), func(b *testing.B) {
			b.Run("active-index", func(b *testing.B) {
				var rcu, items float64
				for b.Loop() {
					rcu, items = meter.measure(func() {
						rs, err := s.Active(ctx, "p")
						if err != nil || len(rs) != benchActive {
							b.Fatalf("Active: %d reservations, %v; want %d", len(rs), err, benchActive)
						}
					})
				}
				b.ReportMetric(rcu, "RCU/sweep")
				b.ReportMetric(items, "items-read/sweep")
			})
		})
	}
}

// concurrently runs fn(0..n-1) on 8 goroutines and returns the first error.
func concurrently(n int, fn func(i int) error) error {
	work := make(chan int)
	errs := make(chan error, n)
	var wg sync.WaitGroup
	for range 8 {
		wg.Go(func() {
			for i := range work {
				if err := fn(i); err != nil {
					errs <- err
				}
			}
		})
	}
	for i := range n {
		work <- i
	}
	close(work)
	wg.Wait()
	close(errs)
	return <-errs
}
