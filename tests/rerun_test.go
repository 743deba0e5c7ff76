package tests

import (
	"context"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/runnerscaler/runnerscaler/internal/rerun"
	"github.com/runnerscaler/runnerscaler/internal/runnerpod"
	"github.com/runnerscaler/runnerscaler/internal/status"
	"github.com/runnerscaler/runnerscaler/internal/status/gather"
	"github.com/runnerscaler/runnerscaler/local/githubsim"
	"github.com/runnerscaler/runnerscaler/local/loop"
)

// oomPool is an ephemeral pool whose runner containers the kernel can OOM-kill
// (chaosTemplate's memory limit); %[3]s is its rerunsPerRun.
const oomPool = `
pools:
  - name: oom
    organization: acme
    labels: [oom]
    maxReplicas: 2
    scaleDownDelaySecondsAfterScaleOut: 1
    rerunsPerRun: %[3]s
    kubernetes: {namespace: %[1]s, template: %[2]s}
`

func rerunWorld(t *testing.T, budget string) *world {
	t.Helper()
	return newWorldWith(t, oomPool, loop.Options{SweepEvery: time.Second, LostAfter: 3 * time.Second},
		chaosTemplate, func(string) string { return budget })
}

// TestOOMKilledJobIsRerunOnce: a job whose runner container the kernel
// OOM-kills fails (GitHub fails a job whose runner stopped answering); the
// sweeper sees the OOM kill, re-runs the job once through GitHub's API, and the
// second attempt runs on a new runner and succeeds. The decision names the cause.
func TestOOMKilledJobIsRerunOnce(t *testing.T) {
	t.Parallel()
	w := rerunWorld(t, "1")
	w.queue(1, 30*time.Second, "oom")
	first := w.runningJob(0)
	w.oomKill(first)
	c := w.decided("oom", first.ID)
	if c.Decision != rerun.Rerun || !killed(c.Cause) {
		t.Fatalf("decision %+v: want a re-run caused by the OOM kill", c)
	}
	w.traceShowsRerun(first.ID, "re-run")
	reruns := w.loop.Sim.Reruns()[first.ID]
	if len(reruns) != 1 {
		t.Fatalf("job %d re-run %d times, want once", first.ID, len(reruns))
	}
	w.waitFor("the re-run completed", 2*time.Minute, func() bool { return allDone(w.loop.Sim.Jobs()) })
	for _, j := range w.loop.Sim.Jobs() {
		if j.ID == reruns[0] && (j.Conclusion != githubsim.JobSuccess || j.RunAttempt != 2 || j.RunnerName == first.RunnerName) {
			t.Fatalf("re-run %+v: want attempt 2 succeeded on another runner", j)
		}
	}
	w.waitFor("back to zero", 2*time.Minute, w.quiescent)
}

// TestJobThatFailsByItselfIsNotRerun: a job whose script exits 1 fails on a
// runner that stays alive and exits normally: it is not re-run.
func TestJobThatFailsByItselfIsNotRerun(t *testing.T) {
	t.Parallel()
	w := rerunWorld(t, "3")
	j := w.loop.Sim.QueueJob(githubsim.JobSpec{Repository: "acme/app", Organization: "acme",
		Labels: []string{"self-hosted", "oom"}, Duration: time.Second, Script: "exit 1"})
	c := w.decided("oom", j.ID)
	if c.Decision != rerun.NotRerun || c.Cause != "" {
		t.Fatalf("decision %+v: want not re-run, no death", c)
	}
	if got := w.loop.Sim.Reruns(); len(got) != 0 {
		t.Fatalf("re-runs %v, want none", got)
	}
	w.traceShowsRerun(j.ID, "not re-run: its runner did not die under it")
	if jobs := w.loop.Sim.Jobs(); len(jobs) != 1 || jobs[0].Conclusion != githubsim.JobFailure || jobs[0].ExitCode != 1 {
		t.Fatalf("jobs %+v: want the one job, failed by its script", jobs)
	}
	w.waitFor("back to zero", 2*time.Minute, w.quiescent)
}

// TestRerunBudgetStopsAJobThatKeepsDying: with rerunsPerRun 1, a job whose
// runner is OOM-killed on both attempts is re-run once, and its second failure
// is left failed, naming the spent budget.
func TestRerunBudgetStopsAJobThatKeepsDying(t *testing.T) {
	t.Parallel()
	w := rerunWorld(t, "1")
	w.queue(1, 30*time.Second, "oom")
	first := w.runningJob(0)
	w.oomKill(first)
	if c := w.decided("oom", first.ID); c.Decision != rerun.Rerun {
		t.Fatalf("first attempt: %+v, want re-run", c)
	}
	second := w.runningJob(first.ID)
	w.oomKill(second)
	c := w.decided("oom", second.ID)
	if c.Decision != rerun.NotRerun || !strings.Contains(c.Reason, "budget of 1 re-run(s) is spent") || !killed(c.Cause) {
		t.Fatalf("second attempt: %+v, want not re-run: the budget is spent", c)
	}
	if got := w.loop.Sim.Reruns()[first.ID]; len(got) != 1 {
		t.Fatalf("re-runs of job %d: %v, want one", first.ID, got)
	}
	w.waitFor("back to zero", 2*time.Minute, w.quiescent)
}

// killed: the cause of a death is the OOM kill, as the kubelet reported it or,
// once the container restarted, as the restarted ephemeral container repeats it.
func killed(cause string) bool {
	return strings.Contains(cause, "OOMKilled (exit code 137)") ||
		strings.Contains(cause, "(exit code 137): runner died: its container was killed before its runner exited")
}

// runningJob waits for a job other than after (0: any) to run, and returns it.
func (w *world) runningJob(after int64) githubsim.Job {
	w.t.Helper()
	var j githubsim.Job
	w.waitFor("a job running", 2*time.Minute, func() bool {
		for _, r := range w.loop.Sim.RunningJobs() {
			if r.ID > after {
				j = r
				return true
			}
		}
		return false
	})
	return j
}

// oomKill has the kernel OOM-kill the runner container running j.
// The runner may run the job before the kubelet has reported its container's id
// (its status lags on a loaded machine): the kill waits for that report.
func (w *world) oomKill(j githubsim.Job) {
	w.t.Helper()
	var pod *corev1.Pod
	w.waitFor("the runner container's id in its pod's status", time.Minute, func() bool {
		p, err := w.kube.CoreV1().Pods(w.ns).Get(context.Background(), j.RunnerName, metav1.GetOptions{})
		if err != nil {
			w.t.Fatal(err)
		}
		for _, cs := range p.Status.ContainerStatuses {
			if cs.Name == runnerpod.ContainerName && cs.ContainerID != "" && cs.State.Running != nil {
				pod = p
			}
		}
		return pod != nil
	})
	if err := w.loop.OOMKill(context.Background(), pod); err != nil {
		w.t.Fatal(err)
	}
}

// decided waits for the sweeper's re-run decision about job, failed on a runner of pool.
func (w *world) decided(pool string, job int64) rerun.Candidate {
	w.t.Helper()
	var c rerun.Candidate
	w.waitFor("the re-run decision", 2*time.Minute, func() bool {
		got, ok, err := w.loop.Rerun(context.Background(), pool, job)
		if err != nil {
			w.t.Fatal(err)
		}
		c = got
		return ok && got.Decision != rerun.Pending
	})
	return c
}

// traceShowsRerun checks that `runnerscaler status --job ID` shows what became
// of the failed job.
func (w *world) traceShowsRerun(job int64, want string) {
	w.t.Helper()
	g := w.gatherer(gather.WithReruns(rerun.NewStore(w.db, w.table)))
	tr, err := g.Trace(w.t.Context(), job)
	if err != nil {
		w.t.Fatal(err)
	}
	var out strings.Builder
	if err := status.RenderTrace(&out, time.Now(), tr); err != nil {
		w.t.Fatal(err)
	}
	if tr.Rerun == nil || !strings.Contains(out.String(), want) {
		w.t.Fatalf("status --job %d:\n%s\nwant a re-run line with %q", job, out.String(), want)
	}
}
