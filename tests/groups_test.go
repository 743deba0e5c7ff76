package tests

import (
	"strings"
	"testing"
	"time"

	"github.com/runnerscaler/runnerscaler/internal/groupaccess"
	"github.com/runnerscaler/runnerscaler/internal/poolstate"
	"github.com/runnerscaler/runnerscaler/internal/scope"
	"github.com/runnerscaler/runnerscaler/internal/status"
	"github.com/runnerscaler/runnerscaler/local/githubsim"
	"github.com/runnerscaler/runnerscaler/local/loop"
)

// Both pools take jobs labelled grp; restricted alone takes gpu. Its runner
// group, ml, admits acme/ml only (the test makes it so in the simulator).
const groupPools = `
pools:
  - name: restricted
    organization: acme
    group: ml
    labels: [grp, gpu]
    maxReplicas: 2
    scaleDownDelaySecondsAfterScaleOut: 1
    kubernetes: {namespace: %[1]s, template: %[2]s}
  - name: open
    organization: acme
    labels: [grp]
    maxReplicas: 2
    scaleDownDelaySecondsAfterScaleOut: 1
    kubernetes: {namespace: %[1]s, template: %[2]s}
`

// TestRestrictedGroupRoutesToTheNextPool: once the sweeper has read the ml
// group's access, a job of acme/app that both pools' labels fit runs on the
// open pool's runner, and no runner of restricted is ever created for it (the
// sweeper's decisions say so); a job of acme/app that only restricted's labels
// fit is unrouted, and status says which group does not admit it; a job of
// acme/ml runs on restricted's runner, whose group admits it.
func TestRestrictedGroupRoutesToTheNextPool(t *testing.T) {
	t.Parallel()
	w := newWorld(t, groupPools, loop.Options{SweepEvery: time.Second})
	acme := scope.Scope{Organization: "acme"}
	w.loop.Sim.AddGroup(acme, "ml", []string{"acme/ml"})
	access := groupaccess.NewStore(w.db, w.table)
	w.waitFor("the sweeper read the ml group", time.Minute, func() bool {
		a, ok, err := access.Get(w.t.Context(), acme, "ml")
		if err != nil {
			w.t.Fatal(err)
		}
		return ok && a.Visibility == groupaccess.Selected
	})

	both := w.loop.Sim.QueueJob(githubsim.JobSpec{Repository: "acme/app", Organization: "acme",
		Labels: []string{"self-hosted", "grp"}, Duration: time.Second})
	onlyRestricted := w.loop.Sim.QueueJob(githubsim.JobSpec{Repository: "acme/app", Organization: "acme",
		Labels: []string{"self-hosted", "gpu"}, Duration: time.Second})
	answered := time.Now()
	w.waitFor("the acme/app job completed", 2*time.Minute, func() bool {
		return w.job(both.ID).State == githubsim.JobCompleted
	})
	if done := w.job(both.ID); done.Conclusion != githubsim.JobSuccess || !strings.HasPrefix(done.RunnerName, "open-") {
		t.Fatalf("job %+v: want success on an open runner", done)
	}
	states := poolstate.NewStore(w.db, w.table)
	w.waitFor("a sweep of restricted after both jobs were queued", time.Minute, func() bool {
		st, err := states.Get(w.t.Context(), "restricted")
		if err != nil {
			w.t.Fatal(err)
		}
		return st.DecidedAt.After(answered.Add(time.Second))
	})
	st, err := states.Get(t.Context(), "restricted")
	if err != nil {
		t.Fatal(err)
	}
	if st.Desired != 0 || !st.LastScaleOut.IsZero() {
		t.Fatalf("restricted: desired %d, last scale-out %s (%s); want no runner ever", st.Desired, st.LastScaleOut, st.Reason)
	}
	w.statusShowsUnrouted(onlyRestricted.ID, "group ml of pool restricted does not admit repository acme/app")

	ml := w.loop.Sim.QueueJob(githubsim.JobSpec{Repository: "acme/ml", Organization: "acme",
		Labels: []string{"self-hosted", "gpu"}, Duration: time.Second})
	w.waitFor("the acme/ml job completed", 2*time.Minute, func() bool {
		return w.job(ml.ID).State == githubsim.JobCompleted
	})
	if done := w.job(ml.ID); done.Conclusion != githubsim.JobSuccess || !strings.HasPrefix(done.RunnerName, "restricted-") {
		t.Fatalf("job %+v: want success on a restricted runner", done)
	}
	if j := w.job(onlyRestricted.ID); j.State != githubsim.JobQueued {
		t.Fatalf("the unrouted job %+v: want it still queued (no runner may take it)", j)
	}
	w.waitFor("back to zero", 2*time.Minute, w.quiescent)
	w.noViolations()
}

// statusShowsUnrouted checks that `runnerscaler status` lists job among the
// jobs no pool took, with why.
func (w *world) statusShowsUnrouted(job int64, why string) {
	w.t.Helper()
	g := w.gatherer()
	r, err := g.Report(w.t.Context(), "")
	if err != nil {
		w.t.Fatal(err)
	}
	if len(r.Unrouted) != 1 || r.Unrouted[0].ID != job || !strings.Contains(r.Unrouted[0].Waiting, why) {
		w.t.Fatalf("status: unrouted %+v; want job %d, because %s", r.Unrouted, job, why)
	}
	var out strings.Builder
	if err := status.RenderReport(&out, r); err != nil {
		w.t.Fatal(err)
	}
	if !strings.Contains(out.String(), why) {
		w.t.Fatalf("status:\n%s\nwant the unrouted job's reason: %s", out.String(), why)
	}
}
