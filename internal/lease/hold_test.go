package lease_test

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	clocktesting "k8s.io/utils/clock/testing"

	"github.com/runnerscaler/runnerscaler/internal/lease"
	"github.com/runnerscaler/runnerscaler/internal/table"
	"github.com/runnerscaler/runnerscaler/local/testenv"
)

// answer is how the renewals view answers one renewal.
type answer int

const (
	pass answer = iota // DynamoDB answers it
	hang               // no answer until its context ends
	fail               // DynamoDB's 500
	lost               // another holder has the lease
)

// renewals is a holder's view of DynamoDB that reports each renewal with the
// fake time it was sent at, answers the n-th (from 1) as answers(n) says, and
// counts the renewals in flight. Other writes go through.
type renewals struct {
	table.API
	clock    *clocktesting.FakeClock
	answers  func(n int) answer
	sent     chan time.Time
	calls    atomic.Int32
	inFlight atomic.Int32
}

func (r *renewals) UpdateItem(ctx context.Context, in *dynamodb.UpdateItemInput, opts ...func(*dynamodb.Options)) (*dynamodb.UpdateItemOutput, error) {
	if aws.ToString(in.UpdateExpression) != "SET #until = :until" {
		return r.API.UpdateItem(ctx, in, opts...)
	}
	r.inFlight.Add(1)
	defer r.inFlight.Add(-1)
	r.sent <- r.clock.Now()
	switch r.answers(int(r.calls.Add(1))) {
	case hang:
		<-ctx.Done()
		return nil, ctx.Err()
	case fail:
		return nil, &types.InternalServerError{Message: aws.String("internal server error")}
	case lost:
		return nil, &types.ConditionalCheckFailedException{Message: aws.String("The conditional request failed")}
	}
	return r.API.UpdateItem(ctx, in, opts...)
}

// holdEnv is one pool's lease, held at t0 (30 s, margin 5 s: Deadline t0+25s)
// through a renewals view, and a second sweeper's leases on the same table.
type holdEnv struct {
	clock    *clocktesting.FakeClock
	db       *renewals
	lease    *lease.Lease
	other    *lease.Leases
	entered  chan struct{}
	release  chan struct{}
	ended    chan struct{}
	endedAt  time.Time // fake time at which fn returned; read after ended
	returned chan error
}

func newHoldEnv(t *testing.T, answers func(n int) answer, opts ...lease.Option) *holdEnv {
	t.Helper()
	db, name := testenv.Table(t)
	clk := clocktesting.NewFakeClock(t0)
	r := &renewals{API: db, clock: clk, answers: answers, sent: make(chan time.Time, 100)}
	leases, err := lease.New(r, name, clk, 30*time.Second, append([]lease.Option{lease.WithMargin(5 * time.Second)}, opts...)...)
	if err != nil {
		t.Fatal(err)
	}
	other, err := lease.New(db, name, clk, 30*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	le, err := leases.Acquire(t.Context(), "p", "first")
	if err != nil {
		t.Fatal(err)
	}
	return &holdEnv{clock: clk, db: r, lease: le, other: other, entered: make(chan struct{}),
		release: make(chan struct{}), ended: make(chan struct{}), returned: make(chan error, 1)}
}

// hold runs Hold with an fn that works until its context ends or release is closed.
func (e *holdEnv) hold(t *testing.T) {
	go func() {
		e.returned <- e.lease.Hold(t.Context(), nil, func(ctx context.Context) error {
			close(e.entered)
			var err error
			select {
			case <-ctx.Done():
				err = ctx.Err()
			case <-e.release:
			}
			e.endedAt = e.clock.Now()
			close(e.ended)
			return err
		})
	}()
	waitFor(t, e.entered, "fn to start")
}

// renewalAt moves the clock to at and waits for the renewal that must be sent then.
func (e *holdEnv) renewalAt(t *testing.T, at time.Time) {
	t.Helper()
	e.clock.SetTime(at)
	select {
	case sent := <-e.db.sent:
		if !sent.Equal(at) {
			t.Fatalf("renewal sent at %s, want at %s", sent, at)
		}
	case <-timeout(t):
		t.Fatalf("no renewal sent at %s", at)
	}
}

// settled waits until Hold's renewer waits on a timer again, or fn ended: what
// the renewer does at the clock's time is done.
func (e *holdEnv) settled(t *testing.T) {
	t.Helper()
	giveUp := timeout(t)
	for e.clock.Waiters() == 0 {
		select {
		case <-e.ended:
			return
		case <-giveUp:
			t.Fatal("Hold's renewer neither waits for a time nor stopped fn")
		case <-time.After(time.Millisecond):
		}
	}
}

// running fails unless fn is still running at the clock's time, once the
// renewer has settled.
func (e *holdEnv) running(t *testing.T) {
	t.Helper()
	e.settled(t)
	select {
	case <-e.ended:
		t.Fatalf("fn stopped at %s", e.endedAt)
	default:
	}
}

// stoppedAt waits for fn to stop and for Hold to return, and checks when fn
// stopped, that Hold's error matches want, and that no renewal is in flight.
func (e *holdEnv) stoppedAt(t *testing.T, at time.Time, want error) {
	t.Helper()
	waitFor(t, e.ended, "fn to stop")
	var err error
	select {
	case err = <-e.returned:
	case <-timeout(t):
		t.Fatal("Hold did not return after fn")
	}
	if n := e.db.inFlight.Load(); n != 0 {
		t.Errorf("Hold returned with %d renewals in flight", n)
	}
	if !e.endedAt.Equal(at) {
		t.Errorf("fn stopped at %s, want %s", e.endedAt, at)
	}
	if want == nil && err != nil || want != nil && !errors.Is(err, want) {
		t.Errorf("Hold returned %v, want %v", err, want)
	}
}

// TestHoldRenewsEveryThirdOfTheLength: a holder that keeps working has its lease
// renewed a third of the length after each renewal was sent, and works on past
// every deadline it had before.
func TestHoldRenewsEveryThirdOfTheLength(t *testing.T) {
	t.Parallel()
	e := newHoldEnv(t, func(int) answer { return pass })
	e.hold(t)
	for _, at := range []time.Duration{10 * time.Second, 20 * time.Second, 30 * time.Second, 40 * time.Second} {
		e.renewalAt(t, t0.Add(at))
	}
	e.settled(t)
	e.clock.SetTime(t0.Add(45 * time.Second)) // past the deadlines before the last renewal (25 s to 45 s)
	e.running(t)
	close(e.release)
	e.stoppedAt(t, t0.Add(45*time.Second), nil)
	if _, err := e.other.Acquire(t.Context(), "p", "second"); !errors.Is(err, lease.ErrHeld) {
		t.Fatalf("acquire of a lease renewed at 40 s, at 45 s: %v, want held", err)
	}
}

// TestHoldStopsAtTheDeadlineWhileRenewalsHang: the holder's renewals hang
// (DynamoDB unreachable for it, no response timeout). Its work is stopped at the
// lease's expiry minus the margin, on its own clock, and not before; a second
// sweeper takes the lease at the expiry, after the first stopped.
func TestHoldStopsAtTheDeadlineWhileRenewalsHang(t *testing.T) {
	t.Parallel()
	e := newHoldEnv(t, func(int) answer { return hang }, lease.WithCallTimeout(time.Hour))
	e.hold(t)
	e.renewalAt(t, t0.Add(10*time.Second))
	_, err := e.other.Acquire(t.Context(), "p", "second")
	var held *lease.HeldError
	if !errors.As(err, &held) || !held.Until.Equal(t0.Add(30*time.Second)) {
		t.Fatalf("acquire while the first holds the lease: %v, want held until t0+30s", err)
	}
	stopBy := held.Until.Add(-5 * time.Second)
	e.settled(t)
	e.clock.SetTime(stopBy.Add(-time.Millisecond))
	e.running(t)
	e.clock.SetTime(stopBy)
	e.stoppedAt(t, stopBy, lease.ErrDeadline)
	if _, err := e.other.Acquire(t.Context(), "p", "second"); !errors.Is(err, lease.ErrHeld) {
		t.Fatalf("acquire at the first's deadline, before the expiry: %v, want held", err)
	}
	e.clock.SetTime(held.Until)
	if _, err := e.other.Acquire(t.Context(), "p", "second"); err != nil {
		t.Fatalf("acquire at the expiry: %v", err)
	}
}

// TestHoldStopsAtOnceWhenTheLeaseIsLost: a renewal that finds the lease in other
// hands stops the work then, not at the deadline.
func TestHoldStopsAtOnceWhenTheLeaseIsLost(t *testing.T) {
	t.Parallel()
	e := newHoldEnv(t, func(int) answer { return lost })
	e.hold(t)
	e.renewalAt(t, t0.Add(10*time.Second))
	e.stoppedAt(t, t0.Add(10*time.Second), lease.ErrLost)
}

// TestHoldRetriesAFailedRenewal: a renewal that fails for another reason than a
// lost lease is retried a fifteenth of the length after it was sent, and the
// retry's success moves the deadline: the work goes on past the first deadline.
func TestHoldRetriesAFailedRenewal(t *testing.T) {
	t.Parallel()
	e := newHoldEnv(t, func(n int) answer {
		if n == 1 {
			return fail
		}
		return pass
	})
	e.hold(t)
	e.renewalAt(t, t0.Add(10*time.Second)) // fails
	e.renewalAt(t, t0.Add(12*time.Second)) // the retry: until 42 s
	e.renewalAt(t, t0.Add(22*time.Second)) // a third of the lease after the retry was sent
	e.settled(t)
	e.clock.SetTime(t0.Add(30 * time.Second)) // past the first deadline (25 s)
	e.running(t)
	close(e.release)
	e.stoppedAt(t, t0.Add(30*time.Second), nil)
}

// TestHoldWaitsForTheRenewalInFlight: when the work ends during a renewal, Hold
// cancels the renewal and returns after it did, so the holder may release the
// lease at once.
func TestHoldWaitsForTheRenewalInFlight(t *testing.T) {
	t.Parallel()
	e := newHoldEnv(t, func(int) answer { return hang }, lease.WithCallTimeout(time.Hour))
	e.hold(t)
	e.renewalAt(t, t0.Add(10*time.Second))
	close(e.release)
	e.stoppedAt(t, t0.Add(10*time.Second), nil)
	if again, err := e.lease.Release(t.Context()); err != nil || again {
		t.Fatalf("release after Hold: again=%v err=%v", again, err)
	}
	if _, err := e.other.Acquire(t.Context(), "p", "second"); err != nil {
		t.Fatalf("acquire after the release: %v", err)
	}
}

// TestHoldPastTheDeadlineDoesNotStart: a holder already at its deadline does not
// start the work.
func TestHoldPastTheDeadlineDoesNotStart(t *testing.T) {
	t.Parallel()
	e := newHoldEnv(t, func(int) answer { return pass })
	e.clock.SetTime(t0.Add(25 * time.Second))
	called := false
	err := e.lease.Hold(t.Context(), nil, func(context.Context) error { called = true; return nil })
	if called || !errors.Is(err, lease.ErrDeadline) {
		t.Fatalf("Hold at the deadline: fn called %v, error %v; want not called, ErrDeadline", called, err)
	}
}

// timeout ends a wait for something that must happen: at the test's deadline
// less a few seconds to report, or after a minute without one.
func timeout(t *testing.T) <-chan time.Time {
	t.Helper()
	d := time.Minute
	if dl, ok := t.Deadline(); ok {
		d = time.Until(dl) - 5*time.Second
	}
	return time.After(d)
}

func waitFor(t *testing.T, ch <-chan struct{}, what string) {
	t.Helper()
	select {
	case <-ch:
	case <-timeout(t):
		t.Fatalf("timed out waiting for %s", what)
	}
}
