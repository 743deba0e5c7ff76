package githubsim_test

import (
	"crypto/rand"
	"crypto/rsa"
	"errors"
	"net/http"
	"net/http/httptest"
	"strconv"
	"testing"
	"time"

	"github.com/google/go-github/v88/github"
	clocktesting "k8s.io/utils/clock/testing"

	"github.com/runnerscaler/runnerscaler/internal/scope"
	"github.com/runnerscaler/runnerscaler/local/apispec"
	"github.com/runnerscaler/runnerscaler/local/githubsim"
)

// rerunEnv is a simulator with one organization runner, a go-github client
// with a PAT, and the deliveries it sent.
type rerunEnv struct {
	sim    *githubsim.Server
	url    string
	gh     *github.Client
	clock  *clocktesting.FakeClock
	runner int64
	queued []string // actions of the deliveries, in order
}

func newRerunEnv(t *testing.T, opts githubsim.Options) *rerunEnv {
	t.Helper()
	e := &rerunEnv{clock: clocktesting.NewFakeClock(t0)}
	opts.PATs, opts.Clock = []string{"ghp_x"}, e.clock
	e.sim = githubsim.New(opts)
	apispec.Verify(t, e.sim)
	srv := httptest.NewServer(e.sim.Handler())
	t.Cleanup(srv.Close)
	e.url = srv.URL
	e.sim.OnDelivery(func(event, _ string, payload []byte) int {
		e.queued = append(e.queued, event)
		return http.StatusOK
	})
	base := srv.URL + "/"
	gh, err := github.NewClient(github.WithAuthToken("ghp_x"), github.WithURLs(&base, &base))
	if err != nil {
		t.Fatal(err)
	}
	e.gh = gh
	sc := scope.Scope{Organization: "acme"}
	rn, err := e.sim.Register(githubsim.Registration{Token: registrationToken(t, srv.URL, sc), Scope: sc.String(), Name: "r"})
	if err != nil {
		t.Fatal(err)
	}
	e.runner = rn.ID
	return e
}

// run runs spec's job to its end with conclusion c.
func (e *rerunEnv) run(t *testing.T, spec githubsim.JobSpec, c githubsim.JobConclusion) githubsim.Job {
	t.Helper()
	j := e.sim.QueueJob(spec)
	got, ok, err := e.sim.AcquireJob(e.runner)
	if err != nil || !ok || got.ID != j.ID {
		t.Fatalf("acquire %d: got %d %v %v", j.ID, got.ID, ok, err)
	}
	if err := e.sim.CompleteJobAs(j.ID, c); err != nil {
		t.Fatal(err)
	}
	return j
}

var acmeJob = githubsim.JobSpec{Repository: "acme/app", Organization: "acme"}

// A failed job re-run through the REST API is queued again as a new job of the
// run's next attempt, with a `queued` delivery; the answer is 201.
func TestRerunJobQueuesTheNextAttempt(t *testing.T) {
	e := newRerunEnv(t, githubsim.Options{})
	old := e.run(t, acmeJob, githubsim.JobFailure)
	resp, err := e.gh.Actions.RerunJobByID(t.Context(), "acme", "app", old.ID)
	if err != nil || resp.StatusCode != http.StatusCreated {
		t.Fatalf("rerun: %v %v", resp, err)
	}
	jobs := e.sim.Jobs()
	if len(jobs) != 2 {
		t.Fatalf("jobs %v, want the first attempt and its re-run", jobs)
	}
	again := jobs[1]
	if again.RunID != old.RunID || again.RunAttempt != 2 || again.RerunOf != old.ID || again.State != githubsim.JobQueued || again.ID == old.ID {
		t.Fatalf("re-run %+v of %+v", again, old)
	}
	if got := e.sim.Reruns(); len(got[old.ID]) != 1 || got[old.ID][0] != again.ID {
		t.Fatalf("Reruns() = %v", got)
	}
	if n := len(e.queued); n != 4 { // queued, in_progress, completed, queued again
		t.Fatalf("%d deliveries, want 4", n)
	}
}

// GitHub's rules: a run still in progress, a run over 30 days old and a run
// re-run 50 times are refused with 403; an App without `actions: write` too;
// a job of another repository is 404. Nothing is queued by a refusal.
func TestRerunRules(t *testing.T) {
	t.Run("run in progress", func(t *testing.T) {
		e := newRerunEnv(t, githubsim.Options{})
		failed := e.run(t, acmeJob, githubsim.JobFailure)
		spec := acmeJob
		spec.RunID = failed.RunID
		e.sim.QueueJob(spec) // another job of the same run, still queued
		wantRefused(t, e, failed.ID, http.StatusForbidden)
	})
	t.Run("over 30 days", func(t *testing.T) {
		e := newRerunEnv(t, githubsim.Options{})
		failed := e.run(t, acmeJob, githubsim.JobFailure)
		e.clock.Step(githubsim.RerunWindow + time.Minute)
		wantRefused(t, e, failed.ID, http.StatusForbidden)
	})
	t.Run("50 attempts", func(t *testing.T) {
		e := newRerunEnv(t, githubsim.Options{})
		j := e.run(t, acmeJob, githubsim.JobFailure)
		for range githubsim.MaxRunAttempts - 1 {
			if _, err := e.gh.Actions.RerunJobByID(t.Context(), "acme", "app", j.ID); err != nil {
				t.Fatal(err)
			}
			jobs := e.sim.Jobs()
			j = e.runQueued(t, jobs[len(jobs)-1], githubsim.JobFailure)
		}
		wantRefused(t, e, j.ID, http.StatusForbidden)
	})
	t.Run("another repository", func(t *testing.T) {
		e := newRerunEnv(t, githubsim.Options{})
		failed := e.run(t, acmeJob, githubsim.JobFailure)
		_, err := e.gh.Actions.RerunJobByID(t.Context(), "acme", "other", failed.ID)
		var ge *github.ErrorResponse
		if !errors.As(err, &ge) || ge.Response.StatusCode != http.StatusNotFound {
			t.Fatalf("rerun in another repository: %v, want 404", err)
		}
	})
}

// An installation token of an App granted only `actions: read` is refused with
// 403, and the same job re-runs with a token that may (a PAT).
func TestRerunNeedsActionsWrite(t *testing.T) {
	k, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		t.Fatal(err)
	}
	e := newRerunEnv(t, githubsim.Options{AppID: 7, AppKey: &k.PublicKey, Installations: []int64{9}, ActionsReadOnly: true})
	env := &env{sim: e.sim, url: e.url, clock: e.clock, key: k}
	j := e.run(t, acmeJob, githubsim.JobFailure)
	path := "/repos/acme/app/actions/jobs/" + strconv.FormatInt(j.ID, 10) + "/rerun"
	if resp := env.do(t, "POST", path, "token "+env.installationToken(t)); resp.StatusCode != http.StatusForbidden {
		t.Fatalf("rerun with actions: read: %d, want 403", resp.StatusCode)
	}
	if n := len(e.sim.Jobs()); n != 1 {
		t.Fatalf("%d jobs after a refused re-run", n)
	}
	if resp := env.do(t, "POST", path, "token ghp_x"); resp.StatusCode != http.StatusCreated {
		t.Fatalf("rerun with a PAT: %d, want 201", resp.StatusCode)
	}
}

// rerun-failed-jobs re-runs exactly the failed and cancelled jobs of the run's
// latest attempt, as one new attempt.
func TestRerunFailedJobs(t *testing.T) {
	e := newRerunEnv(t, githubsim.Options{})
	a := e.run(t, acmeJob, githubsim.JobFailure)
	spec := acmeJob
	spec.RunID = a.RunID
	b := e.run(t, spec, githubsim.JobSuccess)
	c := e.run(t, spec, githubsim.JobCancelled)
	if _, err := e.gh.Actions.RerunFailedJobsByID(t.Context(), "acme", "app", a.RunID); err != nil {
		t.Fatal(err)
	}
	got := e.sim.Reruns()
	if len(got) != 2 || len(got[a.ID]) != 1 || len(got[c.ID]) != 1 || got[b.ID] != nil {
		t.Fatalf("Reruns() = %v, want one re-run of %d and of %d", got, a.ID, c.ID)
	}
	for _, j := range e.sim.Jobs() {
		if j.RerunOf != 0 && j.RunAttempt != 2 {
			t.Fatalf("%v: want attempt 2", j)
		}
	}
}

func (e *rerunEnv) runQueued(t *testing.T, j githubsim.Job, c githubsim.JobConclusion) githubsim.Job {
	t.Helper()
	if got, ok, err := e.sim.AcquireJob(e.runner); err != nil || !ok || got.ID != j.ID {
		t.Fatalf("acquire %d: got %d %v %v", j.ID, got.ID, ok, err)
	}
	if err := e.sim.CompleteJobAs(j.ID, c); err != nil {
		t.Fatal(err)
	}
	return j
}

func wantRefused(t *testing.T, e *rerunEnv, job int64, status int) {
	t.Helper()
	before := len(e.sim.Jobs())
	_, err := e.gh.Actions.RerunJobByID(t.Context(), "acme", "app", job)
	var ge *github.ErrorResponse
	if !errors.As(err, &ge) || ge.Response.StatusCode != status {
		t.Fatalf("rerun of job %d: %v, want %d", job, err, status)
	}
	if n := len(e.sim.Jobs()); n != before {
		t.Fatalf("a refused re-run queued %d jobs", n-before)
	}
}

// The run's jobs list shows the latest attempt: after a re-run, the new job
// with run_attempt 2 (what the sweeper checks before asking for a re-run again).
func TestRunJobsShowTheLatestAttempt(t *testing.T) {
	e := newRerunEnv(t, githubsim.Options{})
	old := e.run(t, acmeJob, githubsim.JobFailure)
	if _, err := e.gh.Actions.RerunJobByID(t.Context(), "acme", "app", old.ID); err != nil {
		t.Fatal(err)
	}
	jobs, _, err := e.gh.Actions.ListWorkflowJobs(t.Context(), "acme", "app", old.RunID, &github.ListWorkflowJobsOptions{Filter: "latest"})
	if err != nil {
		t.Fatal(err)
	}
	if jobs.GetTotalCount() != 1 || jobs.Jobs[0].GetRunAttempt() != 2 || jobs.Jobs[0].GetID() == old.ID {
		t.Fatalf("latest jobs %+v, want the re-run alone, attempt 2", jobs.Jobs)
	}
	all, _, err := e.gh.Actions.ListWorkflowJobs(t.Context(), "acme", "app", old.RunID, &github.ListWorkflowJobsOptions{Filter: "all"})
	if err != nil || all.GetTotalCount() != 2 {
		t.Fatalf("all jobs: %v %v, want both attempts", all, err)
	}
}

// Two failed jobs of one run: re-running the first starts attempt 2, which
// holds a copy of the second with its result (a new id, attempt 2, its name);
// the copy is refused while attempt 2 runs (403 "The workflow run containing
// this job is already running"), the second's job of attempt 1 for good (403
// "Only jobs from the current attempt can be re-run"), and the copy re-runs
// once attempt 2 is over. Reruns() keys both re-runs by the jobs of attempt 1.
func TestRerunOfAnotherJobCarriesTheFailedJobIntoTheNewAttempt(t *testing.T) {
	e := newRerunEnv(t, githubsim.Options{})
	a := e.run(t, acmeJob, githubsim.JobFailure)
	spec := acmeJob
	spec.RunID = a.RunID
	b := e.run(t, spec, githubsim.JobFailure)
	if _, err := e.gh.Actions.RerunJobByID(t.Context(), "acme", "app", a.ID); err != nil {
		t.Fatal(err)
	}
	var copyOfB, rerunOfA githubsim.Job
	for _, j := range e.sim.Jobs() {
		switch {
		case j.ID == b.ID:
			b = j
		case j.CopyOf == b.ID:
			copyOfB = j
		case j.RerunOf == a.ID:
			rerunOfA = j
		}
	}
	if copyOfB.ID == 0 || copyOfB.ID == b.ID || copyOfB.RunAttempt != 2 || copyOfB.State != githubsim.JobCompleted ||
		copyOfB.Conclusion != githubsim.JobFailure || copyOfB.Name != b.Name || copyOfB.RunnerName != b.RunnerName {
		t.Fatalf("copy of %+v in attempt 2: %+v", b, copyOfB)
	}
	wantRefusedWith(t, e, copyOfB.ID, "The workflow run containing this job is already running")
	e.runQueued(t, rerunOfA, githubsim.JobSuccess)
	wantRefusedWith(t, e, b.ID, "Only jobs from the current attempt can be re-run")
	if _, err := e.gh.Actions.RerunJobByID(t.Context(), "acme", "app", copyOfB.ID); err != nil {
		t.Fatalf("re-running the copy of job %d: %v", b.ID, err)
	}
	got := e.sim.Reruns()
	if len(got) != 2 || len(got[a.ID]) != 1 || len(got[b.ID]) != 1 {
		t.Fatalf("Reruns() = %v, want one re-run of %d and of %d", got, a.ID, b.ID)
	}
	jobs, _, err := e.gh.Actions.ListWorkflowJobs(t.Context(), "acme", "app", a.RunID, &github.ListWorkflowJobsOptions{Filter: "latest"})
	if err != nil || jobs.GetTotalCount() != 2 || jobs.Jobs[0].GetRunAttempt() != 3 || jobs.Jobs[0].GetName() == "" {
		t.Fatalf("latest jobs %v %v: want attempt 3's two jobs, named", jobs, err)
	}
}

func wantRefusedWith(t *testing.T, e *rerunEnv, job int64, msg string) {
	t.Helper()
	_, err := e.gh.Actions.RerunJobByID(t.Context(), "acme", "app", job)
	var ge *github.ErrorResponse
	if !errors.As(err, &ge) || ge.Response.StatusCode != http.StatusForbidden || ge.Message != msg {
		t.Fatalf("rerun of job %d: %v, want 403 %q", job, err, msg)
	}
}
