package webhook_test

import (
	"slices"
	"strings"
	"testing"

	"github.com/runnerscaler/runnerscaler/internal/pool"
	"github.com/runnerscaler/runnerscaler/internal/reservation"
	"github.com/runnerscaler/runnerscaler/internal/runnername"
	"github.com/runnerscaler/runnerscaler/internal/sweepevent"
)

// TestCompletedOnAPoolRunnerNudgesARefill: a job completed on one of our
// runners nudges the sweeper for that runner's pool, naming the runner — whatever
// pool the job was routed to, ephemeral or persistent — so that the slot it frees
// is refilled at once and a runner being stopped is unregistered at once; a
// duplicate delivery does not nudge again. A job completed elsewhere (a hosted
// runner, a name of another shape) and an in_progress delivery nudge nobody.
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
	// A job of elastic's repository (elastic's runners serve no other).
	inElastic := func(b []byte) []byte {
		return []byte(strings.Replace(string(b), `"full_name": "Codertocat/Hello-World"`, `"full_name": "lineville/elastic-machines-testing"`, 1))
	}
	// Runner pods named as the sweeper names them, and names of other shapes.
	octo, elastic := runnername.Pod(runnername.New("octo")), runnername.Pod(runnername.New("elastic"))
	// Named like octo's, but another deployment's: not on this one's roster.
	foreign := runnername.Pod(runnername.New("octo"))
	octoRunner, octoLonger := runnername.FromPod(octo), runnername.Pod(runnername.New("octo")+"b")
	persistent, err := pool.Parse([]byte(strings.Replace(pools, "maxReplicas: 5\n", "maxReplicas: 5\n    ephemeral: false\n", 1)))
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name       string
		persistent bool
		bodies     [][]byte
		want       []sweepevent.Event
	}{
		{"ephemeral runner of the pool", false, [][]byte{on(completed, octo)},
			[]sweepevent.Event{{Pool: "octo", Finished: []string{octo}}}},
		{"duplicate delivery", false, [][]byte{on(completed, octo), on(completed, octo)},
			[]sweepevent.Event{{Pool: "octo", Finished: []string{octo}}}},
		{"hosted runner", false, [][]byte{[]byte(completed)}, nil},
		{"another pool's runner", false, [][]byte{inElastic(on(completed, elastic))},
			[]sweepevent.Event{{Pool: "elastic", Finished: []string{elastic}}}},
		{"not a runner pod's name", false, [][]byte{on(completed, octoRunner), on(completed, octoLonger)}, nil},
		{"named like the pool's but not on the roster", false, [][]byte{on(completed, foreign)}, nil},
		{"in_progress", false, [][]byte{on(inProgress, octo)}, nil},
		{"persistent pool", true, [][]byte{on(completed, octo)},
			[]sweepevent.Event{{Pool: "octo", Finished: []string{octo}}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			e := newEnv(t)
			if tc.persistent {
				e = newEnvWith(t, persistent, secret)
			}
			e.enrol(t, "octo", octo)
			e.enrol(t, "elastic", elastic)
			for _, body := range tc.bodies {
				if resp := e.invoke(t, httpAPI(headersFor("workflow_job", body), body, false)); resp.StatusCode != 200 {
					t.Fatalf("status %d %q", resp.StatusCode, resp.Body)
				}
			}
			if !slices.EqualFunc(e.nudger.events, tc.want, func(a, b sweepevent.Event) bool {
				return a.Pool == b.Pool && slices.Equal(a.Jobs, b.Jobs) && slices.Equal(a.Finished, b.Finished)
			}) {
				t.Fatalf("nudges %+v, want %+v", e.nudger.events, tc.want)
			}
		})
	}
}

// TestDeliveriesLinkTheRunnerToItsJob: in_progress and completed deliveries that
// name one of our runners record the job↔runner link under the runner, whatever
// pool the job was routed to (none, here: the sweeper vetoes removing a runner
// that holds any job); the link only moves forward; a hosted runner gets none.
func TestDeliveriesLinkTheRunnerToItsJob(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	inProgress := string(fixture(t, "workflow_job/in_progress.payload.json"))
	completed := string(fixture(t, "workflow_job/completed.success.with-organization.payload.json"))
	on := func(payload, runner string) []byte {
		return []byte(strings.Replace(payload, `"runner_name": "GitHub Actions 5"`, `"runner_name": "`+runner+`"`, 1))
	}
	// A job of elastic's repository whose labels no pool takes: it runs on
	// elastic's runner, and only the link knows.
	unrouted := func(b []byte) []byte {
		return []byte(strings.Replace(strings.Replace(string(b), `"ubuntu-latest"`, `"windows-2022"`, 1),
			`"full_name": "Codertocat/Hello-World"`, `"full_name": "lineville/elastic-machines-testing"`, 1))
	}
	deliver := func(body []byte) {
		t.Helper()
		if resp := e.invoke(t, httpAPI(headersFor("workflow_job", body), body, false)); resp.StatusCode >= 300 {
			t.Fatalf("status %d %q", resp.StatusCode, resp.Body)
		}
	}
	states := func(runner string) []reservation.State {
		t.Helper()
		jobs, err := e.store.RunnerJobs(t.Context(), runner)
		if err != nil {
			t.Fatal(err)
		}
		var out []reservation.State
		for _, j := range jobs {
			out = append(out, j.State)
		}
		return out
	}
	runner := runnername.Pod(runnername.New("elastic"))
	e.enrol(t, "elastic", runner)
	foreign := runnername.Pod(runnername.New("elastic")) // another deployment's
	deliver(unrouted(on(inProgress, foreign)))
	if got := states(foreign); len(got) != 0 {
		t.Fatalf("a runner named like elastic's but on no roster of this deployment got links %v", got)
	}
	deliver(unrouted(on(inProgress, runner)))
	if got := states(runner); !slices.Equal(got, []reservation.State{reservation.InProgress}) {
		t.Fatalf("links %v after in_progress, want one in_progress", got)
	}
	deliver(unrouted(on(completed, runner)))
	deliver(unrouted(on(inProgress, runner))) // late redelivery: changes nothing
	if got := states(runner); !slices.Equal(got, []reservation.State{reservation.Completed}) {
		t.Fatalf("links %v after completed and a late in_progress, want one completed", got)
	}
	deliver([]byte(inProgress))
	if got := states("GitHub Actions 5"); len(got) != 0 {
		t.Fatalf("a hosted runner got links %v", got)
	}
}
