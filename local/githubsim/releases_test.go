package githubsim_test

import (
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/runnerscaler/runnerscaler/local/githubsim"
)

// errorMessage is the message of GitHub's error body.
func errorMessage(t *testing.T, resp *http.Response) string {
	t.Helper()
	var body struct{ Message string }
	raw, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(raw, &body); err != nil {
		t.Fatalf("error body %q: %v", raw, err)
	}
	return body.Message
}

// rawCall is call keeping the body unread.
func (e *agentEnv) rawCall(method, path, auth string, body any) *http.Response {
	e.t.Helper()
	var rd io.Reader
	if body != nil {
		raw, err := json.Marshal(body)
		if err != nil {
			e.t.Fatal(err)
		}
		rd = strings.NewReader(string(raw))
	}
	req, err := http.NewRequestWithContext(e.t.Context(), method, e.url+path, rd)
	if err != nil {
		e.t.Fatal(err)
	}
	req.Header.Set("Authorization", auth)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		e.t.Fatal(err)
	}
	e.t.Cleanup(func() { resp.Body.Close() })
	return resp
}

// TestRegistrationRefusedBelowTheMinimum: config.sh of a runner older than
// 2.329.0 gets GitHub's 404 and message, and no runner exists; 2.329.0 and a
// runner that reports no version register.
func TestRegistrationRefusedBelowTheMinimum(t *testing.T) {
	t.Parallel()
	e := newAgentEnv(t)
	tok := e.regToken("/orgs/acme")
	resp := e.rawCall("POST", "/_runner/registrations", "RemoteAuth "+tok,
		map[string]any{"url": e.url + "/acme", "name": "old", "version": "2.328.0"})
	want := "Your runner version is out of date and can no longer register with GitHub. " +
		"The minimum runner version required to register with GitHub Actions is now 2.329.0."
	if resp.StatusCode != http.StatusNotFound || errorMessage(t, resp) != want {
		t.Fatalf("registration of 2.328.0: %d; want 404 %q", resp.StatusCode, want)
	}
	if rs := e.sim.Runners(); len(rs) != 0 {
		t.Fatalf("a refused registration left runners: %+v", rs)
	}
	e.mustRegister(tok, map[string]any{"url": e.url + "/acme", "name": "minimum", "version": "2.329.0"})
	e.mustRegister(tok, map[string]any{"url": e.url + "/acme", "name": "silent"})
}

// TestOutdatedRunnerGetsNoJob: 30 days after the release that followed its
// version, a runner's polls are refused with the broker's 403 and message and
// it is given no job, while a runner of the latest release takes it; before
// that day it still gets jobs.
func TestOutdatedRunnerGetsNoJob(t *testing.T) {
	t.Parallel()
	e := newAgentEnv(t)
	e.sim.SetRunnerReleases(githubsim.RunnerRelease{Version: "2.331.0", PublishedAt: t0.Add(-40 * 24 * time.Hour)},
		githubsim.RunnerRelease{Version: "2.332.0", PublishedAt: t0.Add(-29 * 24 * time.Hour)})
	tok := e.regToken("/orgs/acme")
	oldReg := e.mustRegister(tok, map[string]any{"url": e.url + "/acme", "name": "old", "labels": []string{"big"}, "version": "2.330.0"})
	oldCred := oldReg.Credentials.Data["token"]
	old := e.mustOpen(oldCred, map[string]string{"runner_version": "2.330.0"})
	e.sim.QueueJob(githubsim.JobSpec{Repository: "acme/app", Organization: "acme", Labels: []string{"big"}})
	resp := e.rawCall("GET", "/_runner/sessions/"+old.SessionID+"/job?wait=0s", "Bearer "+oldCred, nil)
	want := "Forbidden Runner version v2.330.0 is deprecated and cannot receive messages."
	if resp.StatusCode != http.StatusForbidden || errorMessage(t, resp) != want {
		t.Fatalf("poll of 2.330.0, 2.331.0 out for 40 days: %d; want 403 %q", resp.StatusCode, want)
	}
	if rs := e.sim.RunningJobs(); len(rs) != 0 {
		t.Fatalf("the outdated runner got a job: %+v", rs)
	}
	// One release behind, within its 30 days: jobs still come.
	midReg := e.mustRegister(tok, map[string]any{"url": e.url + "/acme", "name": "mid", "labels": []string{"big"}, "version": "2.331.0"})
	midCred := midReg.Credentials.Data["token"]
	mid := e.mustOpen(midCred, map[string]string{"runner_version": "2.331.0"})
	if j, code := e.poll(midCred, mid.SessionID, "5s"); code != http.StatusOK || j.ID == 0 {
		t.Fatalf("poll of 2.331.0, 2.332.0 out for 29 days: %d %+v; want the job", code, j)
	}
	// A day later its grace is over (its runner reconnects: the session expired meanwhile).
	e.clock.Step(24 * time.Hour)
	again := e.mustOpen(midCred, map[string]string{"runner_version": "2.331.0"})
	if _, code := e.poll(midCred, again.SessionID, "0s"); code != http.StatusForbidden {
		t.Fatalf("poll of 2.331.0, 2.332.0 out for 30 days: %d; want 403", code)
	}
}
