package tests

import (
	"os"
	"strconv"
	"testing"
	"time"

	"github.com/runnerscaler/runnerscaler/local/loop"
)

// TestChaos runs a job stream through the closed loop while deliveries are lost
// (20%), duplicated (20%) and delayed/reordered (up to 300 ms), and GitHub answers
// some API calls with 502: every job must complete, no pod may be deleted under a
// running job, and nothing may be left at the end. `make test` runs 60 jobs;
// `make chaos` runs RUNNERSCALER_CHAOS_JOBS (1,000).
func TestChaos(t *testing.T) {
	t.Parallel()
	jobs := 60
	if v, err := strconv.Atoi(os.Getenv("RUNNERSCALER_CHAOS_JOBS")); err == nil && v > 0 {
		jobs = v
	}
	w := newWorld(t, twoPools, loop.Options{SweepEvery: time.Second,
		Chaos: loop.Chaos{Drop: 0.2, Duplicate: 0.2, Delay: 300 * time.Millisecond}})
	stream := loop.Generate(w.cfg, jobs, 10, 100*time.Millisecond, 600*time.Millisecond, uint64(time.Now().UnixNano()))
	done := make(chan struct{})
	go func() {
		defer close(done)
		w.loop.Play(t.Context(), stream)
	}()
	injected := 0
	tick := time.NewTicker(2 * time.Second)
	defer tick.Stop()
	limit := time.Now().Add(time.Duration(jobs)*200*time.Millisecond + 2*time.Minute)
	for !allDone(w.loop.Sim.Jobs()) || len(w.loop.Sim.Jobs()) < jobs {
		if time.Now().After(limit) {
			t.Fatalf("jobs %v not all done; faults %+v, violations %v", summary(w.loop.Sim.Jobs()), w.loop.Faults(), w.loop.Monitor.Violations())
		}
		select {
		case <-tick.C:
			w.loop.Sim.InjectStatus(502, 2)
			injected += 2
		case <-time.After(100 * time.Millisecond):
		}
	}
	<-done
	w.waitFor("back to zero", 2*time.Minute, w.quiescent)
	f := w.loop.Faults()
	t.Logf("%d jobs run; faults: %d deliveries lost, %d duplicated, %d delayed, %d GitHub 502s; wait p50 %s p95 %s",
		jobs, f.Dropped, f.Duplicated, f.Delayed, injected, loop.Percentile(w.loop.Waits(), 50).Round(time.Millisecond),
		loop.Percentile(w.loop.Waits(), 95).Round(time.Millisecond))
	if v := w.loop.Monitor.Violations(); len(v) > 0 {
		t.Fatalf("invariant violations: %v", v)
	}
	if f.Dropped == 0 || f.Duplicated == 0 {
		t.Fatalf("faults %+v: the run injected no loss or duplication, so it proves nothing", f)
	}
}
