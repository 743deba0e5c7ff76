package githubsim_test

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strconv"
	"testing"
	"time"

	clocktesting "k8s.io/utils/clock/testing"

	"github.com/runnerscaler/runnerscaler/internal/scope"
	"github.com/runnerscaler/runnerscaler/local/githubsim"
)

const pat = "ghp_runnerapi"

// agentEnv is a simulator with a PAT, driven over HTTP like config.sh and run.sh.
type agentEnv struct {
	t     *testing.T
	sim   *githubsim.Server
	url   string
	clock *clocktesting.FakeClock
}

func newAgentEnv(t *testing.T) *agentEnv {
	t.Helper()
	clk := clocktesting.NewFakeClock(t0)
	sim := githubsim.New(githubsim.Options{PATs: []string{pat}, Clock: clk, SessionTimeout: 30 * time.Second})
	srv := httptest.NewServer(sim.Handler())
	t.Cleanup(srv.Close)
	return &agentEnv{t: t, sim: sim, url: srv.URL, clock: clk}
}

// call sends a JSON request and decodes a JSON answer into out (when not nil).
func (e *agentEnv) call(method, path, auth string, body, out any) *http.Response {
	e.t.Helper()
	var raw []byte
	if body != nil {
		var err error
		if raw, err = json.Marshal(body); err != nil {
			e.t.Fatal(err)
		}
	}
	req, err := http.NewRequestWithContext(e.t.Context(), method, e.url+path, bytes.NewReader(raw))
	if err != nil {
		e.t.Fatal(err)
	}
	req.Header.Set("Authorization", auth)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		e.t.Fatal(err)
	}
	defer resp.Body.Close()
	if out != nil && resp.StatusCode < 300 && resp.StatusCode != http.StatusNoContent {
		if err := json.NewDecoder(resp.Body).Decode(out); err != nil {
			e.t.Fatalf("%s %s: %v", method, path, err)
		}
	}
	return resp
}

func (e *agentEnv) regToken(scopePath string) string {
	e.t.Helper()
	var rt struct{ Token string }
	if resp := e.call("POST", scopePath+"/actions/runners/registration-token", "token "+pat, nil, &rt); resp.StatusCode != 201 {
		e.t.Fatalf("registration token: %d", resp.StatusCode)
	}
	return rt.Token
}

type registered struct {
	Runner struct {
		AgentID   int64  `json:"agentId"`
		AgentName string `json:"agentName"`
		ServerURL string `json:"serverUrl"`
		GitHubURL string `json:"gitHubUrl"`
		Ephemeral bool   `json:"ephemeral"`
	} `json:"runner"`
	Credentials struct {
		Scheme string            `json:"scheme"`
		Data   map[string]string `json:"data"`
	} `json:"credentials"`
}

func (e *agentEnv) register(token string, body map[string]any) (registered, int) {
	e.t.Helper()
	var out registered
	resp := e.call("POST", "/_runner/registrations", "RemoteAuth "+token, body, &out)
	return out, resp.StatusCode
}

// mustRegister is register for a registration that must succeed.
func (e *agentEnv) mustRegister(token string, body map[string]any) registered {
	e.t.Helper()
	reg, status := e.register(token, body)
	if status != http.StatusCreated {
		e.t.Fatalf("registration: %d, want 201", status)
	}
	return reg
}

type sessionOut struct {
	SessionID string `json:"session_id"`
	RunnerID  int64  `json:"runner_id"`
	Ephemeral bool   `json:"ephemeral"`
}

func (e *agentEnv) open(cred string, body any) (sessionOut, *http.Response) {
	e.t.Helper()
	var out sessionOut
	resp := e.call("POST", "/_runner/sessions", "Bearer "+cred, body, &out)
	return out, resp
}

// mustOpen is open for a session that must open.
func (e *agentEnv) mustOpen(cred string, body any) sessionOut {
	e.t.Helper()
	s, resp := e.open(cred, body)
	if resp.StatusCode != http.StatusCreated {
		e.t.Fatalf("session: %d, want 201", resp.StatusCode)
	}
	return s
}

type jobOut struct {
	ID       int64  `json:"id"`
	Duration string `json:"duration"`
	Script   string `json:"script"`
	Token    string `json:"token"`
}

func (e *agentEnv) poll(cred, sid, wait string) (jobOut, int) {
	e.t.Helper()
	var out jobOut
	resp := e.call("GET", "/_runner/sessions/"+sid+"/job?wait="+wait, "Bearer "+cred, nil, &out)
	return out, resp.StatusCode
}

func (e *agentEnv) result(j jobOut, conclusion string) int {
	e.t.Helper()
	return e.call("POST", "/_runner/jobs/"+strconv.FormatInt(j.ID, 10)+"/result", "Bearer "+j.Token,
		map[string]string{"conclusion": conclusion}, nil).StatusCode
}

func TestAgentRegistration(t *testing.T) {
	t.Parallel()
	e := newAgentEnv(t)
	e.sim.AddGroup(scope.Scope{Organization: "acme"}, "linux", nil)
	tok := e.regToken("/orgs/acme")
	reg, status := e.register(tok, map[string]any{"url": e.url + "/acme", "name": "r1", "labels": []string{"big"}, "runner_group": "linux"})
	if status != 201 || reg.Runner.AgentID == 0 || reg.Credentials.Data["token"] == "" || reg.Runner.ServerURL != e.url ||
		reg.Runner.GitHubURL != e.url+"/acme" {
		t.Fatalf("registration: %d %+v", status, reg)
	}
	rn, ok := e.sim.Runner(reg.Runner.AgentID)
	if !ok || rn.Online || rn.Registered || rn.GroupID != 2 || rn.Labels[len(rn.Labels)-1] != "big" {
		t.Fatalf("a configured runner exists, offline, in its group, with its labels: %+v", rn)
	}
	cases := []struct {
		name  string
		token string
		body  map[string]any
		want  int
	}{
		{"same name without --replace", tok, map[string]any{"url": e.url + "/acme", "name": "r1"}, 409},
		{"unknown token", "AABFbogus", map[string]any{"url": e.url + "/acme", "name": "r2"}, 401},
		{"token of another scope", tok, map[string]any{"url": e.url + "/other", "name": "r2"}, 401},
		{"unknown group", tok, map[string]any{"url": e.url + "/acme", "name": "r2", "runner_group": "gpu"}, 404},
		{"not a scope URL", tok, map[string]any{"url": e.url + "/a/b/c", "name": "r2"}, 404},
		{"no name", tok, map[string]any{"url": e.url + "/acme"}, 422},
	}
	for _, tc := range cases {
		if _, got := e.register(tc.token, tc.body); got != tc.want {
			t.Errorf("%s: %d, want %d", tc.name, got, tc.want)
		}
	}
	replaced, status := e.register(tok, map[string]any{"url": e.url + "/acme", "name": "r1", "replace": true})
	if status != 201 || replaced.Runner.AgentID == reg.Runner.AgentID {
		t.Fatalf("--replace: %d %+v", status, replaced)
	}
	if _, resp := e.open(reg.Credentials.Data["token"], nil); resp.StatusCode != 410 {
		t.Fatalf("the replaced runner's credential: %d, want 410 (deleted)", resp.StatusCode)
	}
	if _, resp := e.open("simcred_made_up", nil); resp.StatusCode != 401 {
		t.Fatalf("unknown credential: %d, want 401", resp.StatusCode)
	}
	e.clock.Step(time.Hour)
	if _, got := e.register(tok, map[string]any{"url": e.url + "/acme", "name": "r3"}); got != 401 {
		t.Fatalf("expired token: %d, want 401", got)
	}
}

// TestInjectedRegistrationStatus: an injected status fails the next
// registration, which registers nothing; the one after it registers.
func TestInjectedRegistrationStatus(t *testing.T) {
	t.Parallel()
	e := newAgentEnv(t)
	tok := e.regToken("/orgs/acme")
	e.sim.InjectRegistrationStatus(http.StatusBadGateway, 1)
	body := map[string]any{"url": e.url + "/acme", "name": "r1"}
	if _, status := e.register(tok, body); status != http.StatusBadGateway {
		t.Fatalf("registration: %d, want the injected 502", status)
	}
	if rs := e.sim.Runners(); len(rs) != 0 {
		t.Fatalf("runners %+v after a failed registration, want none", rs)
	}
	e.mustRegister(tok, body)
}

func TestAgentSessionOnlineOffline(t *testing.T) {
	t.Parallel()
	e := newAgentEnv(t)
	reg := e.mustRegister(e.regToken("/repos/acme/app"), map[string]any{"url": e.url + "/acme/app", "name": "p"})
	cred, id := reg.Credentials.Data["token"], reg.Runner.AgentID
	s, resp := e.open(cred, nil)
	if resp.StatusCode != 201 || s.RunnerID != id {
		t.Fatalf("session: %d %+v", resp.StatusCode, s)
	}
	if rn, ok := e.sim.Runner(id); !ok || !rn.Online || !rn.Registered {
		t.Fatalf("a session makes the runner online: %+v", rn)
	}
	if _, resp := e.open(cred, nil); resp.StatusCode != 409 || resp.Header.Get("Retry-After") != "30" {
		t.Fatalf("second session: %d Retry-After %q, want 409 and 30", resp.StatusCode, resp.Header.Get("Retry-After"))
	}
	if got := e.call("DELETE", "/_runner/sessions/"+s.SessionID, "Bearer "+cred, nil, nil).StatusCode; got != 204 {
		t.Fatalf("close: %d", got)
	}
	if rn, ok := e.sim.Runner(id); !ok || rn.Online {
		t.Fatalf("closing the session must make the runner offline: %+v %v", rn, ok)
	}
	if _, code := e.poll(cred, s.SessionID, "0s"); code != 404 {
		t.Fatalf("poll on a closed session: %d, want 404", code)
	}
	// A session nobody polls ends after the timeout.
	s = e.mustOpen(cred, nil)
	if _, code := e.poll(cred, s.SessionID, "0s"); code != 204 {
		t.Fatalf("empty poll: %d, want 204", code)
	}
	e.clock.Step(29 * time.Second)
	if rn, ok := e.sim.Runner(id); !ok || !rn.Online {
		t.Fatal("offline before the session timeout")
	}
	e.clock.Step(time.Second)
	if rn, ok := e.sim.Runner(id); !ok || rn.Online {
		t.Fatalf("still online after the session timeout with no poll: %+v %v", rn, ok)
	}
	if _, resp := e.open(cred, nil); resp.StatusCode != 201 {
		t.Fatalf("reconnecting after the timeout: %d", resp.StatusCode)
	}
}

func TestAgentJobLifecycle(t *testing.T) {
	t.Parallel()
	e := newAgentEnv(t)
	reg := e.mustRegister(e.regToken("/orgs/acme"), map[string]any{"url": e.url + "/acme", "name": "p", "labels": []string{"big"}})
	cred, id := reg.Credentials.Data["token"], reg.Runner.AgentID
	s := e.mustOpen(cred, nil)
	start := time.Now()
	if _, code := e.poll(cred, s.SessionID, "200ms"); code != 204 || time.Since(start) < 200*time.Millisecond {
		t.Fatalf("poll with no job: %d after %s, want 204 after the wait", code, time.Since(start))
	}
	other := e.sim.QueueJob(githubsim.JobSpec{Repository: "acme/app", Organization: "acme", Labels: []string{"gpu"}})
	go func() {
		time.Sleep(100 * time.Millisecond)
		e.sim.QueueJob(githubsim.JobSpec{Repository: "acme/app", Organization: "acme", Labels: []string{"self-hosted", "big"}, Duration: 90 * time.Second,
			Script: "echo hi; exit 3"})
	}()
	j, code := e.poll(cred, s.SessionID, "20s")
	if code != 200 || j.ID == other.ID || j.Duration != "1m30s" || j.Script != "echo hi; exit 3" || j.Token == "" {
		t.Fatalf("long-poll: %d %+v, want the matching job", code, j)
	}
	if time.Since(start) > 5*time.Second {
		t.Fatal("a queued job must wake the long-poll")
	}
	if running, ok := e.sim.RunningJob(id); !ok || running.ID != j.ID || running.RunnerName != "p" {
		t.Fatalf("RunningJob: %+v %v", running, ok)
	}
	if rs := e.sim.RunningJobs(); len(rs) != 1 || rs[0].ID != j.ID {
		t.Fatalf("RunningJobs: %+v", rs)
	}
	if rn, ok := e.sim.Runner(id); !ok || !rn.Busy {
		t.Fatal("the runner must be busy with its job")
	}
	if got := e.result(jobOut{ID: j.ID, Token: "simjob_forged"}, "success"); got != 401 {
		t.Fatalf("result with a forged token: %d, want 401", got)
	}
	if got := e.result(j, "maybe"); got != 422 {
		t.Fatalf("unknown conclusion: %d, want 422", got)
	}
	scriptStart := time.Date(2026, 12, 7, 12, 0, 0, 123456789, time.UTC)
	if got := e.call("POST", "/_runner/jobs/"+strconv.FormatInt(j.ID, 10)+"/result", "Bearer "+j.Token,
		map[string]any{"conclusion": "failure", "output": "hi\n", "exit_code": 3, "script_started_at": scriptStart}, nil).StatusCode; got != 204 {
		t.Fatalf("result: %d", got)
	}
	if got := e.result(j, "success"); got != 401 {
		t.Fatalf("second result: %d, want 401 (the job's token is spent)", got)
	}
	jobs := e.sim.Jobs()
	if done := jobs[j.ID-1]; done.State != githubsim.JobCompleted || done.Conclusion != githubsim.JobFailure || done.Output != "hi\n" || done.ExitCode != 3 ||
		!done.ScriptStartedAt.Equal(scriptStart) {
		t.Fatalf("job after its result: %+v (want the script's start %s recorded)", done, scriptStart)
	}
	if _, ok := e.sim.RunningJob(id); ok {
		t.Fatal("RunningJob after the result")
	}
	if rn, ok := e.sim.Runner(id); !ok || rn.Busy {
		t.Fatalf("a persistent runner stays, idle: %+v %v", rn, ok)
	}
	if got := e.call("DELETE", "/orgs/acme/actions/runners/"+strconv.FormatInt(id, 10), "token "+pat, nil, nil).StatusCode; got != 204 {
		t.Fatalf("remove: %d", got)
	}
	if _, code := e.poll(cred, s.SessionID, "1s"); code != 410 {
		t.Fatalf("poll of a removed runner: %d, want 410", code)
	}
}

func TestAgentJITConfig(t *testing.T) {
	t.Parallel()
	e := newAgentEnv(t)
	var jit struct {
		Runner  struct{ ID int64 }
		Encoded string `json:"encoded_jit_config"`
	}
	if resp := e.call("POST", "/orgs/acme/actions/runners/generate-jitconfig", "token "+pat,
		map[string]any{"name": "eph-1", "runner_group_id": 1, "labels": []string{"big"}}, &jit); resp.StatusCode != 201 {
		t.Fatalf("generate-jitconfig: %d", resp.StatusCode)
	}
	// The JIT config is base64 of the runner's files, each base64 of its JSON.
	var files map[string]string
	raw, err := base64.StdEncoding.DecodeString(jit.Encoded)
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(raw, &files); err != nil {
		t.Fatal(err)
	}
	var settings struct {
		AgentID   int64  `json:"agentId"`
		ServerURL string `json:"serverUrl"`
		Ephemeral bool   `json:"ephemeral"`
	}
	var creds struct{ Data map[string]string }
	for name, v := range map[string]any{".runner": &settings, ".credentials": &creds} {
		content, err := base64.StdEncoding.DecodeString(files[name])
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		if err := json.Unmarshal(content, v); err != nil {
			t.Fatalf("%s: %v", name, err)
		}
	}
	cred := creds.Data["token"]
	if settings.AgentID != jit.Runner.ID || settings.ServerURL != e.url || !settings.Ephemeral || cred == "" {
		t.Fatalf("JIT config content: %+v %v", settings, creds)
	}
	body := map[string]string{"jit_config": jit.Encoded}
	if _, resp := e.open("simcred_other", body); resp.StatusCode != 401 {
		t.Fatalf("JIT config with another credential: %d, want 401", resp.StatusCode)
	}
	s, resp := e.open(cred, body)
	if resp.StatusCode != 201 || !s.Ephemeral {
		t.Fatalf("session from the JIT config: %d %+v", resp.StatusCode, s)
	}
	if got := e.call("DELETE", "/_runner/sessions/"+s.SessionID, "Bearer "+cred, nil, nil).StatusCode; got != 204 {
		t.Fatalf("close: %d", got)
	}
	if _, resp := e.open(cred, body); resp.StatusCode != 401 {
		t.Fatalf("JIT config used twice: %d, want 401", resp.StatusCode)
	}
	if _, err := e.sim.Register(githubsim.Registration{JITConfig: jit.Encoded}); err == nil {
		t.Fatal("Register must refuse a used JIT config too")
	}
	s = e.mustOpen(cred, nil) // the credential itself works while the runner exists
	e.sim.QueueJob(githubsim.JobSpec{Repository: "acme/app", Organization: "acme", Labels: []string{"big"}})
	j, code := e.poll(cred, s.SessionID, "5s")
	if code != 200 || e.result(j, "success") != 204 {
		t.Fatalf("ephemeral job: %d", code)
	}
	if _, ok := e.sim.Runner(jit.Runner.ID); ok {
		t.Fatal("an ephemeral runner is deleted after its job")
	}
	if _, resp := e.open(cred, body); resp.StatusCode != 410 {
		t.Fatalf("spent JIT config after the job: %d, want 410", resp.StatusCode)
	}
	if _, resp := e.open(cred, nil); resp.StatusCode != 410 {
		t.Fatalf("spent credential after the job: %d, want 410", resp.StatusCode)
	}
}
