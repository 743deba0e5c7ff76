package githubsim_test

import (
	"encoding/json"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/runnerscaler/runnerscaler/local/githubsim"
)

// busyRunner is a runner agent that has taken a job, for the busy-flag tests.
type busyRunner struct {
	e    *agentEnv
	id   int64
	cred string
	sid  string
	job  jobOut
}

// takeJob registers an org runner "p" in acme, connects it and has it take a
// queued job: the job is assigned at e.clock.Now().
func takeJob(e *agentEnv) busyRunner {
	e.t.Helper()
	reg, code := e.register(e.regToken("/orgs/acme"), map[string]any{"url": e.url + "/acme", "name": "p", "ephemeral": true})
	if code != 201 {
		e.t.Fatalf("register: %d", code)
	}
	cred := reg.Credentials.Data["token"]
	s, resp := e.open(cred, nil)
	if resp.StatusCode != 201 {
		e.t.Fatalf("session: %d", resp.StatusCode)
	}
	e.sim.QueueJob(githubsim.JobSpec{Repository: "acme/app", Organization: "acme", Labels: []string{"self-hosted"}, Duration: time.Hour})
	j, code := e.poll(cred, s.SessionID, "0s")
	if code != 200 {
		e.t.Fatalf("poll: %d, want the queued job", code)
	}
	return busyRunner{e: e, id: reg.Runner.AgentID, cred: cred, sid: s.SessionID, job: j}
}

// restBusy is the busy field GET /orgs/acme/actions/runners shows for the runner.
func (b busyRunner) restBusy() bool {
	b.e.t.Helper()
	var list struct {
		Runners []struct {
			ID   int64 `json:"id"`
			Busy bool  `json:"busy"`
		} `json:"runners"`
	}
	if resp := b.e.call("GET", "/orgs/acme/actions/runners", "token "+pat, nil, &list); resp.StatusCode != 200 {
		b.e.t.Fatalf("list runners: %d", resp.StatusCode)
	}
	for _, r := range list.Runners {
		if r.ID == b.id {
			if api, ok := b.e.sim.RESTBusy(b.id); !ok || api != r.Busy {
				b.e.t.Fatalf("RESTBusy says %v (known %v), the runner list %v", api, ok, r.Busy)
			}
			return r.Busy
		}
	}
	b.e.t.Fatalf("runner %d not listed", b.id)
	return false
}

// truthBusy checks that the Actions side still sees the job running on the runner.
func (b busyRunner) truthBusy() {
	b.e.t.Helper()
	rn, ok := b.e.sim.Runner(b.id)
	j, running := b.e.sim.RunningJob(b.id)
	if !ok || !rn.Busy || !running || j.ID != b.job.ID {
		b.e.t.Fatalf("the truth must stay busy with job %d: runner %+v %v, running %+v %v", b.job.ID, rn, ok, j, running)
	}
}

func (b busyRunner) remove() int {
	b.e.t.Helper()
	return b.e.call("DELETE", "/orgs/acme/actions/runners/"+strconv.FormatInt(b.id, 10), "token "+pat, nil, nil).StatusCode
}

// TestBusyLieLagsAfterAssignment: for the lag after a job's assignment REST says
// busy: false (list and RESTBusy) while the Actions side says busy; from the
// lag on, without flicker, REST tells the truth and DELETE answers 422.
func TestBusyLieLagsAfterAssignment(t *testing.T) {
	t.Parallel()
	e := newAgentEnv(t)
	if err := e.sim.SetBusyLie(&githubsim.BusyLie{MinLag: 30 * time.Second, MaxLag: 30 * time.Second}); err != nil {
		t.Fatal(err)
	}
	b := takeJob(e)
	for _, step := range []time.Duration{0, 10 * time.Second, 19*time.Second + 999*time.Millisecond} {
		e.clock.Step(step)
		if b.restBusy() {
			t.Fatalf("%s after the assignment REST says busy, want the lag's busy: false", e.clock.Since(t0))
		}
		b.truthBusy()
	}
	if n := e.sim.BusyLiesTold(); n != 3 {
		t.Fatalf("BusyLiesTold = %d after three lists in the lag, want 3", n)
	}
	e.clock.Step(time.Millisecond) // 30 s: the lag is over
	for range 60 {
		if !b.restBusy() {
			t.Fatalf("%s after the assignment, past the lag with no flicker, REST says idle", e.clock.Since(t0))
		}
		e.clock.Step(time.Second)
	}
	if got := b.remove(); got != 422 {
		t.Fatalf("DELETE outside the lie window: %d, want 422", got)
	}
	b.truthBusy()
	if lost := e.sim.LostJobs(); len(lost) != 0 {
		t.Fatalf("LostJobs after a refused removal: %+v", lost)
	}
	if n := e.sim.BusyLiesTold(); n != 3 {
		t.Fatalf("BusyLiesTold = %d after the lag, want still 3", n)
	}
}

// TestBusyLieFlickersMidJob: past the lag REST says busy: false for FlickerFor
// once in every FlickerEvery, in one stretch, and busy otherwise, while the
// truth stays busy; the same seed gives the same answers.
func TestBusyLieFlickersMidJob(t *testing.T) {
	t.Parallel()
	lie := githubsim.BusyLie{MinLag: 5 * time.Second, MaxLag: 5 * time.Second, FlickerEvery: 10 * time.Second, FlickerFor: 2 * time.Second, Seed: 42}
	sample := func() []bool { // REST's busy every 100 ms from 10 s to 70 s after the assignment
		e := newAgentEnv(t)
		if err := e.sim.SetBusyLie(&lie); err != nil {
			t.Fatal(err)
		}
		b := takeJob(e)
		e.clock.Step(10 * time.Second)
		var out []bool
		for range 600 {
			out = append(out, b.restBusy())
			b.truthBusy()
			e.clock.Step(100 * time.Millisecond)
		}
		return out
	}
	first := sample()
	for period := range 6 {
		s := first[period*100 : (period+1)*100]
		idle, stretches := 0, 0
		for i, busy := range s {
			if !busy {
				idle++
				if i == 0 || s[i-1] {
					stretches++
				}
			}
		}
		// A half-open window of 2 s holds exactly 20 samples 100 ms apart; one
		// cut by the period's end would show as two stretches.
		if idle != 20 || stretches != 1 {
			t.Fatalf("period %d after the lag: busy: false at %d samples in %d stretches, want 20 in 1 (%v)", period+1, idle, stretches, s)
		}
	}
	if again := sample(); strings.Join(boolStrings(again), "") != strings.Join(boolStrings(first), "") {
		t.Fatal("the same seed, job and clock gave other answers")
	}
}

func boolStrings(bs []bool) []string {
	out := make([]string, len(bs))
	for i, b := range bs {
		out[i] = "0"
		if b {
			out[i] = "1"
		}
	}
	return out
}

// TestRemovalInLieWindowLosesJob: DELETE of a runner whose job REST still shows
// idle answers 204; the job fails as GitHub fails it (lost runner, its message
// naming the runner), its completed delivery names the runner, LostJobs has it,
// and the runner agent learns its runner is gone.
func TestRemovalInLieWindowLosesJob(t *testing.T) {
	t.Parallel()
	e := newAgentEnv(t)
	var mu sync.Mutex
	var completed []map[string]any
	e.sim.OnDelivery(func(_, _ string, payload []byte) int {
		var p map[string]any
		if err := json.Unmarshal(payload, &p); err != nil {
			t.Errorf("delivery: %v", err)
		}
		if p["action"] == "completed" {
			mu.Lock()
			completed = append(completed, p)
			mu.Unlock()
		}
		return 200
	})
	if err := e.sim.SetBusyLie(&githubsim.BusyLie{MinLag: 25 * time.Second, MaxLag: 60 * time.Second, Seed: 7}); err != nil {
		t.Fatal(err)
	}
	b := takeJob(e)
	e.clock.Step(24 * time.Second) // within any lag in [25 s, 60 s]
	if got := b.remove(); got != 204 {
		t.Fatalf("DELETE in the lie window: %d, want 204", got)
	}
	if _, ok := e.sim.Runner(b.id); ok {
		t.Fatal("the runner is still registered after a 204")
	}
	if n := e.sim.BusyLiesTold(); n != 1 {
		t.Fatalf("BusyLiesTold = %d after a DELETE of a busy runner, want 1", n)
	}
	j := e.sim.Jobs()[b.job.ID-1]
	if j.State != githubsim.JobCompleted || j.Conclusion != githubsim.JobFailure || !j.LostRunner ||
		!strings.Contains(j.FailureReason, "The self-hosted runner: p lost communication with the server") || !j.EndedAt.Equal(t0.Add(24*time.Second)) {
		t.Fatalf("the job after its runner's removal: %+v", j)
	}
	if lost := e.sim.LostJobs(); len(lost) != 1 || lost[0].ID != b.job.ID || lost[0].RunnerName != "p" {
		t.Fatalf("LostJobs: %+v", lost)
	}
	mu.Lock()
	if len(completed) != 1 {
		t.Fatalf("completed deliveries: %v, want one", completed)
	}
	wj := completed[0]["workflow_job"].(map[string]any)
	mu.Unlock()
	if wj["conclusion"] != "failure" || wj["runner_name"] != "p" || wj["id"] != float64(b.job.ID) {
		t.Fatalf("completed delivery: %v", wj)
	}
	if _, code := e.poll(b.cred, b.sid, "0s"); code != 410 {
		t.Fatalf("the agent's poll after the removal: %d, want 410", code)
	}
	if got := e.result(b.job, "success"); got != 410 {
		t.Fatalf("the worker's result after the removal: %d, want 410", got)
	}
	if j := e.sim.Jobs()[b.job.ID-1]; j.Conclusion != githubsim.JobFailure || !j.LostRunner {
		t.Fatalf("a late result changed the lost job: %+v", j)
	}
}

// TestSetRESTBusyForcesTheView: with the lie off, SetRESTBusy(false) on a runner
// running a job makes REST say idle and DELETE lose the job; ClearRESTBusy
// brings the truth back; SetRESTBusy(true) on an idle runner makes DELETE 422.
func TestSetRESTBusyForcesTheView(t *testing.T) {
	t.Parallel()
	e := newAgentEnv(t)
	b := takeJob(e)
	if !b.restBusy() {
		t.Fatal("with the lie off REST must tell the truth: busy")
	}
	if err := e.sim.SetRESTBusy(b.id, false); err != nil {
		t.Fatal(err)
	}
	if b.restBusy() {
		t.Fatal("SetRESTBusy(false): REST still says busy")
	}
	b.truthBusy()
	e.sim.ClearRESTBusy(b.id)
	if !b.restBusy() {
		t.Fatal("ClearRESTBusy: REST must say busy again")
	}
	if got := b.remove(); got != 422 {
		t.Fatalf("DELETE after ClearRESTBusy: %d, want 422", got)
	}
	if err := e.sim.SetRESTBusy(b.id, false); err != nil {
		t.Fatal(err)
	}
	if got := b.remove(); got != 204 {
		t.Fatalf("DELETE while forced idle: %d, want 204", got)
	}
	if lost := e.sim.LostJobs(); len(lost) != 1 || lost[0].ID != b.job.ID {
		t.Fatalf("LostJobs: %+v", lost)
	}
	if err := e.sim.SetRESTBusy(b.id, true); err == nil {
		t.Fatal("SetRESTBusy of a removed runner must fail")
	}

	idle, code := e.register(e.regToken("/orgs/acme"), map[string]any{"url": e.url + "/acme", "name": "q"})
	if code != 201 {
		t.Fatalf("register: %d", code)
	}
	if err := e.sim.SetRESTBusy(idle.Runner.AgentID, true); err != nil {
		t.Fatal(err)
	}
	if got := e.call("DELETE", "/orgs/acme/actions/runners/"+strconv.FormatInt(idle.Runner.AgentID, 10), "token "+pat, nil, nil).StatusCode; got != 422 {
		t.Fatalf("DELETE of an idle runner forced busy: %d, want 422", got)
	}
}

func TestBusyLieValidate(t *testing.T) {
	t.Parallel()
	for _, l := range []githubsim.BusyLie{
		{MinLag: 2 * time.Second, MaxLag: time.Second},
		{MinLag: -time.Second},
		{FlickerEvery: time.Second},
		{FlickerEvery: time.Second, FlickerFor: time.Second},
		{FlickerEvery: -time.Second, FlickerFor: time.Second},
	} {
		if err := githubsim.New(githubsim.Options{}).SetBusyLie(&l); err == nil {
			t.Errorf("SetBusyLie(%+v) accepted", l)
		}
	}
	if err := githubsim.New(githubsim.Options{}).SetBusyLie(&githubsim.BusyLie{MaxLag: time.Second, FlickerEvery: time.Second, FlickerFor: time.Millisecond}); err != nil {
		t.Fatal(err)
	}
}
