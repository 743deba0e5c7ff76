package lease

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"testing"
	"time"

	clocktesting "k8s.io/utils/clock/testing"
)

// TestKeeperSchedule pins when Hold's renewer acts on a 30 s lease with a 5 s
// margin: it renews a third of the length after the last successful renewal was
// sent, retries a failed one a fifteenth of the length after it was sent, waits
// only for the deadline while a renewal is in flight, stops at once on a lost
// lease, and stops at the deadline, not before.
func TestKeeperSchedule(t *testing.T) {
	t0 := time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC)
	at := func(s int) time.Time { return t0.Add(time.Duration(s) * time.Second) }
	clk := clocktesting.NewFakeClock(t0)
	le := &Lease{leases: &Leases{clock: clk, length: 30 * time.Second, margin: 5 * time.Second}, Pool: "p", Until: at(30)}
	var cause error
	k := &keeper{lease: le, cancel: func(err error) { cause = err }, log: slog.New(slog.DiscardHandler), renewCtx: context.Background()}
	check := func(step string, due, deadline time.Time) {
		t.Helper()
		if !k.due().Equal(due) || !k.deadline.Equal(deadline) || cause != nil {
			t.Fatalf("%s: due %s, deadline %s, cancelled %v; want due %s, deadline %s, not cancelled",
				step, k.due(), k.deadline, cause, due, deadline)
		}
	}

	if k.renewed(nil) {
		t.Fatal("the acquired lease stopped the keeper")
	}
	check("acquired at 0 s", at(10), at(25))
	k.renewal = make(chan error, 1)
	check("a renewal in flight", at(25), at(25))
	k.sent = at(10)
	k.renewed(errors.New("internal server error"))
	check("the renewal sent at 10 s failed", at(12), at(25))
	k.sent, le.Until = at(12), at(42) // Renew moved Until
	k.renewed(nil)
	check("the retry sent at 12 s succeeded", at(22), at(37))

	clk.SetTime(at(37).Add(-time.Millisecond))
	k.renewal = make(chan error, 1) // in flight: tick starts none
	if k.tick() || cause != nil {
		t.Fatalf("tick before the deadline stopped the keeper (%v)", cause)
	}
	clk.SetTime(at(37))
	if !k.tick() || !errors.Is(cause, ErrDeadline) {
		t.Fatalf("tick at the deadline: cause %v, want ErrDeadline", cause)
	}

	cause = nil
	if !k.renewed(fmt.Errorf("renewing lease of pool p: %w", ErrLost)) || !errors.Is(cause, ErrLost) {
		t.Fatalf("a lost lease: cause %v, want ErrLost at once", cause)
	}
}
