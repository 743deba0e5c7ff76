package sweeper

import (
	"errors"
	"fmt"
	"time"

	"k8s.io/utils/clock"

	"github.com/runnerscaler/runnerscaler/internal/lease"
	"github.com/runnerscaler/runnerscaler/internal/pool"
)

// Validate gives the settings left zero their defaults, then reports, by
// field name, the settings New cannot use: a negative count or duration, and
// a DeliveryLog without the Recoverer whose findings it records.
func (o *Options) Validate() error {
	o.defaults()
	var errs []error
	for _, f := range []struct {
		name string
		n    int
	}{{"Parallelism", o.Parallelism}, {"MaxRounds", o.MaxRounds}} {
		if f.n < 0 {
			errs = append(errs, fmt.Errorf("Options.%s is %d: want 0 (the default) or more", f.name, f.n))
		}
	}
	for _, f := range []struct {
		name string
		d    time.Duration
	}{{"ExtendWithin", o.ExtendWithin}, {"MaxWait", o.MaxWait}, {"RefillWait", o.RefillWait}, {"RefillPoll", o.RefillPoll},
		{"HeldGrace", o.HeldGrace}, {"FollowUpEvery", o.FollowUpEvery}, {"FollowUpFor", o.FollowUpFor}} {
		if f.d < 0 {
			errs = append(errs, fmt.Errorf("Options.%s is %s: want 0 (the default) or more", f.name, f.d))
		}
	}
	if o.DeliveryLog != nil && o.Recoverer == nil {
		errs = append(errs, errors.New("Options.DeliveryLog is set without Options.Recoverer: nothing would ever be recorded"))
	}
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("sweeper options: %w", err)
	}
	return nil
}

// defaults gives each setting left zero its default; a negative one stays, for
// Validate to report.
func (o *Options) defaults() {
	if o.Parallelism == 0 {
		o.Parallelism = 4
	}
	if o.ExtendWithin == 0 {
		o.ExtendWithin = 5 * time.Minute
	}
	if o.MaxWait == 0 {
		o.MaxWait = 24 * time.Hour
	}
	if o.MaxRounds == 0 {
		o.MaxRounds = 100
	}
	if o.HeldGrace == 0 {
		o.HeldGrace = DefaultHeldGrace
	}
	if o.RefillWait == 0 {
		o.RefillWait = 10 * time.Second
	}
	if o.RefillPoll == 0 {
		o.RefillPoll = 250 * time.Millisecond
	}
	if o.FollowUpEvery == 0 {
		o.FollowUpEvery = time.Second
	}
	if o.FollowUpFor == 0 {
		o.FollowUpFor = 20 * time.Second
	}
}

// required checks New's arguments: every dependency but the reconciler and the
// logger, and the options (given their defaults).
func required(pools *pool.Config, rs Reservations, status StatusStore, leases *lease.Leases, clk clock.Clock, opts *Options) error {
	var errs []error
	for _, dep := range []struct {
		name    string
		missing bool
	}{{"pools", pools == nil}, {"reservations", rs == nil}, {"status", status == nil}, {"leases", leases == nil}, {"clock", clk == nil}} {
		if dep.missing {
			errs = append(errs, fmt.Errorf("sweeper: %s is required", dep.name))
		}
	}
	return errors.Join(append(errs, opts.Validate())...)
}
