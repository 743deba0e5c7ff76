package tests

import (
	"context"
	"fmt"
	"slices"
	"time"

	"github.com/runnerscaler/runnerscaler/internal/rerun"
	"github.com/runnerscaler/runnerscaler/internal/runnername"
	"github.com/runnerscaler/runnerscaler/local/githubsim"
	"github.com/runnerscaler/runnerscaler/local/loop"
)

// chaosReruns is what the chaos run's re-runs came to.
type chaosReruns struct {
	rerun, byItself, budgetSpent int
	delays                       []time.Duration // a failed attempt's end → its re-run queued
	problems                     []string
}

// rerunsSettled: every job is done, and every job that failed on one of our
// runners has the sweeper's re-run decision (which comes once the settling time
// after the failure is over, and may queue another attempt).
func (w *world) rerunsSettled() bool {
	jobs := w.loop.Sim.Jobs()
	if !allDone(jobs) {
		return false
	}
	for _, j := range jobs {
		if j.Conclusion == githubsim.JobSuccess || j.RunnerName == "" {
			continue
		}
		c, ok := w.rerunDecision(j)
		if !ok || c.Decision == rerun.Pending {
			return false
		}
	}
	// A re-run decided while the decisions were read has queued a job this
	// look's jobs lack (jobs are only ever added): look again then.
	return len(w.loop.Sim.Jobs()) == len(jobs)
}

// rerunDecision is the decision about failed job j, kept in its runner's pool.
func (w *world) rerunDecision(j githubsim.Job) (rerun.Candidate, bool) {
	for _, p := range w.cfg.Pools {
		if runnername.IsPodOf(p.Name, j.RunnerName) {
			c, ok, err := w.loop.Rerun(context.Background(), p.Name, j.ID)
			if err != nil {
				w.t.Fatal(err)
			}
			return c, ok
		}
	}
	return rerun.Candidate{}, false
}

// checkReruns judges the re-runs of a settled run, with budget re-runs per
// workflow run: no job is re-run twice; a job that failed by itself
// (loop.FailedByItself) is never re-run; every other failed job — its runner died under an injected fault —
// is re-run, unless its run's budget is spent (a container job whose exec a
// kubelet restart cut failed with its runner alive: by itself, as far as
// anyone can tell); and every workflow run ends
// with a successful attempt, or one that failed by itself, or a spent budget.
func (w *world) checkReruns(budget int) chaosReruns {
	var out chaosReruns
	jobs := w.loop.Sim.Jobs()
	byID := map[int64]githubsim.Job{}
	rerunOf := map[int64]githubsim.Job{}
	last := map[int64]githubsim.Job{} // run → its latest attempt
	for _, j := range jobs {
		byID[j.ID] = j
		if j.RerunOf != 0 {
			if twice, ok := rerunOf[j.RerunOf]; ok {
				out.problems = append(out.problems, fmt.Sprintf("job %d was re-run twice: jobs %d and %d", j.RerunOf, twice.ID, j.ID))
			}
			rerunOf[j.RerunOf] = j
		}
		if l, ok := last[j.RunID]; !ok || j.RunAttempt > l.RunAttempt {
			last[j.RunID] = j
		}
	}
	for _, j := range jobs {
		if j.RerunOf != 0 {
			out.delays = append(out.delays, j.QueuedAt.Sub(byID[j.RerunOf].EndedAt))
		}
		if j.Conclusion == githubsim.JobSuccess {
			continue
		}
		again, rerunDone := rerunOf[j.ID]
		switch {
		case loop.FailedByItself(j):
			out.byItself++
			if rerunDone {
				out.problems = append(out.problems, fmt.Sprintf("job %d failed by itself and was re-run as job %d", j.ID, again.ID))
			}
		case rerunDone:
			out.rerun++
		case j.RunAttempt > budget:
			out.budgetSpent++
		default:
			c, _ := w.rerunDecision(j)
			out.problems = append(out.problems, fmt.Sprintf("job %d (attempt %d, runner %s) ended %s and was not re-run: %s %s (cause %q)",
				j.ID, j.RunAttempt, j.RunnerName, j.Conclusion, c.Decision, c.Reason, c.Cause))
		}
	}
	for run, j := range last {
		if j.Conclusion != githubsim.JobSuccess && !loop.FailedByItself(j) && j.RunAttempt <= budget {
			out.problems = append(out.problems, fmt.Sprintf("run %d ended with job %d (attempt %d) %s", run, j.ID, j.RunAttempt, j.Conclusion))
		}
	}
	slices.Sort(out.delays)
	return out
}

func (r chaosReruns) String() string {
	return fmt.Sprintf("%d jobs re-run after their runner died (failure → re-run queued p50 %s p95 %s), %d failed by themselves (none re-run), "+
		"%d runs out of re-run budget", r.rerun, loop.Percentile(r.delays, 50).Round(time.Millisecond),
		loop.Percentile(r.delays, 95).Round(time.Millisecond), r.byItself, r.budgetSpent)
}
