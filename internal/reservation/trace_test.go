package reservation_test

import (
	"testing"
	"time"

	"github.com/runnerscaler/runnerscaler/internal/reservation"
)

func withRunner(d reservation.Delivery, id int64, name string) reservation.Delivery {
	d.RunnerID, d.RunnerName = id, name
	return d
}

func job(t *testing.T, s *reservation.Store, pool string, id int64) reservation.Reservation {
	t.Helper()
	r, ok, err := s.Job(t.Context(), pool, id)
	if err != nil || !ok {
		t.Fatalf("Job(%s, %d) = %v, %v", pool, id, ok, err)
	}
	return r
}

func TestRunnerAndTrailRecordedWithTheState(t *testing.T) {
	t.Parallel()
	s, clk := newStore(t)
	record(t, s, delivery(1, reservation.Queued), reservation.Applied)
	clk.SetTime(t0.Add(5 * time.Second))
	record(t, s, withRunner(delivery(1, reservation.InProgress), 42, "p-abcde-0"), reservation.Applied)
	// A redelivered in_progress naming another runner is stale and changes nothing.
	stale := withRunner(delivery(1, reservation.InProgress), 43, "p-other-0")
	stale.DeliveryID = "redelivered"
	record(t, s, stale, reservation.Stale)
	clk.SetTime(t0.Add(9 * time.Second))
	record(t, s, withRunner(delivery(1, reservation.Completed), 42, "p-abcde-0"), reservation.Applied)

	r := job(t, s, "p", 1)
	if r.State != reservation.Completed || r.RunnerID != 42 || r.RunnerName != "p-abcde-0" {
		t.Fatalf("job = state %s runner %d %q, want completed on runner 42 p-abcde-0", r.State, r.RunnerID, r.RunnerName)
	}
	trail := r.Trail()
	want := []struct {
		state reservation.State
		id    string
		at    time.Time
	}{
		{reservation.Queued, "d-1 queued", t0},
		{reservation.InProgress, "d-1 in_progress", t0.Add(5 * time.Second)},
		{reservation.Completed, "d-1 completed", t0.Add(9 * time.Second)},
	}
	if len(trail) != len(want) {
		t.Fatalf("trail = %+v, want %d entries", trail, len(want))
	}
	for i, w := range want {
		if trail[i].State != w.state || trail[i].DeliveryID != w.id || !trail[i].At().Equal(w.at) {
			t.Errorf("trail[%d] = %s %s at %s, want %s %s at %s", i, trail[i].State, trail[i].DeliveryID, trail[i].At(), w.state, w.id, w.at)
		}
	}
}

func TestRunnerFromACompletedThatOvertookItsInProgress(t *testing.T) {
	t.Parallel()
	s, _ := newStore(t)
	record(t, s, withRunner(delivery(2, reservation.Completed), 7, "p-xyz-0"), reservation.Applied)
	record(t, s, withRunner(delivery(2, reservation.InProgress), 7, "p-xyz-0"), reservation.Stale)
	r := job(t, s, "p", 2)
	if r.RunnerID != 7 || r.RunnerName != "p-xyz-0" {
		t.Fatalf("runner = %d %q, want 7 p-xyz-0", r.RunnerID, r.RunnerName)
	}
	if trail := r.Trail(); len(trail) != 1 || trail[0].State != reservation.Completed {
		t.Fatalf("trail = %+v, want only the completed delivery", trail)
	}
	if _, ok, err := s.Job(t.Context(), "p", 3); ok || err != nil {
		t.Fatalf("Job of an unknown job = %v, %v; want not found", ok, err)
	}
}

func TestUnfinishedKeepsExpiredJobs(t *testing.T) {
	t.Parallel()
	s, clk := newStore(t)
	record(t, s, delivery(1, reservation.Queued), reservation.Applied)
	record(t, s, delivery(2, reservation.Queued), reservation.Applied)
	record(t, s, delivery(3, reservation.Queued), reservation.Applied)
	record(t, s, delivery(3, reservation.Completed), reservation.Applied)
	clk.SetTime(t0.Add(11 * time.Minute)) // past the 10-minute duration
	if ids := activeIDs(t, s, "p"); len(ids) != 0 {
		t.Fatalf("Active after expiry = %v, want none", ids)
	}
	rs, err := s.Unfinished(t.Context(), "p")
	if err != nil {
		t.Fatal(err)
	}
	if got := ids(rs); len(got) != 2 || got[0] != 1 || got[1] != 2 {
		t.Fatalf("Unfinished = %v, want the expired queued jobs 1 and 2", got)
	}
}
