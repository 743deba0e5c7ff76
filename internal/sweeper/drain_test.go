package sweeper_test

import (
	"context"
	"errors"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-lambda-go/lambdacontext"
	clocktesting "k8s.io/utils/clock/testing"

	"github.com/runnerscaler/runnerscaler/internal/pool"
	"github.com/runnerscaler/runnerscaler/internal/poolstate"
	"github.com/runnerscaler/runnerscaler/internal/reservation"
	"github.com/runnerscaler/runnerscaler/internal/scaling"
	"github.com/runnerscaler/runnerscaler/internal/scope"
	"github.com/runnerscaler/runnerscaler/internal/sweeper"
	"github.com/runnerscaler/runnerscaler/internal/sweepevent"
	"github.com/runnerscaler/runnerscaler/internal/teardown"
	"github.com/runnerscaler/runnerscaler/local/testenv"
)

// decisions records each pool's last decision and the pool as swept.
type decisions struct {
	mu    sync.Mutex
	pools map[string]*pool.Pool
	d     map[string]scaling.Decision
}

func (r *decisions) Reconcile(_ context.Context, p *pool.Pool, d scaling.Decision, _ *poolstate.Status) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.pools[p.Name], r.d[p.Name] = p, d
	return nil
}

// removedFinder reports one removed pool "gone" and nothing left.
type removedFinder struct{ ns []string }

func (f *removedFinder) Removed(_ context.Context, ns []string, known func(string) bool) ([]*pool.Pool, error) {
	f.ns = ns
	if known("gone") {
		return nil, nil
	}
	return []*pool.Pool{pool.Removed("gone", "ns", scope.Scope{Organization: "acme"}, true)}, nil
}

func (f *removedFinder) Remaining(context.Context, []string, func(string) bool) (map[string]int, error) {
	return nil, nil
}

func newDrainEnv(t *testing.T) (*sweeper.Sweeper, *decisions, *reservation.Store, *teardown.Mark) {
	t.Helper()
	cfg, err := pool.Parse([]byte(`
pools:
  - name: a
    organization: acme
    minReplicas: 1
    maxReplicas: 5
    kubernetes: {namespace: ns, image: runner:1}
`))
	if err != nil {
		t.Fatal(err)
	}
	db, name := testenv.Table(t)
	clk := clocktesting.NewFakeClock(t0)
	rec := &decisions{pools: map[string]*pool.Pool{}, d: map[string]scaling.Decision{}}
	mark := teardown.NewMark(db, name)
	rs := reservation.New(db, name, clk)
	s, err := sweeper.New(cfg, rs, poolstate.NewStore(db, name), newLeases(t, db, name, clk), rec, clk, nil,
		sweeper.Options{Removed: &removedFinder{}, Drain: mark})
	if err != nil {
		t.Fatal(err)
	}
	return s, rec, rs, mark
}

var scheduled = sweeper.Event{Source: "aws.events", DetailType: "Scheduled Event"}

// TestDrainHoldsEveryPathAtZero: a scheduled sweep drains a removed pool and
// keeps configured ones; once the drain started, nudges and scheduled sweeps
// decide zero for every pool (a queued job included) until it is cancelled.
func TestDrainHoldsEveryPathAtZero(t *testing.T) {
	t.Parallel()
	s, rec, rs, _ := newDrainEnv(t)
	ctx := t.Context()
	if _, err := rs.Record(ctx, reservation.Delivery{Pool: "a", JobID: 1, State: reservation.Queued, Amount: 1, Duration: 10 * time.Minute}); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Handle(ctx, scheduled); err != nil {
		t.Fatal(err)
	}
	if rec.d["a"].Desired != 2 || rec.d["gone"].Desired != 0 || !rec.pools["gone"].IsDraining() {
		t.Fatalf("decisions %v: want a at 2 (min 1 + 1 queued) and the removed pool drained", rec.d)
	}
	r, err := s.Handle(ctx, sweeper.Event{Drain: sweepevent.DrainStart})
	if err != nil || !r.Draining || len(r.Swept) != 2 {
		t.Fatalf("drain: %+v, %v; want both pools swept", r, err)
	}
	for _, ev := range []sweeper.Event{{Pool: "a", Jobs: []int64{1}}, scheduled} {
		rec.d["a"] = scaling.Decision{Desired: -1}
		if _, err := s.Handle(ctx, ev); err != nil {
			t.Fatal(err)
		}
		if d := rec.d["a"]; d.Desired != 0 || !rec.pools["a"].IsDraining() {
			t.Fatalf("event %+v during the drain: pool a decided %d (draining %v), want 0", ev, d.Desired, rec.pools["a"].IsDraining())
		}
	}
	if _, err := s.Handle(ctx, sweeper.Event{Drain: sweepevent.DrainCancel}); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Handle(ctx, scheduled); err != nil {
		t.Fatal(err)
	}
	if rec.d["a"].Desired != 2 {
		t.Fatalf("after cancel: a decided %d, want 2", rec.d["a"].Desired)
	}
}

func TestDrainRefusesUnknownActions(t *testing.T) {
	t.Parallel()
	s, _, _, mark := newDrainEnv(t)
	if _, err := s.Handle(t.Context(), sweeper.Event{Drain: "stop"}); err == nil || !strings.Contains(err.Error(), `drain "stop"`) {
		t.Fatalf("error %v, want one naming the action", err)
	}
	if on, err := mark.Draining(t.Context()); err != nil || on {
		t.Fatalf("an unknown action set the mark (%v, %v)", on, err)
	}
}

// TestDrainOnlyThroughTheDrainAlias: in Lambda, a drain command is served only
// when the sweeper was invoked through its drain alias. Through the nudge alias
// (all the webhook may invoke), the unqualified function or a version, start
// and cancel are refused and leave the drain mark as it was.
func TestDrainOnlyThroughTheDrainAlias(t *testing.T) {
	t.Parallel()
	s, rec, _, mark := newDrainEnv(t)
	const fn = "arn:aws:lambda:eu-west-1:123456789012:function:stack-sweeper"
	via := func(arn string) context.Context {
		return lambdacontext.NewContext(t.Context(), &lambdacontext.LambdaContext{AwsRequestID: "r", InvokedFunctionArn: arn})
	}
	for _, arn := range []string{fn + ":" + sweepevent.NudgeAlias, fn, fn + ":$LATEST", fn + ":7", ""} {
		_, err := s.Handle(via(arn), sweeper.Event{Drain: sweepevent.DrainStart})
		if !errors.Is(err, sweeper.ErrNotDrainEntry) {
			t.Fatalf("drain start invoked as %q: error %v, want ErrNotDrainEntry", arn, err)
		}
		if on, err := mark.Draining(t.Context()); err != nil || on {
			t.Fatalf("drain start invoked as %q set the mark (%v, %v)", arn, on, err)
		}
	}
	if len(rec.d) != 0 {
		t.Fatalf("refused drains swept pools: %v", rec.d)
	}
	r, err := s.Handle(via(fn+":"+sweepevent.DrainAlias), sweeper.Event{Drain: sweepevent.DrainStart})
	if err != nil || !r.Draining {
		t.Fatalf("drain start through the drain alias: %+v, %v", r, err)
	}
	if _, err := s.Handle(via(fn+":"+sweepevent.NudgeAlias), sweeper.Event{Drain: sweepevent.DrainCancel}); !errors.Is(err, sweeper.ErrNotDrainEntry) {
		t.Fatalf("drain cancel through the nudge alias: error %v, want ErrNotDrainEntry", err)
	}
	if on, err := mark.Draining(t.Context()); err != nil || !on {
		t.Fatalf("a refused cancel cleared the mark (%v, %v)", on, err)
	}
	if _, err := s.Handle(via(fn+":"+sweepevent.DrainAlias), sweeper.Event{Drain: sweepevent.DrainCancel}); err != nil {
		t.Fatal(err)
	}
	if on, err := mark.Draining(t.Context()); err != nil || on {
		t.Fatalf("cancel through the drain alias left the mark (%v, %v)", on, err)
	}
}
