package reconcile_test

import (
	"context"
	"errors"
	"slices"
	"sync"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/runnerscaler/runnerscaler/internal/pool"
	"github.com/runnerscaler/runnerscaler/internal/reconcile"
	"github.com/runnerscaler/runnerscaler/internal/runnerpod"
)

// recordingRoster is a roster that records what the sweeper adds and retires,
// whether the runner's Secret existed when it was added, and fails while fail
// is set.
type recordingRoster struct {
	e               *env
	mu              sync.Mutex
	added, retired  []string
	secretBeforeAdd []string
	fail            bool
}

var errRosterDown = errors.New("injected: the roster cannot be written")

func (r *recordingRoster) Add(ctx context.Context, pool, runner string, _ time.Time) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.fail {
		return errRosterDown
	}
	name := runner[:len(runner)-len("-0")]
	if _, err := r.e.raw.CoreV1().Secrets(r.e.ns).Get(ctx, name, metav1.GetOptions{}); err == nil {
		r.secretBeforeAdd = append(r.secretBeforeAdd, runner)
	}
	r.added = append(r.added, runner)
	return nil
}

func (r *recordingRoster) Retire(_ context.Context, pool, runner string, _ time.Time) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.fail {
		return errRosterDown
	}
	r.retired = append(r.retired, runner)
	return nil
}

// withRoster makes e's reconciler keep its runners on roster.
func (e *env) withRoster(roster reconcile.Roster) {
	e.t.Helper()
	cfg, err := pool.Parse([]byte(poolYAML(e.ns, false, "runner:1")))
	if err != nil {
		e.t.Fatal(err)
	}
	e.pool = cfg.Pool("p")
	if e.rec, err = reconcile.New(cfg, e.kube, e.gh, e.clock, nil, reconcile.Options{JobLinks: e.links, Roster: roster}); err != nil {
		e.t.Fatal(err)
	}
}

// TestRosterHoldsEachRunnerFromBeforeItsSecretUntilItGoes: each runner the
// sweeper creates is on the roster before its Secret exists, under its GitHub
// (pod) name, and is retired when it is deleted. While the roster cannot be
// written, no runner is created, and a runner being removed keeps its
// StatefulSet until the roster can be written.
func TestRosterHoldsEachRunnerFromBeforeItsSecretUntilItGoes(t *testing.T) {
	t.Parallel()
	e := newEnv(t, false)
	roster := &recordingRoster{e: e}
	e.withRoster(roster)

	roster.fail = true
	if err := e.sweep(1, time.Time{}); !errors.Is(err, errRosterDown) {
		t.Fatalf("sweep with the roster down: %v, want its error", err)
	}
	if got := e.statefulSets(); len(got) != 0 {
		t.Fatalf("runners created with the roster down: %v", got)
	}
	roster.fail = false
	e.mustSweep(2, time.Time{})
	names := e.statefulSets()
	var pods []string
	for _, n := range names {
		pods = append(pods, runnerpod.PodName(n))
	}
	if slices.Sort(roster.added); !slices.Equal(roster.added, pods) || len(roster.secretBeforeAdd) != 0 {
		t.Fatalf("roster added %v (with a Secret already there: %v), want exactly %v, each before its Secret",
			roster.added, roster.secretBeforeAdd, pods)
	}
	for _, n := range names {
		e.start(n)
	}
	e.mustSweep(2, time.Time{})
	e.clock.Step(3 * time.Second)

	roster.fail = true
	// The sweeps stop the unused runners; their deletion stops at the roster.
	var err error
	for range 4 {
		err = e.sweep(0, time.Time{})
		e.endStoppedRunners()
	}
	if !errors.Is(err, errRosterDown) {
		t.Fatalf("sweep deleting runners with the roster down: %v, want its error", err)
	}
	if got := e.statefulSets(); len(got) != 2 || len(roster.retired) != 0 {
		t.Fatalf("with the roster down: runners %v left, retired %v; want both runners kept, none retired", got, roster.retired)
	}
	roster.fail = false
	e.mustSweep(0, time.Time{})
	if got := e.statefulSets(); len(got) != 0 {
		t.Fatalf("runners %v left, want none", got)
	}
	if slices.Sort(roster.retired); !slices.Equal(roster.retired, pods) {
		t.Fatalf("retired %v, want %v", roster.retired, pods)
	}
}
