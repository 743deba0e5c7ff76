package lease_test

import (
	"context"
	"errors"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	clocktesting "k8s.io/utils/clock/testing"

	"github.com/runnerscaler/runnerscaler/internal/lease"
	"github.com/runnerscaler/runnerscaler/internal/table"
	"github.com/runnerscaler/runnerscaler/local/testenv"
)

func TestMain(m *testing.M) { testenv.Main(m) }

var t0 = time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC)

func newLeases(t *testing.T) (*lease.Leases, *clocktesting.FakeClock) {
	t.Helper()
	db, name := testenv.Table(t)
	clk := clocktesting.NewFakeClock(t0)
	leases, err := lease.New(db, name, clk, 30*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	return leases, clk
}

// TestLeaseExclusive runs 8 concurrent acquisitions of one pool: exactly one wins.
func TestLeaseExclusive(t *testing.T) {
	t.Parallel()
	leases, _ := newLeases(t)
	var won atomic.Int32
	var wg sync.WaitGroup
	for i := range 8 {
		wg.Go(func() {
			_, err := leases.Acquire(t.Context(), "p", string(rune('a'+i)))
			switch {
			case err == nil:
				won.Add(1)
			case !errors.Is(err, lease.ErrHeld):
				t.Errorf("acquire: %v", err)
			}
		})
	}
	wg.Wait()
	if won.Load() != 1 {
		t.Fatalf("%d sweepers got the lease, want exactly 1", won.Load())
	}
}

func TestLeaseLifecycle(t *testing.T) {
	t.Parallel()
	leases, clk := newLeases(t)
	ctx := t.Context()
	a, err := leases.Acquire(ctx, "p", "req-a")
	if err != nil {
		t.Fatal(err)
	}
	_, err = leases.Acquire(ctx, "p", "req-b")
	var held *lease.HeldError
	if !errors.As(err, &held) || held.Holder != "req-a" || !held.Until.Equal(t0.Add(30*time.Second)) {
		t.Fatalf("second acquire: %v, want held by req-a until +30s", err)
	}
	// Another pool is independent.
	if _, err := leases.Acquire(ctx, "q", "req-b"); err != nil {
		t.Fatalf("other pool: %v", err)
	}
	// Renewal keeps it past the first expiry.
	clk.SetTime(t0.Add(20 * time.Second))
	if err := a.Renew(ctx); err != nil {
		t.Fatal(err)
	}
	clk.SetTime(t0.Add(40 * time.Second))
	if _, err := leases.Acquire(ctx, "p", "req-b"); !errors.Is(err, lease.ErrHeld) {
		t.Fatalf("acquire of a renewed lease: %v, want held", err)
	}
	// Expired: taken over; the old holder learns it lost the lease.
	clk.SetTime(t0.Add(50 * time.Second))
	b, err := leases.Acquire(ctx, "p", "req-b")
	if err != nil {
		t.Fatalf("take-over of an expired lease: %v", err)
	}
	if err := a.Renew(ctx); !errors.Is(err, lease.ErrLost) {
		t.Fatalf("renew by the old holder: %v, want ErrLost", err)
	}
	if _, err := a.Release(ctx); !errors.Is(err, lease.ErrLost) {
		t.Fatalf("release by the old holder: %v, want ErrLost", err)
	}
	// Release lets the next one in.
	if again, err := b.Release(ctx); err != nil || again {
		t.Fatalf("release: again=%v err=%v", again, err)
	}
	if _, err := leases.Acquire(ctx, "p", "req-c"); err != nil {
		t.Fatalf("acquire after release: %v", err)
	}
}

// TestDirtyNudgeIsNotLost: a nudge that finds the lease held marks the pool dirty;
// the holder's release then asks for one more sweep, and the next release succeeds.
func TestDirtyNudgeIsNotLost(t *testing.T) {
	t.Parallel()
	leases, _ := newLeases(t)
	ctx := t.Context()
	if ok, err := leases.MarkDirty(ctx, "p"); err != nil || ok {
		t.Fatalf("MarkDirty with no holder = %v, %v; want false (acquire instead)", ok, err)
	}
	a, err := leases.Acquire(ctx, "p", "req-a")
	if err != nil {
		t.Fatal(err)
	}
	if ok, err := leases.MarkDirty(ctx, "p"); err != nil || !ok {
		t.Fatalf("MarkDirty while held = %v, %v", ok, err)
	}
	again, err := a.Release(ctx)
	if err != nil || !again {
		t.Fatalf("release after a nudge: again=%v err=%v; want again", again, err)
	}
	if _, err := leases.Acquire(ctx, "p", "req-b"); !errors.Is(err, lease.ErrHeld) {
		t.Fatalf("lease must still be held while the holder sweeps again: %v", err)
	}
	if again, err := a.Release(ctx); err != nil || again {
		t.Fatalf("second release: again=%v err=%v", again, err)
	}
	// A dirty mark made before acquisition is already accounted for.
	b, err := leases.Acquire(ctx, "p", "req-b")
	if err != nil {
		t.Fatal(err)
	}
	if again, err := b.Release(ctx); err != nil || again {
		t.Fatalf("release with no new nudge: again=%v err=%v", again, err)
	}
}

// TestNudgedJobsReachTheHolder: the jobs of nudges that find the lease held reach
// its holder with the request to sweep again; a release with nothing pending clears
// them, a forced release leaves them to the next holder.
func TestNudgedJobsReachTheHolder(t *testing.T) {
	t.Parallel()
	leases, _ := newLeases(t)
	ctx := t.Context()
	a, err := leases.Acquire(ctx, "p", "req-a")
	if err != nil || len(a.Nudged) != 0 {
		t.Fatalf("acquire: %+v, %v; want no nudged jobs", a, err)
	}
	for _, job := range []int64{7, 8, 7} {
		if ok, err := leases.MarkDirty(ctx, "p", job); err != nil || !ok {
			t.Fatalf("MarkDirty(%d) = %v, %v", job, ok, err)
		}
	}
	if again, err := a.Release(ctx); err != nil || !again || !slices.Equal(sorted(a.Nudged), []int64{7, 8}) {
		t.Fatalf("release after nudges for 7, 8, 7: again=%v err=%v nudged=%v; want again with [7 8]", again, err, a.Nudged)
	}
	if again, err := a.Release(ctx); err != nil || again {
		t.Fatalf("second release: again=%v err=%v", again, err)
	}
	b, err := leases.Acquire(ctx, "p", "req-b")
	if err != nil || len(b.Nudged) != 0 {
		t.Fatalf("acquire after a clean release: nudged %v, %v; want none", b.Nudged, err)
	}
	if ok, err := leases.MarkDirty(ctx, "p", 9); err != nil || !ok {
		t.Fatalf("MarkDirty(9) = %v, %v", ok, err)
	}
	if err := b.ForceRelease(ctx); err != nil {
		t.Fatal(err)
	}
	c, err := leases.Acquire(ctx, "p", "req-c")
	if err != nil || !slices.Equal(c.Nudged, []int64{9}) {
		t.Fatalf("acquire after a forced release: nudged %v, %v; want [9], never swept", c.Nudged, err)
	}
}

// TestFinishedRunnersReachTheHolder: the runners of refill nudges that find the
// lease held reach its holder as the jobs do (TestNudgedJobsReachTheHolder):
// a nudge with both jobs and runners, one with runners alone and one with
// neither (no empty set is written); a release with nothing pending clears
// them, a forced release leaves them to the next holder.
func TestFinishedRunnersReachTheHolder(t *testing.T) {
	t.Parallel()
	leases, _ := newLeases(t)
	ctx := t.Context()
	a, err := leases.Acquire(ctx, "p", "req-a")
	if err != nil || len(a.Finished) != 0 {
		t.Fatalf("acquire: %+v, %v; want no finished runners", a, err)
	}
	for _, n := range []struct {
		jobs     []int64
		finished []string
	}{{[]int64{7}, []string{"octo-bcdfg-0"}}, {nil, []string{"octo-bcdfg-0", "octo-hjklm-0"}}, {nil, nil},
		{[]int64{7, 7}, []string{"octo-hjklm-0", "octo-hjklm-0"}}} { // a nudge naming one twice: a set holds it once

		if ok, err := leases.MarkDirtyFor(ctx, "p", n.jobs, n.finished); err != nil || !ok {
			t.Fatalf("MarkDirtyFor(%v, %v) = %v, %v", n.jobs, n.finished, ok, err)
		}
	}
	again, err := a.Release(ctx)
	if err != nil || !again || !slices.Equal(a.Nudged, []int64{7}) || !slices.Equal(slices.Sorted(slices.Values(a.Finished)), []string{"octo-bcdfg-0", "octo-hjklm-0"}) {
		t.Fatalf("release after refill nudges: again=%v err=%v nudged=%v finished=%v; want again with [7] and both runners",
			again, err, a.Nudged, a.Finished)
	}
	if again, err := a.Release(ctx); err != nil || again {
		t.Fatalf("second release: again=%v err=%v", again, err)
	}
	b, err := leases.Acquire(ctx, "p", "req-b")
	if err != nil || len(b.Finished) != 0 {
		t.Fatalf("acquire after a clean release: finished %v, %v; want none", b.Finished, err)
	}
	if ok, err := leases.MarkDirtyFor(ctx, "p", nil, []string{"octo-pqrst-0"}); err != nil || !ok {
		t.Fatalf("MarkDirtyFor = %v, %v", ok, err)
	}
	if err := b.ForceRelease(ctx); err != nil {
		t.Fatal(err)
	}
	c, err := leases.Acquire(ctx, "p", "req-c")
	if err != nil || !slices.Equal(c.Finished, []string{"octo-pqrst-0"}) {
		t.Fatalf("acquire after a forced release: finished %v, %v; want [octo-pqrst-0], never swept", c.Finished, err)
	}
}

func sorted(s []int64) []int64 { s = slices.Clone(s); slices.Sort(s); return s }

// TestForceRelease lets the lease go despite pending nudges; a stranger's lease
// cannot be force-released.
func TestForceRelease(t *testing.T) {
	t.Parallel()
	leases, _ := newLeases(t)
	ctx := t.Context()
	a, err := leases.Acquire(ctx, "p", "req-a")
	if err != nil {
		t.Fatal(err)
	}
	if ok, err := leases.MarkDirty(ctx, "p"); err != nil || !ok {
		t.Fatalf("MarkDirty = %v, %v", ok, err)
	}
	if err := a.ForceRelease(ctx); err != nil {
		t.Fatalf("ForceRelease: %v", err)
	}
	b, err := leases.Acquire(ctx, "p", "req-b")
	if err != nil {
		t.Fatalf("acquire after a forced release: %v", err)
	}
	if err := a.ForceRelease(ctx); !errors.Is(err, lease.ErrLost) {
		t.Fatalf("force-releasing b's lease as a: %v, want ErrLost", err)
	}
	if again, err := b.Release(ctx); err != nil || again {
		t.Fatalf("b's release: %v, %v", again, err)
	}
}

// TestLeaseNotReacquiredByItsHolder: a holder name is no key to a held lease — two
// invocations that share one (a duplicated event's request id) cannot both hold it.
func TestLeaseNotReacquiredByItsHolder(t *testing.T) {
	t.Parallel()
	leases, _ := newLeases(t)
	if _, err := leases.Acquire(t.Context(), "p", "req-a"); err != nil {
		t.Fatal(err)
	}
	if _, err := leases.Acquire(t.Context(), "p", "req-a"); !errors.Is(err, lease.ErrHeld) {
		t.Fatalf("second acquire under the same holder name: %v, want ErrHeld", err)
	}
}

// hangingRenewals answers every renewal only when its context ends.
type hangingRenewals struct{ table.API }

func (h hangingRenewals) UpdateItem(ctx context.Context, in *dynamodb.UpdateItemInput, opts ...func(*dynamodb.Options)) (*dynamodb.UpdateItemOutput, error) {
	if aws.ToString(in.UpdateExpression) == "SET #until = :until" {
		<-ctx.Done()
		return nil, ctx.Err()
	}
	return h.API.UpdateItem(ctx, in, opts...)
}

// TestRenewIsBoundedAndMovesNothingOnFailure: a renewal that gets no answer gives
// up after the call timeout, and the holder's deadline stays where the last
// successful request put it: the expiry, measured from its sending, minus the margin.
func TestRenewIsBoundedAndMovesNothingOnFailure(t *testing.T) {
	t.Parallel()
	db, name := testenv.Table(t)
	clk := clocktesting.NewFakeClock(t0)
	leases, err := lease.New(hangingRenewals{db}, name, clk, 30*time.Second,
		lease.WithMargin(4*time.Second), lease.WithCallTimeout(200*time.Millisecond))
	if err != nil {
		t.Fatal(err)
	}
	le, err := leases.Acquire(t.Context(), "p", "req-a")
	if err != nil {
		t.Fatal(err)
	}
	if want := t0.Add(26 * time.Second); !le.Deadline().Equal(want) {
		t.Fatalf("deadline %s, want expiry - margin %s", le.Deadline(), want)
	}
	clk.SetTime(t0.Add(10 * time.Second))
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	defer cancel()
	start := time.Now()
	err = le.Renew(ctx)
	if !errors.Is(err, context.DeadlineExceeded) || time.Since(start) > 5*time.Second {
		t.Fatalf("hung renewal returned %v after %s, want the call timeout (200ms)", err, time.Since(start))
	}
	if want := t0.Add(26 * time.Second); !le.Deadline().Equal(want) {
		t.Fatalf("deadline after a failed renewal %s, want unchanged %s", le.Deadline(), want)
	}
}
