package reconcile_test

import (
	"context"
	"errors"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/runnerscaler/runnerscaler/internal/githubapi"
	"github.com/runnerscaler/runnerscaler/internal/pool"
	"github.com/runnerscaler/runnerscaler/internal/poolstate"
	"github.com/runnerscaler/runnerscaler/internal/reconcile"
	"github.com/runnerscaler/runnerscaler/internal/rerun"
	"github.com/runnerscaler/runnerscaler/internal/roster"
	"github.com/runnerscaler/runnerscaler/internal/runnerpod"
	"github.com/runnerscaler/runnerscaler/internal/scaling"
	"github.com/runnerscaler/runnerscaler/internal/scope"
	"github.com/runnerscaler/runnerscaler/local/githubsim"
	"github.com/runnerscaler/runnerscaler/local/testenv"
)

// memReruns is an in-memory rerun.Store with its rules: a candidate is decided
// once, a run's budget counts the jobs it paid for. failDeaths fails RecordDeath.
type memReruns struct {
	mu         sync.Mutex
	deaths     map[string][]rerun.Death
	cands      map[int64]rerun.Candidate
	paid       map[int64][]int64       // run → jobs charged
	calls      map[int64]map[int]int64 // run → attempt → the job whose call was claimed
	failDeaths error
	recorded   int
}

func newMemReruns() *memReruns {
	return &memReruns{deaths: map[string][]rerun.Death{}, cands: map[int64]rerun.Candidate{}, paid: map[int64][]int64{},
		calls: map[int64]map[int]int64{}}
}

func (m *memReruns) RecordDeath(_ context.Context, d rerun.Death, _ time.Time) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.failDeaths != nil {
		return m.failDeaths
	}
	m.recorded++
	for _, old := range m.deaths[d.Runner] {
		if old.Key() == d.Key() {
			return nil
		}
	}
	m.deaths[d.Runner] = append(m.deaths[d.Runner], d)
	return nil
}

func (m *memReruns) Deaths(_ context.Context, runner string) ([]rerun.Death, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	return append([]rerun.Death(nil), m.deaths[runner]...), nil
}

func (m *memReruns) Pending(_ context.Context, pool string) ([]rerun.Candidate, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	var out []rerun.Candidate
	for _, c := range m.cands {
		if c.Pool == pool && c.Decision == rerun.Pending {
			out = append(out, c)
		}
	}
	return out, nil
}

func (m *memReruns) Charge(_ context.Context, c rerun.Candidate, max int, _ time.Time) (bool, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	for _, j := range m.paid[c.RunID] {
		if j == c.JobID {
			return true, nil
		}
	}
	if len(m.paid[c.RunID]) >= max {
		return false, nil
	}
	m.paid[c.RunID] = append(m.paid[c.RunID], c.JobID)
	return true, nil
}

func (m *memReruns) Claim(_ context.Context, c rerun.Candidate, from int, _ time.Time) (int64, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.calls[c.RunID] == nil {
		m.calls[c.RunID] = map[int]int64{}
	}
	if _, ok := m.calls[c.RunID][from]; !ok {
		m.calls[c.RunID][from] = c.JobID
	}
	return m.calls[c.RunID][from], nil
}

func (m *memReruns) Calls(_ context.Context, c rerun.Candidate) (map[int]int64, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	out := map[int]int64{}
	for k, v := range m.calls[c.RunID] {
		out[k] = v
	}
	return out, nil
}

func (m *memReruns) Release(_ context.Context, c rerun.Candidate, from int) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.calls[c.RunID][from] != c.JobID || !slices.Contains(m.paid[c.RunID], c.JobID) {
		return nil
	}
	delete(m.calls[c.RunID], from)
	m.paid[c.RunID] = slices.DeleteFunc(m.paid[c.RunID], func(j int64) bool { return j == c.JobID })
	return nil
}

func (m *memReruns) Decide(_ context.Context, c rerun.Candidate, now time.Time) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.cands[c.JobID].Decision != rerun.Pending {
		return rerun.ErrDecided
	}
	c.DecidedMillis = now.UnixMilli()
	m.cands[c.JobID] = c
	return nil
}

func (m *memReruns) Later(_ context.Context, c rerun.Candidate, next time.Time) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	c.NextTryMillis = next.UnixMilli()
	m.cands[c.JobID] = c
	return nil
}

func (m *memReruns) get(job int64) rerun.Candidate {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.cands[job]
}

// rerunEnv is an env whose reconciler re-runs, with one runner that ran job and
// failed it in the simulator, and the webhook's record of that failure.
type rerunEnv struct {
	*env
	store  *memReruns
	runner string // the runner's pod
	job    githubsim.Job
}

// options are the reconciler's options of e: its job links, re-runs and roster.
func (e *rerunEnv) options() reconcile.Options {
	return reconcile.Options{JobLinks: e.links, Reruns: e.store, Roster: e.roster}
}

func newRerunEnv(t *testing.T, opts ...func(*githubsim.Options)) *rerunEnv {
	t.Helper()
	return newRerunEnvOf(t, jobRun{conclusion: githubsim.JobFailure}, opts...)
}

// jobRun is how the job of a rerunEnv really ran, by GitHub: its conclusion,
// and whether another runner of the scope took it.
type jobRun struct {
	conclusion   githubsim.JobConclusion
	anotherTaker bool
	running      bool   // GitHub still shows the job running: it is not completed
	name         string // the job's name in its run ("": the simulator's, one of its own)
}

func newRerunEnvOf(t *testing.T, run jobRun, opts ...func(*githubsim.Options)) *rerunEnv {
	t.Helper()
	e := &rerunEnv{env: newEnv(t, true, opts...), store: newMemReruns()}
	cfg, err := pool.Parse([]byte(poolYAML(e.ns, true, "runner:1")))
	if err != nil {
		t.Fatal(err)
	}
	if e.rec, err = reconcile.New(cfg, e.kube, e.gh, e.clock, nil, e.options()); err != nil {
		t.Fatal(err)
	}
	e.mustSweep(1, e.clock.Now())
	name := e.statefulSets()[0]
	r := e.start(name)
	e.runner = r.Name
	e.job = e.sim.QueueJob(githubsim.JobSpec{Repository: "acme/app", Organization: "acme", Labels: []string{"big"}, Name: run.name})
	started, taker := e.clock.Now(), r
	if run.anotherTaker {
		taker = e.foreignRunner()
	}
	if _, ok, err := e.sim.AcquireJob(taker.ID); !ok || err != nil {
		t.Fatalf("runner %s taking job %d: %v %v", taker.Name, e.job.ID, ok, err)
	}
	e.clock.Step(30 * time.Second) // the job runs for 30 s
	if !run.running {
		if err := e.sim.CompleteJobAs(e.job.ID, run.conclusion); err != nil {
			t.Fatal(err)
		}
	}
	now := e.clock.Now()
	e.store.cands[e.job.ID] = rerun.Candidate{Pool: "p", JobID: e.job.ID, RunID: e.job.RunID, RunAttempt: 1, Repository: "acme/app",
		Runner: e.runner, Conclusion: "failure", StartedMillis: started.UnixMilli(),
		CompletedMillis: now.UnixMilli(), RecordedMillis: now.UnixMilli()}
	return e
}

// foreignRunner registers a runner of the scope this deployment did not make.
func (e *rerunEnv) foreignRunner() githubsim.Runner {
	e.t.Helper()
	tok, err := e.gh.RegistrationToken(e.t.Context(), e.pool.Scope())
	if err != nil {
		e.t.Fatal(err)
	}
	r, err := e.sim.Register(githubsim.Registration{Token: tok.Token, Scope: "organization/acme", Name: "other-team-runner",
		Labels: []string{"big"}})
	if err != nil {
		e.t.Fatal(err)
	}
	return r
}

// oomKilled plays the kubelet reporting the runner container OOM-killed 10 s
// before the job's failure (GitHub fails the job of a runner it stopped hearing
// from, after the kill).
func (e *rerunEnv) oomKilled() {
	e.t.Helper()
	at := e.store.get(e.job.ID).Completed().Add(-10 * time.Second)
	e.setRunnerStatus(strings.TrimSuffix(e.runner, "-0"), corev1.ContainerStatus{State: corev1.ContainerState{
		Terminated: &corev1.ContainerStateTerminated{ExitCode: 137, Reason: "OOMKilled", FinishedAt: metav1.NewTime(at)}}})
}

func (e *rerunEnv) rerunCalls() int {
	return e.sim.Calls()["POST /repos/{owner}/{repo}/actions/jobs/{job_id}/rerun"]
}

// TestCandidateIsActedOnOnlyForARunnerOnItsPoolsRoster: a candidate is a claim
// anyone holding the webhook's role can write in any pool's partition. One in
// pool p's partition for a job whose runner died under it is re-run only when
// that runner is on p's roster; for a runner on another pool's roster, or on
// no roster, it is decided not re-run, saying so,
// without a call to GitHub and without charging the run's budget.
func TestCandidateIsActedOnOnlyForARunnerOnItsPoolsRoster(t *testing.T) {
	t.Parallel()
	const notOnRoster = "runner not on this pool's roster"
	for _, tc := range []struct {
		name   string
		on     string // the pool whose roster holds the runner ("": none)
		want   rerun.Decision
		reason string
	}{
		{"on the pool's roster", "p", rerun.Rerun, ""},
		{"on another pool's roster", "q", rerun.NotRerun, notOnRoster},
		{"on no roster", "", rerun.NotRerun, notOnRoster},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			// The job ran on a runner the pool's sweeper did not create, which
			// an OOM kill ended under it (a death the sweeper of its own pool
			// recorded), and GitHub failed it.
			e := newRerunEnvOf(t, jobRun{conclusion: githubsim.JobFailure, anotherTaker: true})
			const runner = "other-team-runner"
			c := e.store.get(e.job.ID)
			c.Runner = runner
			e.store.cands[e.job.ID] = c
			e.store.deaths[runner] = []rerun.Death{{Runner: runner, Cause: "runner container OOMKilled (exit code 137)",
				FromMillis: c.Completed().Add(-10 * time.Second).UnixMilli(), ToMillis: c.Completed().Add(-10 * time.Second).UnixMilli(), Killed: true}}
			if tc.on != "" {
				if err := e.roster.Add(t.Context(), roster.Runner{Pool: tc.on, Name: runner}, e.clock.Now()); err != nil {
					t.Fatal(err)
				}
			}
			var err error
			if e.rec, err = reconcile.New(e.cfg(), e.kube, e.gh, e.clock, nil, e.options()); err != nil {
				t.Fatal(err)
			}
			e.clock.Step(rerun.Settle)
			for range 2 {
				if err := e.sweep(1, e.clock.Now()); err != nil {
					t.Fatal(err)
				}
			}
			got := e.store.get(e.job.ID)
			if got.Decision != tc.want || !strings.Contains(got.Reason, tc.reason) {
				t.Fatalf("decision %+v: want %q, reason containing %q", got, tc.want, tc.reason)
			}
			wantCalls, wantPaid := 0, 0
			if tc.want == rerun.Rerun {
				wantCalls, wantPaid = 1, 1
			}
			if n, paid := e.rerunCalls(), e.store.paid[e.job.RunID]; n != wantCalls || len(paid) != wantPaid {
				t.Fatalf("%d re-run calls, budget charged for %v: want %d call(s), %d charge(s)", n, paid, wantCalls, wantPaid)
			}
		})
	}
}

// cfg is the pools file of newRerunEnvOf's reconciler.
func (e *rerunEnv) cfg() *pool.Config {
	e.t.Helper()
	cfg, err := pool.Parse([]byte(poolYAML(e.ns, true, "runner:1")))
	if err != nil {
		e.t.Fatal(err)
	}
	return cfg
}

// A job whose runner was OOM-killed under it is re-run once through GitHub, and
// the decision names the cause; a sweep that could not record the death (a
// refused write) decides nothing and stops before it could delete the pod
// that shows the death (the finished runner is stopped by the next sweep).
func TestJobOfARunnerThatDiedIsRerun(t *testing.T) {
	e := newRerunEnv(t)
	e.oomKilled()
	e.store.failDeaths = errors.New("injected: DynamoDB refused the write")
	if err := e.sweep(1, e.clock.Now()); err == nil {
		t.Fatal("a sweep that could not record a death reported no error")
	}
	if c := e.store.get(e.job.ID); c.Decision != rerun.Pending || e.rerunCalls() != 0 {
		t.Fatalf("decided %+v (%d re-run calls) without the death", c, e.rerunCalls())
	}
	if pod := e.pods()[strings.TrimSuffix(e.runner, "-0")]; pod == nil || pod.DeletionTimestamp != nil {
		t.Fatalf("the pod that shows the death was deleted by a sweep that could not record it")
	}
	e.store.failDeaths = nil
	e.clock.Step(rerun.Settle) // past the settling time: only the death can make it a re-run
	_ = e.sweep(1, e.clock.Now())
	c := e.store.get(e.job.ID)
	if c.Decision != rerun.Rerun || !strings.Contains(c.Cause, "OOMKilled") {
		t.Fatalf("decision %+v: want a re-run caused by the OOM kill", c)
	}
	if got := e.sim.Reruns()[e.job.ID]; len(got) != 1 {
		t.Fatalf("re-runs of job %d: %v, want one", e.job.ID, got)
	}
	_ = e.sweep(1, e.clock.Now())
	if n := e.rerunCalls(); n != 1 {
		t.Fatalf("%d re-run calls after another sweep, want 1", n)
	}
}

// A job whose runner did not die is left failed once the settling time is
// over, and pending before it.
func TestJobThatFailedByItselfIsNotRerun(t *testing.T) {
	e := newRerunEnv(t)
	_ = e.sweep(1, e.clock.Now())
	if c := e.store.get(e.job.ID); c.Decision != rerun.Pending {
		t.Fatalf("decided %+v within the settling time", c)
	}
	e.clock.Step(rerun.Settle)
	_ = e.sweep(1, e.clock.Now())
	if c := e.store.get(e.job.ID); c.Decision != rerun.NotRerun || c.Cause != "" {
		t.Fatalf("decision %+v: want not re-run, no death", c)
	}
	if n := e.rerunCalls(); n != 0 {
		t.Fatalf("%d re-run calls", n)
	}
}

// An ephemeral runner killed a moment after it reported a job that failed by
// itself did not kill that job: the sweep sees the kill as the kubelet shows
// the pod's first container's end (the container restarted once, its repeat of
// the kill ended too), and the job is left failed once the settling time is
// over.
func TestKillAfterAJobThatFailedByItselfIsNotRerun(t *testing.T) {
	e := newRerunEnv(t)
	completed := e.store.get(e.job.ID).Completed()
	killed := completed.Add(time.Second)
	repeat := corev1.ContainerStateTerminated{ExitCode: 137, Reason: "Error", FinishedAt: metav1.NewTime(killed.Add(time.Second)),
		Message: "runner died: its container was killed before its runner exited"}
	e.clock.Step(2 * time.Second)
	e.setRunnerStatus(strings.TrimSuffix(e.runner, "-0"), corev1.ContainerStatus{RestartCount: 1,
		State:                corev1.ContainerState{Terminated: &repeat},
		LastTerminationState: corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{ExitCode: 137, Reason: "Error", FinishedAt: metav1.NewTime(killed)}}})
	_ = e.sweep(1, e.clock.Now())
	if ds, _ := e.store.Deaths(t.Context(), e.runner); len(ds) != 1 || !ds[0].From().Equal(killed) || !ds[0].Killed {
		t.Fatalf("deaths recorded %+v: want the kill at %s", ds, killed)
	}
	e.clock.Step(rerun.Settle)
	_ = e.sweep(1, e.clock.Now())
	if c := e.store.get(e.job.ID); c.Decision != rerun.NotRerun || c.Cause != "" {
		t.Fatalf("decision %+v: want not re-run, no death", c)
	}
	if n := e.rerunCalls(); n != 0 {
		t.Fatalf("%d re-run calls", n)
	}
}

// Without the App's `actions: write` GitHub refuses the re-run: that is final,
// recorded with GitHub's message, and never asked again.
func TestRerunWithoutPermissionIsRefusedOnce(t *testing.T) {
	e := newRerunEnv(t, func(o *githubsim.Options) { o.ActionsReadOnly = true })
	e.oomKilled()
	_ = e.sweep(1, e.clock.Now())
	c := e.store.get(e.job.ID)
	if c.Decision != rerun.Refused || !strings.Contains(c.Reason, "Resource not accessible by integration") {
		t.Fatalf("decision %+v: want refused with GitHub's message", c)
	}
	for range 3 {
		e.clock.Step(time.Hour)
		_ = e.sweep(1, e.clock.Now())
	}
	if n := e.rerunCalls(); n != 1 {
		t.Fatalf("%d re-run calls, want the one refused", n)
	}
}

// A job of a run still in progress cannot be re-run yet (GitHub's 403): the
// sweeper asks again after its back-off, and re-runs it once the run is over.
func TestRerunWaitsForTheRunToComplete(t *testing.T) {
	e := newRerunEnv(t)
	other := e.sim.QueueJob(githubsim.JobSpec{Repository: "acme/app", Organization: "acme", Labels: []string{"other"}, RunID: e.job.RunID})
	e.oomKilled()
	_ = e.sweep(1, e.clock.Now())
	if c := e.store.get(e.job.ID); c.Decision != rerun.Pending || c.Tries != 1 || c.NextTry().IsZero() {
		t.Fatalf("decision %+v: want pending, asked once, with a next try", c)
	}
	_ = e.sweep(1, e.clock.Now()) // before the back-off: not asked
	if n := e.rerunCalls(); n != 1 {
		t.Fatalf("%d re-run calls within the back-off, want 1", n)
	}
	runner := e.register2(other)
	if err := e.sim.CompleteJobAs(other.ID, githubsim.JobSuccess); err != nil {
		t.Fatalf("completing job %d on %s: %v", other.ID, runner, err)
	}
	e.clock.Step(time.Minute)
	_ = e.sweep(1, e.clock.Now())
	if c := e.store.get(e.job.ID); c.Decision != rerun.Rerun || c.Tries != 2 {
		t.Fatalf("decision %+v: want re-run on the second try", c)
	}
}

// A re-run still waiting at rerun.GiveUpAfter is given up, and the decision
// says what it waited for: refused when GitHub kept answering with an error (a
// run that stays in progress), not re-run when it was not GitHub's refusal (a
// job GitHub still shows running, whose candidate came before its end).
func TestRerunStillWaitingIsGivenUp(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name   string
		run    jobRun
		other  bool // another job of the run stays queued
		want   rerun.Decision
		reason string
	}{
		{"GitHub refuses while the run is in progress", jobRun{conclusion: githubsim.JobFailure}, true, rerun.Refused, "403"},
		{"GitHub still shows the job running", jobRun{running: true}, false, rerun.NotRerun, "gave up after 6h0m0s: GitHub says job"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			e := newRerunEnvOf(t, tc.run)
			if tc.other {
				e.sim.QueueJob(githubsim.JobSpec{Repository: "acme/app", Organization: "acme", Labels: []string{"other"}, RunID: e.job.RunID})
			}
			e.oomKilled()
			e.clock.Step(rerun.Settle)
			for range 4 * int(rerun.GiveUpAfter/time.Hour) {
				_ = e.sweep(1, e.clock.Now())
				if c := e.store.get(e.job.ID); c.Decision != rerun.Pending {
					break
				}
				e.clock.Step(31 * time.Minute)
			}
			c := e.store.get(e.job.ID)
			if c.Decision != tc.want || !strings.Contains(c.Reason, tc.reason) {
				t.Fatalf("decision %+v: want %q, reason containing %q", c, tc.want, tc.reason)
			}
			if e.clock.Since(c.Recorded()) <= rerun.GiveUpAfter {
				t.Fatalf("decided %s after the failure, before rerun.GiveUpAfter", e.clock.Since(c.Recorded()))
			}
		})
	}
}

// register2 registers a runner outside the pool that takes job (the run's
// other job), and returns its name.
func (e *rerunEnv) register2(j githubsim.Job) string {
	e.t.Helper()
	tok, err := e.gh.RegistrationToken(e.t.Context(), e.pool.Scope())
	if err != nil {
		e.t.Fatal(err)
	}
	r, err := e.sim.Register(githubsim.Registration{Token: tok.Token, Scope: "organization/acme", Name: "other-runner",
		Labels: []string{"other"}, Ephemeral: true})
	if err != nil {
		e.t.Fatal(err)
	}
	if got, ok, err := e.sim.AcquireJob(r.ID); !ok || err != nil || got.ID != j.ID {
		e.t.Fatalf("other runner taking job %d: %v %v %v", j.ID, got.ID, ok, err)
	}
	return r.Name
}

// lostAnswer is GitHub whose answer to the first re-run call is lost (a
// timeout after GitHub acted).
type lostAnswer struct {
	*githubapi.Client
	lost bool
}

func (g *lostAnswer) RerunJob(ctx context.Context, s scope.Scope, repo string, jobID int64) error {
	err := g.Client.RerunJob(ctx, s, repo, jobID)
	if !g.lost {
		g.lost = true
		return errors.Join(err, context.DeadlineExceeded)
	}
	return err
}

// A re-run call whose answer was lost is not made again when GitHub shows the
// run's new attempt: the job is re-run once.
func TestRerunWhoseAnswerWasLostIsNotRepeated(t *testing.T) {
	e := newRerunEnv(t)
	cfg, err := pool.Parse([]byte(poolYAML(e.ns, true, "runner:1")))
	if err != nil {
		t.Fatal(err)
	}
	if e.rec, err = reconcile.New(cfg, e.kube, &lostAnswer{Client: e.gh}, e.clock, nil, e.options()); err != nil {
		t.Fatal(err)
	}
	e.oomKilled()
	_ = e.sweep(1, e.clock.Now())
	if c := e.store.get(e.job.ID); c.Decision != rerun.Pending || c.Tries != 1 {
		t.Fatalf("after the lost answer: %+v, want pending, one try", c)
	}
	e.clock.Step(time.Minute)
	_ = e.sweep(1, e.clock.Now())
	c := e.store.get(e.job.ID)
	if c.Decision != rerun.Rerun || !strings.Contains(c.Reason, "re-run already: the run is at attempt 2") {
		t.Fatalf("decision %+v: want re-run, by the earlier call", c)
	}
	if got := e.sim.Reruns()[e.job.ID]; len(got) != 1 || e.rerunCalls() != 1 {
		t.Fatalf("re-runs %v after %d calls, want one", got, e.rerunCalls())
	}
}

// TestRerunIsDecidedByGitHubsAccountOfTheJob: a re-run candidate is what the
// webhook recorded, and anyone holding the webhook's role can write one; the
// sweeper re-runs only a job GitHub says failed on the runner recorded, and
// decides by GitHub's times. A candidate claiming a failure GitHub does not
// show (the job succeeded, or ran on another runner) is not re-run, whatever
// death of ours its times cover; one whose recorded times miss the death
// while GitHub's cover it is re-run.
func TestRerunIsDecidedByGitHubsAccountOfTheJob(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name   string
		run    jobRun
		forge  func(c *rerun.Candidate)
		want   rerun.Decision
		reason string
	}{
		{"the job succeeded", jobRun{conclusion: githubsim.JobSuccess}, nil, rerun.NotRerun, "ended success"},
		{"the job ran on another runner", jobRun{conclusion: githubsim.JobFailure, anotherTaker: true}, nil, rerun.NotRerun, `ran on runner "other-team-runner"`},
		{"GitHub has no such job", jobRun{conclusion: githubsim.JobFailure}, func(c *rerun.Candidate) {
			c.Repository = "acme/other"
		}, rerun.NotRerun, "GitHub has no job"},
		{"the job is of another attempt", jobRun{conclusion: githubsim.JobFailure}, func(c *rerun.Candidate) {
			c.RunAttempt = 2
		}, rerun.NotRerun, "attempt 1, not of run"},
		{"the recorded times miss the death", jobRun{conclusion: githubsim.JobFailure}, func(c *rerun.Candidate) {
			c.StartedMillis -= time.Hour.Milliseconds()
			c.CompletedMillis -= time.Hour.Milliseconds()
		}, rerun.Rerun, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			e := newRerunEnvOf(t, tc.run)
			e.oomKilled()
			if tc.forge != nil {
				c := e.store.get(e.job.ID)
				tc.forge(&c)
				e.store.cands[e.job.ID] = c
			}
			e.clock.Step(rerun.Settle)
			for range 2 {
				if err := e.sweep(1, e.clock.Now()); err != nil {
					t.Fatal(err)
				}
			}
			c := e.store.get(e.job.ID)
			if c.Decision != tc.want || !strings.Contains(c.Reason, tc.reason) {
				t.Fatalf("decision %+v: want %q, reason containing %q", c, tc.want, tc.reason)
			}
			if n, want := e.rerunCalls(), map[bool]int{true: 1}[tc.want == rerun.Rerun]; n != want {
				t.Fatalf("%d re-run calls, want %d", n, want)
			}
		})
	}
}

// twoJobsOfOneRun is a rerunEnv whose pool re-runs up to twice per workflow
// run, with a second runner of the pool that ran and failed the run's second
// job 30 s after the first completed, and the webhook's record of that failure;
// both jobs are named name in their run ("": each its own name).
func twoJobsOfOneRun(t *testing.T, name string) (*rerunEnv, string, githubsim.Job) {
	t.Helper()
	e := newRerunEnvOf(t, jobRun{conclusion: githubsim.JobFailure, name: name})
	cfg := e.twoRerunsCfg()
	e.pool = cfg.Pool("p")
	var err error
	if e.rec, err = reconcile.New(cfg, e.kube, e.gh, e.clock, nil, e.options()); err != nil {
		t.Fatal(err)
	}
	before := e.statefulSets()
	e.mustSweep(2, e.clock.Now())
	var sts string
	for _, n := range e.statefulSets() {
		if !slices.Contains(before, n) {
			sts = n
		}
	}
	r := e.start(sts)
	job := e.sim.QueueJob(githubsim.JobSpec{Repository: "acme/app", Organization: "acme", Labels: []string{"big"}, RunID: e.job.RunID, Name: name})
	started := e.clock.Now()
	if got, ok, err := e.sim.AcquireJob(r.ID); !ok || err != nil || got.ID != job.ID {
		t.Fatalf("runner %s taking job %d: %v %v %v", r.Name, job.ID, got.ID, ok, err)
	}
	e.clock.Step(30 * time.Second)
	if err := e.sim.CompleteJobAs(job.ID, githubsim.JobFailure); err != nil {
		t.Fatal(err)
	}
	now := e.clock.Now()
	e.store.mu.Lock()
	e.store.cands[job.ID] = rerun.Candidate{Pool: "p", JobID: job.ID, RunID: job.RunID, RunAttempt: 1, Repository: "acme/app",
		Runner: r.Name, Conclusion: "failure", StartedMillis: started.UnixMilli(), CompletedMillis: now.UnixMilli(), RecordedMillis: now.UnixMilli()}
	e.store.mu.Unlock()
	return e, r.Name, job
}

// TestJobsOfOneRunWhoseRunnersDiedAreEachRerun: two jobs of one run whose
// runners were both OOM-killed under them are each re-run, as GitHub allows —
// the first from attempt 1, the second as attempt 2 carried it, once the first
// one's re-run is over — and the budget is charged for each; neither decision
// says "re-run already" of a job nobody re-ran. Two jobs of one name (a
// matrix whose jobs share it) are told apart in attempt 2 by the runner and
// times the second one carries there.
func TestJobsOfOneRunWhoseRunnersDiedAreEachRerun(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct{ name, jobName string }{{"jobs of their own names", ""}, {"jobs of one name", "build"}} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			jobsOfOneRunAreEachRerun(t, tc.jobName)
		})
	}
}

func jobsOfOneRunAreEachRerun(t *testing.T, jobName string) {
	e, second, job2 := twoJobsOfOneRun(t, jobName)
	e.oomKilled()
	completed2 := e.store.get(job2.ID).Completed()
	e.setRunnerStatus(strings.TrimSuffix(second, "-0"), corev1.ContainerStatus{State: corev1.ContainerState{
		Terminated: &corev1.ContainerStateTerminated{ExitCode: 137, Reason: "OOMKilled", FinishedAt: metav1.NewTime(completed2.Add(-10 * time.Second))}}})
	e.clock.Step(rerun.Settle)
	_ = e.sweep(2, e.clock.Now())
	first, waiting := e.store.get(e.job.ID), e.store.get(job2.ID)
	if first.Decision != rerun.Rerun {
		first, waiting = waiting, first
	}
	if first.Decision != rerun.Rerun || first.Reason != "" || waiting.Decision != rerun.Pending {
		t.Fatalf("after the first sweep: %+v and %+v, want one re-run and one waiting for its re-run to be over", first, waiting)
	}
	again := e.sim.Reruns()[first.JobID]
	if len(again) != 1 {
		t.Fatalf("re-runs of job %d: %v, want one", first.JobID, again)
	}
	other := e.foreignRunner()
	if got, ok, err := e.sim.AcquireJob(other.ID); !ok || err != nil || got.ID != again[0] {
		t.Fatalf("taking the re-run %d: %v %v %v", again[0], got.ID, ok, err)
	}
	if err := e.sim.CompleteJobAs(again[0], githubsim.JobSuccess); err != nil {
		t.Fatal(err)
	}
	e.clock.Step(time.Minute)
	_ = e.sweep(2, e.clock.Now())
	for _, id := range []int64{e.job.ID, job2.ID} {
		c := e.store.get(id)
		if c.Decision != rerun.Rerun || strings.Contains(c.Reason, "re-run already") || !strings.Contains(c.Cause, "OOMKilled") {
			t.Fatalf("decision of job %d: %+v, want re-run by this deployment's own call", id, c)
		}
		if got := e.sim.Reruns()[id]; len(got) != 1 {
			t.Fatalf("GitHub's re-runs of job %d: %v, want one", id, got)
		}
	}
	if !strings.Contains(waiting.Reason, "waiting for the re-run of job") && !strings.Contains(waiting.Reason, "already running") {
		t.Fatalf("the second job waited with %q", waiting.Reason)
	}
	if second := e.store.get(waiting.JobID); !strings.Contains(second.Reason, "of attempt 2") {
		t.Fatalf("the second job's decision %+v: want its re-run from attempt 2 said", second)
	}
	if paid := e.store.paid[e.job.RunID]; len(paid) != 2 {
		t.Fatalf("budget charged for %v, want both jobs", paid)
	}
}

// refuseFirst is GitHub that refuses for good (404) the first re-run asked
// of it, and answers the others.
type refuseFirst struct {
	*githubapi.Client
	mu      sync.Mutex
	refused int64 // the job refused (0: none yet)
}

func (g *refuseFirst) RerunJob(ctx context.Context, s scope.Scope, repo string, jobID int64) error {
	g.mu.Lock()
	first := g.refused == 0
	if first {
		g.refused = jobID
	}
	g.mu.Unlock()
	if first {
		return &githubapi.APIError{Op: githubapi.OpRerunJob, Status: 404, Message: "Not Found"}
	}
	return g.Client.RerunJob(ctx, s, repo, jobID)
}

// TestRefusedCallDoesNotBlockTheOtherJobsOfItsRun: of two jobs of one run
// whose runners died under them, the one whose call GitHub refuses for good is
// decided refused, and gives back its claim on the attempt and its charge: the
// other is re-run from that attempt in the same sweep, rather than wait
// behind a call that never moved the run, and the budget pays for it alone.
func TestRefusedCallDoesNotBlockTheOtherJobsOfItsRun(t *testing.T) {
	t.Parallel()
	e, second, job2 := twoJobsOfOneRun(t, "")
	gh := &refuseFirst{Client: e.gh}
	var err error
	if e.rec, err = reconcile.New(e.twoRerunsCfg(), e.kube, gh, e.clock, nil, e.options()); err != nil {
		t.Fatal(err)
	}
	e.oomKilled()
	completed2 := e.store.get(job2.ID).Completed()
	e.setRunnerStatus(strings.TrimSuffix(second, "-0"), corev1.ContainerStatus{State: corev1.ContainerState{
		Terminated: &corev1.ContainerStateTerminated{ExitCode: 137, Reason: "OOMKilled", FinishedAt: metav1.NewTime(completed2.Add(-10 * time.Second))}}})
	e.clock.Step(rerun.Settle)
	_ = e.sweep(2, e.clock.Now())
	refused, other := e.store.get(gh.refused), e.store.get(e.job.ID)
	if other.JobID == refused.JobID {
		other = e.store.get(job2.ID)
	}
	if refused.Decision != rerun.Refused || !strings.Contains(refused.Reason, "404") {
		t.Fatalf("the job whose call GitHub refused: %+v, want refused with GitHub's answer", refused)
	}
	if other.Decision != rerun.Rerun || other.Reason != "" {
		t.Fatalf("the run's other job: %+v, want re-run from attempt 1 by its own call", other)
	}
	if got := e.sim.Reruns()[other.JobID]; len(got) != 1 {
		t.Fatalf("GitHub's re-runs of job %d: %v, want one", other.JobID, got)
	}
	if paid := e.store.paid[e.job.RunID]; !slices.Equal(paid, []int64{other.JobID}) {
		t.Fatalf("budget charged for %v, want job %d alone", paid, other.JobID)
	}
}

// twoRerunsCfg is twoJobsOfOneRun's pools file: pool p re-runs up to twice
// per workflow run.
func (e *rerunEnv) twoRerunsCfg() *pool.Config {
	e.t.Helper()
	cfg, err := pool.Parse([]byte(strings.Replace(poolYAML(e.ns, true, "runner:1"), "    maxReplicas: 10\n", "    maxReplicas: 10\n    rerunsPerRun: 2\n", 1)))
	if err != nil || cfg.Pool("p").Reruns() != 2 {
		e.t.Fatalf("pool with rerunsPerRun 2: %v", err)
	}
	return cfg
}

// A run someone else re-ran before the sweeper could is not said to be re-run
// by this deployment: the job is decided not re-run, saying who moved the run
// on, and the budget is not charged.
func TestRunRerunBySomeoneElseIsNotClaimed(t *testing.T) {
	e := newRerunEnv(t)
	e.oomKilled()
	if err := e.gh.RerunJob(t.Context(), e.pool.Scope(), "acme/app", e.job.ID); err != nil {
		t.Fatalf("a person's re-run: %v", err)
	}
	e.clock.Step(rerun.Settle)
	_ = e.sweep(1, e.clock.Now())
	c := e.store.get(e.job.ID)
	if c.Decision != rerun.NotRerun || !strings.Contains(c.Reason, "someone else re-ran the workflow run") {
		t.Fatalf("decision %+v: want not re-run by this deployment, someone else's re-run said", c)
	}
	if n, paid := e.rerunCalls(), e.store.paid[e.job.RunID]; n != 1 || len(paid) != 0 {
		t.Fatalf("%d re-run calls (the person's: 1), budget charged for %v (want none)", n, paid)
	}
}

// TestJobsOfOneRunInTwoPoolsAreEachRerun: two jobs of one workflow run, one
// run by pool p's runner and one by pool q's, whose runners were both
// OOM-killed under them, are each re-run by the sweeper of its own pool, with
// the deployment's table (rerun.Store). The pool that comes second sees the
// first one's call from attempt 1 — this deployment's re-run of another job of
// the run, not someone else's — and re-runs its job from attempt 2 once that
// re-run is over; the run's one budget is charged once per job.
func TestJobsOfOneRunInTwoPoolsAreEachRerun(t *testing.T) {
	e := newEnv(t, true)
	db, name := testenv.Table(t)
	store, ros := rerun.NewStore(db, name), roster.NewStore(db, name)
	cfg, err := pool.Parse([]byte(strings.Replace(poolYAML(e.ns, true, "runner:1"), "    maxReplicas: 10\n",
		"    maxReplicas: 10\n    rerunsPerRun: 2\n", 1) + `
  - name: q
    organization: acme
    labels: [small]
    ephemeral: true
    maxReplicas: 1
    rerunsPerRun: 2
    kubernetes: {namespace: ` + e.ns + `, image: "runner:1", template: {spec: {schedulerName: runnerscaler.dev/no-scheduler}}}
`))
	if err != nil {
		t.Fatal(err)
	}
	if e.rec, err = reconcile.New(cfg, e.kube, e.gh, e.clock, nil, reconcile.Options{JobLinks: e.links, Reruns: store, Roster: ros}); err != nil {
		t.Fatal(err)
	}
	pools := map[string]*pool.Pool{"p": cfg.Pool("p"), "q": cfg.Pool("q")}
	statuses := map[string]*poolstate.Status{"p": {}, "q": {}}
	sweep := func(name string) error {
		return e.rec.Reconcile(t.Context(), pools[name], scaling.Decision{Desired: 1, EffectiveTime: e.clock.Now()}, statuses[name])
	}
	// Each pool's runner takes and fails a job of the run, 30 s long; the
	// webhook records each failure in the runner's pool.
	var run int64
	jobs := map[string]githubsim.Job{}
	for _, pl := range []string{"p", "q"} {
		if err := sweep(pl); err != nil {
			t.Fatalf("sweep of pool %s: %v", pl, err)
		}
		var sts string
		for _, n := range e.statefulSets() {
			if strings.HasPrefix(n, pl+"-") {
				sts = n
			}
		}
		e.run(sts)
		r := e.registerIn(sts, pools[pl])
		job := e.sim.QueueJob(githubsim.JobSpec{Repository: "acme/app", Organization: "acme", Labels: pools[pl].Labels, RunID: run})
		run = job.RunID
		started := e.clock.Now()
		if got, ok, err := e.sim.AcquireJob(r.ID); !ok || err != nil || got.ID != job.ID {
			t.Fatalf("runner %s taking job %d: %v %v %v", r.Name, job.ID, got.ID, ok, err)
		}
		e.clock.Step(30 * time.Second)
		if err := e.sim.CompleteJobAs(job.ID, githubsim.JobFailure); err != nil {
			t.Fatal(err)
		}
		completed := e.clock.Now()
		e.setRunnerStatus(sts, corev1.ContainerStatus{State: corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{
			ExitCode: 137, Reason: "OOMKilled", FinishedAt: metav1.NewTime(completed.Add(-10 * time.Second))}}})
		c := rerun.Candidate{Pool: pl, JobID: job.ID, RunID: job.RunID, RunAttempt: 1, Repository: "acme/app", Runner: r.Name,
			Conclusion: "failure", StartedMillis: started.UnixMilli(), CompletedMillis: completed.UnixMilli()}
		if fresh, err := store.Record(t.Context(), c, completed); err != nil || !fresh {
			t.Fatalf("recording the failure of job %d: %v %v", job.ID, fresh, err)
		}
		jobs[pl] = job
	}
	decision := func(pl string) rerun.Candidate {
		t.Helper()
		c, ok, err := store.Get(t.Context(), pl, jobs[pl].ID)
		if err != nil || !ok {
			t.Fatalf("the candidate of job %d in pool %s: %v %v", jobs[pl].ID, pl, ok, err)
		}
		return c
	}
	e.clock.Step(rerun.Settle)
	_ = sweep("p")
	_ = sweep("q")
	if p, q := decision("p"), decision("q"); p.Decision != rerun.Rerun || q.Decision != rerun.Pending {
		t.Fatalf("after a sweep of each pool: p's %+v, q's %+v; want p's re-run, q's waiting for it to be over", p, q)
	}
	again := e.sim.Reruns()[jobs["p"].ID]
	if len(again) != 1 {
		t.Fatalf("re-runs of job %d: %v, want one", jobs["p"].ID, again)
	}
	other := e.registerIn("other-team", pools["p"])
	if got, ok, err := e.sim.AcquireJob(other.ID); !ok || err != nil || got.ID != again[0] {
		t.Fatalf("taking the re-run %d: %v %v %v", again[0], got.ID, ok, err)
	}
	if err := e.sim.CompleteJobAs(again[0], githubsim.JobSuccess); err != nil {
		t.Fatal(err)
	}
	e.clock.Step(time.Minute)
	_ = sweep("q")
	q := decision("q")
	if q.Decision != rerun.Rerun || !strings.Contains(q.Reason, "of attempt 2") || !strings.Contains(q.Cause, "OOMKilled") {
		t.Fatalf("q's decision %+v: want its job re-run by its own call, from attempt 2", q)
	}
	for pl, job := range jobs {
		if got := e.sim.Reruns()[job.ID]; len(got) != 1 {
			t.Fatalf("GitHub's re-runs of pool %s's job %d: %v, want one", pl, job.ID, got)
		}
	}
	third := rerun.Candidate{Pool: "q", JobID: 999, RunID: run, Repository: "acme/app"}
	if ok, err := store.Charge(t.Context(), third, 2, e.clock.Now()); err != nil || ok {
		t.Fatalf("charging a third job of the run with a budget of 2: %v %v, want refused (the run's 2 re-runs are spent)", ok, err)
	}
	if ok, err := store.Charge(t.Context(), third, 3, e.clock.Now()); err != nil || !ok {
		t.Fatalf("charging a third job of the run with a budget of 3: %v %v, want charged (the run paid for 2 jobs only)", ok, err)
	}
}

// registerIn plays a runner of pool pl registering with the credentials in the
// Secret of StatefulSet sts; without such a Secret, it registers in pl's scope
// as a runner this deployment did not make, named sts.
func (e *env) registerIn(sts string, pl *pool.Pool) githubsim.Runner {
	e.t.Helper()
	reg := githubsim.Registration{Scope: "organization/acme", Name: sts + "-0", Labels: pl.Labels, Ephemeral: pl.IsEphemeral()}
	sec, err := e.raw.CoreV1().Secrets(e.ns).Get(e.t.Context(), sts, metav1.GetOptions{})
	switch {
	case err == nil:
		reg.JITConfig, reg.Token = string(sec.Data[runnerpod.SecretJITConfig]), string(sec.Data[runnerpod.SecretToken])
	default:
		tok, err := e.gh.RegistrationToken(e.t.Context(), pl.Scope())
		if err != nil {
			e.t.Fatal(err)
		}
		reg.Token, reg.Name = tok.Token, sts
	}
	r, err := e.sim.Register(reg)
	if err != nil {
		e.t.Fatalf("runner %s registering: %v", reg.Name, err)
	}
	return r
}
