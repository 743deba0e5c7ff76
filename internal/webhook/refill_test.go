package webhook_test

import (
	"slices"
	"strings"
	"testing"

	"github.com/runnerscaler/runnerscaler/internal/nudge"
	"github.com/runnerscaler/runnerscaler/internal/pool"
)

// TestCompletedOnAPoolRunnerNudgesARefill: a job completed on one of an
// ephemeral pool's runners nudges the sweeper for that pool, naming the runner,
// so that the slot it frees is refilled at once; a duplicate delivery does not
// nudge again. A job completed elsewhere (a hosted runner, another pool's runner,
// a name of another shape), an in_progress delivery, or a persistent pool's job
// frees no slot to refill and nudges nobody.
func TestCompletedOnAPoolRunnerNudgesARefill(t *testing.T) {
	t.Parallel()
	completed := string(fixture(t, "workflow_job/completed.success.with-organization.payload.json"))
	inProgress := string(fixture(t, "workflow_job/in_progress.payload.json"))
	on := func(payload, runner string) []byte {
		if !strings.Contains(payload, `"runner_name": "GitHub Actions 5"`) {
			t.Fatal("fixture has no runner_name to replace")
		}
		return []byte(strings.Replace(payload, `"runner_name": "GitHub Actions 5"`, `"runner_name": "`+runner+`"`, 1))
	}
	persistent, err := pool.Parse([]byte(strings.Replace(pools, "maxReplicas: 5\n", "maxReplicas: 5\n    ephemeral: false\n", 1)))
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name       string
		persistent bool
		bodies     [][]byte
		want       []nudge.Event
	}{
		{"ephemeral runner of the pool", false, [][]byte{on(completed, "octo-bcdfg-0")},
			[]nudge.Event{{Pool: "octo", Finished: []string{"octo-bcdfg-0"}}}},
		{"duplicate delivery", false, [][]byte{on(completed, "octo-bcdfg-0"), on(completed, "octo-bcdfg-0")},
			[]nudge.Event{{Pool: "octo", Finished: []string{"octo-bcdfg-0"}}}},
		{"hosted runner", false, [][]byte{[]byte(completed)}, nil},
		{"another pool's runner", false, [][]byte{on(completed, "elastic-bcdfg-0")}, nil},
		{"not a runner pod's name", false, [][]byte{on(completed, "octo-bcdfg"), on(completed, "octo-bcdfgh-0")}, nil},
		{"in_progress", false, [][]byte{on(inProgress, "octo-bcdfg-0")}, nil},
		{"persistent pool", true, [][]byte{on(completed, "octo-bcdfg-0")}, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			e := newEnv(t)
			if tc.persistent {
				e = newEnvWith(t, persistent, secret)
			}
			for _, body := range tc.bodies {
				if resp := e.invoke(t, httpAPI(headersFor("workflow_job", body), body, false)); resp.StatusCode != 200 {
					t.Fatalf("status %d %q", resp.StatusCode, resp.Body)
				}
			}
			if !slices.EqualFunc(e.nudger.events, tc.want, func(a, b nudge.Event) bool {
				return a.Pool == b.Pool && slices.Equal(a.Jobs, b.Jobs) && slices.Equal(a.Finished, b.Finished)
			}) {
				t.Fatalf("nudges %+v, want %+v", e.nudger.events, tc.want)
			}
		})
	}
}
