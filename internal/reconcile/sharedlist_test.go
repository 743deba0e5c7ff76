package reconcile_test

import (
	"testing"
	"time"

	"github.com/runnerscaler/runnerscaler/internal/pool"
	"github.com/runnerscaler/runnerscaler/internal/reconcile"
	"github.com/runnerscaler/runnerscaler/internal/scaling"
)

// TestFinishedRunnerIsNotHeldByAListReadDuringItsJob: with runner lists shared
// between sweeps (RunnerListMaxAge), a sweep during an ephemeral runner's job
// reads GitHub's list, which shows the runner busy. The job ends, the runner's
// container exits, and the next sweep, 2 s later, still has that list at hand.
// The finished runner cannot hold a job: its removal is decided on a list read
// by this sweep (GitHub deleted the ephemeral runner after its job), and its
// slot is refilled at once for the job that waits — not vetoed by the old busy
// flag and backed off for 15 s with the job waiting.
func TestFinishedRunnerIsNotHeldByAListReadDuringItsJob(t *testing.T) {
	t.Parallel()
	e := newEnv(t, true)
	cfg, err := pool.Parse([]byte(poolYAML(e.ns, true, "runner:1")))
	if err != nil {
		t.Fatal(err)
	}
	if e.rec, err = reconcile.New(cfg, e.kube, e.gh, e.clock, nil, reconcile.Options{JobLinks: e.links, Roster: e.roster,
		RunnerListMaxAge: 10 * time.Second}); err != nil {
		t.Fatal(err)
	}
	effective := e.clock.Now()
	// A backlog: one runner allowed, one more job waiting for it.
	backlog := scaling.Decision{Desired: 1, Reserved: 2, Queued: 1, Saturated: true, EffectiveTime: effective}
	sweep := func() {
		t.Helper()
		if err := e.rec.Reconcile(t.Context(), e.pool, backlog, &e.status); err != nil {
			t.Fatalf("sweep: %v", err)
		}
	}
	e.clock.Step(time.Second)
	sweep()
	name := e.statefulSets()[0]
	r := e.start(name)
	e.setBusy(r.ID, true)
	// Past half the registration timeout, the sweep looks the runner up in
	// GitHub's list (register): busy, mid-job. That list is kept for 10 s.
	e.clock.Step(6 * time.Minute)
	before := e.sim.Calls()[listCall]
	sweep()
	if e.sim.Calls()[listCall] == before {
		t.Fatal("the sweep mid-job read no runner list")
	}
	e.exit(name, r.ID) // the job ends; GitHub deletes the ephemeral runner; the container exits 0
	e.clock.Step(2 * time.Second)
	sweep()
	got := e.statefulSets()
	if len(got) != 1 || got[0] == name {
		t.Fatalf("statefulsets %v, want the finished %s replaced in the sweep after its exit", got, name)
	}
}
