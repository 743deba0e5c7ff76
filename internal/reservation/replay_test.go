package reservation_test

import (
	"slices"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"

	"github.com/runnerscaler/runnerscaler/internal/reservation"
	"github.com/runnerscaler/runnerscaler/internal/table"
)

// TestReplayOfACompletedJobWithinTheRetention: a queued delivery replayed up to
// the retention after its job completed finds the completed item and changes
// nothing: no reservation comes back.
func TestReplayOfACompletedJobWithinTheRetention(t *testing.T) {
	t.Parallel()
	s, clk := newStore(t)
	queued := delivery(1, reservation.Queued)
	record(t, s, queued, reservation.Applied)
	clk.SetTime(t0.Add(time.Minute))
	record(t, s, delivery(1, reservation.Completed), reservation.Applied)
	clk.SetTime(t0.Add(time.Minute + reservation.DefaultRetention - time.Second))
	record(t, s, queued, reservation.Stale)
	record(t, s, delivery(1, reservation.InProgress), reservation.Stale)
	if ids := activeIDs(t, s, "p"); len(ids) != 0 {
		t.Fatalf("active after the replay = %v, want none", ids)
	}
	r, ok, err := s.Job(t.Context(), "p", 1)
	if err != nil || !ok || r.State != reservation.Completed {
		t.Fatalf("job after the replay: %+v, %v, %v; want it completed", r, ok, err)
	}
}

// TestQueuedOfAJobOlderThanTheRetention: a queued delivery of a job created
// more than the retention ago writes nothing (TooOld) — not even after its
// item went with TTL, when nothing else would stop it; one created within the
// retention, or that does not say when its job was created, reserves as before.
func TestQueuedOfAJobOlderThanTheRetention(t *testing.T) {
	t.Parallel()
	s, clk, db, name := newStoreOver(t, func(db *dynamodb.Client) reservation.API { return db })
	aged := func(job int64, age time.Duration) reservation.Delivery {
		d := delivery(job, reservation.Queued)
		d.Created = clk.Now().Add(-age)
		return d
	}
	record(t, s, aged(1, reservation.DefaultRetention+time.Second), reservation.TooOld)
	record(t, s, aged(2, reservation.DefaultRetention), reservation.Applied)
	record(t, s, delivery(3, reservation.Queued), reservation.Applied) // Created unknown
	if _, ok, err := s.Job(t.Context(), "p", 1); err != nil || ok {
		t.Fatalf("job 1 has an item (%v, %v); want none", ok, err)
	}
	if got := activeIDs(t, s, "p"); !slices.Equal(got, []int64{2, 3}) {
		t.Fatalf("active = %v, want [2 3]", got)
	}

	// Job 4 completes; a day later TTL has removed its item; its queued comes again.
	queued := aged(4, 0)
	record(t, s, queued, reservation.Applied)
	clk.SetTime(t0.Add(time.Minute))
	record(t, s, delivery(4, reservation.Completed), reservation.Applied)
	if _, err := db.DeleteItem(t.Context(), &dynamodb.DeleteItemInput{TableName: aws.String(name),
		Key: table.Key(table.PoolPK("p"), table.JobSK(4))}); err != nil {
		t.Fatal(err)
	}
	clk.SetTime(t0.Add(reservation.DefaultRetention + time.Second))
	record(t, s, queued, reservation.TooOld)
	if _, ok, err := s.Job(t.Context(), "p", 4); err != nil || ok {
		t.Fatalf("job 4 has an item again (%v, %v); want none", ok, err)
	}
}

// TestUnroutedQueuedOfAJobOlderThanTheRetention: an unrouted job's queued is
// kept only if Record would take it.
func TestUnroutedQueuedOfAJobOlderThanTheRetention(t *testing.T) {
	t.Parallel()
	s, clk := newStore(t)
	for job, age := range map[int64]time.Duration{1: reservation.DefaultRetention + time.Second, 2: reservation.DefaultRetention} {
		u := reservation.Unrouted{JobID: job, Repository: "o/r", Labels: []string{"self-hosted", "gpu"}, Reason: "no pool",
			DeliveryID: "d", State: reservation.Queued, Created: clk.Now().Add(-age)}
		if err := s.RecordUnrouted(t.Context(), u); err != nil {
			t.Fatal(err)
		}
	}
	us, err := s.UnroutedQueued(t.Context())
	if err != nil || len(us) != 1 || us[0].JobID != 2 {
		t.Fatalf("unrouted = %+v, %v; want job 2 only", us, err)
	}
}
