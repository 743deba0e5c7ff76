package sweeper_test

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/aws/aws-lambda-go/lambda"
	"github.com/aws/aws-lambda-go/lambdacontext"
	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"k8s.io/utils/clock"
	clocktesting "k8s.io/utils/clock/testing"

	"github.com/runnerscaler/runnerscaler/internal/lease"
	"github.com/runnerscaler/runnerscaler/internal/pool"
	"github.com/runnerscaler/runnerscaler/internal/poolstate"
	"github.com/runnerscaler/runnerscaler/internal/reservation"
	"github.com/runnerscaler/runnerscaler/internal/scaling"
	"github.com/runnerscaler/runnerscaler/internal/sweeper"
	"github.com/runnerscaler/runnerscaler/internal/table"
	"github.com/runnerscaler/runnerscaler/local/testenv"
)

func TestMain(m *testing.M) { testenv.Main(m) }

var t0 = time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC)

type env struct {
	sweeper *sweeper.Sweeper
	rs      *reservation.Store
	status  *poolstate.Store
	leases  *lease.Leases
	clock   *clocktesting.FakeClock
	db      *dynamodb.Client
	table   string
}

func newEnv(t *testing.T, rec sweeper.Reconciler) *env {
	t.Helper()
	return newEnvWith(t, rec, func(db table.API) table.API { return db })
}

// newEnvWith lets the leases see DynamoDB through wrap.
func newEnvWith(t *testing.T, rec sweeper.Reconciler, wrap func(table.API) table.API) *env {
	t.Helper()
	cfg, err := pool.Load(filepath.Join("..", "..", "local", "pools.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	db, name := testenv.Table(t)
	clk := clocktesting.NewFakeClock(t0)
	e := &env{rs: reservation.New(db, name, clk), status: poolstate.NewStore(db, name),
		leases: newLeases(t, wrap(db), name, clk), clock: clk, db: db, table: name}
	if e.sweeper, err = sweeper.New(cfg, e.rs, e.status, e.leases, rec, clk, nil, sweeper.Options{}); err != nil {
		t.Fatal(err)
	}
	return e
}

// newLeases returns 30-second leases, as the sweeper's tests take them.
func newLeases(t *testing.T, db table.API, name string, clk clock.Clock) *lease.Leases {
	t.Helper()
	leases, err := lease.New(db, name, clk, 30*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	return leases
}

func (e *env) queue(t *testing.T, pool string, jobs ...int64) {
	t.Helper()
	for _, j := range jobs {
		if _, err := e.rs.Record(t.Context(), reservation.Delivery{Pool: pool, JobID: j, State: reservation.Queued, Amount: 1, Duration: 10 * time.Minute}); err != nil {
			t.Fatal(err)
		}
	}
}

func (e *env) desired(t *testing.T, pool string) poolstate.Status {
	t.Helper()
	st, err := e.status.Get(t.Context(), pool)
	if err != nil {
		t.Fatal(err)
	}
	return st
}

// invoke runs an event file through aws-lambda-go's decoding, as the runtime does.
func (e *env) invoke(t *testing.T, payload []byte) (sweeper.Report, error) {
	t.Helper()
	out, err := lambda.NewHandler(e.sweeper.Handle).Invoke(t.Context(), payload)
	var r sweeper.Report
	if err == nil {
		if err := json.Unmarshal(out, &r); err != nil {
			t.Fatal(err)
		}
	}
	return r, err
}

func eventFile(t *testing.T, name string) []byte {
	t.Helper()
	raw, err := os.ReadFile(filepath.Join("..", "..", "local", "events", name))
	if err != nil {
		t.Fatal(err)
	}
	return raw
}

func TestScheduledEventSweepsEveryPool(t *testing.T) {
	t.Parallel()
	e := newEnv(t, nil)
	e.queue(t, "octo", 1, 2, 3)
	e.queue(t, "octo-gpu", 4)
	r, err := e.invoke(t, eventFile(t, "sweeper-scheduled.json"))
	if err != nil || len(r.Swept) != 2 {
		t.Fatalf("report %+v, err %v; want both pools swept", r, err)
	}
	if st := e.desired(t, "octo"); st.Desired != 3 || !st.LastScaleOut.Equal(t0) || st.Version != 1 || !strings.Contains(st.Reason, "scale out 0 -> 3") {
		t.Fatalf("octo status %+v", st)
	}
	if st := e.desired(t, "octo-gpu"); st.Desired != 1 {
		t.Fatalf("octo-gpu desired %d, want 1", st.Desired)
	}
	// Reservations expire; the scale-down delay (30s in local/pools.yaml) holds, then releases.
	e.clock.SetTime(t0.Add(10 * time.Minute))
	if _, err := e.invoke(t, eventFile(t, "sweeper-scheduled.json")); err != nil {
		t.Fatal(err)
	}
	if st := e.desired(t, "octo"); st.Desired != 0 || st.Version != 2 {
		t.Fatalf("after expiry and delay: %+v, want desired 0", st)
	}
}

func TestNudgeSweepsOnePool(t *testing.T) {
	t.Parallel()
	e := newEnv(t, nil)
	e.queue(t, "octo", 1)
	e.queue(t, "octo-gpu", 2)
	r, err := e.invoke(t, eventFile(t, "sweeper-nudge.json"))
	if err != nil || len(r.Swept) != 1 || r.Swept[0] != "octo" {
		t.Fatalf("report %+v, err %v", r, err)
	}
	if st := e.desired(t, "octo-gpu"); st.Version != 0 {
		t.Fatalf("a nudge for octo swept octo-gpu: %+v", st)
	}
}

func TestBadEvents(t *testing.T) {
	t.Parallel()
	e := newEnv(t, nil)
	if _, err := e.invoke(t, []byte(`{"pool":"nope"}`)); err == nil || !strings.Contains(err.Error(), `unknown pool "nope"`) {
		t.Fatalf("unknown pool: %v", err)
	}
	if _, err := e.invoke(t, []byte(`{"source":"aws.s3"}`)); err == nil || !strings.Contains(err.Error(), "unrecognised event") {
		t.Fatalf("unknown event: %v", err)
	}
}

func TestSaturatedPoolExtendsWaitingReservations(t *testing.T) {
	t.Parallel()
	e := newEnv(t, nil)
	e.queue(t, "octo-gpu", 1, 2, 3) // maxReplicas 2
	e.clock.SetTime(t0.Add(7 * time.Minute))
	if _, err := e.invoke(t, []byte(`{"pool":"octo-gpu"}`)); err != nil {
		t.Fatal(err)
	}
	e.clock.SetTime(t0.Add(12 * time.Minute)) // past the original expiry
	rs, err := e.rs.Active(t.Context(), "octo-gpu")
	if err != nil || len(rs) != 3 {
		t.Fatalf("active at +12m: %d, %v; want the 3 waiting jobs kept", len(rs), err)
	}
}

// TestWaitingReservationsOutliveSlowStarts: a queued job whose pool is not at
// maxReplicas but whose runner is still starting (a node scaling up, a slow image
// pull) keeps its reservation; one whose pool's runners are all up and idle (its
// in_progress delivery was lost) does not.
func TestWaitingReservationsOutliveSlowStarts(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		phase string
		kept  int
	}{{"pending", 1}, {"running", 0}} {
		t.Run(tc.phase, func(t *testing.T) {
			t.Parallel()
			e := newEnv(t, phasesReconciler{tc.phase: 1})
			e.queue(t, "octo", 1)
			for _, at := range []time.Duration{time.Minute, 7 * time.Minute} {
				e.clock.SetTime(t0.Add(at))
				if _, err := e.invoke(t, []byte(`{"pool":"octo"}`)); err != nil {
					t.Fatal(err)
				}
			}
			e.clock.SetTime(t0.Add(12 * time.Minute)) // past the original expiry
			rs, err := e.rs.Active(t.Context(), "octo")
			if err != nil || len(rs) != tc.kept {
				t.Fatalf("active at +12m with a %s runner: %d, %v; want %d", tc.phase, len(rs), err, tc.kept)
			}
		})
	}
}

// phasesReconciler reports its runners in the given phases.
type phasesReconciler map[string]int

func (p phasesReconciler) Reconcile(_ context.Context, _ *pool.Pool, _ scaling.Decision, st *poolstate.Status) error {
	st.Phases = p
	return nil
}

// blockingReconciler holds the first call until released, counting calls
// and recording each call's finished runners (Decision.Finished).
type blockingReconciler struct {
	calls    atomic.Int32
	entered  chan struct{}
	release  chan struct{}
	mu       sync.Mutex
	finished [][]string
}

func (b *blockingReconciler) Reconcile(ctx context.Context, _ *pool.Pool, d scaling.Decision, _ *poolstate.Status) error {
	b.mu.Lock()
	b.finished = append(b.finished, d.Finished)
	b.mu.Unlock()
	if b.calls.Add(1) == 1 {
		close(b.entered)
		<-b.release
	}
	return nil
}

// TestConcurrentSweepsOfOnePool: while a scheduled sweep holds the pool, another
// scheduled sweep skips it and a nudge marks it dirty; the holder then sweeps again
// so the nudge is not lost. Reconcile never runs twice at once.
func TestConcurrentSweepsOfOnePool(t *testing.T) {
	t.Parallel()
	rec := &blockingReconciler{entered: make(chan struct{}), release: make(chan struct{})}
	e := newEnv(t, rec)
	done := make(chan sweeper.Report)
	go func() {
		r, _ := e.sweeper.Handle(t.Context(), sweeper.Event{Pool: "octo"})
		done <- r
	}()
	<-rec.entered
	r, err := e.sweeper.Handle(t.Context(), sweeper.Event{Source: "aws.events", DetailType: "Scheduled Event"})
	if err != nil || !contains(r.Skipped, "octo") || !contains(r.Swept, "octo-gpu") {
		t.Fatalf("scheduled sweep during the hold: %+v, %v; want octo skipped", r, err)
	}
	if rec.calls.Load() != 2 { // the holder's octo (blocked) + the scheduled octo-gpu
		t.Fatalf("reconcile calls %d during the hold, want 2", rec.calls.Load())
	}
	e.queue(t, "octo", 9)
	if r, err := e.sweeper.Handle(t.Context(), sweeper.Event{Pool: "octo"}); err != nil || !contains(r.Skipped, "octo") {
		t.Fatalf("nudge during the hold: %+v, %v; want skipped (marked dirty)", r, err)
	}
	close(rec.release)
	if r := <-done; !contains(r.Swept, "octo") {
		t.Fatalf("holder report %+v", r)
	}
	if got := rec.calls.Load(); got != 3 {
		t.Fatalf("reconcile calls %d, want 3: the holder must sweep octo again for the nudge", got)
	}
	if st := e.desired(t, "octo"); st.Desired != 1 {
		t.Fatalf("octo desired %d after the second round, want 1 (the job queued during the hold)", st.Desired)
	}
}

// TestDuplicatedEventCannotShareTheLease: Lambda may run a duplicated
// asynchronous event twice under one request id; the second invocation must not
// get the lease the first holds.
func TestDuplicatedEventCannotShareTheLease(t *testing.T) {
	t.Parallel()
	rec := &blockingReconciler{entered: make(chan struct{}), release: make(chan struct{})}
	e := newEnv(t, rec)
	ctx := lambdacontext.NewContext(t.Context(), &lambdacontext.LambdaContext{AwsRequestID: "req-1"})
	done := make(chan sweeper.Report)
	go func() {
		r, _ := e.sweeper.Handle(ctx, sweeper.Event{Pool: "octo"})
		done <- r
	}()
	<-rec.entered
	r, err := e.sweeper.Handle(ctx, sweeper.Event{Pool: "octo"})
	if err != nil || !contains(r.Skipped, "octo") || rec.calls.Load() != 1 {
		t.Fatalf("the same request id again while the first holds the pool: %+v, %v, %d reconciles; want skipped, 1 reconcile",
			r, err, rec.calls.Load())
	}
	close(rec.release)
	if r := <-done; !contains(r.Swept, "octo") {
		t.Fatalf("first invocation: %+v", r)
	}
}

// cancelledReconciler reconciles octo until its context ends, and records when
// (on the fake clock) that was.
type cancelledReconciler struct {
	clock   clock.PassiveClock
	entered chan struct{}
	ended   chan struct{}
	endedAt time.Time // read after ended is closed
}

func (r *cancelledReconciler) Reconcile(ctx context.Context, p *pool.Pool, _ scaling.Decision, _ *poolstate.Status) error {
	if p.Name != "octo" {
		return nil
	}
	close(r.entered)
	<-ctx.Done()
	r.endedAt = r.clock.Now()
	close(r.ended)
	return ctx.Err()
}

func waitFor(t *testing.T, ch <-chan struct{}, what string) {
	t.Helper()
	giveUp := time.Minute // without a test deadline
	if d, ok := t.Deadline(); ok {
		giveUp = time.Until(d) - 5*time.Second
	}
	select {
	case <-ch:
	case <-time.After(giveUp):
		t.Fatalf("timed out waiting for %s", what)
	}
}

// stolenDB answers every renewal, once stolen is set, as DynamoDB does when the
// lease has another holder.
type stolenDB struct {
	table.API
	stolen atomic.Bool
}

func (d *stolenDB) UpdateItem(ctx context.Context, in *dynamodb.UpdateItemInput, opts ...func(*dynamodb.Options)) (*dynamodb.UpdateItemOutput, error) {
	if d.stolen.Load() && aws.ToString(in.UpdateExpression) == "SET #until = :until" {
		return nil, &types.ConditionalCheckFailedException{Message: aws.String("The conditional request failed")}
	}
	return d.API.UpdateItem(ctx, in, opts...)
}

// TestLostLeaseStopsTheHolderAtOnce: the sweep runs under its lease (the lease
// package tests how Lease.Hold keeps it): a renewal that finds the lease in other
// hands cancels the reconcile then, not at the deadline, and the pool's sweep fails.
func TestLostLeaseStopsTheHolderAtOnce(t *testing.T) {
	t.Parallel()
	db := &stolenDB{}
	rec := &cancelledReconciler{entered: make(chan struct{}), ended: make(chan struct{})}
	e := newEnvWith(t, rec, func(api table.API) table.API { db.API = api; return db })
	rec.clock = e.clock
	first := make(chan sweeper.Report, 1)
	go func() {
		r, _ := e.sweeper.Handle(t.Context(), sweeper.Event{Pool: "octo"})
		first <- r
	}()
	waitFor(t, rec.entered, "the reconcile")
	db.stolen.Store(true)
	e.clock.SetTime(t0.Add(10 * time.Second))
	waitFor(t, rec.ended, "the reconcile to be cancelled by the lost renewal")
	if !rec.endedAt.Equal(t0.Add(10 * time.Second)) {
		t.Fatalf("reconcile cancelled at %s, want at the failed renewal (%s)", rec.endedAt, t0.Add(10*time.Second))
	}
	if r := <-first; !contains(r.Failed, "octo") {
		t.Fatalf("report %+v, want octo failed", r)
	}
}

func contains(list []string, s string) bool {
	for _, v := range list {
		if v == s {
			return true
		}
	}
	return false
}

// orderReconciler records the pools it reconciles, in order.
type orderReconciler struct {
	mu    sync.Mutex
	pools []string
}

func (o *orderReconciler) Reconcile(_ context.Context, p *pool.Pool, _ scaling.Decision, _ *poolstate.Status) error {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.pools = append(o.pools, p.Name)
	return nil
}

func (o *orderReconciler) take() []string {
	o.mu.Lock()
	defer o.mu.Unlock()
	got := o.pools
	o.pools = nil
	return got
}

// TestScheduledSweepsStartAtAnotherPoolEachMinute: one pool at a time, the
// invocation of one minute starts at the first pool and the next minute's at
// the second, so pools late in the file are not always swept last.
func TestScheduledSweepsStartAtAnotherPoolEachMinute(t *testing.T) {
	t.Parallel()
	rec := &orderReconciler{}
	cfg, err := pool.Load(filepath.Join("..", "..", "local", "pools.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	db, name := testenv.Table(t)
	clk := clocktesting.NewFakeClock(t0) // t0 is a whole minute: an even one
	sw, err := sweeper.New(cfg, reservation.New(db, name, clk), poolstate.NewStore(db, name), newLeases(t, db, name, clk),
		rec, clk, nil, sweeper.Options{Parallelism: 1})
	if err != nil {
		t.Fatal(err)
	}
	scheduled := sweeper.Event{Source: "aws.events", DetailType: "Scheduled Event"}
	var orders [][]string
	for range 2 {
		if _, err := sw.Handle(t.Context(), scheduled); err != nil {
			t.Fatal(err)
		}
		orders = append(orders, rec.take())
		clk.Step(time.Minute)
	}
	want := [][]string{{"octo", "octo-gpu"}, {"octo-gpu", "octo"}}
	if fmt.Sprint(orders) != fmt.Sprint(want) {
		t.Fatalf("orders %v, want %v", orders, want)
	}
}

// TestSweepNearTheDeadlineSkipsPools: with less than 20 s of the invocation
// left, no pool sweep starts; the pools are reported skipped (the next
// invocation sweeps them), and the invocation does not fail.
func TestSweepNearTheDeadlineSkipsPools(t *testing.T) {
	t.Parallel()
	rec := &orderReconciler{}
	e := newEnv(t, rec)
	ctx, cancel := context.WithTimeout(t.Context(), 15*time.Second)
	defer cancel()
	r, err := e.sweeper.Handle(ctx, sweeper.Event{Source: "aws.events", DetailType: "Scheduled Event"})
	if err != nil {
		t.Fatal(err)
	}
	if got := rec.take(); len(got) != 0 {
		t.Fatalf("reconciled %v with 15 s left, want none", got)
	}
	if len(r.Skipped) != 2 || len(r.Swept) != 0 {
		t.Fatalf("report %+v, want both pools skipped", r)
	}
}
