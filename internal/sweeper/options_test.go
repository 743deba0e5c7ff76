package sweeper_test

import (
	"strings"
	"testing"
	"time"

	"k8s.io/utils/clock"
	clocktesting "k8s.io/utils/clock/testing"

	"github.com/runnerscaler/runnerscaler/internal/lease"
	"github.com/runnerscaler/runnerscaler/internal/pool"
	"github.com/runnerscaler/runnerscaler/internal/poolstate"
	"github.com/runnerscaler/runnerscaler/internal/reservation"
	"github.com/runnerscaler/runnerscaler/internal/sweeper"
)

// deps are New's arguments, each usable (the stores are never called here).
type deps struct {
	pools  *pool.Config
	rs     sweeper.Reservations
	status sweeper.StatusStore
	leases *lease.Leases
	clock  clock.Clock
}

func newDeps(t *testing.T) deps {
	clk := clocktesting.NewFakeClock(t0)
	return deps{pools: mustPools(t), rs: reservation.New(nil, "table", clk), status: poolstate.NewStore(nil, "table"),
		leases: mustLeases(t, clk), clock: clk}
}

func (d deps) new(opts sweeper.Options) (*sweeper.Sweeper, error) {
	return sweeper.New(d.pools, d.rs, d.status, d.leases, nil, d.clock, nil, opts)
}

// TestNewRejectsNonsenseOptions: each negative count or duration, and a
// delivery log without a recoverer, fails New with an error naming the field;
// zero values (the defaults) and a full valid set are accepted.
func TestNewRejectsNonsenseOptions(t *testing.T) {
	t.Parallel()
	d := newDeps(t)
	for field, opts := range map[string]sweeper.Options{
		"Options.Parallelism":  {Parallelism: -1},
		"Options.MaxRounds":    {MaxRounds: -1},
		"Options.ExtendWithin": {ExtendWithin: -time.Minute},
		"Options.MaxWait":      {MaxWait: -time.Hour},
		"Options.RefillWait":   {RefillWait: -time.Second},
		"Options.RefillPoll":   {RefillPoll: -time.Millisecond},
		"Options.HeldGrace":    {HeldGrace: -time.Minute},
		"Options.DeliveryLog":  {DeliveryLog: &failingLog{}},
	} {
		s, err := d.new(opts)
		if err == nil || s != nil || !strings.Contains(err.Error(), field) {
			t.Errorf("New with %+v: %v, %v; want an error naming %s", opts, s, err, field)
		}
	}
	for _, opts := range []sweeper.Options{{}, {Parallelism: 8, MaxRounds: 3, ExtendWithin: time.Minute, MaxWait: time.Hour,
		RefillWait: time.Second, RefillPoll: time.Millisecond, Recoverer: seen{}, DeliveryLog: &failingLog{}}} {
		if s, err := d.new(opts); err != nil || s == nil {
			t.Errorf("New with %+v: %v; want a sweeper", opts, err)
		}
	}
}

// TestNewRequiresItsDependencies: a missing store, lease table, clock or pools
// file fails New with an error naming it.
func TestNewRequiresItsDependencies(t *testing.T) {
	t.Parallel()
	for name, drop := range map[string]func(*deps){
		"pools":        func(d *deps) { d.pools = nil },
		"reservations": func(d *deps) { d.rs = nil },
		"status":       func(d *deps) { d.status = nil },
		"leases":       func(d *deps) { d.leases = nil },
		"clock":        func(d *deps) { d.clock = nil },
	} {
		d := newDeps(t)
		drop(&d)
		if _, err := d.new(sweeper.Options{}); err == nil || !strings.Contains(err.Error(), name+" is required") {
			t.Errorf("New without %s: %v; want an error naming it", name, err)
		}
	}
}

func mustLeases(t *testing.T, clk *clocktesting.FakeClock) *lease.Leases {
	t.Helper()
	l, err := lease.New(nil, "table", clk, 30*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	return l
}
