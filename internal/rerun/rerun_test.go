package rerun_test

import (
	"strings"
	"testing"
	"time"

	"github.com/runnerscaler/runnerscaler/internal/rerun"
	"github.com/runnerscaler/runnerscaler/internal/scope"
)

var t0 = time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)

func candidate(started, completed time.Time) rerun.Candidate {
	return rerun.Candidate{Pool: "p", JobID: 7, Runner: "p-abcde-0", Conclusion: "failure",
		StartedMillis: started.UnixMilli(), CompletedMillis: completed.UnixMilli(), RecordedMillis: completed.UnixMilli()}
}

// death is runner's container OOM-killed.
func death(runner string, from, to time.Time) rerun.Death {
	return rerun.Death{Runner: runner, Cause: "runner container OOMKilled (exit code 137)", FromMillis: from.UnixMilli(), ToMillis: to.UnixMilli(),
		Killed: true}
}

// exited is runner's container ended with an error: its runner may have
// reported its job first.
func exited(runner string, at time.Time) rerun.Death {
	return rerun.Death{Runner: runner, Cause: "runner container Error (exit code 1)", FromMillis: at.UnixMilli(), ToMillis: at.UnixMilli()}
}

func deleted(runner string, from, to time.Time) rerun.Death {
	d := death(runner, from, to)
	d.Cause, d.Deleted = "pod deleted", true
	return d
}

// A death of the job's runner while the job ran is a re-run (a deletion only
// when it was asked before the job ended); one before the job
// started or after it completed (a persistent runner's earlier or later death),
// or of another runner, is not; without one, the job failed by itself once the
// settling time is over, and is pending before.
func TestDecide(t *testing.T) {
	started, completed := t0, t0.Add(time.Minute)
	c := candidate(started, completed)
	later := completed.Add(rerun.Settle)
	cases := []struct {
		name   string
		deaths []rerun.Death
		starts []time.Time // of the runner's other jobs
		now    time.Time
		want   rerun.Decision
	}{
		{"died mid-job", []rerun.Death{death(c.Runner, t0.Add(30*time.Second), t0.Add(30*time.Second))}, nil, completed, rerun.Rerun},
		{"pod deleted over the job's end, job failed by itself", []rerun.Death{deleted(c.Runner, completed.Add(-10*time.Second), completed.Add(20*time.Second))}, nil, later, rerun.NotRerun},
		{"pod deleted after the job ended", []rerun.Death{deleted(c.Runner, completed.Add(500*time.Millisecond), completed.Add(30*time.Second))}, nil, later, rerun.NotRerun},
		{"exited with an error a moment after GitHub's completion", []rerun.Death{exited(c.Runner, completed.Add(2*time.Second))}, nil, later, rerun.Rerun},
		{"exited with an error well after the job", []rerun.Death{exited(c.Runner, completed.Add(10*time.Second))}, nil, later, rerun.NotRerun},
		{"killed a second before GitHub's completion", []rerun.Death{death(c.Runner, completed.Add(-time.Second), completed.Add(-time.Second))}, nil, later, rerun.Rerun},
		{"killed in the second of GitHub's completion (the sweeper removed the dead runner at once)", []rerun.Death{death(c.Runner, completed, completed)},
			nil, later, rerun.Rerun},
		{"killed a second after GitHub's completion", []rerun.Death{death(c.Runner, completed.Add(time.Second), completed.Add(time.Second))}, nil, later, rerun.NotRerun},
		{"killed a moment after GitHub's completion", []rerun.Death{death(c.Runner, completed.Add(2*time.Second), completed.Add(2*time.Second))}, nil, later, rerun.NotRerun},
		{"died before the job", []rerun.Death{death(c.Runner, t0.Add(-time.Hour), t0.Add(-time.Hour))}, nil, later, rerun.NotRerun},
		{"died after the job", []rerun.Death{death(c.Runner, completed.Add(time.Minute), completed.Add(time.Minute))}, nil, later, rerun.NotRerun},
		{"another runner died", []rerun.Death{death("p-zzzzz-0", t0.Add(time.Second), t0.Add(time.Second))}, nil, later, rerun.NotRerun},
		{"its next job started before the death", []rerun.Death{exited(c.Runner, completed.Add(3*time.Second))},
			[]time.Time{completed.Add(time.Second)}, later, rerun.NotRerun},
		{"a job that started before it", []rerun.Death{death(c.Runner, t0.Add(30*time.Second), t0.Add(30*time.Second))},
			[]time.Time{t0.Add(-time.Minute)}, completed, rerun.Rerun},
		{"no death yet, settling", nil, nil, completed.Add(rerun.Settle - time.Second), rerun.Pending},
		{"no death, settled", nil, nil, later, rerun.NotRerun},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			v := rerun.Decide(c, tc.deaths, tc.starts, tc.now)
			if v.Decision != tc.want {
				t.Fatalf("Decide = %+v, want %q", v, tc.want)
			}
			if v.Decision == rerun.Rerun && v.Cause != tc.deaths[0].Cause {
				t.Fatalf("cause %q: want the death's", v.Cause)
			}
		})
	}
}

// A deletion kills a job it cancels (the entrypoint cancels a job still running
// at the end of its graceful stop): asked before the job completed, it is a
// re-run; asked after, it is not.
func TestDecideDeletion(t *testing.T) {
	started, completed := t0, t0.Add(time.Minute)
	c := candidate(started, completed)
	c.Conclusion = "cancelled"
	later := completed.Add(rerun.Settle)
	for _, tc := range []struct {
		name string
		d    rerun.Death
		want rerun.Decision
	}{
		{"deleted over the job's end", deleted(c.Runner, completed.Add(-10*time.Second), completed.Add(20*time.Second)), rerun.Rerun},
		{"handed a job as its pod was being deleted", deleted(c.Runner, started.Add(-time.Second), started.Add(30*time.Second)), rerun.Rerun},
		{"deleted after the job ended", deleted(c.Runner, completed.Add(500*time.Millisecond), completed.Add(30*time.Second)), rerun.NotRerun},
	} {
		if v := rerun.Decide(c, []rerun.Death{tc.d}, nil, later); v.Decision != tc.want {
			t.Errorf("%s: Decide = %+v, want %q", tc.name, v, tc.want)
		}
	}
}

// A persistent runner reports a job that fails by itself, takes its next job
// at once and is killed under it, its `in_progress` delivery lost (so no start
// of the next job is known): the kill, seconds after the first job's completion
// (GitHub's times and the kubelet's have a second's precision), is the next
// job's alone. The first job is left failed; the next one, which GitHub fails
// once it stops hearing from the runner, is re-run. (A kill within the second
// of the first job's completion cannot be told from one just before it: that
// job is re-run too.)
func TestDecideKillAfterAJobThatFailedByItself(t *testing.T) {
	failed := candidate(t0, t0) // ran within the second
	next := candidate(t0.Add(time.Second), t0.Add(20*time.Second))
	next.JobID = 8
	for _, after := range []time.Duration{time.Second, 3 * time.Second} {
		kill := death(failed.Runner, t0.Add(after), t0.Add(after))
		now := failed.Completed().Add(rerun.Settle)
		if v := rerun.Decide(failed, []rerun.Death{kill}, nil, now); v.Decision != rerun.NotRerun {
			t.Errorf("killed %s after the job that failed by itself: Decide = %+v, want not re-run", after, v)
		}
		if v := rerun.Decide(next, []rerun.Death{kill}, []time.Time{t0}, next.Completed()); v.Decision != rerun.Rerun {
			t.Errorf("killed %s after the first job's end, under the next one: Decide = %+v, want a re-run", after, v)
		}
	}
}

// An ephemeral runner runs once. Its container killed a moment after it
// reported a job that failed by itself is no death of that job, though the
// restarted container that repeats the kill later bounds it only by the pod's
// start: the end seen as it happened decides. Without it, the repeat's bound
// is all there is, and the job is re-run.
func TestDecideEphemeralEndSeenBeatsItsRepeat(t *testing.T) {
	podStart := t0.Add(-10 * time.Second)
	c := candidate(t0, t0.Add(time.Second))
	kill := death(c.Runner, c.Completed().Add(time.Second), c.Completed().Add(time.Second))
	repeat := death(c.Runner, podStart, c.Completed().Add(30*time.Second))
	repeat.Repeated = true
	later := c.Completed().Add(rerun.Settle)
	if v := rerun.Decide(c, []rerun.Death{repeat, kill}, nil, later); v.Decision != rerun.NotRerun {
		t.Fatalf("with the kill seen: Decide = %+v, want not re-run", v)
	}
	if v := rerun.Decide(c, []rerun.Death{repeat}, nil, later); v.Decision != rerun.Rerun {
		t.Fatalf("with only the repeat seen: Decide = %+v, want a re-run", v)
	}
	other := death("p-zzzzz-0", c.Completed().Add(time.Second), c.Completed().Add(time.Second))
	if v := rerun.Decide(c, []rerun.Death{repeat, other}, nil, later); v.Decision != rerun.Rerun {
		t.Fatalf("with another runner's end seen: Decide = %+v, want a re-run", v)
	}
}

// A failure recorded late (its delivery delayed) settles from when it was recorded.
func TestDecideSettlesFromTheRecording(t *testing.T) {
	c := candidate(t0, t0.Add(time.Second))
	c.RecordedMillis = t0.Add(time.Hour).UnixMilli()
	if v := rerun.Decide(c, nil, nil, t0.Add(time.Hour+time.Second)); v.Decision != rerun.Pending {
		t.Fatalf("Decide = %+v, want pending until the settling time after the recording", v)
	}
}

// Only a repository the pool's scope covers can be re-run through its credentials.
func TestInScope(t *testing.T) {
	cases := []struct {
		sc   scope.Scope
		repo string
		want bool
	}{
		{scope.Scope{Organization: "acme"}, "acme/app", true},
		{scope.Scope{Organization: "acme"}, "ACME/app", true},
		{scope.Scope{Organization: "acme"}, "other/app", false},
		{scope.Scope{Organization: "acme"}, "acme", false},
		{scope.Scope{Repository: "acme/app"}, "acme/app", true},
		{scope.Scope{Repository: "acme/app"}, "acme/other", false},
		{scope.Scope{Enterprise: "big"}, "anyone/app", true},
	}
	for _, tc := range cases {
		if got := rerun.InScope(tc.sc, tc.repo); got != tc.want {
			t.Errorf("InScope(%s, %q) = %v, want %v", tc.sc, tc.repo, got, tc.want)
		}
	}
}

func TestFailed(t *testing.T) {
	for c, want := range map[string]bool{"failure": true, "cancelled": true, "success": false, "timed_out": false, "skipped": false, "": false} {
		if rerun.Failed(c) != want {
			t.Errorf("Failed(%q) = %v", c, !want)
		}
	}
}

// Next accounts for every attempt after the candidate's: one this deployment
// asked for the job is its re-run (an answer lost), one asked for another job
// leaves the job to be re-run from the latest attempt, after that job's call
// from it has moved the run on; one nobody here asked for is someone else's.
func TestNextAccountsForEveryLaterAttempt(t *testing.T) {
	t.Parallel()
	c := rerun.Candidate{JobID: 7, RunAttempt: 1}
	for _, tc := range []struct {
		name   string
		latest int
		calls  rerun.Calls
		want   rerun.Step
		reason string
	}{
		{"the job's own attempt", 1, nil, rerun.Step{From: 1}, ""},
		{"the job's own call, not yet answered", 1, rerun.Calls{1: 7}, rerun.Step{From: 1}, ""},
		{"another job's call from the same attempt", 1, rerun.Calls{1: 8}, rerun.Step{From: 1, Wait: 8}, "waiting for the re-run of job 8 from attempt 1"},
		{"the job's call made attempt 2", 2, rerun.Calls{1: 7}, rerun.Step{Decision: rerun.Rerun}, "re-run already: the run is at attempt 2"},
		{"another job's call made attempt 2", 2, rerun.Calls{1: 8}, rerun.Step{From: 2}, ""},
		{"other jobs' calls made attempts 2 and 3", 3, rerun.Calls{1: 8, 2: 9}, rerun.Step{From: 3}, ""},
		{"another job's call made attempt 2, the job's attempt 3", 3, rerun.Calls{1: 8, 2: 7}, rerun.Step{Decision: rerun.Rerun}, "run is at attempt 3"},
		{"someone else made attempt 2", 2, nil, rerun.Step{Decision: rerun.NotRerun}, "someone else re-ran the workflow run: its attempt 2"},
		{"someone else made attempt 3", 3, rerun.Calls{1: 8}, rerun.Step{Decision: rerun.NotRerun}, "its attempt 3 was not asked"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			got := rerun.Next(c, tc.latest, tc.calls)
			reason := got.Reason
			got.Reason = ""
			if got != tc.want || !strings.Contains(reason, tc.reason) {
				t.Fatalf("Next = %+v (%q), want %+v with a reason containing %q", got, reason, tc.want, tc.reason)
			}
		})
	}
}
