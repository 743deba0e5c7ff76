package rerun_test

import (
	"errors"
	"testing"
	"time"

	"k8s.io/utils/clock"

	"github.com/runnerscaler/runnerscaler/internal/rerun"
	"github.com/runnerscaler/runnerscaler/internal/reservation"
	"github.com/runnerscaler/runnerscaler/local/testenv"
)

func TestMain(m *testing.M) { testenv.Main(m) }

// A failure is recorded once (a redelivered `completed` changes nothing), is
// pending until decided, and is decided once: a second sweeper's decision is
// ErrDecided and changes nothing.
func TestCandidateIsRecordedAndDecidedOnce(t *testing.T) {
	db, name := testenv.Table(t)
	s := rerun.NewStore(db, name)
	ctx := t.Context()
	c := candidate(t0, t0.Add(time.Minute))
	c.Repository, c.RunID = "acme/app", 90
	if fresh, err := s.Record(ctx, c, t0); err != nil || !fresh {
		t.Fatalf("Record: %v %v", fresh, err)
	}
	again := c
	again.Conclusion = "cancelled"
	if fresh, err := s.Record(ctx, again, t0.Add(time.Second)); err != nil || fresh {
		t.Fatalf("Record again: %v %v, want not fresh", fresh, err)
	}
	pending, err := s.Pending(ctx, "p")
	if err != nil || len(pending) != 1 || pending[0].Conclusion != "failure" || pending[0].Recorded() != t0 {
		t.Fatalf("Pending = %+v, %v", pending, err)
	}
	if other, err := s.Pending(ctx, "other"); err != nil || len(other) != 0 {
		t.Fatalf("Pending(other) = %+v, %v", other, err)
	}
	c = pending[0]
	c.Decision, c.Cause = rerun.Rerun, "OOMKilled"
	if err := s.Decide(ctx, c, t0.Add(time.Minute)); err != nil {
		t.Fatal(err)
	}
	c.Decision = rerun.NotRerun
	if err := s.Decide(ctx, c, t0.Add(2*time.Minute)); !errors.Is(err, rerun.ErrDecided) {
		t.Fatalf("second Decide: %v, want ErrDecided", err)
	}
	got, ok, err := s.Get(ctx, "p", c.JobID)
	if err != nil || !ok || got.Decision != rerun.Rerun || got.Cause != "OOMKilled" || got.Decided() != t0.Add(time.Minute) {
		t.Fatalf("Get = %+v %v %v", got, ok, err)
	}
	if pending, err := s.Pending(ctx, "p"); err != nil || len(pending) != 0 {
		t.Fatalf("Pending after the decision = %+v, %v", pending, err)
	}
}

// The budget counts re-runs per workflow run: with 1, the first job is charged,
// charging it again is free, and another job of the run is refused; another run
// has its own budget.
func TestBudgetPerRun(t *testing.T) {
	db, name := testenv.Table(t)
	s := rerun.NewStore(db, name)
	ctx := t.Context()
	job := func(id, run int64) rerun.Candidate {
		return rerun.Candidate{Pool: "p", JobID: id, RunID: run, Repository: "acme/app"}
	}
	for _, step := range []struct {
		c    rerun.Candidate
		want bool
	}{{job(1, 90), true}, {job(1, 90), true}, {job(2, 90), false}, {job(3, 91), true}} {
		got, err := s.Charge(ctx, step.c, 1, t0)
		if err != nil || got != step.want {
			t.Fatalf("Charge(job %d of run %d) = %v %v, want %v", step.c.JobID, step.c.RunID, got, err, step.want)
		}
	}
	if got, err := s.Charge(ctx, job(2, 90), 2, t0); err != nil || !got {
		t.Fatalf("Charge with a budget of 2 = %v %v, want true", got, err)
	}
}

// A run's re-run calls are claimed one per attempt on its budget item: the
// first job's claim from an attempt holds (claiming it again is free), another
// job's claim from that attempt answers the holder, a claim from the next
// attempt is another's; Calls reads them all back beside the budget.
func TestCallsOnePerAttempt(t *testing.T) {
	db, name := testenv.Table(t)
	s := rerun.NewStore(db, name)
	ctx := t.Context()
	job := func(id int64) rerun.Candidate {
		return rerun.Candidate{Pool: "p", JobID: id, RunID: 90, Repository: "acme/app"}
	}
	if ok, err := s.Charge(ctx, job(1), 2, t0); err != nil || !ok {
		t.Fatalf("Charge = %v %v", ok, err)
	}
	for _, step := range []struct {
		job        int64
		from       int
		wantHolder int64
	}{{1, 1, 1}, {1, 1, 1}, {2, 1, 1}, {2, 2, 2}} {
		got, err := s.Claim(ctx, job(step.job), step.from, t0)
		if err != nil || got != step.wantHolder {
			t.Fatalf("Claim(job %d from attempt %d) = %d %v, want %d", step.job, step.from, got, err, step.wantHolder)
		}
	}
	calls, err := s.Calls(ctx, job(3))
	if err != nil || len(calls) != 2 || calls[1] != 1 || calls[2] != 2 {
		t.Fatalf("Calls = %v %v, want {1: 1, 2: 2}", calls, err)
	}
	if ok, err := s.Charge(ctx, job(2), 2, t0); err != nil || !ok {
		t.Fatalf("Charge beside the calls = %v %v", ok, err)
	}
	if calls, err := s.Calls(ctx, rerun.Candidate{Pool: "p", RunID: 91, Repository: "acme/app"}); err != nil || len(calls) != 0 {
		t.Fatalf("Calls of another run = %v %v, want none", calls, err)
	}
}

// TestOneRunIsOneBudgetAndOneCallPerAttemptAcrossPools: jobs of one workflow
// run that ran in two pools share the run's budget and its calls. Pool q's
// charge finds the run's one re-run spent by pool p's job, and q's claim from
// attempt 1 answers p's job, the holder of that attempt's call, which q's
// Calls read back, whichever case the repository's name is spelt in; a run of
// the same id in another repository is another run.
func TestOneRunIsOneBudgetAndOneCallPerAttemptAcrossPools(t *testing.T) {
	db, name := testenv.Table(t)
	s := rerun.NewStore(db, name)
	ctx := t.Context()
	inP := rerun.Candidate{Pool: "p", JobID: 1, RunID: 90, Repository: "acme/app"}
	inQ := rerun.Candidate{Pool: "q", JobID: 2, RunID: 90, Repository: "Acme/App"} // as another delivery may spell it
	elsewhere := rerun.Candidate{Pool: "q", JobID: 3, RunID: 90, Repository: "acme/other"}
	if ok, err := s.Charge(ctx, inP, 1, t0); err != nil || !ok {
		t.Fatalf("Charge(job 1 in pool p) = %v %v, want true", ok, err)
	}
	if ok, err := s.Charge(ctx, inQ, 1, t0); err != nil || ok {
		t.Fatalf("Charge(job 2 in pool q) = %v %v, want false: the run's one re-run went to job 1 in pool p", ok, err)
	}
	if holder, err := s.Claim(ctx, inP, 1, t0); err != nil || holder != 1 {
		t.Fatalf("Claim(job 1 in pool p from attempt 1) = %d %v, want 1", holder, err)
	}
	if holder, err := s.Claim(ctx, inQ, 1, t0); err != nil || holder != 1 {
		t.Fatalf("Claim(job 2 in pool q from attempt 1) = %d %v, want 1: pool p's call holds that attempt", holder, err)
	}
	if calls, err := s.Calls(ctx, inQ); err != nil || len(calls) != 1 || calls[1] != 1 {
		t.Fatalf("Calls seen from pool q = %v %v, want {1: 1}, pool p's call", calls, err)
	}
	if ok, err := s.Charge(ctx, elsewhere, 1, t0); err != nil || !ok {
		t.Fatalf("Charge(run 90 of acme/other) = %v %v, want true: another repository's run", ok, err)
	}
	if calls, err := s.Calls(ctx, elsewhere); err != nil || len(calls) != 0 {
		t.Fatalf("Calls of run 90 of acme/other = %v %v, want none", calls, err)
	}
}

// TestReleaseGivesBackTheAttemptAndTheCharge: a job whose call GitHub refused
// gives back its claim on the attempt and its charge, so that another job of
// the run may claim both; releasing a claim that is another job's changes
// nothing.
func TestReleaseGivesBackTheAttemptAndTheCharge(t *testing.T) {
	db, name := testenv.Table(t)
	s := rerun.NewStore(db, name)
	ctx := t.Context()
	job := func(id int64) rerun.Candidate {
		return rerun.Candidate{Pool: "p", JobID: id, RunID: 90, Repository: "acme/app"}
	}
	if ok, err := s.Charge(ctx, job(1), 1, t0); err != nil || !ok {
		t.Fatalf("Charge(job 1) = %v %v", ok, err)
	}
	if holder, err := s.Claim(ctx, job(1), 1, t0); err != nil || holder != 1 {
		t.Fatalf("Claim(job 1 from attempt 1) = %d %v", holder, err)
	}
	if err := s.Release(ctx, job(2), 1); err != nil {
		t.Fatalf("Release(job 2, not the holder) = %v", err)
	}
	if calls, err := s.Calls(ctx, job(2)); err != nil || len(calls) != 1 || calls[1] != 1 {
		t.Fatalf("Calls after another job's release = %v %v, want {1: 1}", calls, err)
	}
	if ok, err := s.Charge(ctx, job(2), 1, t0); err != nil || ok {
		t.Fatalf("Charge(job 2) before job 1's release = %v %v, want false", ok, err)
	}
	if err := s.Release(ctx, job(1), 1); err != nil {
		t.Fatalf("Release(job 1) = %v", err)
	}
	if calls, err := s.Calls(ctx, job(2)); err != nil || len(calls) != 0 {
		t.Fatalf("Calls after job 1's release = %v %v, want none", calls, err)
	}
	if ok, err := s.Charge(ctx, job(2), 1, t0); err != nil || !ok {
		t.Fatalf("Charge(job 2) after job 1's release = %v %v, want true", ok, err)
	}
	if holder, err := s.Claim(ctx, job(2), 1, t0); err != nil || holder != 2 {
		t.Fatalf("Claim(job 2 from attempt 1) after job 1's release = %d %v, want 2", holder, err)
	}
}

// Deaths live in a partition of their own (DIED#<runner>), apart from the
// runner's job links, and neither read returns the other's items; a death is
// read back whole.
func TestDeathsBesideJobLinks(t *testing.T) {
	db, name := testenv.Table(t)
	s := rerun.NewStore(db, name)
	links := reservation.New(db, name, clock.RealClock{})
	ctx := t.Context()
	d := death("p-abcde-0", t0, t0.Add(time.Second))
	d.Repeated = true
	if err := s.RecordDeath(ctx, d, t0); err != nil {
		t.Fatal(err)
	}
	if err := s.RecordDeath(ctx, d, t0); err != nil { // the same death again: one item
		t.Fatal(err)
	}
	if _, err := links.RecordRunner(ctx, reservation.Delivery{JobID: 5, RunnerName: "p-abcde-0", State: reservation.InProgress}); err != nil {
		t.Fatal(err)
	}
	started := time.Now()
	if _, err := links.RecordRunner(ctx, reservation.Delivery{JobID: 5, RunnerName: "p-abcde-0", State: reservation.Completed}); err != nil {
		t.Fatal(err)
	}
	deaths, err := s.Deaths(ctx, "p-abcde-0")
	if err != nil || len(deaths) != 1 || deaths[0] != d {
		t.Fatalf("Deaths = %+v, %v, want %+v", deaths, err, d)
	}
	jobs, err := links.RunnerJobs(ctx, "p-abcde-0")
	if err != nil || len(jobs) != 1 || jobs[0].JobID != 5 || jobs[0].State != reservation.Completed {
		t.Fatalf("RunnerJobs = %+v, %v, want the one job, completed", jobs, err)
	}
	// The start is kept when the job completes: a persistent runner's death
	// after its next job started is that job's (rerun.Decide).
	if at := time.UnixMilli(jobs[0].StartedMillis); jobs[0].StartedMillis == 0 || at.After(started) {
		t.Fatalf("StartedMillis %d: want the in_progress's time, kept by the completed", jobs[0].StartedMillis)
	}
}

// TestDeathsOfOneSecondAreBothKept: a runner killed in the second its pod's
// deletion was asked has two deaths from the same time — the deletion and
// its container's end — and both are kept: the kill decides a job the
// deletion did not cancel.
func TestDeathsOfOneSecondAreBothKept(t *testing.T) {
	t.Parallel()
	db, name := testenv.Table(t)
	s := rerun.NewStore(db, name)
	at := time.Date(2026, 12, 3, 18, 48, 20, 0, time.UTC).UnixMilli()
	deleted := rerun.Death{Runner: "small-lfmxc-0", Cause: "pod deleted", FromMillis: at, ToMillis: at + 27_000, Deleted: true}
	killed := rerun.Death{Runner: "small-lfmxc-0", Cause: "runner container Error (exit code 137)", FromMillis: at, ToMillis: at, Killed: true}
	for _, d := range []rerun.Death{deleted, killed} {
		if err := s.RecordDeath(t.Context(), d, time.UnixMilli(at)); err != nil {
			t.Fatal(err)
		}
	}
	ds, err := s.Deaths(t.Context(), "small-lfmxc-0")
	if err != nil {
		t.Fatal(err)
	}
	if len(ds) != 2 || deleted.Key() == killed.Key() {
		t.Fatalf("deaths %+v (keys %q, %q): want both, under keys of their own", ds, deleted.Key(), killed.Key())
	}
}
