// End-to-end tests of the fake runner without containers: the real
// runner/entrypoint.sh runs under bash on the host with RUNNER_HOME pointing at a
// directory laid out like the runner image (config.sh, run.sh, bin/Runner.Listener,
// bin/Runner.Worker), against an in-process GitHub simulator. The fake runner is
// this test binary itself (a copy the runner user can run), run under those names
// (see TestMain). The tests run as root, as the entrypoint does in a pod; it runs
// the runner as uid 1001 (RUNNER_USER=1001:1001: the host has no user runner).
package fakerunner_test

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	clocktesting "k8s.io/utils/clock/testing"

	"github.com/runnerscaler/runnerscaler/local/fakerunner"
	"github.com/runnerscaler/runnerscaler/local/githubsim"
)

// TestMain runs this binary as the fake runner when it is started under one of
// the runner's names.
func TestMain(m *testing.M) {
	switch filepath.Base(os.Args[0]) {
	case "config.sh", "run.sh", "Runner.Listener", "Runner.Worker":
		os.Exit(fakerunner.Main(fakerunner.Env{Args: os.Args, Getenv: os.Getenv, Stdin: os.Stdin, Stdout: os.Stdout, Stderr: os.Stderr}))
	}
	code := m.Run()
	if sharedDir != "" {
		_ = os.RemoveAll(sharedDir)
	}
	os.Exit(code)
}

// runnerUID is the runner user the entrypoint runs the fake runner as.
const runnerUID = 1001

// sharedDir holds a copy of this test binary that the runner user can run (the go
// command builds it in a directory only root can enter), and the runner homes.
var (
	sharedDir  string
	sharedOnce sync.Once
	sharedErr  error
	sharedExe  string
)

func shared(t *testing.T) (dir, exe string) {
	t.Helper()
	sharedOnce.Do(func() {
		if sharedDir, sharedErr = os.MkdirTemp("", "fakerunner-test-"); sharedErr != nil {
			return
		}
		if sharedErr = os.Chmod(sharedDir, 0o755); sharedErr != nil {
			return
		}
		var self string
		if self, sharedErr = os.Executable(); sharedErr != nil {
			return
		}
		var raw []byte
		if raw, sharedErr = os.ReadFile(self); sharedErr != nil {
			return
		}
		sharedExe = filepath.Join(sharedDir, "fakerunner.test")
		if sharedErr = os.WriteFile(sharedExe, raw, 0o755); sharedErr != nil {
			return
		}
		// The image's job hooks and probe, where the runner user can run them.
		if sharedErr = os.Mkdir(filepath.Join(sharedDir, "hooks"), 0o755); sharedErr != nil {
			return
		}
		for _, name := range []string{"runner-job-started.sh", "runner-job-completed.sh", "runner-job-running"} {
			if raw, sharedErr = os.ReadFile(filepath.Join("../../runner", name)); sharedErr != nil {
				return
			}
			if sharedErr = os.WriteFile(filepath.Join(sharedDir, "hooks", name), raw, 0o755); sharedErr != nil {
				return
			}
		}
	})
	if sharedErr != nil {
		t.Fatal(sharedErr)
	}
	return sharedDir, sharedExe
}

const pat = "ghp_fakerunner"

type env struct {
	t   *testing.T
	sim *githubsim.Server
	srv *httptest.Server
	url string
}

func newEnv(t *testing.T, opts githubsim.Options) *env {
	t.Helper()
	opts.PATs = []string{pat}
	sim := githubsim.New(opts)
	srv := httptest.NewServer(sim.Handler())
	t.Cleanup(srv.Close)
	return &env{t: t, sim: sim, srv: srv, url: srv.URL}
}

func (e *env) api(method, path string, body, out any) {
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
	req.Header.Set("Authorization", "token "+pat)
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		e.t.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode >= 300 {
		e.t.Fatalf("%s %s: %d", method, path, resp.StatusCode)
	}
	if out != nil {
		if err := json.NewDecoder(resp.Body).Decode(out); err != nil {
			e.t.Fatal(err)
		}
	}
}

func (e *env) registrationToken() string {
	var rt struct{ Token string }
	e.api("POST", "/orgs/acme/actions/runners/registration-token", nil, &rt)
	return rt.Token
}

func (e *env) jitConfig(name string) (int64, string) {
	var jit struct {
		Runner  struct{ ID int64 }
		Encoded string `json:"encoded_jit_config"`
	}
	e.api("POST", "/orgs/acme/actions/runners/generate-jitconfig", map[string]any{"name": name, "runner_group_id": 1, "labels": []string{"big"}}, &jit)
	return jit.Runner.ID, jit.Encoded
}

func (e *env) queue(d time.Duration) githubsim.Job {
	return e.sim.QueueJob(githubsim.JobSpec{Repository: "acme/app", Organization: "acme", Labels: []string{"self-hosted", "big"}, Duration: d})
}

func (e *env) job(id int64) githubsim.Job {
	for _, j := range e.sim.Jobs() {
		if j.ID == id {
			return j
		}
	}
	e.t.Fatalf("no job %d", id)
	return githubsim.Job{}
}

func (e *env) waitFor(what string, timeout time.Duration, cond func() bool) {
	e.t.Helper()
	deadline := time.Now().Add(timeout)
	for !cond() {
		if time.Now().After(deadline) {
			e.t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// runnerHome lays out a runner directory like the image's, the runner user's,
// every name a link to this test binary.
func runnerHome(t *testing.T) string {
	t.Helper()
	base, exe := shared(t)
	dir, err := os.MkdirTemp(base, "home-")
	if err != nil {
		t.Fatal(err)
	}
	if err := os.Mkdir(filepath.Join(dir, "bin"), 0o755); err != nil {
		t.Fatal(err)
	}
	for _, p := range []string{dir, filepath.Join(dir, "bin")} {
		if err := os.Chmod(p, 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.Chown(p, runnerUID, runnerUID); err != nil {
			t.Fatal(err)
		}
	}
	for _, name := range []string{"config.sh", "run.sh", "bin/Runner.Listener", "bin/Runner.Worker"} {
		if err := os.Symlink(exe, filepath.Join(dir, name)); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}

// proc is a process of the test: the entrypoint or one of the runner's scripts.
type proc struct {
	cmd  *exec.Cmd
	mu   sync.Mutex
	out  bytes.Buffer
	done chan struct{}
	code int
}

func (p *proc) Write(b []byte) (int, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.out.Write(b)
}

func (p *proc) output() string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.out.String()
}

func start(t *testing.T, name string, args []string, environ ...string) *proc {
	t.Helper()
	p := &proc{cmd: exec.Command(name, args...), done: make(chan struct{})}
	p.cmd.Env = append([]string{"PATH=" + os.Getenv("PATH")}, environ...)
	p.cmd.Stdout, p.cmd.Stderr = p, p
	p.cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true} // the cleanup kills the whole "container"
	if err := p.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() {
		err := p.cmd.Wait()
		var exit *exec.ExitError
		if errors.As(err, &exit) {
			p.code = exit.ExitCode()
		}
		close(p.done)
	}()
	t.Cleanup(func() {
		_ = syscall.Kill(-p.cmd.Process.Pid, syscall.SIGKILL)
		<-p.done
	})
	return p
}

func (p *proc) wait(t *testing.T, timeout time.Duration) int {
	t.Helper()
	select {
	case <-p.done:
		return p.code
	case <-time.After(timeout):
		t.Fatalf("%s did not exit within %s; output:\n%s", p.cmd.Path, timeout, p.output())
		return -1
	}
}

// entrypoint starts runner/entrypoint.sh in a "container" whose runner home is
// home, in a "pod" whose state directory (RUNNER_STATE_DIR, an emptyDir in a real
// pod) is state. The worker pattern is unique to the test, since tests run in
// parallel on one host.
func entrypoint(t *testing.T, e *env, home, state string, environ ...string) *proc {
	t.Helper()
	script, err := filepath.Abs("../../runner/entrypoint.sh")
	if err != nil {
		t.Fatal(err)
	}
	base, _ := shared(t)
	return start(t, "bash", []string{script}, append([]string{"HOME=" + home, "RUNNER_HOME=" + home, "RUNNER_STATE_DIR=" + state,
		fmt.Sprintf("RUNNER_USER=%d:%d", runnerUID, runnerUID),
		"GITHUB_URL=" + e.url, "RUNNER_WORKER_PATTERN=" + filepath.Join(home, "bin", "Runner.Worker"),
		"RUNNER_HOOKS_DIR=" + filepath.Join(base, "hooks"), "RUNNER_JOB_DIR=" + jobDir(home)}, environ...)...)
}

// jobDir is the job hooks' directory of the runner whose home is home.
func jobDir(home string) string { return home + "-job" }

// probe runs the readiness probe of the runner whose home is home, as the
// kubelet does (as root, in the container's environment): true when it says a
// job runs.
func probe(t *testing.T, home string) bool {
	t.Helper()
	base, _ := shared(t)
	cmd := exec.Command(filepath.Join(base, "hooks", "runner-job-running"))
	cmd.Env = []string{"PATH=" + os.Getenv("PATH"), "RUNNER_JOB_DIR=" + jobDir(home),
		"RUNNER_WORKER_PATTERN=" + filepath.Join(home, "bin", "Runner.Worker")}
	err := cmd.Run()
	var exit *exec.ExitError
	if err != nil && !errors.As(err, &exit) {
		t.Fatal(err)
	}
	return err == nil
}

func assertNoSecrets(t *testing.T, out string, secrets ...string) {
	t.Helper()
	for _, s := range secrets {
		if s != "" && strings.Contains(out, s) {
			t.Fatalf("the output shows a secret:\n%s", out)
		}
	}
}

func credentialOf(t *testing.T, home string) string {
	t.Helper()
	raw, err := os.ReadFile(filepath.Join(home, ".credentials"))
	if err != nil {
		t.Fatal(err)
	}
	var c struct{ Data map[string]string }
	if err := json.Unmarshal(raw, &c); err != nil {
		t.Fatal(err)
	}
	return c.Data["token"]
}

func TestJITEphemeralRunnerTakesOneJobThenItsConfigIsSpent(t *testing.T) {
	t.Parallel()
	e := newEnv(t, githubsim.Options{})
	id, jit := e.jitConfig("eph-1")
	j := e.queue(300 * time.Millisecond)
	home := runnerHome(t)
	p := entrypoint(t, e, home, t.TempDir(), "ACTIONS_RUNNER_INPUT_JITCONFIG="+jit)
	if code := p.wait(t, 20*time.Second); code != 0 {
		t.Fatalf("exit %d, want 0 after the ephemeral job; output:\n%s", code, p.output())
	}
	if got := e.job(j.ID); got.State != githubsim.JobCompleted || got.Conclusion != githubsim.JobSuccess || got.RunnerID != id {
		t.Fatalf("job: %+v", got)
	}
	if _, ok := e.sim.Runner(id); ok {
		t.Fatal("GitHub deletes an ephemeral runner after its job")
	}
	for _, f := range []string{".runner", ".credentials"} {
		if _, err := os.Stat(filepath.Join(home, f)); err != nil {
			t.Fatalf("run.sh keeps the JIT config's %s in its root directory like the real runner: %v", f, err)
		}
	}
	cred := credentialOf(t, home)
	assertNoSecrets(t, p.output(), jit, cred)
	if !strings.Contains(p.output(), "Running job: job-1") || !strings.Contains(p.output(), "completed with result: Succeeded") {
		t.Fatalf("the listener logs its job:\n%s", p.output())
	}

	// Another pod with the same JIT config (a restarted container of the same pod
	// never starts the runner again: the entrypoint's marker in RUNNER_STATE_DIR).
	again := entrypoint(t, e, runnerHome(t), t.TempDir(), "ACTIONS_RUNNER_INPUT_JITCONFIG="+jit)
	if code := again.wait(t, 20*time.Second); code == 0 || !strings.Contains(again.output(), "registration has been deleted") {
		t.Fatalf("a spent JIT config: exit %d, output:\n%s\nwant non-zero and a clear message", code, again.output())
	}
	assertNoSecrets(t, again.output(), jit, cred)
	// Or run.sh from the saved .runner/.credentials.
	rerun := start(t, filepath.Join(home, "run.sh"), nil)
	if code := rerun.wait(t, 20*time.Second); code != 1 || !strings.Contains(rerun.output(), "registration has been deleted") {
		t.Fatalf("spent credentials: exit %d, output:\n%s", code, rerun.output())
	}
}

// TestJITConfigIsSingleUse: run.sh started from a JIT config (the variable, as
// actions/runner reads it) presents it when it connects; the simulator refuses it
// the second time. (The entrypoint writes the JIT config's files instead, so its
// run.sh connects as a configured runner: a restarted container is kept from
// running twice by its run-once marker.)
func TestJITConfigIsSingleUse(t *testing.T) {
	t.Parallel()
	e := newEnv(t, githubsim.Options{})
	_, jit := e.jitConfig("eph-2")
	first := start(t, filepath.Join(runnerHome(t), "run.sh"), nil, "ACTIONS_RUNNER_INPUT_JITCONFIG="+jit)
	e.waitFor("the runner online", 10*time.Second, func() bool { return strings.Contains(first.output(), "listening for Jobs") })
	_ = first.cmd.Process.Signal(syscall.SIGTERM)
	first.wait(t, 10*time.Second)
	second := start(t, filepath.Join(runnerHome(t), "run.sh"), nil, "ACTIONS_RUNNER_INPUT_JITCONFIG="+jit)
	if code := second.wait(t, 20*time.Second); code != 1 || !strings.Contains(second.output(), "JIT config is invalid, expired or was already used") {
		t.Fatalf("a used JIT config: exit %d, output:\n%s", code, second.output())
	}
}

func TestPersistentRunnerTakesJobsUntilSIGTERM(t *testing.T) {
	t.Parallel()
	e := newEnv(t, githubsim.Options{})
	tok := e.registrationToken()
	home, state := runnerHome(t), t.TempDir()
	environ := []string{"RUNNER_TOKEN=" + tok, "RUNNER_ORG=acme", "RUNNER_NAME=persistent-1", "RUNNER_LABELS=big",
		"RUNNER_EPHEMERAL=false", "RUNNER_GRACEFUL_STOP_TIMEOUT=20"}
	p := entrypoint(t, e, home, state, environ...)
	j1, j2 := e.queue(200*time.Millisecond), e.queue(200*time.Millisecond)
	e.waitFor("both jobs completed", 20*time.Second, func() bool {
		return e.job(j1.ID).State == githubsim.JobCompleted && e.job(j2.ID).State == githubsim.JobCompleted
	})
	rs := e.sim.Runners()
	if len(rs) != 1 || rs[0].Name != "persistent-1" || !rs[0].Online || rs[0].Busy {
		t.Fatalf("runners %+v: want one online persistent runner", rs)
	}
	rn := rs[0]
	for _, j := range []githubsim.Job{e.job(j1.ID), e.job(j2.ID)} {
		if j.RunnerID != rn.ID || j.Conclusion != githubsim.JobSuccess {
			t.Fatalf("job %+v: want it run to success by runner %d; output:\n%s", j, rn.ID, p.output())
		}
	}
	if fi, err := os.Stat(filepath.Join(home, ".credentials")); err != nil || fi.Mode().Perm() != 0o600 {
		t.Fatalf(".credentials: %v %v, want mode 0600", fi, err)
	}
	// SIGTERM while idle: the entrypoint forwards it at once and the runner disconnects.
	stop := time.Now()
	_ = p.cmd.Process.Signal(syscall.SIGTERM)
	if code := p.wait(t, 10*time.Second); code != 143 || time.Since(stop) > 3*time.Second {
		t.Fatalf("exit %d after %s, want 143 promptly; output:\n%s", code, time.Since(stop), p.output())
	}
	if strings.Contains(p.output(), "waiting up to") {
		t.Fatalf("an idle runner must not wait for a job:\n%s", p.output())
	}
	if rn, ok := e.sim.Runner(rn.ID); !ok || rn.Online {
		t.Fatalf("after SIGTERM the runner stays registered, offline: %+v %v", rn, ok)
	}
	assertNoSecrets(t, p.output(), tok, credentialOf(t, home))

	// The container restarts (a fresh runner home, the pod's state directory): the
	// runner resumes its registration from .runner/.credentials and takes jobs.
	again := entrypoint(t, e, runnerHome(t), state, environ...)
	j3 := e.queue(0)
	e.waitFor("the third job", 20*time.Second, func() bool { return e.job(j3.ID).State == githubsim.JobCompleted })
	if got := e.job(j3.ID); got.RunnerID != rn.ID || len(e.sim.Runners()) != 1 {
		t.Fatalf("job %+v, runners %+v: want the same runner", got, e.sim.Runners())
	}
	// Removed on GitHub while idle: the runner stops with a clear message.
	e.api("DELETE", "/orgs/acme/actions/runners/"+strconv.FormatInt(rn.ID, 10), nil, nil)
	if code := again.wait(t, 10*time.Second); code != 1 || !strings.Contains(again.output(), "registration has been deleted") {
		t.Fatalf("runner removed: exit %d, output:\n%s", code, again.output())
	}
}

func TestSIGTERMLetsAShortJobFinish(t *testing.T) {
	t.Parallel()
	e := newEnv(t, githubsim.Options{})
	id, jit := e.jitConfig("eph-3")
	j := e.queue(2 * time.Second)
	p := entrypoint(t, e, runnerHome(t), t.TempDir(), "ACTIONS_RUNNER_INPUT_JITCONFIG="+jit, "RUNNER_GRACEFUL_STOP_TIMEOUT=20")
	e.waitFor("the job running", 10*time.Second, func() bool { _, ok := e.sim.RunningJob(id); return ok })
	started := time.Now()
	_ = p.cmd.Process.Signal(syscall.SIGTERM)
	if code := p.wait(t, 25*time.Second); code != 143 {
		t.Fatalf("exit %d; output:\n%s", code, p.output())
	}
	if got := e.job(j.ID); got.State != githubsim.JobCompleted || got.Conclusion != githubsim.JobSuccess {
		t.Fatalf("job %+v: a job shorter than the grace period completes, not cancelled; output:\n%s", got, p.output())
	}
	if time.Since(started) > 10*time.Second || !strings.Contains(p.output(), "waiting up to 20s") {
		t.Fatalf("after %s, output:\n%s\nwant the entrypoint to wait for Runner.Worker, then stop", time.Since(started), p.output())
	}
}

func TestSIGTERMAfterTheGraceCancelsTheJob(t *testing.T) {
	t.Parallel()
	e := newEnv(t, githubsim.Options{})
	id, jit := e.jitConfig("eph-4")
	j := e.queue(time.Minute)
	p := entrypoint(t, e, runnerHome(t), t.TempDir(), "ACTIONS_RUNNER_INPUT_JITCONFIG="+jit, "RUNNER_GRACEFUL_STOP_TIMEOUT=1")
	e.waitFor("the job running", 10*time.Second, func() bool { _, ok := e.sim.RunningJob(id); return ok })
	_ = p.cmd.Process.Signal(syscall.SIGTERM)
	if code := p.wait(t, 15*time.Second); code != 143 {
		t.Fatalf("exit %d; output:\n%s", code, p.output())
	}
	if got := e.job(j.ID); got.State != githubsim.JobCompleted || got.Conclusion != githubsim.JobCancelled {
		t.Fatalf("job %+v: the runner reports the job it had to stop as cancelled; output:\n%s", got, p.output())
	}
	if _, ok := e.sim.Runner(id); ok {
		t.Fatal("an ephemeral runner whose job ended (cancelled) is deleted")
	}
}

func TestSIGTERMIdleJITRunnerExitsPromptly(t *testing.T) {
	t.Parallel()
	e := newEnv(t, githubsim.Options{})
	id, jit := e.jitConfig("eph-5")
	p := entrypoint(t, e, runnerHome(t), t.TempDir(), "ACTIONS_RUNNER_INPUT_JITCONFIG="+jit, "RUNNER_GRACEFUL_STOP_TIMEOUT=30")
	e.waitFor("the runner online", 10*time.Second, func() bool { rn, _ := e.sim.Runner(id); return rn.Online })
	stop := time.Now()
	_ = p.cmd.Process.Signal(syscall.SIGTERM)
	if code := p.wait(t, 10*time.Second); code != 143 || time.Since(stop) > 3*time.Second {
		t.Fatalf("exit %d after %s, want 143 promptly; output:\n%s", code, time.Since(stop), p.output())
	}
	if rn, ok := e.sim.Runner(id); !ok || rn.Online {
		t.Fatalf("runner %+v %v: registered (never ran a job) and offline", rn, ok)
	}
}

// TestSIGTERMAsAJobIsHandedOver: an idle runner is told to stop (the sweeper
// deletes the pod of a runner every signal says is idle) just as GitHub hands it
// a job. The entrypoint sees the listener take it ("Running job", before its
// worker starts) or looks for a job for its settling time before it stops the
// listener, so the job is run to completion: neither cancelled (stopped as its
// worker starts) nor left to another runner.
func TestSIGTERMAsAJobIsHandedOver(t *testing.T) {
	t.Parallel()
	e := newEnv(t, githubsim.Options{})
	id, jit := e.jitConfig("eph-6")
	p := entrypoint(t, e, runnerHome(t), t.TempDir(), "ACTIONS_RUNNER_INPUT_JITCONFIG="+jit, "RUNNER_GRACEFUL_STOP_TIMEOUT=30")
	e.waitFor("the runner online", 10*time.Second, func() bool { rn, _ := e.sim.Runner(id); return rn.Online })
	job := e.sim.QueueJob(githubsim.JobSpec{Repository: "acme/app", Organization: "acme", Labels: []string{"self-hosted"}, Duration: time.Second})
	_ = p.cmd.Process.Signal(syscall.SIGTERM) // as the job is handed over: its worker not started yet
	if code := p.wait(t, 20*time.Second); code != 143 {
		t.Fatalf("exit %d, want 143; output:\n%s", code, p.output())
	}
	for _, j := range e.sim.Jobs() {
		if j.ID == job.ID && (j.State != githubsim.JobCompleted || j.Conclusion != githubsim.JobSuccess) {
			t.Fatalf("job %+v: want it completed successfully; output:\n%s", j, p.output())
		}
	}
}

func TestConfigFailures(t *testing.T) {
	t.Parallel()
	clk := clocktesting.NewFakeClock(time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC))
	e := newEnv(t, githubsim.Options{Clock: clk})
	tok := e.registrationToken()
	config := func(home string, args ...string) *proc {
		return start(t, filepath.Join(home, "config.sh"), append([]string{"--unattended", "--url", e.url + "/acme", "--name", "c-1"}, args...),
			"ACTIONS_RUNNER_INPUT_TOKEN="+tok)
	}
	home := runnerHome(t)
	if p := config(home, "--labels", "big,gpu", "--ephemeral"); p.wait(t, 10*time.Second) != 0 {
		t.Fatalf("config.sh: %s", p.output())
	}
	if rn := e.sim.Runners(); len(rn) != 1 || rn[0].Name != "c-1" || !rn[0].Ephemeral || rn[0].Online ||
		strings.Join(rn[0].Labels, ",") != "self-hosted,Linux,X64,big,gpu" {
		t.Fatalf("registered runners: %+v", rn)
	}
	cases := []struct {
		name string
		home string
		args []string
		want string
	}{
		{"already configured", home, nil, "already configured"},
		{"same name without --replace", runnerHome(t), nil, "same name"},
		{"unknown runner group", runnerHome(t), []string{"--replace", "--runnergroup", "gpu"}, "no such runner group"},
		{"invalid token", runnerHome(t), []string{"--replace", "--token", "AABFbogus"}, "invalid or has expired"},
	}
	for _, tc := range cases {
		p := config(tc.home, tc.args...)
		if code := p.wait(t, 10*time.Second); code != 1 || !strings.Contains(p.output(), tc.want) {
			t.Errorf("%s: exit %d, output:\n%s\nwant 1 and %q", tc.name, code, p.output(), tc.want)
		}
		assertNoSecrets(t, p.output(), tok)
	}
	clk.Step(2 * time.Hour)
	fresh := runnerHome(t)
	p := config(fresh, "--replace")
	if code := p.wait(t, 10*time.Second); code != 1 || !strings.Contains(p.output(), "invalid or has expired") {
		t.Fatalf("expired token: exit %d, output:\n%s", code, p.output())
	}
	if _, err := os.Stat(filepath.Join(fresh, ".runner")); err == nil {
		t.Fatal("a failed configuration must not leave .runner behind")
	}
	if p := start(t, filepath.Join(fresh, "run.sh"), nil); p.wait(t, 10*time.Second) != 1 || !strings.Contains(p.output(), "Not configured") {
		t.Fatalf("run.sh unconfigured: %s", p.output())
	}
}

func TestUnreachableGitHubIsRetriedUntilSIGTERM(t *testing.T) {
	t.Parallel()
	e := newEnv(t, githubsim.Options{})
	_, jit := e.jitConfig("eph-6")
	e.srv.Close()
	p := start(t, filepath.Join(runnerHome(t), "run.sh"), nil, "ACTIONS_RUNNER_INPUT_JITCONFIG="+jit)
	e.waitFor("a retry", 10*time.Second, func() bool { return strings.Contains(p.output(), "Retrying until reconnected") })
	_ = p.cmd.Process.Signal(syscall.SIGINT)
	if code := p.wait(t, 5*time.Second); code != 0 || !strings.Contains(p.output(), "Received SIGINT") {
		t.Fatalf("exit %d, output:\n%s\nwant 0 after SIGINT", code, p.output())
	}
	assertNoSecrets(t, p.output(), jit)
}

// TestJobScript: a job's script runs with /bin/sh as the runner user (run.sh's,
// here uid 1001 under the entrypoint started as root), in an environment without
// the runner's inputs; its output and exit code come back with the result, a
// failing script fails the job, and nothing of it reaches the runner's log.
func TestJobScript(t *testing.T) {
	t.Parallel()
	e := newEnv(t, githubsim.Options{})
	tok := e.registrationToken()
	home := runnerHome(t)
	p := entrypoint(t, e, home, t.TempDir(), "RUNNER_TOKEN="+tok, "RUNNER_ORG=acme", "RUNNER_NAME=script-1", "RUNNER_LABELS=big",
		"RUNNER_EPHEMERAL=false")
	spec := githubsim.JobSpec{Repository: "acme/app", Organization: "acme", Labels: []string{"big"}}
	spec.Script = `echo "uid $(id -u)"; env | grep -c ACTIONS_RUNNER_INPUT_; echo to-stderr >&2; exit 0`
	ok := e.sim.QueueJob(spec)
	spec.Script = "echo failing; exit 3"
	failing := e.sim.QueueJob(spec)
	e.waitFor("both jobs", 20*time.Second, func() bool {
		return e.job(ok.ID).State == githubsim.JobCompleted && e.job(failing.ID).State == githubsim.JobCompleted
	})
	if got := e.job(ok.ID); got.Conclusion != githubsim.JobSuccess || got.ExitCode != 0 || got.Output != "uid 1001\n0\nto-stderr\n" {
		t.Fatalf("job %+v: want success with the script's output, run as uid 1001 without runner inputs", got)
	}
	// The script's start (the job's first step) comes back with the result:
	// within the job, on this machine's clock.
	for _, id := range []int64{ok.ID, failing.ID} {
		if got := e.job(id); got.ScriptStartedAt.Before(got.StartedAt) || got.ScriptStartedAt.After(got.EndedAt) {
			t.Fatalf("job %d: script started at %s, want within the job (%s – %s)", id, got.ScriptStartedAt, got.StartedAt, got.EndedAt)
		}
	}
	if got := e.job(failing.ID); got.Conclusion != githubsim.JobFailure || got.ExitCode != 3 || got.Output != "failing\n" {
		t.Fatalf("job %+v: want failure, exit code 3", got)
	}
	_ = p.cmd.Process.Signal(syscall.SIGTERM)
	if code := p.wait(t, 10*time.Second); code != 143 {
		t.Fatalf("exit %d; output:\n%s", code, p.output())
	}
	if strings.Contains(p.output(), "to-stderr") || strings.Contains(p.output(), "failing\n") {
		t.Fatalf("a job's output reached the runner's log:\n%s", p.output())
	}
	assertNoSecrets(t, p.output(), tok)
}

// TestJobHooksAndProbe: the worker runs the job hooks as actions/runner does, in
// the job's environment; ours keep the marker the probe reads, and the pool's own
// hooks (set in the template) still run, after ours. The probe answers "no job"
// before and after the job, "a job" during it.
func TestJobHooksAndProbe(t *testing.T) {
	t.Parallel()
	e := newEnv(t, githubsim.Options{})
	tok := e.registrationToken()
	base, _ := shared(t)
	home := runnerHome(t)
	logDir := filepath.Join(home, "_hooks") // the runner user's
	if err := os.Mkdir(logDir, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Chown(logDir, runnerUID, runnerUID); err != nil {
		t.Fatal(err)
	}
	userHook := func(name string) string {
		p := filepath.Join(base, filepath.Base(home)+"-"+name+".sh")
		body := "if [ -e \"$RUNNER_JOB_DIR/job\" ]; then m=yes; else m=no; fi\necho \"" + name + " marker=$m\" >> " + logDir + "/order\n"
		if err := os.WriteFile(p, []byte(body), 0o755); err != nil {
			t.Fatal(err)
		}
		return p
	}
	p := entrypoint(t, e, home, t.TempDir(), "RUNNER_TOKEN="+tok, "RUNNER_ORG=acme", "RUNNER_NAME=hooks-1", "RUNNER_LABELS=big",
		"RUNNER_EPHEMERAL=false", "ACTIONS_RUNNER_HOOK_JOB_STARTED="+userHook("user-started"),
		"ACTIONS_RUNNER_HOOK_JOB_COMPLETED="+userHook("user-completed"))
	e.waitFor("the runner online", 10*time.Second, func() bool { rs := e.sim.Runners(); return len(rs) == 1 && rs[0].Online })
	if probe(t, home) {
		t.Fatalf("the probe reports a job before any; output:\n%s", p.output())
	}
	spec := githubsim.JobSpec{Repository: "acme/app", Organization: "acme", Labels: []string{"big"}, Duration: 1500 * time.Millisecond}
	spec.Script = "if [ -e \"$RUNNER_JOB_DIR/job\" ]; then m=yes; else m=no; fi; echo \"script marker=$m\" >> " + logDir + "/order"
	j := e.sim.QueueJob(spec)
	e.waitFor("the job running", 10*time.Second, func() bool { return e.job(j.ID).State == githubsim.JobInProgress })
	e.waitFor("the probe to report the job", 5*time.Second, func() bool { return probe(t, home) })
	e.waitFor("the job completed", 10*time.Second, func() bool { return e.job(j.ID).State == githubsim.JobCompleted })
	if got := e.job(j.ID); got.Conclusion != githubsim.JobSuccess || got.Output != "" {
		t.Fatalf("job %+v: want success, and no output from our hooks", got)
	}
	if probe(t, home) {
		t.Fatalf("the probe reports a job after it completed (the worker is gone and the completed hook ran); output:\n%s", p.output())
	}
	raw, _ := os.ReadFile(filepath.Join(logDir, "order"))
	if want := "user-started marker=yes\nscript marker=yes\nuser-completed marker=no\n"; string(raw) != want {
		t.Fatalf("hooks and script ran as:\n%s\nwant:\n%s(ours record first, then the pool's run); output:\n%s", raw, want, p.output())
	}
	if !strings.Contains(p.output(), "the pool's job-started hook") {
		t.Fatalf("the entrypoint does not say the pool's hooks run after ours:\n%s", p.output())
	}
	_ = p.cmd.Process.Signal(syscall.SIGTERM)
	if code := p.wait(t, 10*time.Second); code != 143 {
		t.Fatalf("exit %d; output:\n%s", code, p.output())
	}
}

// TestSIGTERMTakesNoJobAfterTheRunningOne: a persistent runner gets SIGTERM
// during a job while another job is queued for it. The job completes; the
// listener, held from the job's completed hook until its worker exited, never
// takes the queued job; no job is cancelled.
func TestSIGTERMTakesNoJobAfterTheRunningOne(t *testing.T) {
	t.Parallel()
	e := newEnv(t, githubsim.Options{})
	tok := e.registrationToken()
	home := runnerHome(t)
	p := entrypoint(t, e, home, t.TempDir(), "RUNNER_TOKEN="+tok, "RUNNER_ORG=acme", "RUNNER_NAME=stop-1", "RUNNER_LABELS=big",
		"RUNNER_EPHEMERAL=false", "RUNNER_GRACEFUL_STOP_TIMEOUT=20")
	first := e.queue(1500 * time.Millisecond)
	e.waitFor("the first job running", 10*time.Second, func() bool { return e.job(first.ID).State == githubsim.JobInProgress })
	second := e.queue(200 * time.Millisecond)
	_ = p.cmd.Process.Signal(syscall.SIGTERM)
	if code := p.wait(t, 25*time.Second); code != 143 {
		t.Fatalf("exit %d; output:\n%s", code, p.output())
	}
	if got := e.job(first.ID); got.State != githubsim.JobCompleted || got.Conclusion != githubsim.JobSuccess {
		t.Fatalf("first job %+v: want it completed; output:\n%s", got, p.output())
	}
	if got := e.job(second.ID); got.State != githubsim.JobQueued || got.RunnerID != 0 {
		t.Fatalf("second job %+v: the stopping runner took it; output:\n%s", got, p.output())
	}
	for _, j := range e.sim.Jobs() {
		if j.Conclusion == githubsim.JobCancelled {
			t.Fatalf("job %+v cancelled; output:\n%s", j, p.output())
		}
	}
	out := p.output()
	if !strings.Contains(out, "holding the listener") || !strings.Contains(out, "remaining window: 0 ms") {
		t.Fatalf("the entrypoint did not hold the listener from the completed hook:\n%s", out)
	}
	logWindow(t, out)
}

// TestSIGTERMWithoutHooksSaysSoWhenItTakesAJob: without the job hooks (an image
// without them), the entrypoint can only poll for the worker's exit; the listener
// may take the queued job in the window that remains. That job is not lost
// silently: the entrypoint says so and lets it finish within the grace period.
// The window is measured either way.
func TestSIGTERMWithoutHooksSaysSoWhenItTakesAJob(t *testing.T) {
	t.Parallel()
	e := newEnv(t, githubsim.Options{})
	tok := e.registrationToken()
	home := runnerHome(t)
	p := entrypoint(t, e, home, t.TempDir(), "RUNNER_TOKEN="+tok, "RUNNER_ORG=acme", "RUNNER_NAME=stop-2", "RUNNER_LABELS=big",
		"RUNNER_EPHEMERAL=false", "RUNNER_GRACEFUL_STOP_TIMEOUT=20", "RUNNER_HOOKS_DIR=/nonexistent")
	first := e.queue(1500 * time.Millisecond)
	e.waitFor("the first job running", 10*time.Second, func() bool { return e.job(first.ID).State == githubsim.JobInProgress })
	second := e.queue(500 * time.Millisecond)
	_ = p.cmd.Process.Signal(syscall.SIGTERM)
	if code := p.wait(t, 25*time.Second); code != 143 {
		t.Fatalf("exit %d; output:\n%s", code, p.output())
	}
	for _, j := range e.sim.Jobs() {
		if j.Conclusion == githubsim.JobCancelled {
			t.Fatalf("job %+v cancelled; output:\n%s", j, p.output())
		}
	}
	out := p.output()
	switch got := e.job(second.ID); {
	case got.State == githubsim.JobQueued:
		t.Log("the listener was stopped before it took the second job")
	case got.State == githubsim.JobCompleted && got.Conclusion == githubsim.JobSuccess:
		if !strings.Contains(out, "a job started after this runner's stop began") {
			t.Fatalf("the runner took the second job and nobody said so:\n%s", out)
		}
		t.Log("the listener took the second job in the window; it was said and the job completed")
	default:
		t.Fatalf("second job %+v; output:\n%s", got, out)
	}
	logWindow(t, out)
}

// logWindow prints the entrypoint's lines about the stop's remaining window.
func logWindow(t *testing.T, out string) {
	t.Helper()
	for _, line := range strings.Split(out, "\n") {
		if strings.Contains(line, "window") || strings.Contains(line, "after this runner's stop began") || strings.Contains(line, "holding the listener") {
			t.Log(line)
		}
	}
}

// TestContainerHookJobsThatCannotRun: with a container hook set, a job without
// a container fails with the runner's message when the runner requires one,
// and a container job whose hook cannot start (here: no service account, not
// in a pod) fails with the hook's error, as a failed prepare_job fails the job;
// neither runs its script.
func TestContainerHookJobsThatCannotRun(t *testing.T) {
	t.Parallel()
	e := newEnv(t, githubsim.Options{})
	tok := e.registrationToken()
	home := runnerHome(t)
	p := entrypoint(t, e, home, t.TempDir(), "RUNNER_TOKEN="+tok, "RUNNER_ORG=acme", "RUNNER_NAME=hook-1", "RUNNER_LABELS=big",
		"RUNNER_EPHEMERAL=false", "ACTIONS_RUNNER_CONTAINER_HOOKS=/home/runner/k8s-novolume/index.js",
		"ACTIONS_RUNNER_REQUIRE_JOB_CONTAINER=true", "ACTIONS_RUNNER_POD_NAME=hook-1", "ACTIONS_RUNNER_KUBERNETES_NAMESPACE=jobs")
	spec := githubsim.JobSpec{Repository: "acme/app", Organization: "acme", Labels: []string{"big"}, Script: "echo ran"}
	bare := e.sim.QueueJob(spec)
	spec.Container = &githubsim.JobContainer{Image: "busybox"}
	contained := e.sim.QueueJob(spec)
	e.waitFor("both jobs", 20*time.Second, func() bool {
		return e.job(bare.ID).State == githubsim.JobCompleted && e.job(contained.ID).State == githubsim.JobCompleted
	})
	if got := e.job(bare.ID); got.Conclusion != githubsim.JobFailure || !strings.Contains(got.Output, "Jobs without a job container are forbidden on this runner") || strings.Contains(got.Output, "ran") {
		t.Errorf("job without a container %+v: want failure with the runner's message, its script not run", got)
	}
	if got := e.job(contained.ID); got.Conclusion != githubsim.JobFailure || !strings.Contains(got.Output, "loading the in-cluster configuration") ||
		strings.Contains(got.Output, "ran") {
		t.Errorf("container job %+v: want failure with the hook's error, its script not run", got)
	}
	_ = p.cmd.Process.Signal(syscall.SIGTERM)
	if code := p.wait(t, 10*time.Second); code != 143 {
		t.Fatalf("exit %d; output:\n%s", code, p.output())
	}
}
