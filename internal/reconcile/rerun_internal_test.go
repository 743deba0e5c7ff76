package reconcile

import (
	"strings"
	"testing"
	"time"

	"github.com/runnerscaler/runnerscaler/internal/githubapi"
	"github.com/runnerscaler/runnerscaler/internal/rerun"
)

// jobIn re-runs a job of its own attempt by its id, and in a later attempt
// the one job of its name there, while it has not ended well; of several of
// that name (a matrix), the one carried with the job's runner and times;
// none of its name, or several that its runner and times do not tell apart,
// and nothing is re-run.
func TestJobInALaterAttemptIsTheOneOfItsName(t *testing.T) {
	t.Parallel()
	started, completed := time.Unix(1_796_000_000, 0), time.Unix(1_796_000_030, 0)
	c := rerun.Candidate{JobID: 1, RunAttempt: 1, Runner: "p-abcde-0", StartedMillis: started.UnixMilli(), CompletedMillis: completed.UnixMilli()}
	carried := githubapi.Job{ID: 5, RunAttempt: 2, Name: "build", Status: "completed", Conclusion: "failure",
		RunnerName: "p-abcde-0", Started: started, Completed: completed}
	sibling := carried // another job of the matrix, on another runner
	sibling.ID, sibling.RunnerName = 7, "p-fghjk-0"
	later := carried // another job of the matrix, later on the same (persistent) runner
	later.ID, later.Started, later.Completed = 8, completed.Add(time.Second), completed.Add(time.Minute)
	passed := carried
	passed.Conclusion = "success"
	other := githubapi.Job{ID: 6, RunAttempt: 2, Name: "test", Status: "completed", Conclusion: "success"}
	for _, tc := range []struct {
		name   string
		from   int
		jobs   []githubapi.Job
		want   int64
		reason string
	}{
		{"its own attempt", 1, []githubapi.Job{carried, other}, 1, ""},
		{"carried into attempt 2", 2, []githubapi.Job{carried, other}, 5, ""},
		{"ended well in attempt 2", 2, []githubapi.Job{passed, other}, 0, "ended success"},
		{"a matrix of its name", 2, []githubapi.Job{sibling, carried, later, other}, 5, ""},
		{"a matrix with none of its runner and times", 2, []githubapi.Job{sibling, later}, 0, "0 jobs named \"build\" carried from runner p-abcde-0"},
		{"a matrix with two of its runner and times", 2, []githubapi.Job{carried, {ID: 9, RunAttempt: 2, Name: "build", Status: "completed",
			Conclusion: "failure", RunnerName: "p-abcde-0", Started: started, Completed: completed}}, 0, "2 jobs named"},
		{"none of its name", 2, []githubapi.Job{other}, 0, "0 jobs named"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			got, why := jobIn(c, "build", tc.from, tc.jobs)
			if got != tc.want || (tc.reason == "") != (why == "") || !strings.Contains(why, tc.reason) {
				t.Fatalf("jobIn = %d %q, want %d with a reason containing %q", got, why, tc.want, tc.reason)
			}
		})
	}
}
