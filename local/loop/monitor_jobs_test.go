package loop

import (
	"encoding/json"
	"fmt"
	"log/slog"
	"net/http"
	"slices"
	"testing"
	"time"

	"github.com/runnerscaler/runnerscaler/internal/pool"
	"github.com/runnerscaler/runnerscaler/internal/scope"
	"github.com/runnerscaler/runnerscaler/local/githubsim"
)

// TestCancelledJobExcusedOnlyByAFault: a job that ended cancelled on a runner a
// fault hit is excused; cancelled on a runner nothing hit, it is a violation;
// and a job lost because its runner was removed under it is a violation even
// with a fault on that runner.
func TestCancelledJobExcusedOnlyByAFault(t *testing.T) {
	t.Parallel()
	sim, url, take := simWithRunner(t)
	l := testLoop(t, sim)
	_, hit := take("small-a")
	_, clean := take("small-b")
	lostRunner, lost := take("small-c")
	for _, name := range []string{"small-a", "small-c"} {
		l.Monitor.Fault(name, "runner process killed")
	}
	for _, j := range []githubsim.Job{hit, clean} {
		if err := sim.CompleteJobAs(j.ID, githubsim.JobCancelled); err != nil {
			t.Fatal(err)
		}
	}
	removeWhileRESTSaysIdle(t, sim, url, lostRunner.ID)
	for range 2 { // judged once, however often the jobs are looked at
		l.judgeJobs(sim.Jobs())
	}
	v := l.Monitor.Violations()
	if len(v) != 2 {
		t.Fatalf("violations %q, want job %d cancelled and job %d lost", v, clean.ID, lost.ID)
	}
	mustFind(t, "violations", v, fmt.Sprintf("job %d on runner small-b ended cancelled", clean.ID))
	mustFind(t, "violations", v, fmt.Sprintf("job %d lost", lost.ID), "small-c")
	ex := l.Monitor.Excused()
	if len(ex) != 1 {
		t.Fatalf("excused %q, want job %d alone", ex, hit.ID)
	}
	mustFind(t, "excused", ex, fmt.Sprintf("job %d on runner small-a ended cancelled", hit.ID), "runner process killed")
}

// TestFailedByItself: a job failed by itself when its runner reported it
// failed with its script's non-zero exit code, or its container hook's (an
// unschedulable workflow pod failed prepare_job); not when it was cancelled
// while its script ran (the script killed), nor when its runner died (no exit
// code), nor when it was lost with its runner's registration.
func TestFailedByItself(t *testing.T) {
	t.Parallel()
	job := func(c githubsim.JobConclusion, code int, lost bool) githubsim.Job {
		return githubsim.Job{State: githubsim.JobCompleted, Conclusion: c, ExitCode: code, LostRunner: lost,
			JobSpec: githubsim.JobSpec{Script: FailingScript}}
	}
	prepareFailed := job(githubsim.JobFailure, 1, false)
	prepareFailed.Output = "##[error]the workflow pod did not start within 10 s\n"
	for _, tc := range []struct {
		name string
		j    githubsim.Job
		want bool
	}{
		{"its script failed", job(githubsim.JobFailure, 1, false), true},
		{"its container hook's prepare_job failed", prepareFailed, true},
		{"cancelled while its script ran", job(githubsim.JobCancelled, 137, false), false},
		{"its runner died", job(githubsim.JobFailure, 0, false), false},
		{"lost with its runner's registration", job(githubsim.JobFailure, 1, true), false},
		{"no script", githubsim.Job{State: githubsim.JobCompleted, Conclusion: githubsim.JobFailure, ExitCode: 1}, false},
	} {
		if got := FailedByItself(tc.j); got != tc.want {
			t.Errorf("%s: FailedByItself = %v, want %v", tc.name, got, tc.want)
		}
	}
}

// TestEphemeralRunnerRunsOneJob: an ephemeral pool's runner that ran two jobs is
// one violation; a persistent pool's runner may run many.
func TestEphemeralRunnerRunsOneJob(t *testing.T) {
	t.Parallel()
	sim, _, _ := simWithRunner(t)
	l := testLoop(t, sim)
	done := func(id int64, runner string, labels ...string) githubsim.Job {
		return githubsim.Job{ID: id, State: githubsim.JobCompleted, Conclusion: githubsim.JobSuccess, RunnerName: runner,
			JobSpec: githubsim.JobSpec{Repository: "acme/app", Organization: "acme", Labels: append([]string{"self-hosted"}, labels...)}}
	}
	jobs := []githubsim.Job{
		done(1, "small-a", "small"), done(2, "small-a", "small"), done(3, "small-b", "small"),
		done(4, "keep-a", "keep"), done(5, "keep-a", "keep"), done(6, "keep-a", "keep"),
	}
	for range 2 {
		l.judgeJobs(jobs)
	}
	v := l.Monitor.Violations()
	if len(v) != 1 {
		t.Fatalf("violations %q, want small-a's two jobs alone", v)
	}
	mustFind(t, "violations", v, "ephemeral runner small-a ran 2 jobs [1 2]")
}

// TestLostJobsAreFailedAfterLostAfter: a running job whose runner went offline,
// or whose runner container stopped after the job started, is failed once it
// has been so for LostAfter (as GitHub fails a job whose worker died); a job
// whose runner's container stopped before the job started, on a runner online,
// runs on, and so does one whose runner's container stopped in the second the
// job started without ever starting its runner (its restart took the job).
func TestLostJobsAreFailedAfterLostAfter(t *testing.T) {
	t.Parallel()
	sim, _, take := simWithRunner(t)
	l := testLoop(t, sim)
	l.opts.LostAfter = 10 * time.Second
	offline, offlineJob := take("small-a")
	if err := sim.SetOnline(offline.ID, false); err != nil {
		t.Fatal(err)
	}
	_, diedJob := take("small-b")
	b := runnerPod("small-b")
	l.podAdded(b)
	l.podChanged(b, withStop(b, 137, "Error", diedJob.StartedAt.Add(time.Minute)))
	c := withStop(runnerPod("small-c"), 137, "Error", time.Now().Add(-time.Hour))
	l.podAdded(runnerPod("small-c"))
	l.podChanged(runnerPod("small-c"), c) // long before its job
	l.podChanged(c, restarted(c))
	_, aliveJob := take("small-c")
	// Its entrypoint exited before it started the runner, in the second its
	// restart took the job: no worker died with it.
	d := runnerPod("small-d")
	l.podAdded(d)
	notStarted := withStop(d, 1, "Error", time.Now())
	notStarted.Status.ContainerStatuses[0].State.Terminated.Message = "runner not started: the entrypoint exited with code 1 before it started the runner\n"
	l.podChanged(d, notStarted)
	l.podChanged(notStarted, restarted(notStarted))
	_, restartedJob := take("small-d")

	now := time.Now()
	lost := map[int64]time.Time{}
	l.failLost(now, lost)
	l.failLost(now.Add(l.opts.LostAfter-time.Millisecond), lost)
	if n := l.LostJobs(); n != 0 {
		t.Fatalf("%d jobs failed before LostAfter", n)
	}
	l.failLost(now.Add(l.opts.LostAfter), lost)
	if n := l.LostJobs(); n != 2 {
		t.Fatalf("%d jobs failed, want jobs %d and %d", n, offlineJob.ID, diedJob.ID)
	}
	state := map[int64]githubsim.Job{}
	for _, j := range sim.Jobs() {
		state[j.ID] = j
	}
	for _, id := range []int64{offlineJob.ID, diedJob.ID} {
		if j := state[id]; j.State != githubsim.JobCompleted || j.Conclusion != githubsim.JobFailure {
			t.Fatalf("job %d: %s %s, want completed failure", id, j.State, j.Conclusion)
		}
	}
	if j := state[aliveJob.ID]; j.State != githubsim.JobInProgress {
		t.Fatalf("job %d, whose runner is online and stopped before it: %s, want still in progress", aliveJob.ID, j.State)
	}
	if j := state[restartedJob.ID]; j.State != githubsim.JobInProgress {
		t.Fatalf("job %d, taken by a restart of a container that never started its runner: %s, want still in progress", restartedJob.ID, j.State)
	}
	l.failLost(now.Add(2*l.opts.LostAfter), lost)
	if n := l.LostJobs(); n != 2 || len(lost) != 0 {
		t.Fatalf("the next look: %d jobs failed, lost %v; want 2, and the failed jobs forgotten", n, lost)
	}
}

// TestWithdrawnFaultExcusesNothing: an eviction the API refused (a busy
// runner's disruption budget) is withdrawn, and a cancelled job on that runner
// is a violation; a fault recorded twice and withdrawn once still excuses.
func TestWithdrawnFaultExcusesNothing(t *testing.T) {
	t.Parallel()
	sim, _, take := simWithRunner(t)
	l := testLoop(t, sim)
	_, refused := take("small-a")
	_, twice := take("small-b")
	l.Monitor.Fault("small-a", evictedFault)
	l.Monitor.Withdraw("small-a", evictedFault)
	l.Monitor.Fault("small-b", evictedFault)
	l.Monitor.Fault("small-b", evictedFault)
	l.Monitor.Withdraw("small-b", evictedFault)
	for _, j := range []githubsim.Job{refused, twice} {
		if err := sim.CompleteJobAs(j.ID, githubsim.JobCancelled); err != nil {
			t.Fatal(err)
		}
	}
	l.judgeJobs(sim.Jobs())
	v := l.Monitor.Violations()
	if len(v) != 1 {
		t.Fatalf("violations %q, want job %d alone", v, refused.ID)
	}
	mustFind(t, "violations", v, fmt.Sprintf("job %d on runner small-a ended cancelled", refused.ID))
	mustFind(t, "excused", l.Monitor.Excused(), fmt.Sprintf("job %d on runner small-b ended cancelled", twice.ID), evictedFault)
}

// TestContainerJobRunners: the runners a kubelet restart excuses are those
// running a container job on a pool in container mode; not a runner running a
// job without a container there, nor one running a container job on a pool
// outside container mode (it runs on the runner, with no exec).
func TestContainerJobRunners(t *testing.T) {
	t.Parallel()
	sim, url, _ := simWithRunner(t)
	cfg, err := pool.Parse([]byte(`
pools:
  - name: cmk
    organization: acme
    labels: [cmk]
    maxReplicas: 2
    kubernetes: {namespace: ns, image: r, serviceAccountName: cmk-runner, containerMode: kubernetes-novolume, jobsNamespace: jobs}
  - name: small
    organization: acme
    labels: [small]
    maxReplicas: 2
    kubernetes: {namespace: ns, image: r}
`))
	if err != nil {
		t.Fatal(err)
	}
	l := testLoop(t, sim)
	l.pools.Store(cfg)
	run := func(name, label string, container bool) {
		t.Helper()
		req, err := http.NewRequestWithContext(t.Context(), "POST", url+"/orgs/acme/actions/runners/registration-token", nil)
		if err != nil {
			t.Fatal(err)
		}
		req.Header.Set("Authorization", "token pat")
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		var tok struct{ Token string }
		err = json.NewDecoder(resp.Body).Decode(&tok)
		resp.Body.Close()
		if err != nil {
			t.Fatal(err)
		}
		rn, err := sim.Register(githubsim.Registration{Token: tok.Token, Scope: scope.Scope{Organization: "acme"}.String(), Name: name,
			Labels: []string{label}, Ephemeral: true})
		if err != nil {
			t.Fatal(err)
		}
		spec := githubsim.JobSpec{Repository: "acme/app", Organization: "acme", Labels: []string{"self-hosted", label}, Duration: time.Minute}
		if container {
			spec.Container = &githubsim.JobContainer{Image: "img"}
		}
		sim.QueueJob(spec)
		if _, ok, err := sim.AcquireJob(rn.ID); err != nil || !ok {
			t.Fatalf("AcquireJob: %v %v", ok, err)
		}
	}
	run("cmk-a-0", "cmk", true)
	run("cmk-b-0", "cmk", false)
	run("small-c-0", "small", true)
	if got := l.containerJobRunners(); !slices.Equal(got, []string{"cmk-a-0"}) {
		t.Fatalf("containerJobRunners %q, want [cmk-a-0]", got)
	}
}

// TestOnlyExecCut: a runner only a kubelet restart hit under its container
// job is "only exec cut"; not one no fault hit, nor one another fault hit too.
// Faulted: any fault hit it.
func TestOnlyExecCut(t *testing.T) {
	t.Parallel()
	m := newMonitor(slog.New(slog.DiscardHandler))
	m.Fault("cut", kubeletCutExec)
	m.Fault("killed", kubeletCutExec)
	m.Fault("killed", "runner process killed")
	for runner, want := range map[string]bool{"cut": true, "killed": false, "untouched": false} {
		if got := m.OnlyExecCut(runner); got != want {
			t.Errorf("OnlyExecCut(%s) = %v, want %v", runner, got, want)
		}
		if got := m.Faulted(runner); got != (runner != "untouched") {
			t.Errorf("Faulted(%s) = %v, want %v", runner, got, runner != "untouched")
		}
	}
}
