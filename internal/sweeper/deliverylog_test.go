package sweeper_test

import (
	"context"
	"errors"
	"maps"
	"path/filepath"
	"testing"
	"time"

	"k8s.io/utils/clock"

	"github.com/runnerscaler/runnerscaler/internal/pool"
	"github.com/runnerscaler/runnerscaler/internal/redeliver"
	"github.com/runnerscaler/runnerscaler/internal/sweeper"
)

// seen is a Recoverer that reads the log at its clock's time and finds u, or
// fails to read it (unreadable).
type seen struct {
	clock      clock.PassiveClock
	u          redeliver.Undelivered
	unreadable bool
}

func (s seen) Recover(context.Context) (redeliver.Undelivered, error) {
	if s.unreadable {
		return redeliver.Undelivered{}, errors.New("listing the App's webhook deliveries: 502")
	}
	u := s.u
	u.CheckedAt = s.clock.Now()
	return u, nil
}

// failingLog is a DeliveryLog whose writes fail.
type failingLog struct{ calls int }

func (f *failingLog) Put(context.Context, redeliver.Undelivered) error {
	f.calls++
	return errors.New("writing the failed webhook deliveries: throttled")
}

// mustPools is the local stack's pools file (octo, octo-gpu).
func mustPools(t *testing.T) *pool.Config {
	t.Helper()
	cfg, err := pool.Load(filepath.Join("..", "..", "local", "pools.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	return cfg
}

// TestScheduledSweepRecordsFailedDeliveries: a scheduled sweep writes what the
// delivery log showed, at the time it read it, also when nothing failed; a
// nudge does not touch it; a sweep that could not read the log leaves the last
// record as it was.
func TestScheduledSweepRecordsFailedDeliveries(t *testing.T) {
	t.Parallel()
	e := newEnv(t, nil)
	store := redeliver.NewStore(e.db, e.table)
	sweep := func(rec sweeper.Recoverer, ev sweeper.Event) {
		t.Helper()
		s, err := sweeper.New(mustPools(t), e.rs, e.status, e.leases, nil, e.clock, nil,
			sweeper.Options{Recoverer: rec, DeliveryLog: store})
		if err != nil {
			t.Fatal(err)
		}
		if _, err := s.Handle(t.Context(), ev); err != nil {
			t.Fatal(err)
		}
	}
	failing := redeliver.Undelivered{Window: 30 * time.Minute, ByStatus: map[int]int{401: 3, 502: 1}, Redelivered: 1,
		Latest: &redeliver.FailedDelivery{At: t0.Add(-time.Minute), StatusCode: 401, Action: "queued", GUID: "g4"}}
	sweep(seen{clock: e.clock, u: failing}, scheduled)
	got, ok, err := store.Get(t.Context())
	if err != nil || !ok {
		t.Fatalf("after a scheduled sweep: found %v, %v; want the record", ok, err)
	}
	if !got.CheckedAt.Equal(t0) || !maps.Equal(got.ByStatus, failing.ByStatus) || got.Redelivered != 1 ||
		got.Latest == nil || got.Latest.GUID != "g4" || got.Window != 30*time.Minute {
		t.Fatalf("recorded %+v (latest %+v), want %+v checked at %v", got, got.Latest, failing, t0)
	}

	e.clock.Step(time.Minute)
	sweep(seen{clock: e.clock, u: redeliver.Undelivered{Window: 30 * time.Minute, ByStatus: map[int]int{}}}, sweeper.Event{Pool: "octo"})
	if got, _, _ := store.Get(t.Context()); !got.CheckedAt.Equal(t0) {
		t.Fatalf("a nudge rewrote the record (checked at %v)", got.CheckedAt)
	}

	sweep(seen{clock: e.clock, u: redeliver.Undelivered{Window: 30 * time.Minute, ByStatus: map[int]int{}}}, scheduled)
	got, _, err = store.Get(t.Context())
	if err != nil || got.Count() != 0 || got.Latest != nil || !got.CheckedAt.Equal(t0.Add(time.Minute)) {
		t.Fatalf("after a clean scheduled sweep: %+v, %v; want none failed, checked at %v", got, err, t0.Add(time.Minute))
	}

	e.clock.Step(time.Minute)
	sweep(seen{clock: e.clock, unreadable: true}, scheduled)
	if got, _, _ := store.Get(t.Context()); !got.CheckedAt.Equal(t0.Add(time.Minute)) {
		t.Fatalf("a sweep that could not read the log rewrote the record (checked at %v)", got.CheckedAt)
	}
}

// TestDeliveryLogWriteFailureDoesNotFailTheSweep: the pools are swept and the
// invocation succeeds though the record could not be written.
func TestDeliveryLogWriteFailureDoesNotFailTheSweep(t *testing.T) {
	t.Parallel()
	e := newEnv(t, nil)
	e.queue(t, "octo", 1)
	log := &failingLog{}
	s, err := sweeper.New(mustPools(t), e.rs, e.status, e.leases, nil, e.clock, nil,
		sweeper.Options{Recoverer: seen{clock: e.clock, u: redeliver.Undelivered{ByStatus: map[int]int{}}}, DeliveryLog: log})
	if err != nil {
		t.Fatal(err)
	}
	r, err := s.Handle(t.Context(), scheduled)
	if err != nil || len(r.Swept) != 2 || log.calls != 1 {
		t.Fatalf("report %+v, err %v, %d writes; want both pools swept despite the failed write", r, err, log.calls)
	}
	if st := e.desired(t, "octo"); st.Desired != 1 {
		t.Fatalf("octo desired %d, want 1", st.Desired)
	}
}
