package webhook_test

import (
	"bytes"
	"fmt"
	"testing"

	"github.com/runnerscaler/runnerscaler/internal/roster"
	"github.com/runnerscaler/runnerscaler/internal/runnername"
)

// TestRunnerOfAnotherScopeWithOurNameIsNotOurs: a delivery naming one of the
// deployment's runners is taken for it only when the job is of the pool's
// scope (as routing matches it), the runner was created in that scope, and the
// delivery's runner id is the one the roster recorded. A runner of another
// organization, or another runner of the same name (its id), links, records
// and nudges nothing; the deployment's own runner does.
func TestRunnerOfAnotherScopeWithOurNameIsNotOurs(t *testing.T) {
	t.Parallel()
	inProgress := fixture(t, "workflow_job/in_progress.payload.json")
	on := func(runner string, id int64, org string) []byte {
		b := bytes.Replace(inProgress, []byte(`"runner_name": "GitHub Actions 5"`), []byte(`"runner_name": "`+runner+`"`), 1)
		b = bytes.Replace(b, []byte(`"runner_id": 5,`), fmt.Appendf(nil, `"runner_id": %d,`, id), 1)
		return bytes.ReplaceAll(b, []byte(`"login": "Octocoders"`), []byte(`"login": "`+org+`"`))
	}
	for _, tc := range []struct {
		name  string
		scope string // the roster entry's
		id    int64  // the delivery's runner id
		org   string // the delivery's organization
		ours  bool
	}{
		{"our runner", "organization/octocoders", 42, "Octocoders", true},
		{"our runner, id not recorded yet", "", 42, "Octocoders", true},
		{"another organization's runner of our name", "organization/octocoders", 42, "Evilcorp", false},
		{"another runner of our name (its id)", "organization/octocoders", 43, "Octocoders", false},
		{"created in another scope", "organization/other", 42, "Octocoders", false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			e := newEnv(t)
			runner := runnername.Pod(runnername.New("octo"))
			entry := roster.Runner{Pool: "octo", Name: runner, Scope: tc.scope}
			if tc.scope != "" {
				entry.GitHubID = 42
			}
			if err := e.roster.Add(t.Context(), entry, fixtureTime); err != nil {
				t.Fatal(err)
			}
			body := on(runner, tc.id, tc.org)
			if resp := e.invoke(t, httpAPI(headersFor("workflow_job", body), body, false)); resp.StatusCode >= 300 {
				t.Fatalf("status %d %q", resp.StatusCode, resp.Body)
			}
			links, err := e.store.RunnerJobs(t.Context(), runner)
			if err != nil {
				t.Fatal(err)
			}
			if got := len(links) == 1; got != tc.ours {
				t.Fatalf("links %+v; want the runner taken for ours: %v", links, tc.ours)
			}
		})
	}
}
