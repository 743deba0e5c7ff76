package reconcile

import (
	"strings"
	"testing"

	"github.com/runnerscaler/runnerscaler/internal/githubapi"
	"github.com/runnerscaler/runnerscaler/internal/rerun"
)

// jobIn re-runs a job of its own attempt by its id, and in a later attempt
// the one job of its name there, while it has not ended well; two jobs of
// that name, or none, cannot be told apart, and nothing is re-run.
func TestJobInALaterAttemptIsTheOneOfItsName(t *testing.T) {
	t.Parallel()
	c := rerun.Candidate{JobID: 1, RunAttempt: 1}
	carried := githubapi.Job{ID: 5, RunAttempt: 2, Name: "build", Status: "completed", Conclusion: "failure"}
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
		{"two of its name", 2, []githubapi.Job{carried, {ID: 7, RunAttempt: 2, Name: "build", Status: "completed", Conclusion: "failure"}}, 0, "2 jobs named"},
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
