package reservation_test

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	clocktesting "k8s.io/utils/clock/testing"

	"github.com/runnerscaler/runnerscaler/internal/reservation"
	"github.com/runnerscaler/runnerscaler/local/testenv"
)

func TestMain(m *testing.M) { testenv.Main(m) }

var t0 = time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC)

func newStore(t *testing.T) (*reservation.Store, *clocktesting.FakePassiveClock) {
	t.Helper()
	db, name := testenv.Table(t)
	clk := clocktesting.NewFakePassiveClock(t0)
	return reservation.New(db, name, clk), clk
}

// newStoreOver is newStore reading and writing DynamoDB through wrap.
func newStoreOver(t *testing.T, wrap func(*dynamodb.Client) reservation.API) (*reservation.Store, *clocktesting.FakePassiveClock, *dynamodb.Client, string) {
	t.Helper()
	db, name := testenv.Table(t)
	clk := clocktesting.NewFakePassiveClock(t0)
	return reservation.New(wrap(db), name, clk), clk, db, name
}

func delivery(job int64, s reservation.State) reservation.Delivery {
	return reservation.Delivery{Pool: "p", JobID: job, RunID: 7, Repository: "o/r", DeliveryID: fmt.Sprint("d-", job, s),
		State: s, Amount: 1, Duration: 10 * time.Minute}
}

func activeIDs(t *testing.T, s *reservation.Store, pool string) []int64 {
	t.Helper()
	rs, err := s.Active(t.Context(), pool)
	if err != nil {
		t.Fatalf("Active: %v", err)
	}
	ids := make([]int64, len(rs))
	for i, r := range rs {
		ids[i] = r.JobID
	}
	slices.Sort(ids)
	return ids
}

func record(t *testing.T, s *reservation.Store, d reservation.Delivery, want reservation.Outcome) {
	t.Helper()
	got, err := s.Record(t.Context(), d)
	if err != nil {
		t.Fatalf("Record(%s job %d): %v", d.State, d.JobID, err)
	}
	if got != want {
		t.Fatalf("Record(%s job %d) = %s, want %s", d.State, d.JobID, got, want)
	}
}

func TestLifeCycleInOrder(t *testing.T) {
	t.Parallel()
	s, clk := newStore(t)
	record(t, s, delivery(1, reservation.Queued), reservation.Applied)
	rs, err := s.Active(t.Context(), "p")
	if err != nil || len(rs) != 1 {
		t.Fatalf("Active after queued = %v, %v; want one", rs, err)
	}
	r := rs[0]
	if r.State != reservation.Queued || r.Amount != 1 || r.Repository != "o/r" || r.RunID != 7 ||
		!r.EffectiveTime.Equal(t0) || !r.ExpirationTime.Equal(t0.Add(10*time.Minute)) {
		t.Fatalf("reservation = %+v", r)
	}

	clk.SetTime(t0.Add(5 * time.Minute))
	record(t, s, delivery(1, reservation.InProgress), reservation.Applied)
	rs, err = s.Active(t.Context(), "p")
	if err != nil {
		t.Fatal(err)
	}
	if len(rs) != 1 || !rs[0].EffectiveTime.Equal(t0) || !rs[0].ExpirationTime.Equal(t0.Add(15*time.Minute)) {
		t.Fatalf("in_progress must keep the effective time and restart expiration: %+v", rs)
	}
	record(t, s, delivery(1, reservation.Completed), reservation.Applied)
	if ids := activeIDs(t, s, "p"); len(ids) != 0 {
		t.Fatalf("active after completed = %v, want none", ids)
	}
}

func TestDuplicatesAndReorderingChangeNothing(t *testing.T) {
	t.Parallel()
	s, _ := newStore(t)
	// completed first, then the late queued and in_progress: nothing reserved.
	record(t, s, delivery(1, reservation.Completed), reservation.Applied)
	record(t, s, delivery(1, reservation.Queued), reservation.Stale)
	record(t, s, delivery(1, reservation.InProgress), reservation.Stale)
	// a redelivered queued is counted once.
	record(t, s, delivery(2, reservation.Queued), reservation.Applied)
	record(t, s, delivery(2, reservation.Queued), reservation.Stale)
	// in_progress before queued: the late queued changes nothing.
	record(t, s, delivery(3, reservation.InProgress), reservation.Applied)
	record(t, s, delivery(3, reservation.Queued), reservation.Stale)
	if got := activeIDs(t, s, "p"); !slices.Equal(got, []int64{2, 3}) {
		t.Fatalf("active = %v, want [2 3]", got)
	}
	rs, err := s.Active(t.Context(), "p")
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range rs {
		if r.JobID == 3 && r.State != reservation.InProgress {
			t.Errorf("job 3 state = %s, want in_progress kept", r.State)
		}
	}
}

func TestExpiryBoundaryAndPools(t *testing.T) {
	t.Parallel()
	s, clk := newStore(t)
	record(t, s, delivery(1, reservation.Queued), reservation.Applied)
	other := delivery(9, reservation.Queued)
	other.Pool = "q"
	record(t, s, other, reservation.Applied)

	clk.SetTime(t0.Add(10*time.Minute - time.Millisecond))
	if got := activeIDs(t, s, "p"); !slices.Equal(got, []int64{1}) {
		t.Fatalf("1 ms before expiry: active = %v, want [1]", got)
	}
	clk.SetTime(t0.Add(10 * time.Minute))
	if got := activeIDs(t, s, "p"); len(got) != 0 {
		t.Fatalf("at the expiration instant: active = %v, want none", got)
	}
	if got := activeIDs(t, s, "q"); len(got) != 0 {
		t.Fatalf("pool q at its expiration: %v", got)
	}
}

func TestExtend(t *testing.T) {
	t.Parallel()
	s, clk := newStore(t)
	record(t, s, delivery(1, reservation.Queued), reservation.Applied)
	record(t, s, delivery(2, reservation.InProgress), reservation.Applied)
	until := t0.Add(20 * time.Minute)
	if ok, err := s.Extend(t.Context(), "p", 1, until); err != nil || !ok {
		t.Fatalf("Extend queued job = %v, %v; want true", ok, err)
	}
	if ok, err := s.Extend(t.Context(), "p", 1, until); err != nil || ok {
		t.Fatalf("Extend to the same time again = %v, %v; want false", ok, err)
	}
	if ok, err := s.Extend(t.Context(), "p", 2, until); err != nil || ok {
		t.Fatalf("Extend in-progress job = %v, %v; want false (only queued jobs wait for capacity)", ok, err)
	}
	clk.SetTime(t0.Add(15 * time.Minute))
	rs, err := s.Active(t.Context(), "p")
	if err != nil {
		t.Fatal(err)
	}
	if len(rs) != 1 || rs[0].JobID != 1 || rs[0].Extensions != 1 || !rs[0].ExpirationTime.Equal(until) {
		t.Fatalf("after extension, at +15m: %+v, want job 1 extended once to +20m", rs)
	}
}

// TestExactlyOnceUnderConcurrency delivers random life cycles with duplicates, in
// random order, from 16 goroutines, and compares the active set with the model:
// a job is active iff the latest state delivered for it is queued or in_progress.
func TestExactlyOnceUnderConcurrency(t *testing.T) {
	t.Parallel()
	s, _, db, name := newStoreOver(t, func(db *dynamodb.Client) reservation.API { return db })
	rng := rand.New(rand.NewPCG(1, uint64(time.Now().UnixNano())))
	const jobs = 200
	var deliveries []reservation.Delivery
	var want []int64
	for job := int64(1); job <= jobs; job++ {
		last := reservation.State(1 + rng.IntN(3)) // the job got this far
		for st := reservation.Queued; st <= last; st++ {
			for range 1 + rng.IntN(3) { // 1–3 copies of each delivery
				deliveries = append(deliveries, delivery(job, st))
			}
		}
		if last != reservation.Completed {
			want = append(want, job)
		}
	}
	rng.Shuffle(len(deliveries), func(i, j int) { deliveries[i], deliveries[j] = deliveries[j], deliveries[i] })

	work := make(chan reservation.Delivery)
	var wg sync.WaitGroup
	var mu sync.Mutex
	var errs []error
	for range 16 {
		wg.Go(func() {
			for d := range work {
				if _, err := s.Record(t.Context(), d); err != nil {
					mu.Lock()
					errs = append(errs, err)
					mu.Unlock()
				}
			}
		})
	}
	for _, d := range deliveries {
		work <- d
	}
	close(work)
	wg.Wait()
	if len(errs) > 0 {
		t.Fatalf("%d of %d deliveries failed, first: %v", len(errs), len(deliveries), errs[0])
	}
	if got := activeIDs(t, s, "p"); !slices.Equal(got, want) {
		t.Fatalf("%d deliveries: active set has %d jobs, model %d\n got %v\nwant %v", len(deliveries), len(got), len(want), got, want)
	}
	// The index holds exactly the unfinished jobs, whatever the order of their deliveries.
	if got := indexedIDs(t, db, name, "p"); !slices.Equal(got, want) {
		t.Fatalf("active index holds %d jobs, model %d\n got %v\nwant %v", len(got), len(want), got, want)
	}
}
