package tests

import (
	"strings"
	"testing"
	"time"

	"github.com/runnerscaler/runnerscaler/internal/poolstate"
	"github.com/runnerscaler/runnerscaler/internal/status"
	"github.com/runnerscaler/runnerscaler/local/githubsim"
	"github.com/runnerscaler/runnerscaler/local/loop"
)

// gateDuration is the gate pool's reservation duration (the shortest a pool
// may have): the hold outlasts it.
const gateDuration = time.Minute

// gatePool's reservations last gateDuration.
const gatePool = `
pools:
  - name: gate
    organization: acme
    labels: [gate]
    maxReplicas: 2
    scaleDownDelaySecondsAfterScaleOut: 1
    scaleUpTriggers: [{amount: 1, duration: 1m}]
    kubernetes: {namespace: %[1]s, template: %[2]s}
`

// TestJobWaitingForApprovalHoldsNoRunner: a job that deploys to an environment
// with required reviewers sends queued, then waiting; the sweeper never scales
// the pool out for it (its decisions say so: desired 0, no scale-out ever),
// through sweeps past the reservation's duration counted from either delivery,
// and status shows it waiting for approval, apart from the queued jobs. Once
// approved (queued again), a runner starts, takes it, and it completes; then
// nothing is left.
func TestJobWaitingForApprovalHoldsNoRunner(t *testing.T) {
	t.Parallel()
	w := newWorld(t, gatePool, loop.Options{SweepEvery: time.Second})
	// The simulator's deliveries are synchronous: both are answered on return.
	j := w.loop.Sim.QueueJobForApproval(githubsim.JobSpec{Repository: "acme/app", Organization: "acme",
		Labels: []string{"self-hosted", "gate"}, Duration: time.Second}, "production")
	answered := time.Now()
	states := poolstate.NewStore(w.db, w.table)
	var st poolstate.Status
	w.waitFor("a sweep past the reservation's duration", gateDuration+time.Minute, func() bool {
		var err error
		if st, err = states.Get(w.t.Context(), "gate"); err != nil {
			w.t.Fatal(err)
		}
		return st.DecidedAt.After(answered.Add(gateDuration + time.Second))
	})
	if st.Desired != 0 || !st.LastScaleOut.IsZero() || w.statefulSets() != 0 {
		t.Fatalf("while the job waited for approval: desired %d, last scale-out %s (%s), %d statefulsets; want no runner ever",
			st.Desired, st.LastScaleOut, st.Reason, w.statefulSets())
	}
	w.statusShowsWaitingForApproval(j.ID)

	if err := w.loop.Sim.Approve(j.ID); err != nil {
		t.Fatal(err)
	}
	w.waitFor("the approved job completed", 2*time.Minute, func() bool { return allDone(w.loop.Sim.Jobs()) })
	if done := w.job(j.ID); done.Conclusion != githubsim.JobSuccess || !strings.HasPrefix(done.RunnerName, "gate-") {
		t.Fatalf("job %+v: want success on a gate runner", done)
	}
	// The monitor's wait bound is not judged here: it counts a job's wait from
	// its creation, and this one was created before its approval.
	w.waitFor("back to zero", 2*time.Minute, w.quiescent)
}

// statusShowsWaitingForApproval checks that `runnerscaler status` lists the job
// as waiting for approval, not as queued.
func (w *world) statusShowsWaitingForApproval(job int64) {
	w.t.Helper()
	g := w.gatherer()
	r, err := g.Report(w.t.Context(), "gate")
	if err != nil {
		w.t.Fatal(err)
	}
	p := r.Pools[0]
	if len(p.Queued) != 0 || len(p.WaitingForApproval) != 1 || p.WaitingForApproval[0].ID != job {
		w.t.Fatalf("status: queued %+v, waiting for approval %+v; want job %d waiting for approval only", p.Queued, p.WaitingForApproval, job)
	}
	var out strings.Builder
	if err := status.RenderReport(&out, r); err != nil {
		w.t.Fatal(err)
	}
	if !strings.Contains(out.String(), "WAITING FOR APPROVAL") {
		w.t.Fatalf("status:\n%s\nwant a WAITING FOR APPROVAL section", out.String())
	}
}

// TestHeldJobWhoseDeliveriesWereLostRuns: a job whose deliveries leave it
// held although GitHub no longer holds it still gets a runner, once the
// sweeper asked GitHub about it: an environment with required reviewers
// whose first `queued` never came (the `waiting` and the approval's `queued`
// alone), and an environment without reviewers whose second `queued` was
// lost for good (the first says the job waits). Each job runs to success on a
// gate runner, and then nothing is left.
func TestHeldJobWhoseDeliveriesWereLostRuns(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name  string
		queue func(sim *githubsim.Server, spec githubsim.JobSpec) githubsim.Job
	}{
		{"first queued never came", func(sim *githubsim.Server, spec githubsim.JobSpec) githubsim.Job {
			return sim.QueueJobForApproval(spec, "production", "waiting")
		}},
		{"second queued of an environment without reviewers lost", func(sim *githubsim.Server, spec githubsim.JobSpec) githubsim.Job {
			return sim.QueueJobForApproval(spec, "staging", "queued")
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			w := newWorld(t, gatePool, loop.Options{SweepEvery: time.Second})
			j := tc.queue(w.loop.Sim, githubsim.JobSpec{Repository: "acme/app", Organization: "acme",
				Labels: []string{"self-hosted", "gate"}, Duration: time.Second})
			w.loop.Sim.LoseDelivery(j.ID, "queued", 2)
			if err := w.loop.Sim.Approve(j.ID); err != nil {
				t.Fatal(err)
			}
			w.waitFor("the job completed", 3*time.Minute, func() bool { return allDone(w.loop.Sim.Jobs()) })
			if done := w.job(j.ID); done.Conclusion != githubsim.JobSuccess || !strings.HasPrefix(done.RunnerName, "gate-") {
				t.Fatalf("job %+v: want success on a gate runner", done)
			}
			w.waitFor("back to zero", 2*time.Minute, w.quiescent)
		})
	}
}
