package reservation_test

import (
	"context"
	"slices"
	"strconv"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	clocktesting "k8s.io/utils/clock/testing"

	"github.com/runnerscaler/runnerscaler/internal/reservation"
	"github.com/runnerscaler/runnerscaler/internal/table"
	"github.com/runnerscaler/runnerscaler/local/testenv"
)

// readPaths are the ways Active reads a pool's own jobs: the index.
var readPaths = []struct {
	name   string
	window time.Duration
}{{"index", 0}}

func newStoreWindow(t *testing.T, window time.Duration) *reservation.Store {
	t.Helper()
	db, name := testenv.Table(t)
	return reservation.New(db, name, clocktesting.NewFakePassiveClock(t0))
}

// in is delivery d routed to pool.
func in(pool string, d reservation.Delivery) reservation.Delivery {
	d.Pool = pool
	return d
}

// counted says in which pools Active counts job 1, each time it does.
func counted(t *testing.T, s *reservation.Store, pools ...string) []string {
	t.Helper()
	var out []string
	for _, p := range pools {
		for _, id := range activeIDs(t, s, p) {
			if id == 1 {
				out = append(out, p)
			}
		}
	}
	return out
}

func wantCounted(t *testing.T, s *reservation.Store, when string, want ...string) {
	t.Helper()
	if got := counted(t, s, "linux", "gpu", "big"); !slices.Equal(got, want) {
		t.Fatalf("%s: job 1 counted in %v, want %v", when, got, want)
	}
}

func follow(t *testing.T, s *reservation.Store, home, runnerPool string) (string, bool) {
	t.Helper()
	from, moved, err := s.FollowRunner(t.Context(), home, 1, runnerPool)
	if err != nil {
		t.Fatalf("FollowRunner(%s, 1, %s): %v", home, runnerPool, err)
	}
	return from, moved
}

// TestRunnerOfAnotherPoolTakesTheCount: a job routed to linux that a gpu
// runner takes is counted in gpu from then on, once, through a redelivered
// in_progress; its completion ends the count everywhere and removes gpu's
// pointer to it.
func TestRunnerOfAnotherPoolTakesTheCount(t *testing.T) {
	t.Parallel()
	for _, path := range readPaths {
		t.Run(path.name, func(t *testing.T) {
			t.Parallel()
			s := newStoreWindow(t, path.window)
			record(t, s, in("linux", delivery(1, reservation.Queued)), reservation.Applied)
			wantCounted(t, s, "queued", "linux")
			record(t, s, in("linux", delivery(1, reservation.InProgress)), reservation.Applied)
			if from, moved := follow(t, s, "linux", "gpu"); !moved || from != "linux" {
				t.Fatalf("FollowRunner = from %q, moved %v; want moved from linux", from, moved)
			}
			wantCounted(t, s, "on a gpu runner", "gpu")
			record(t, s, in("linux", delivery(1, reservation.InProgress)), reservation.Stale)
			if _, moved := follow(t, s, "linux", "gpu"); moved {
				t.Fatal("a redelivered in_progress moved the job again")
			}
			wantCounted(t, s, "after the redelivery", "gpu")
			r, ok, err := s.Job(t.Context(), "linux", 1)
			if err != nil || !ok || r.CountedIn != "gpu" || r.MovedBy != reservation.MovedByRunner || r.CountsIn() != "gpu" {
				t.Fatalf("home item = %+v, %v, %v; want counted in gpu, moved by a runner", r, ok, err)
			}
			if ms, err := s.MovedIn(t.Context(), "gpu"); err != nil || len(ms) != 1 || ms[0].JobID != 1 || ms[0].Pool != "linux" {
				t.Fatalf("MovedIn(gpu) = %+v, %v; want job 1 of linux", ms, err)
			}
			record(t, s, in("linux", delivery(1, reservation.Completed)), reservation.Applied)
			wantCounted(t, s, "completed")
			if ms, err := s.MovedIn(t.Context(), "gpu"); err != nil || len(ms) != 0 {
				t.Fatalf("MovedIn(gpu) after completion = %+v, %v; want none", ms, err)
			}
		})
	}
}

// TestCompletedFirstCountsNowhere: a `completed` from a gpu runner that
// overtakes the `queued` and `in_progress` moves the finished job's count, which
// counts nowhere, and the late deliveries bring no count back.
func TestCompletedFirstCountsNowhere(t *testing.T) {
	t.Parallel()
	s := newStoreWindow(t, 0)
	record(t, s, in("linux", delivery(1, reservation.Completed)), reservation.Applied)
	if _, moved := follow(t, s, "linux", "gpu"); !moved {
		t.Fatal("the completed job's count was not moved to its runner's pool")
	}
	record(t, s, in("linux", delivery(1, reservation.InProgress)), reservation.Stale)
	if _, moved := follow(t, s, "linux", "gpu"); moved {
		t.Fatal("the late in_progress moved the job again")
	}
	record(t, s, in("linux", delivery(1, reservation.Queued)), reservation.Stale)
	wantCounted(t, s, "after every delivery")
}

// TestNoItemNoMove: a runner's job without a recorded delivery is not moved,
// and no pool counts it.
func TestNoItemNoMove(t *testing.T) {
	t.Parallel()
	s := newStoreWindow(t, 0)
	if _, moved := follow(t, s, "linux", "gpu"); moved {
		t.Fatal("moved a job with no item")
	}
	wantCounted(t, s, "no item")
}

func activeJob(t *testing.T, s *reservation.Store, pool string) reservation.Reservation {
	t.Helper()
	rs, err := s.Active(t.Context(), pool)
	if err != nil || len(rs) != 1 {
		t.Fatalf("Active(%s) = %+v, %v; want one job", pool, rs, err)
	}
	return rs[0]
}

func spill(t *testing.T, s *reservation.Store, r reservation.Reservation, from, to string) bool {
	t.Helper()
	moved, err := s.Spill(t.Context(), r, from, to)
	if err != nil {
		t.Fatalf("Spill(job %d, %s -> %s): %v", r.JobID, from, to, err)
	}
	return moved
}

// TestTwoSweepersSpillOnce: two sweepers that read the same queued job spill
// it once; a move whose expected pool is stale changes nothing.
func TestTwoSweepersSpillOnce(t *testing.T) {
	t.Parallel()
	s := newStoreWindow(t, 0)
	record(t, s, in("linux", delivery(1, reservation.Queued)), reservation.Applied)
	read := activeJob(t, s, "linux")
	if !spill(t, s, read, "linux", "big") {
		t.Fatal("the first sweeper's spill did not move the job")
	}
	if spill(t, s, read, "linux", "big") || spill(t, s, read, "linux", "gpu") {
		t.Fatal("a spill with a stale expected pool moved the job")
	}
	wantCounted(t, s, "spilled to big", "big")
	// The job as big's sweeper reads it can move on.
	if !spill(t, s, activeJob(t, s, "big"), "big", "gpu") {
		t.Fatal("big could not spill the job on")
	}
	wantCounted(t, s, "spilled on to gpu", "gpu")
}

// TestSpillOnlyWhileQueued: a job that started between the sweeper's read and
// its spill stays where it is counted.
func TestSpillOnlyWhileQueued(t *testing.T) {
	t.Parallel()
	s := newStoreWindow(t, 0)
	record(t, s, in("linux", delivery(1, reservation.Queued)), reservation.Applied)
	read := activeJob(t, s, "linux")
	record(t, s, in("linux", delivery(1, reservation.InProgress)), reservation.Applied)
	if spill(t, s, read, "linux", "big") {
		t.Fatal("spilled a job in progress")
	}
	wantCounted(t, s, "in progress", "linux")
}

// TestPointerOfAMovedOnJobCountsNothing: a job spilled to big and then taken
// by a runner of its home pool is counted at home only; big's pointer, left
// behind, counts nothing, and neither does a move that lost its condition
// after writing its pointer.
func TestPointerOfAMovedOnJobCountsNothing(t *testing.T) {
	t.Parallel()
	s := newStoreWindow(t, 0)
	record(t, s, in("linux", delivery(1, reservation.Queued)), reservation.Applied)
	read := activeJob(t, s, "linux")
	if !spill(t, s, read, "linux", "big") {
		t.Fatal("spill did not move the job")
	}
	// A stale spill to gpu writes gpu's pointer, then loses its condition.
	if spill(t, s, read, "linux", "gpu") {
		t.Fatal("a stale spill moved the job")
	}
	wantCounted(t, s, "spilled, with a lost move's pointer in gpu", "big")
	record(t, s, in("linux", delivery(1, reservation.InProgress)), reservation.Applied)
	if from, moved := follow(t, s, "linux", "linux"); !moved || from != "big" {
		t.Fatalf("FollowRunner to the home pool = from %q, moved %v; want moved from big", from, moved)
	}
	wantCounted(t, s, "on a runner of its home pool", "linux")
	if r, _, err := s.Job(t.Context(), "linux", 1); err != nil || r.CountedIn != "" || r.Moved() {
		t.Fatalf("home item = %+v, %v; want counted at home", r, err)
	}
}

// TestJobKeepsItsLabelsAndScope: a delivery's labels and scope are kept on the
// job's item for a spill to check against the overflow pool; a delivery
// without labels (from an older webhook) leaves none.
func TestJobKeepsItsLabelsAndScope(t *testing.T) {
	t.Parallel()
	s := newStoreWindow(t, 0)
	d := in("linux", delivery(1, reservation.Queued))
	d.Labels, d.Organization, d.Enterprise = []string{"self-hosted", "linux"}, "o", "e"
	record(t, s, d, reservation.Applied)
	record(t, s, in("linux", delivery(1, reservation.InProgress)), reservation.Applied)
	record(t, s, in("linux", delivery(2, reservation.Queued)), reservation.Applied)
	rs, err := s.Active(t.Context(), "linux")
	if err != nil || len(rs) != 2 {
		t.Fatalf("Active = %+v, %v", rs, err)
	}
	slices.SortFunc(rs, func(a, b reservation.Reservation) int { return int(a.JobID - b.JobID) })
	if j := rs[0].Job(); !slices.Equal(j.Labels, d.Labels) || j.Organization != "o" || j.Enterprise != "e" || j.Repository != "o/r" {
		t.Fatalf("job 1 as routing sees it: %+v", j)
	}
	if j := rs[1].Job(); len(j.Labels) != 0 || j.Organization != "" {
		t.Fatalf("job 2 recorded without labels: %+v", j)
	}
}

// TestCountedInARemovedPoolCountsAtHome: a job spilled to big, a pool the
// pools file no longer has, counts in its home pool again, on both read paths.
func TestCountedInARemovedPoolCountsAtHome(t *testing.T) {
	t.Parallel()
	for _, path := range readPaths {
		t.Run(path.name, func(t *testing.T) {
			t.Parallel()
			db, name := testenv.Table(t)
			clk := clocktesting.NewFakePassiveClock(t0)
			s := reservation.New(db, name, clk)
			record(t, s, in("linux", delivery(1, reservation.Queued)), reservation.Applied)
			if !spill(t, s, activeJob(t, s, "linux"), "linux", "big") {
				t.Fatal("spill did not move the job")
			}
			wantCounted(t, s, "spilled to big", "big")
			known := func(p string) bool { return p != "big" }
			after := reservation.New(db, name, clk, reservation.WithPools(known))
			if got := counted(t, after, "linux", "gpu"); !slices.Equal(got, []string{"linux"}) {
				t.Fatalf("with big removed, job 1 counted in %v, want [linux]", got)
			}
		})
	}
}

// TestSpilledJobHeldForApprovalCountsOnceWhenReleased: a job spilled to big
// and then held for its environment's approval counts nowhere while held, and
// once released days later counts in exactly one pool, even after DynamoDB's
// TTL has removed big's pointer, which was written for the job's first
// reservation: the hold brings the count home.
func TestSpilledJobHeldForApprovalCountsOnceWhenReleased(t *testing.T) {
	t.Parallel()
	db, name := testenv.Table(t)
	clk := clocktesting.NewFakePassiveClock(t0)
	s := reservation.New(db, name, clk)
	record(t, s, in("linux", gatedDelivery(1, "q1")), reservation.Applied)
	if !spill(t, s, activeJob(t, s, "linux"), "linux", "big") {
		t.Fatal("spill did not move the job")
	}
	wantCounted(t, s, "spilled to big", "big")
	record(t, s, in("linux", gatedDelivery(1, "w")), reservation.Held)
	wantCounted(t, s, "held for its approval")

	clk.SetTime(clk.Now().Add(3 * 24 * time.Hour))
	pointer := table.Key(table.PoolPK("big"), table.MovedSK(1))
	out, err := db.GetItem(t.Context(), &dynamodb.GetItemInput{TableName: aws.String(name), Key: pointer, ConsistentRead: aws.Bool(true)})
	if err != nil {
		t.Fatal(err)
	}
	ttl, ok := out.Item[table.TTLAttribute].(*types.AttributeValueMemberN)
	if !ok {
		t.Fatalf("big's pointer %v has no TTL", out.Item)
	}
	if expires, err := strconv.ParseInt(ttl.Value, 10, 64); err != nil || expires >= clk.Now().Unix() {
		t.Fatalf("big's pointer expires at %s (%v), not before the approval", ttl.Value, err)
	}
	// DynamoDB's TTL may delete an expired item at any time: here it has.
	if _, err := db.DeleteItem(t.Context(), &dynamodb.DeleteItemInput{TableName: aws.String(name), Key: pointer}); err != nil {
		t.Fatal(err)
	}
	record(t, s, in("linux", gatedDelivery(1, "q2")), reservation.Released)
	wantCounted(t, s, "approved three days later", "linux")
}

// laggingIndex answers the active index's queries with the answer it gave
// when lag was set, as an index that has not caught up with later writes.
type laggingIndex struct {
	reservation.API
	lag  bool
	last map[string]*dynamodb.QueryOutput
}

func (l *laggingIndex) Query(ctx context.Context, in *dynamodb.QueryInput, opts ...func(*dynamodb.Options)) (*dynamodb.QueryOutput, error) {
	if in.IndexName == nil || *in.IndexName != table.ActiveIndex {
		return l.API.Query(ctx, in, opts...)
	}
	key := in.ExpressionAttributeValues[":pk"].(*types.AttributeValueMemberS).Value
	if out, ok := l.last[key]; ok && l.lag {
		return out, nil
	}
	out, err := l.API.Query(ctx, in, opts...)
	if err == nil {
		l.last[key] = out
	}
	return out, err
}

// TestMoveHomeWhileTheIndexLags: a spilled job that a runner of its home
// pool takes counts at home even while the home pool's index still shows it
// counted in the overflow pool: it is not counted nowhere for a sweep.
func TestMoveHomeWhileTheIndexLags(t *testing.T) {
	t.Parallel()
	idx := &laggingIndex{last: map[string]*dynamodb.QueryOutput{}}
	s, _, _, _ := newStoreOver(t, func(db *dynamodb.Client) reservation.API { idx.API = db; return idx })
	record(t, s, in("linux", delivery(1, reservation.Queued)), reservation.Applied)
	if !spill(t, s, activeJob(t, s, "linux"), "linux", "big") {
		t.Fatal("spill did not move the job")
	}
	wantCounted(t, s, "spilled to big", "big")
	idx.lag = true
	record(t, s, in("linux", delivery(1, reservation.InProgress)), reservation.Applied)
	if _, moved := follow(t, s, "linux", "linux"); !moved {
		t.Fatal("the job on its home pool's runner was not moved home")
	}
	wantCounted(t, s, "on its home pool's runner, the index lagging", "linux")
}

// spillBetween is a table that, once, spills job 1 of big to spare after the
// first GetItem it answers: between a delivery's read of the item and its
// write.
type spillBetween struct {
	table.API
	t    *testing.T
	raw  *reservation.Store
	done bool
}

func (s *spillBetween) GetItem(ctx context.Context, in *dynamodb.GetItemInput, opts ...func(*dynamodb.Options)) (*dynamodb.GetItemOutput, error) {
	out, err := s.API.GetItem(ctx, in, opts...)
	if err != nil || s.done {
		return out, err
	}
	s.done = true
	r, ok, jerr := s.raw.Job(ctx, "big", 1)
	if jerr != nil || !ok {
		s.t.Fatalf("job 1 of big: %v %v", ok, jerr)
	}
	if moved, serr := s.raw.Spill(ctx, r, "big", "spare"); serr != nil || !moved {
		s.t.Fatalf("spilling job 1 between the read and the write: %v %v", moved, serr)
	}
	return out, err
}

// TestDeliveryDecidedBeforeASpillIsDecidedAgain: a `waiting` read the item of
// a queued job, then the sweeper spilled the job before the delivery wrote.
// The spill added to the item's version, so the delivery's write is refused
// and decided again on the spilled item: the job is held, and its count comes
// home (a held job counts in no overflow pool).
func TestDeliveryDecidedBeforeASpillIsDecidedAgain(t *testing.T) {
	t.Parallel()
	db, name := testenv.Table(t)
	clk := clocktesting.NewFakePassiveClock(time.Date(2026, 12, 3, 12, 0, 0, 0, time.UTC))
	raw := reservation.New(db, name, clk)
	d := reservation.Delivery{Pool: "big", JobID: 1, State: reservation.Queued, Amount: 1, Duration: time.Hour, DeliveryID: "q1"}
	if _, err := raw.Record(t.Context(), d); err != nil {
		t.Fatal(err)
	}
	s := reservation.New(&spillBetween{API: db, t: t, raw: raw}, name, clk)
	d.State, d.DeliveryID = reservation.Waiting, "w1"
	out, err := s.Record(t.Context(), d)
	if err != nil || out != reservation.Held {
		t.Fatalf("waiting after a spill between its read and write: %s, %v; want held", out, err)
	}
	r, _, err := raw.Job(t.Context(), "big", 1)
	if err != nil || !r.Held() || r.CountedIn != "" {
		t.Fatalf("job 1 %+v, %v: want held and counted at home, not in %q", r, err, r.CountedIn)
	}
}
