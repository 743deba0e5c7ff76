package tests

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/runnerscaler/runnerscaler/internal/poolstate"
	"github.com/runnerscaler/runnerscaler/internal/status"
	"github.com/runnerscaler/runnerscaler/local/githubsim"
	"github.com/runnerscaler/runnerscaler/local/loop"
)

// overflowPools: jobs asking for `spill` route to first (maxReplicas 1), which
// spills to second.
const overflowPools = `
pools:
  - name: first
    organization: acme
    labels: [spill]
    maxReplicas: 1
    scaleDownDelaySecondsAfterScaleOut: 1
    overflowTo: second
    kubernetes: {namespace: %[1]s, template: %[2]s}
  - name: second
    organization: acme
    labels: [spill]
    maxReplicas: 2
    scaleDownDelaySecondsAfterScaleOut: 1
    kubernetes: {namespace: %[1]s, template: %[2]s}
`

// TestSaturatedPoolSpillsOver: with first's one runner busy, a second job
// routed to first is spilled to second and runs on a second runner; when
// first's job completes, first's sweeps count nothing (the spilled job is not
// counted twice, nor moved back) while second still counts the spilled job
// once. Status says where it went; both complete; nothing is left.
func TestSaturatedPoolSpillsOver(t *testing.T) {
	t.Parallel()
	w := newWorld(t, overflowPools, loop.Options{SweepEvery: time.Second})
	spec := githubsim.JobSpec{Repository: "acme/app", Organization: "acme", Labels: []string{"self-hosted", "spill"}}
	spec.Duration = 20 * time.Second
	j1 := w.loop.Sim.QueueJob(spec)
	w.waitFor("the first job running on first's runner", 2*time.Minute, func() bool {
		return w.job(j1.ID).State == githubsim.JobInProgress
	})
	if r := w.job(j1.ID).RunnerName; !strings.HasPrefix(r, "first-") {
		t.Fatalf("the first job runs on %s, want first's runner", r)
	}
	spec.Duration = time.Minute
	j2 := w.loop.Sim.QueueJob(spec)
	w.waitFor("the second job running", 2*time.Minute, func() bool { return w.job(j2.ID).State == githubsim.JobInProgress })
	if r := w.job(j2.ID).RunnerName; !strings.HasPrefix(r, "second-") {
		t.Fatalf("the second job runs on %s, want a runner of second", r)
	}
	w.statusShowsSpilled(j2.ID)
	states := poolstate.NewStore(w.db, w.table)
	w.waitFor("first's job completed and first swept since", time.Minute, func() bool {
		done := w.job(j1.ID)
		if done.State != githubsim.JobCompleted {
			return false
		}
		st, err := states.Get(w.t.Context(), "first")
		if err != nil {
			w.t.Fatal(err)
		}
		return st.DecidedAt.After(done.EndedAt) && st.Desired == 0
	})
	if w.job(j2.ID).State != githubsim.JobInProgress {
		t.Fatal("the second job ended before first's sweep after the first job: the check shows nothing")
	}
	if st, err := states.Get(t.Context(), "second"); err != nil || st.Desired != 1 {
		t.Fatalf("second: desired %d (%s), %v; want 1, the spilled job once", st.Desired, st.Reason, err)
	}
	w.waitFor("both jobs completed", 2*time.Minute, func() bool { return allDone(w.loop.Sim.Jobs()) })
	w.waitFor("back to zero", 2*time.Minute, w.quiescent)
	w.noViolations()
}

// statusShowsSpilled checks that `runnerscaler status` lists the job as
// spilled, in both pools.
func (w *world) statusShowsSpilled(job int64) {
	w.t.Helper()
	g := w.gatherer()
	r, err := g.Report(w.t.Context(), "")
	if err != nil {
		w.t.Fatal(err)
	}
	text := fmt.Sprintf("job %d spilled from first to second", job)
	if !hasMove(r, "first", status.MovedAway, text) || !hasMove(r, "second", status.MovedHere, text) {
		w.t.Fatalf("status moves: first %+v, second %+v; want %q in both", r.Pools[0].Moves, r.Pools[1].Moves, text)
	}
}
