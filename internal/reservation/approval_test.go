package reservation_test

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/runnerscaler/runnerscaler/internal/pool"
	"github.com/runnerscaler/runnerscaler/internal/reservation"
	"github.com/runnerscaler/runnerscaler/internal/scaling"
	"github.com/runnerscaler/runnerscaler/internal/table"
)

// The five deliveries of a job held for an environment's approval, in the order
// GitHub sends them; q1 and q2 are both `queued`, told apart by delivery id.
var gated = []string{"q1", "w", "q2", "ip", "c"}

func gatedDelivery(job int64, name string) reservation.Delivery {
	state := map[string]reservation.State{"q1": reservation.Queued, "q2": reservation.Queued,
		"w": reservation.Waiting, "ip": reservation.InProgress, "c": reservation.Completed}[name]
	return reservation.Delivery{Pool: "p", JobID: job, RunID: 7, Repository: "o/r", DeliveryID: fmt.Sprint("d-", job, "-", name),
		State: state, Amount: 1, Duration: 10 * time.Minute}
}

// hintedDelivery is gatedDelivery as GitHub renders the first queued of a job
// held at its creation: its workflow_job.status already says waiting.
func hintedDelivery(job int64, name string) reservation.Delivery {
	d := gatedDelivery(job, name)
	d.AwaitsApproval = name == "q1"
	return d
}

// expected is what a job must look like once the deliveries in got arrived, in
// whatever order: its stored state, whether it is held, and the runners it
// asks for. With hinted, the first queued says the job waits, as the waiting does.
func expected(got map[string]bool, hinted bool) (reservation.State, bool, int) {
	waiting := got["w"] || hinted && got["q1"]
	switch {
	case got["c"]:
		return reservation.Completed, false, 0
	case got["ip"]:
		return reservation.InProgress, false, 1
	case waiting && !(got["q1"] && got["q2"]):
		return reservation.Queued, true, 0
	}
	return reservation.Queued, false, 1
}

func permutations(xs []string) [][]string {
	if len(xs) <= 1 {
		return [][]string{append([]string(nil), xs...)}
	}
	var out [][]string
	for i, x := range xs {
		rest := append(append([]string(nil), xs[:i]...), xs[i+1:]...)
		for _, p := range permutations(rest) {
			out = append(out, append([]string{x}, p...))
		}
	}
	return out
}

// demand is what the sweeper asks for in pool p: scaling.Decide over Active.
func demand(t *testing.T, s *reservation.Store, job int64, now time.Time) int {
	t.Helper()
	rs, err := s.Active(t.Context(), "p", job)
	if err != nil {
		t.Fatalf("Active: %v", err)
	}
	var mine []reservation.Reservation
	for _, r := range rs {
		if r.JobID == job {
			mine = append(mine, r)
		}
	}
	maxReplicas := 10
	p := &pool.Pool{Name: "p", MaxReplicas: &maxReplicas}
	return scaling.Decide(p, mine, scaling.Previous{}, now).Reserved
}

// TestEveryOrderOfAnApprovalGate sends the five deliveries of a job held for
// approval in each of their 120 orders, each delivery redelivered right after it
// and every earlier one redelivered again at the end; once with a first queued
// that does not say the job waits, once with one that does. After every
// delivery the job's stored state, its hold and the sweeper's demand are those
// of the deliveries received so far: a waiting job holds no runner, the
// approval's queued makes it count once, in_progress and completed end it.
func TestEveryOrderOfAnApprovalGate(t *testing.T) {
	t.Parallel()
	for _, hinted := range []bool{false, true} {
		t.Run(fmt.Sprint("hinted=", hinted), func(t *testing.T) {
			t.Parallel()
			everyOrder(t, hinted)
		})
	}
}

func everyOrder(t *testing.T, hinted bool) {
	s, clk := newStore(t)
	deliver := gatedDelivery
	if hinted {
		deliver = hintedDelivery
	}
	for i, order := range permutations(gated) {
		job := int64(1000 + i)
		got := map[string]bool{}
		check := func(after string) {
			t.Helper()
			state, held, want := expected(got, hinted)
			r, ok, err := s.Job(t.Context(), "p", job)
			if err != nil || !ok {
				t.Fatalf("%v after %s: Job = %v, %v", order, after, ok, err)
			}
			if r.State != state || r.Held() != held {
				t.Fatalf("%v after %s: state %s held %v, want %s held %v", order, after, r.State, r.Held(), state, held)
			}
			if d := demand(t, s, job, clk.Now()); d != want {
				t.Fatalf("%v after %s: demand %d, want %d", order, after, d, want)
			}
		}
		for _, name := range order {
			clk.SetTime(clk.Now().Add(time.Second))
			if _, err := s.Record(t.Context(), deliver(job, name)); err != nil {
				t.Fatal(err)
			}
			got[name] = true
			check(name)
			if out, err := s.Record(t.Context(), deliver(job, name)); err != nil || out != reservation.Stale {
				t.Fatalf("%v: redelivered %s = %s, %v; want stale", order, name, out, err)
			}
			check(name + " redelivered")
		}
		for _, name := range order {
			if out, err := s.Record(t.Context(), deliver(job, name)); err != nil || out != reservation.Stale {
				t.Fatalf("%v: %s redelivered at the end = %s, %v; want stale", order, name, out, err)
			}
		}
		check("every redelivery")
	}
}

// TestApprovalGateOutcomes: the waiting holds the job (Held), the approval's
// queued releases it (Released) as a job queued at the release, and a waiting
// that comes after both queued only records itself (Applied).
func TestApprovalGateOutcomes(t *testing.T) {
	t.Parallel()
	s, clk := newStore(t)
	record(t, s, gatedDelivery(1, "q1"), reservation.Applied)
	record(t, s, gatedDelivery(1, "w"), reservation.Held)
	clk.SetTime(clk.Now().Add(time.Hour))
	record(t, s, gatedDelivery(1, "q2"), reservation.Released)
	r, _, err := s.Job(t.Context(), "p", 1)
	if err != nil {
		t.Fatal(err)
	}
	if !r.EffectiveTime.Equal(clk.Now()) || !r.ExpirationTime.Equal(clk.Now().Add(10*time.Minute)) {
		t.Fatalf("released job: effective %s, expires %s; want %s and 10m later", r.EffectiveTime, r.ExpirationTime, clk.Now())
	}
	var states []string
	for _, seen := range r.Trail() {
		states = append(states, seen.State.String()+":"+seen.DeliveryID)
	}
	if got := strings.Join(states, " "); got != "queued:d-1-q1 waiting:d-1-w queued:d-1-q2" {
		t.Fatalf("trail = %s", got)
	}

	record(t, s, gatedDelivery(2, "q1"), reservation.Applied)
	record(t, s, gatedDelivery(2, "q2"), reservation.Applied)
	record(t, s, gatedDelivery(2, "w"), reservation.Applied)
	if ids := activeIDs(t, s, "p"); len(ids) != 2 {
		t.Fatalf("active = %v, want jobs 1 and 2", ids)
	}

	// A first queued that says the job waits holds it by itself; the waiting
	// after it changes nothing.
	record(t, s, hintedDelivery(4, "q1"), reservation.Held)
	record(t, s, hintedDelivery(4, "w"), reservation.Stale)
	record(t, s, hintedDelivery(4, "q2"), reservation.Released)

	// Deliveries without an id: a second one is the same delivery again.
	anonymous := func(name string) reservation.Delivery {
		d := gatedDelivery(3, name)
		d.DeliveryID = ""
		return d
	}
	record(t, s, anonymous("q1"), reservation.Applied)
	record(t, s, anonymous("w"), reservation.Held)
	record(t, s, anonymous("q2"), reservation.Stale)
}

// TestHeldJobOutlivesItsReservationAndTTL: a job held for three days — past its
// reservation's duration and past the retention after it — keeps its item (the
// TTL is beyond GitHub's 30-day limit), and the approval's queued, whose
// created_at is three days old, releases it instead of being refused as too old.
func TestHeldJobOutlivesItsReservationAndTTL(t *testing.T) {
	t.Parallel()
	s, clk, db, name := newStoreOver(t, func(c *dynamodb.Client) reservation.API { return c })
	created := clk.Now()
	q1 := gatedDelivery(1, "q1")
	q1.Created = created
	record(t, s, q1, reservation.Applied)
	record(t, s, gatedDelivery(1, "w"), reservation.Held)
	if ttl := ttlOf(t, db, name, 1); !ttl.After(clk.Now().Add(reservation.MaxApprovalWait)) {
		t.Fatalf("held item's TTL %s is not past %s", ttl, reservation.MaxApprovalWait)
	}
	clk.SetTime(clk.Now().Add(3 * 24 * time.Hour))
	if d := demand(t, s, 1, clk.Now()); d != 0 {
		t.Fatalf("demand while held = %d", d)
	}
	q2 := gatedDelivery(1, "q2")
	q2.Created = created
	record(t, s, q2, reservation.Released)
	if d := demand(t, s, 1, clk.Now()); d != 1 {
		t.Fatalf("demand after the approval = %d, want 1", d)
	}
	if ttl := ttlOf(t, db, name, 1); !ttl.After(clk.Now()) {
		t.Fatalf("released item's TTL %s is in the past", ttl)
	}
	// A late redelivery of the first queued changes nothing.
	record(t, s, q1, reservation.Stale)
}

// TestOldQueuedReleasesOnlyAHeldJob: a queued of a job created more than the
// retention ago still creates nothing, and counts nothing for a job that was
// never held; if the held job's item is gone, the approval's queued without an
// age (a job that deploys to an environment) creates a fresh reservation.
func TestOldQueuedReleasesOnlyAHeldJob(t *testing.T) {
	t.Parallel()
	s, clk := newStore(t)
	created := clk.Now()
	record(t, s, gatedDelivery(1, "q1"), reservation.Applied)
	clk.SetTime(clk.Now().Add(reservation.DefaultRetention + time.Hour))
	late := gatedDelivery(1, "q2")
	late.Created = created
	record(t, s, late, reservation.TooOld)
	fresh := gatedDelivery(3, "q2")
	fresh.Created = created
	record(t, s, fresh, reservation.TooOld)
	fresh.Created = time.Time{}
	record(t, s, fresh, reservation.Applied)
	if d := demand(t, s, 3, clk.Now()); d != 1 {
		t.Fatalf("demand of a fresh approval = %d, want 1", d)
	}
}

func ttlOf(t *testing.T, db *dynamodb.Client, tableName string, job int64) time.Time {
	t.Helper()
	out, err := db.GetItem(t.Context(), &dynamodb.GetItemInput{TableName: aws.String(tableName),
		Key: table.Key(table.PoolPK("p"), table.JobSK(job)), ConsistentRead: aws.Bool(true)})
	if err != nil {
		t.Fatal(err)
	}
	n, ok := out.Item[table.TTLAttribute].(*types.AttributeValueMemberN)
	if !ok {
		t.Fatalf("item %v has no TTL", out.Item)
	}
	var sec int64
	if _, err := fmt.Sscan(n.Value, &sec); err != nil {
		t.Fatal(err)
	}
	return time.Unix(sec, 0)
}
