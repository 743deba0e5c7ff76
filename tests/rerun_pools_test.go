package tests

import (
	"context"
	"testing"
	"time"

	"github.com/runnerscaler/runnerscaler/internal/rerun"
	"github.com/runnerscaler/runnerscaler/local/githubsim"
	"github.com/runnerscaler/runnerscaler/local/loop"
)

// twoOOMPools are two ephemeral pools of one organization whose runner
// containers the kernel can OOM-kill (chaosTemplate's memory limit), each
// re-running up to twice per workflow run.
const twoOOMPools = `
pools:
  - name: oom-a
    organization: acme
    labels: [oom-a]
    maxReplicas: 2
    scaleDownDelaySecondsAfterScaleOut: 1
    rerunsPerRun: 2
    kubernetes: {namespace: %[1]s, template: %[2]s}
  - name: oom-b
    organization: acme
    labels: [oom-b]
    maxReplicas: 2
    scaleDownDelaySecondsAfterScaleOut: 1
    rerunsPerRun: 2
    kubernetes: {namespace: %[1]s, template: %[2]s}
`

// TestJobsOfOneRunInTwoPoolsBothOOMKilledAreEachRerun: two jobs of one
// workflow run, one routed to each pool, whose runner containers the kernel
// OOM-kills under them, are each re-run once by the sweeper of their own pool
// — the second one, as the run's attempt 2 carries it, once the first one's
// re-run is over — and each re-run succeeds on a new runner.
func TestJobsOfOneRunInTwoPoolsBothOOMKilledAreEachRerun(t *testing.T) {
	t.Parallel()
	w := newWorldWith(t, twoOOMPools, loop.Options{SweepEvery: time.Second, LostAfter: 3 * time.Second}, chaosTemplate)
	a := w.loop.Sim.QueueJob(githubsim.JobSpec{Repository: "acme/app", Organization: "acme",
		Labels: []string{"self-hosted", "oom-a"}, Duration: 30 * time.Second})
	b := w.loop.Sim.QueueJob(githubsim.JobSpec{Repository: "acme/app", Organization: "acme",
		Labels: []string{"self-hosted", "oom-b"}, Duration: 30 * time.Second, RunID: a.RunID})
	running := func(id int64) githubsim.Job {
		var j githubsim.Job
		w.waitFor("job running", 2*time.Minute, func() bool {
			for _, r := range w.loop.Sim.RunningJobs() {
				if r.ID == id {
					j = r
					return true
				}
			}
			return false
		})
		return j
	}
	ja, jb := running(a.ID), running(b.ID)
	w.oomKill(ja)
	w.oomKill(jb)
	for pool, j := range map[string]githubsim.Job{"oom-a": ja, "oom-b": jb} {
		// The second job's re-run waits for the first one's to be over: a
		// new runner's start, the job's 30 s and the re-run's back-off.
		var c rerun.Candidate
		w.waitFor("the re-run decision of job "+j.Name, 5*time.Minute, func() bool {
			got, ok, err := w.loop.Rerun(context.Background(), pool, j.ID)
			if err != nil {
				t.Fatal(err)
			}
			c = got
			return ok && got.Decision != rerun.Pending
		})
		if c.Decision != rerun.Rerun || !killed(c.Cause) {
			t.Fatalf("decision of pool %s's job %d: %+v, want a re-run caused by the OOM kill", pool, j.ID, c)
		}
		if got := w.loop.Sim.Reruns()[j.ID]; len(got) != 1 {
			t.Fatalf("re-runs of pool %s's job %d: %v, want one", pool, j.ID, got)
		}
	}
	w.waitFor("the re-runs completed", 3*time.Minute, func() bool { return allDone(w.loop.Sim.Jobs()) })
	for _, j := range []githubsim.Job{ja, jb} {
		for _, id := range w.loop.Sim.Reruns()[j.ID] {
			for _, r := range w.loop.Sim.Jobs() {
				if r.ID == id && (r.Conclusion != githubsim.JobSuccess || r.RunnerName == j.RunnerName) {
					t.Fatalf("re-run %+v of job %d: want it succeeded on another runner", r, j.ID)
				}
			}
		}
	}
	w.waitFor("back to zero", 2*time.Minute, w.quiescent)
}
