// Package rerun decides which failed jobs are re-run, and keeps what that
// decision needs in the deployment's table.
//
// A job is re-run when GitHub says it failed or was cancelled (the webhook's
// `completed` delivery only makes it a candidate), it ran on one of this
// deployment's runners, and that runner died under it: its container was OOM-killed or killed, its runner exited with an
// error, or its pod was deleted, evicted or lost with its node while the job
// ran (a Death the sweeper recorded, package reconcile). A job whose runner was
// alive and exited normally failed by itself and is never re-run. A workflow
// run has one budget, whatever pools its jobs ran in: a pool re-runs a job of
// it only while the run's re-runs, by every pool, are fewer than that pool's
// `rerunsPerRun` (Store.Charge).
//
// The webhook records a Candidate for each such failure in the partition of
// the runner's pool; the sweeper of that pool acts on it only when the runner
// is on the pool's roster (package reconcile), decides it (Decide), charges
// the run's budget, and asks GitHub to re-run the job with the pool's
// credentials. A candidate is only a claim: before a re-run the sweeper
// reads the job from GitHub and decides again by GitHub's conclusion, run,
// attempt, runner and times, with the deaths it recorded itself; deaths and
// budgets live in partitions only the sweeper writes (package table). A
// decision is written once: a redelivered `completed` or a second sweeper
// cannot re-run a job twice, nor charge the budget twice for one job.
//
// Several jobs of one run. GitHub re-runs only a job of the run's latest
// attempt, each re-run starts a new attempt that carries the run's other jobs
// with their results, and a run in progress re-runs nothing. So each job of a
// run whose runner died is re-run by its own call, one attempt after another:
// the first from its own attempt, the next — once that re-run is over — as the
// latest attempt carries it (Next). Each call is recorded on the run's budget
// item before it is made, one per attempt (Store.Claim); the item is the run's,
// not a pool's, so an attempt after a job's own is known — by the sweeper of
// any pool the run's jobs ran in — to be this deployment's re-run of that job
// (a call whose answer was lost), of another of its jobs (the job is still to
// be re-run), or someone else's (then nothing is claimed for the job). A call
// GitHub refused did not move the run: its claim and its charge are given back
// (Store.Release), and the next job of the run claims that attempt. Re-running the run's
// failed jobs in one call is not done: it would re-run jobs that failed by
// themselves too.
package rerun

import (
	"fmt"
	"strings"
	"time"

	"github.com/runnerscaler/runnerscaler/internal/scope"
)

// Decision is whether a candidate's job was re-run ("" while it is pending).
type Decision string

// Decisions.
const (
	Pending Decision = ""
	// Rerun: GitHub accepted the re-run.
	Rerun Decision = "rerun"
	// NotRerun: the candidate's runner is not on its pool's roster; the job
	// failed by itself; re-runs are off, the budget is spent, or the job's
	// repository is outside the pool's scope; GitHub's account of the job
	// differs from the candidate's (no such job, not failed, another run,
	// attempt or runner); someone else re-ran the run;
	// the job cannot be told apart in the run's latest attempt; or the re-run
	// still waited, at GiveUpAfter, for something other than GitHub's refusal
	// (another job's re-run, the job shown running, GitHub out of reach).
	NotRerun Decision = "not-rerun"
	// Refused: GitHub refused the re-run for good (a missing permission, a run
	// too old or re-run too often), or still answered it with an error status
	// at GiveUpAfter.
	Refused Decision = "refused"
)

// Candidate is a job that failed or was cancelled on one of the deployment's
// runners, and what became of it.
type Candidate struct {
	Pool       string `dynamodbav:"pool"`
	JobID      int64  `dynamodbav:"jobId"`
	RunID      int64  `dynamodbav:"runId"`
	RunAttempt int    `dynamodbav:"runAttempt"`
	Repository string `dynamodbav:"repository"`
	Runner     string `dynamodbav:"runner"`
	Conclusion string `dynamodbav:"conclusion"`
	// StartedMillis and CompletedMillis are GitHub's started_at and
	// completed_at of the job (epoch ms; 0: the payload had none).
	StartedMillis   int64 `dynamodbav:"startedAt"`
	CompletedMillis int64 `dynamodbav:"completedAt"`
	// RecordedMillis is when the webhook recorded the failure.
	RecordedMillis int64 `dynamodbav:"recordedAt"`

	Decision Decision `dynamodbav:"outcome"`
	// Cause is the runner's death the job died of.
	Cause string `dynamodbav:"cause"`
	// Reason says why the job was not re-run, or GitHub's last refusal.
	Reason        string `dynamodbav:"reason"`
	Tries         int    `dynamodbav:"tries"`
	NextTryMillis int64  `dynamodbav:"nextTry"`
	DecidedMillis int64  `dynamodbav:"decidedAt"`
}

// Started, Completed, Recorded and Decided are the candidate's times (zero when unknown).
func (c Candidate) Started() time.Time   { return millis(c.StartedMillis) }
func (c Candidate) Completed() time.Time { return millis(c.CompletedMillis) }
func (c Candidate) Recorded() time.Time  { return millis(c.RecordedMillis) }
func (c Candidate) Decided() time.Time   { return millis(c.DecidedMillis) }

// NextTry is when a re-run GitHub refused for now is asked again.
func (c Candidate) NextTry() time.Time { return millis(c.NextTryMillis) }

func millis(ms int64) time.Time {
	if ms == 0 {
		return time.Time{}
	}
	return time.UnixMilli(ms).UTC()
}

// Failed reports whether a job's conclusion is one a dead runner leaves.
func Failed(conclusion string) bool { return conclusion == "failure" || conclusion == "cancelled" }

// Death is a runner's death the sweeper saw: its container killed or its runner
// exiting with an error (From = To = when it ended), or its pod deleted (From
// when the deletion was asked, To the end of the pod's grace period).
type Death struct {
	Runner     string `dynamodbav:"runner"`
	Cause      string `dynamodbav:"cause"`
	FromMillis int64  `dynamodbav:"from"`
	ToMillis   int64  `dynamodbav:"to"`
	// Deleted: the pod was deleted while its runner ran; From is when the
	// deletion was asked.
	Deleted bool `dynamodbav:"deleted"`
	// Killed: the container was killed (an OOM kill, or SIGKILL: exit code
	// 137), so its runner reported nothing of its job after it.
	Killed bool `dynamodbav:"killed"`
	// Repeated: an ephemeral runner's death known only from a restarted
	// container that repeats its run's outcome; From is the pod's start.
	Repeated bool `dynamodbav:"repeated"`
}

// during reports whether d could have killed a job that ran from started to
// completed and ended with conclusion: a container that ended within the job
// (with the margins), or a deletion asked before a cancelled job completed
// whose grace period reaches the job (a deletion asked after the job's end,
// such as the one that removes an ephemeral runner after its job, killed
// nothing of it; a job that failed by itself during the grace period was not
// killed by it).
func (d Death) during(started, completed time.Time, conclusion string) bool {
	if d.To().Before(started.Add(-earlyMargin)) {
		return false
	}
	switch {
	case d.Deleted:
		// The entrypoint lets a job finish within the pod's grace period and
		// cancels it after: a deletion kills a job it ends as cancelled (a
		// runner killed at the end of the grace period is a container death).
		return d.From().Before(completed) && conclusion == "cancelled"
	case d.Killed:
		// A killed runner reports nothing: GitHub ends the job it ran after the
		// kill (once it stopped hearing from the runner, or at once when the
		// sweeper removes the dead runner). A kill after the job's completion
		// (to the second) came after its live runner reported the job.
		return !d.From().After(completed)
	}
	// A runner that ends otherwise (on SIGTERM, or with an error) may report
	// its job a moment before its container ends.
	return !d.From().After(completed.Add(lateMargin))
}

// From and To bound when the runner died.
func (d Death) From() time.Time { return millis(d.FromMillis) }
func (d Death) To() time.Time   { return millis(d.ToMillis) }

// Key identifies one death of a runner (its pod records it, so it is written
// once): when it began and whether it was the pod's deletion or its
// container's end, which can begin in the same second (a runner killed just as
// its pod is deleted).
func (d Death) Key() string {
	if d.Deleted {
		return fmt.Sprintf("%d-deleted", d.FromMillis)
	}
	return fmt.Sprintf("%d", d.FromMillis)
}

// Window margins: the timestamps GitHub sends and those the kubelet reports have
// a second's precision, and a runner that stops on SIGTERM or exits with an
// error may report its job a moment before its container ends.
const (
	earlyMargin = 2 * time.Second
	lateMargin  = 5 * time.Second
)

// Settle is how long after a failure's completion the sweeper waits for a death
// it has not seen yet before it decides that the job failed by itself: the
// kubelet reports a container's end within a second or two.
const Settle = 15 * time.Second

// GiveUpAfter bounds how long a re-run GitHub refuses for now (a run still in
// progress, 5xx, rate limits) is asked again: GitHub cancels a job after 6 h.
const GiveUpAfter = 6 * time.Hour

// Verdict is Decide's answer.
type Verdict struct {
	Decision Decision // Pending: decide again later
	Cause    string   // Rerun: the death
	Reason   string   // NotRerun: why
}

// Decide says whether the job of c died with its runner: a death of c's runner
// whose time overlaps the job's run is a re-run — unless another job started on
// the runner after c's job and before the death (a persistent runner that took
// its next job at once: the death is that job's), or the runner was killed
// after the job's completion (the runner reported the job before); none,
// once Settle has passed since the job completed, means the job failed by
// itself. starts are when the runner's jobs started, as their `in_progress`
// deliveries were recorded.
func Decide(c Candidate, deaths []Death, starts []time.Time, now time.Time) Verdict {
	started, completed := c.Started(), c.Completed()
	if completed.IsZero() {
		completed = c.Recorded()
	}
	if started.IsZero() {
		started = completed
	}
	exact := endSeen(deaths, c.Runner)
	for _, d := range deaths {
		if d.Runner != c.Runner || (d.Repeated && exact) {
			continue
		}
		if d.during(started, completed, c.Conclusion) && !startedBetween(starts, started, d.From()) {
			return Verdict{Decision: Rerun, Cause: d.Cause}
		}
	}
	if now.Before(completed.Add(Settle)) || now.Before(c.Recorded().Add(Settle)) {
		return Verdict{}
	}
	return Verdict{Decision: NotRerun, Reason: "its runner did not die under it: the job failed by itself"}
}

// endSeen: the end of runner's container was seen as it happened (a death
// neither Repeated nor Deleted). An ephemeral runner runs once, so that end is
// its run's, and the wider bound of a restarted container repeating it adds
// nothing.
func endSeen(deaths []Death, runner string) bool {
	for _, d := range deaths {
		if d.Runner == runner && !d.Repeated && !d.Deleted {
			return true
		}
	}
	return false
}

// startedBetween: a job started on the runner after this job's start (a second
// later, for the precision of GitHub's started_at) and at or before t.
func startedBetween(starts []time.Time, started, t time.Time) bool {
	for _, s := range starts {
		if s.After(started.Add(time.Second)) && !s.After(t) {
			return true
		}
	}
	return false
}

// InScope reports whether repo ("owner/name") is one the pool's scope serves:
// a re-run acts on the job's repository, which a delivery names, so it must be
// one the pool's runners could have served.
func InScope(sc scope.Scope, repo string) bool {
	owner, _, ok := strings.Cut(repo, "/")
	switch sc.Kind() {
	case scope.Enterprise:
		return ok
	case scope.Organization:
		return ok && strings.EqualFold(owner, sc.Organization)
	}
	return strings.EqualFold(repo, sc.Repository)
}

// Calls are the re-run calls this deployment asked of one workflow run: for
// each attempt a call re-ran a job from, the candidate's job it was for. A call
// is recorded before it is made (Store.Claim), so one whose answer was lost is
// known too; only the sweeper writes them.
type Calls = map[int]int64

// Step is Next's answer: Decision Pending with From set is a re-run of the job
// of attempt From that is this candidate's (Wait: once this deployment's call
// for job Wait from that attempt has moved the run on); any other Decision
// decides the candidate, with Reason.
type Step struct {
	Decision Decision
	From     int
	Wait     int64
	Reason   string
}

// Next says how the job of c, whose runner died under it, is re-run now that
// the run's latest attempt is latest and this deployment asked calls of it.
// GitHub re-runs only a job of the run's latest attempt, and a re-run of one
// job carries the run's other jobs into the new attempt with their results;
// so every attempt after c's is accounted for: one this deployment asked for c
// means c was re-run already (by a call whose answer was lost); one it asked
// for another job leaves c to be re-run from the latest attempt, in turn; one
// it did not ask for was someone else's, and c is left to them.
func Next(c Candidate, latest int, calls Calls) Step {
	own := max(c.RunAttempt, 1)
	for k := own; k < latest; k++ {
		job, ok := calls[k]
		switch {
		case !ok:
			return Step{Decision: NotRerun, Reason: fmt.Sprintf(
				"someone else re-ran the workflow run: its attempt %d was not asked by this deployment", k+1)}
		case job == c.JobID:
			return Step{Decision: Rerun, Reason: fmt.Sprintf(
				"re-run already: the run is at attempt %d, after this deployment's call for this job from attempt %d (its answer was lost)", latest, k)}
		}
	}
	if job, ok := calls[latest]; ok && job != c.JobID {
		return Step{From: latest, Wait: job, Reason: fmt.Sprintf(
			"waiting for the re-run of job %d from attempt %d: GitHub re-runs a run's jobs one attempt at a time", job, latest)}
	}
	return Step{From: max(latest, own)}
}
