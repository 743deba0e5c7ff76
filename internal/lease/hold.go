package lease

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"
)

// ErrDeadline means the holder reached its lease's Deadline without a successful
// renewal; another sweeper may take the pool at the lease's expiry.
var ErrDeadline = errors.New("lease deadline reached without a renewal")

// Hold runs fn with a context that is cancelled at the lease's Deadline (its
// expiry minus the margin, measured from the last acquiring or renewing request
// that succeeded) and at once if the lease is lost. Meanwhile it renews the lease
// every third of its length, like client-go's leader election: only a successful
// renewal moves the deadline, and a renewal that hangs or fails does not keep fn
// going; a failed renewal is retried a fifteenth of the length after it was sent.
// fn must stop writing when its context is done, and must not use the lease
// (Hold renews it meanwhile). Hold returns only after fn and any renewal in
// flight have returned: the caller may then Release the lease. Its error joins
// fn's with why fn's context was cancelled, if it was: ErrDeadline or ErrLost.
// Failed renewals are logged on log (nil: not logged).
func (le *Lease) Hold(ctx context.Context, log *slog.Logger, fn func(context.Context) error) error {
	if deadline := le.Deadline(); !le.leases.clock.Now().Before(deadline) {
		return fmt.Errorf("pool %s: %w (at %s)", le.Pool, ErrDeadline, deadline.Format(time.RFC3339Nano))
	}
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	ctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	stop := make(chan struct{})
	var wg sync.WaitGroup
	wg.Go(func() { le.keep(ctx, cancel, stop, log) })
	err := fn(ctx)
	close(stop)
	wg.Wait()
	if cause := context.Cause(ctx); cause != nil {
		return errors.Join(err, fmt.Errorf("pool %s: stopped acting on the pool: %w", le.Pool, cause))
	}
	return err
}

// keep renews le until stop is closed, and cancels ctx when the lease is lost or
// its Deadline comes first.
func (le *Lease) keep(ctx context.Context, cancel context.CancelCauseFunc, stop <-chan struct{}, log *slog.Logger) {
	renewCtx, stopRenewal := context.WithCancel(ctx)
	k := &keeper{lease: le, cancel: cancel, log: log, renewCtx: renewCtx}
	k.renewed(nil) // the lease as acquired or last renewed
	defer k.wait(stopRenewal)
	clk := le.leases.clock
	for {
		due := k.due()
		if !clk.Now().Before(due) {
			if k.tick() {
				return
			}
			continue
		}
		timer := clk.NewTimer(due.Sub(clk.Now()))
		var done bool
		select {
		case <-stop:
			done = true
		case err := <-k.renewal:
			done = k.renewed(err)
		case <-timer.C():
			done = k.tick()
		}
		timer.Stop()
		if done {
			return
		}
	}
}

// keeper is keep's state. It reads the lease only while no renewal is in flight
// (Renew updates it).
type keeper struct {
	lease    *Lease
	cancel   context.CancelCauseFunc
	log      *slog.Logger
	renewCtx context.Context
	// deadline and renewAt follow the last successful (re)acquisition.
	deadline, renewAt time.Time
	// renewal is non-nil while a renewal is in flight; it receives its result.
	renewal chan error
	// sent is when the last renewal was sent.
	sent time.Time
}

// due is when the keeper must act next: renew, or stop at the deadline.
func (k *keeper) due() time.Time {
	if k.renewal == nil && k.renewAt.Before(k.deadline) {
		return k.renewAt
	}
	return k.deadline
}

// tick cancels at the deadline, else starts a renewal when one is due; it
// reports whether the keeper is done.
func (k *keeper) tick() bool {
	now := k.lease.leases.clock.Now()
	if !now.Before(k.deadline) {
		k.cancel(fmt.Errorf("%w (at %s)", ErrDeadline, k.deadline.Format(time.RFC3339Nano)))
		return true
	}
	if k.renewal == nil && !now.Before(k.renewAt) {
		k.renewal, k.sent = make(chan error, 1), now
		go func(result chan<- error) { result <- k.lease.Renew(k.renewCtx) }(k.renewal)
	}
	return false
}

// renewed takes a renewal's result: success moves the deadline and schedules the
// next renewal a third of the length after it was sent; a lost lease cancels at
// once; another failure is retried a fifteenth of the length after it was sent
// (at once if it took longer), until the deadline.
func (k *keeper) renewed(err error) bool {
	k.renewal = nil
	switch {
	case err == nil:
		k.deadline, k.renewAt = k.lease.Deadline(), k.lease.Until.Add(-k.lease.Length()*2/3)
	case errors.Is(err, ErrLost):
		k.cancel(err)
		return true
	default:
		k.log.WarnContext(k.renewCtx, "renewing lease", "error", err, "deadline", k.deadline)
		k.renewAt = k.sent.Add(k.lease.Length() / 15)
	}
	return false
}

// wait cancels a renewal still in flight and waits for it: the caller may use the
// lease again once keep has returned.
func (k *keeper) wait(stopRenewal context.CancelFunc) {
	stopRenewal()
	if k.renewal != nil {
		<-k.renewal
	}
}
