// Tests of runner/entrypoint.sh: it runs under bash with stub config.sh, run.sh,
// docker and sudo that record their arguments and environment.
package runner_test

import (
	"bytes"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

const secret = "s3cr3t-registration-token"

// Stub run.sh modes (STUB_RUN): exit (with STUB_RC), idle (until TERM), job (a
// Runner.Worker-like process for STUB_JOB seconds, then exit 0).
const stubRun = `#!/usr/bin/env bash
echo "args:$*" >> "$STUB_DIR/run.log"
echo "jit:${ACTIONS_RUNNER_INPUT_JITCONFIG:-}" >> "$STUB_DIR/run.log"
echo "token:${RUNNER_TOKEN:-}${ACTIONS_RUNNER_INPUT_TOKEN:-}" >> "$STUB_DIR/run.log"
worker=''
trap 'echo term >> "$STUB_DIR/events"; [ -n "$worker" ] && kill "$worker" 2>/dev/null; exit 143' TERM
case ${STUB_RUN:-exit} in
exit) exit "${STUB_RC:-0}" ;;
idle) while :; do sleep 0.1; done ;;
job)
	(exec -a "$RUNNER_WORKER_PATTERN" sleep "$STUB_JOB") &
	worker=$!
	echo job-started >> "$STUB_DIR/events"
	while kill -0 "$worker" 2>/dev/null; do sleep 0.1; done
	echo job-done >> "$STUB_DIR/events"
	while :; do sleep 0.1; done ;;
esac
`

const stubConfig = `#!/usr/bin/env bash
echo "args:$*" >> "$STUB_DIR/config.log"
echo "token:${ACTIONS_RUNNER_INPUT_TOKEN:-}" >> "$STUB_DIR/config.log"
home=$(dirname "$0")
echo "registration of $STUB_DIR" > "$home/.runner"
echo "credentials of $STUB_DIR" > "$home/.credentials"
`

// stub docker: fails until STUB_DIR/docker-ok-after calls, counting in docker-calls.
const stubDocker = `#!/usr/bin/env bash
n=$(( $(cat "$STUB_DIR/docker-calls" 2>/dev/null || echo 0) + 1 ))
echo "$n" > "$STUB_DIR/docker-calls"
[ "$n" -gt "${STUB_DOCKER_FAILS:-0}" ]
`

const stubSudo = `#!/usr/bin/env bash
echo "$*" >> "$STUB_DIR/sudo.log"
`

type run struct {
	dir    string
	cmd    *exec.Cmd
	out    *bytes.Buffer
	doneCh chan error
}

func start(t *testing.T, env ...string) *run {
	t.Helper()
	dir := t.TempDir()
	bin := filepath.Join(dir, "bin")
	if err := os.Mkdir(bin, 0o755); err != nil {
		t.Fatal(err)
	}
	for name, body := range map[string]string{"run.sh": stubRun, "config.sh": stubConfig, "bin/docker": stubDocker, "bin/sudo": stubSudo} {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(body), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	cmd := exec.Command("bash", "entrypoint.sh")
	cmd.Env = append([]string{
		"PATH=" + bin + ":" + os.Getenv("PATH"), "HOME=" + dir, "RUNNER_HOME=" + dir, "STUB_DIR=" + dir,
		"RUNNER_WORKER_PATTERN=fake-worker-" + strings.NewReplacer("/", "-", " ", "-").Replace(t.Name()), // unique: tests run in parallel
	}, env...)
	r := &run{dir: dir, cmd: cmd, out: &bytes.Buffer{}, doneCh: make(chan error, 1)}
	cmd.Stdout, cmd.Stderr = r.out, r.out
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true} // so a test can kill the whole container
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() { r.doneCh <- cmd.Wait() }()
	t.Cleanup(func() { _ = cmd.Process.Kill() })
	return r
}

func (r *run) wait(t *testing.T) int {
	t.Helper()
	select {
	case err := <-r.doneCh:
		var exit *exec.ExitError
		if errors.As(err, &exit) {
			return exit.ExitCode()
		}
		if err != nil {
			t.Fatal(err)
		}
		return 0
	case <-time.After(30 * time.Second):
		t.Fatalf("entrypoint did not exit; output:\n%s", r.out)
		return -1
	}
}

func (r *run) file(name string) string {
	raw, _ := os.ReadFile(filepath.Join(r.dir, name))
	return string(raw)
}

func (r *run) waitFor(t *testing.T, name, content string) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !strings.Contains(r.file(name), content) {
		if time.Now().After(deadline) {
			t.Fatalf("%s never contained %q; output:\n%s", name, content, r.out)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func TestJITConfig(t *testing.T) {
	t.Parallel()
	r := start(t, "ACTIONS_RUNNER_INPUT_JITCONFIG="+secret)
	if rc := r.wait(t); rc != 0 {
		t.Fatalf("exit %d, want 0 after the ephemeral job; output:\n%s", rc, r.out)
	}
	if r.file("config.log") != "" {
		t.Fatalf("config.sh ran with a JIT config: %s", r.file("config.log"))
	}
	if run := r.file("run.log"); !strings.Contains(run, "args:\n") || !strings.Contains(run, "jit:"+secret) {
		t.Fatalf("run.sh must get the JIT config from its environment, not its arguments: %s", run)
	}
	if strings.Contains(r.out.String(), secret) {
		t.Fatalf("output leaks the JIT config:\n%s", r.out)
	}
}

func TestRegistrationToken(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name string
		env  []string
		args string
	}{
		{"organization, ephemeral by default", []string{"RUNNER_ORG=acme", "RUNNER_NAME=pool-abc-0", "RUNNER_LABELS=big,gpu", "RUNNER_GROUP=linux"},
			"args:--unattended --replace --url https://github.com/acme --name pool-abc-0 --work _work --labels big,gpu --runnergroup linux --ephemeral"},
		{"repository on GHES, persistent", []string{"RUNNER_REPO=acme/app", "RUNNER_NAME=r", "GITHUB_URL=https://ghes.example.com/", "RUNNER_EPHEMERAL=false", "RUNNER_WORKDIR=/tmp/w"},
			"args:--unattended --replace --url https://ghes.example.com/acme/app --name r --work /tmp/w\n"},
		{"enterprise", []string{"RUNNER_ENTERPRISE=big-corp", "RUNNER_NAME=r"},
			"args:--unattended --replace --url https://github.com/enterprises/big-corp --name r --work _work --ephemeral"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			r := start(t, append(tc.env, "RUNNER_TOKEN="+secret)...)
			if rc := r.wait(t); rc != 0 {
				t.Fatalf("exit %d; output:\n%s", rc, r.out)
			}
			cfg := r.file("config.log")
			if !strings.Contains(cfg, tc.args) || !strings.Contains(cfg, "token:"+secret) {
				t.Fatalf("config.sh got:\n%s\nwant %q and the token in ACTIONS_RUNNER_INPUT_TOKEN", cfg, tc.args)
			}
			if run := r.file("run.log"); !strings.Contains(run, "token:\n") {
				t.Fatalf("run.sh (and so every job) must not see the registration token: %s", run)
			}
			if strings.Contains(r.out.String(), secret) {
				t.Fatalf("output leaks the token:\n%s", r.out)
			}
		})
	}
}

func TestBadConfiguration(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name string
		env  []string
		want string
	}{
		{"no credentials", []string{"RUNNER_ORG=acme"}, "no credentials"},
		{"two credentials", []string{"RUNNER_TOKEN=" + secret, "ACTIONS_RUNNER_INPUT_JITCONFIG=" + secret, "RUNNER_ORG=a"}, "set only one"},
		{"no scope", []string{"RUNNER_TOKEN=" + secret}, "exactly one of RUNNER_ENTERPRISE, RUNNER_ORG, RUNNER_REPO (got 0)"},
		{"two scopes", []string{"RUNNER_TOKEN=" + secret, "RUNNER_ORG=a", "RUNNER_REPO=a/b"}, "(got 2)"},
		{"bad ephemeral", []string{"RUNNER_TOKEN=" + secret, "RUNNER_ORG=a", "RUNNER_EPHEMERAL=yes"}, "RUNNER_EPHEMERAL must be true or false"},
		{"bad grace", []string{"ACTIONS_RUNNER_INPUT_JITCONFIG=x", "RUNNER_GRACEFUL_STOP_TIMEOUT=soon"}, "RUNNER_GRACEFUL_STOP_TIMEOUT must be a number"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			r := start(t, tc.env...)
			if rc := r.wait(t); rc != 1 || !strings.Contains(r.out.String(), tc.want) {
				t.Fatalf("exit %d, output %q; want 1 and %q", rc, r.out, tc.want)
			}
			if strings.Contains(r.out.String(), secret) || r.file("run.log") != "" || r.file("config.log") != "" {
				t.Fatalf("leaked the secret or started the runner:\n%s", r.out)
			}
		})
	}
}

func TestExitCodeIsTheRunners(t *testing.T) {
	t.Parallel()
	r := start(t, "ACTIONS_RUNNER_INPUT_JITCONFIG=x", "STUB_RC=3")
	if rc := r.wait(t); rc != 3 {
		t.Fatalf("exit %d, want run.sh's 3", rc)
	}
}

func TestWaitsForDocker(t *testing.T) {
	t.Parallel()
	r := start(t, "ACTIONS_RUNNER_INPUT_JITCONFIG=x", "DOCKER_ENABLED=true", "STUB_DOCKER_FAILS=2")
	if rc := r.wait(t); rc != 0 || strings.TrimSpace(r.file("docker-calls")) != "3" || r.file("run.log") == "" {
		t.Fatalf("exit %d after %s docker calls; want the runner started after the third", rc, r.file("docker-calls"))
	}
	r = start(t, "ACTIONS_RUNNER_INPUT_JITCONFIG=x", "DOCKER_ENABLED=true", "STUB_DOCKER_FAILS=1000", "DOCKER_WAIT_TIMEOUT=1")
	if rc := r.wait(t); rc != 1 || !strings.Contains(r.out.String(), "docker did not become ready within 1s") || r.file("run.log") != "" {
		t.Fatalf("exit %d, output %q; want a bounded wait and a clear error", rc, r.out)
	}
	r = start(t, "ACTIONS_RUNNER_INPUT_JITCONFIG=x", "DOCKERD_IN_RUNNER=true")
	if rc := r.wait(t); rc != 0 || !strings.Contains(r.file("sudo.log"), "-n dockerd") {
		t.Fatalf("exit %d, sudo %q; want dockerd started with sudo", rc, r.file("sudo.log"))
	}
}

func TestSIGTERMIdleRunnerStopsAtOnce(t *testing.T) {
	t.Parallel()
	r := start(t, "ACTIONS_RUNNER_INPUT_JITCONFIG=x", "STUB_RUN=idle", "RUNNER_GRACEFUL_STOP_TIMEOUT=30")
	r.waitFor(t, "run.log", "args:")
	_ = r.cmd.Process.Signal(syscall.SIGTERM)
	if rc := r.wait(t); rc != 143 || !strings.Contains(r.file("events"), "term") {
		t.Fatalf("exit %d, events %q; want TERM forwarded and exit 143", rc, r.file("events"))
	}
	if strings.Contains(r.out.String(), "waiting up to") {
		t.Fatalf("an idle runner must not wait for a job:\n%s", r.out)
	}
}

func TestSIGTERMWaitsForTheJob(t *testing.T) {
	t.Parallel()
	r := start(t, "ACTIONS_RUNNER_INPUT_JITCONFIG=x", "STUB_RUN=job", "STUB_JOB=2", "RUNNER_GRACEFUL_STOP_TIMEOUT=20")
	r.waitFor(t, "events", "job-started")
	_ = r.cmd.Process.Signal(syscall.SIGTERM)
	if rc := r.wait(t); rc != 143 {
		t.Fatalf("exit %d", rc)
	}
	if ev := r.file("events"); ev != "job-started\njob-done\nterm\n" {
		t.Fatalf("events %q: the runner must be told to stop only after its job finished", ev)
	}
	if !strings.Contains(r.out.String(), "waiting up to 20s") {
		t.Fatalf("no message about the wait:\n%s", r.out)
	}
}

func TestSIGTERMAfterGraceStopsTheRunner(t *testing.T) {
	t.Parallel()
	r := start(t, "ACTIONS_RUNNER_INPUT_JITCONFIG=x", "STUB_RUN=job", "STUB_JOB=60", "RUNNER_GRACEFUL_STOP_TIMEOUT=1")
	r.waitFor(t, "events", "job-started")
	_ = r.cmd.Process.Signal(syscall.SIGTERM)
	if rc := r.wait(t); rc != 143 {
		t.Fatalf("exit %d", rc)
	}
	if ev := r.file("events"); ev != "job-started\nterm\n" || !strings.Contains(r.out.String(), "did not finish within 1s") {
		t.Fatalf("events %q, output:\n%s\nwant the runner stopped after the grace period, saying so", ev, r.out)
	}
}

// TestEphemeralRunsOnceAcrossRestarts: the kubelet restarts a StatefulSet's
// container whatever its exit code. A restarted ephemeral runner container — after
// its job, after a crash, or after being killed mid-job before it could record an
// exit — never starts the runner a second time with spent credentials.
func TestEphemeralRunsOnceAcrossRestarts(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name  string
		first []string
		kill  bool
	}{
		{"after the job (exit 0)", []string{"ACTIONS_RUNNER_INPUT_JITCONFIG=x"}, false},
		{"after a crash (exit 3)", []string{"ACTIONS_RUNNER_INPUT_JITCONFIG=x", "STUB_RC=3"}, false},
		{"after SIGKILL mid-job", []string{"ACTIONS_RUNNER_INPUT_JITCONFIG=x", "STUB_RUN=job", "STUB_JOB=60"}, true},
		{"token mode, ephemeral", []string{"RUNNER_TOKEN=" + secret, "RUNNER_ORG=acme"}, false},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			state := t.TempDir()
			first := start(t, append(tc.first, "RUNNER_STATE_DIR="+state)...)
			if tc.kill {
				first.waitFor(t, "events", "job-started")
				_ = syscall.Kill(-first.cmd.Process.Pid, syscall.SIGKILL) // as the kernel's OOM killer or a kubelet kill of the container
			}
			first.wait(t)
			if first.file("run.log") == "" {
				t.Fatalf("the first run did not start the runner:\n%s", first.out)
			}
			for range 3 { // any number of restarts
				again := start(t, append(tc.first, "RUNNER_STATE_DIR="+state)...)
				if rc := again.wait(t); rc != 0 {
					t.Fatalf("restart exited %d, want 0; output:\n%s", rc, again.out)
				}
				if again.file("run.log") != "" || again.file("config.log") != "" {
					t.Fatalf("a restarted ephemeral runner ran again: run %q config %q", again.file("run.log"), again.file("config.log"))
				}
				if !strings.Contains(again.out.String(), "already ran") {
					t.Fatalf("no explanation in the output:\n%s", again.out)
				}
			}
		})
	}
}

// TestEphemeralWithoutStateDirStillRuns: an image run outside the sweeper (no
// state volume) works as before, with a warning.
func TestEphemeralWithoutStateDirStillRuns(t *testing.T) {
	t.Parallel()
	r := start(t, "ACTIONS_RUNNER_INPUT_JITCONFIG=x")
	if rc := r.wait(t); rc != 0 || r.file("run.log") == "" || !strings.Contains(r.out.String(), "RUNNER_STATE_DIR is not set") {
		t.Fatalf("exit %d, output:\n%s", rc, r.out)
	}
}

// TestPersistentRunnerKeepsItsRegistration: a restarted persistent runner resumes
// the registration kept in the state directory instead of running config.sh again
// with a token that may have expired; a new pod (empty state) registers.
func TestPersistentRunnerKeepsItsRegistration(t *testing.T) {
	t.Parallel()
	state := t.TempDir()
	env := []string{"RUNNER_TOKEN=" + secret, "RUNNER_ORG=acme", "RUNNER_EPHEMERAL=false", "RUNNER_STATE_DIR=" + state}
	first := start(t, env...)
	if rc := first.wait(t); rc != 0 || !strings.Contains(first.file("config.log"), "args:") {
		t.Fatalf("first start: exit %d, config %q", rc, first.file("config.log"))
	}
	kept, err := os.ReadFile(filepath.Join(state, ".runner"))
	if err != nil || !strings.Contains(string(kept), first.dir) {
		t.Fatalf("registration not kept in the state directory: %q %v", kept, err)
	}
	if fi, err := os.Stat(filepath.Join(state, ".credentials")); err != nil || fi.Mode().Perm() != 0o600 {
		t.Fatalf("kept credentials: %v, mode %v; want 0600", err, fi)
	}
	again := start(t, env...) // a fresh container file system, the same pod
	if rc := again.wait(t); rc != 0 || again.file("config.log") != "" || again.file("run.log") == "" {
		t.Fatalf("restart: exit %d, config %q, run %q; want the runner resumed without config.sh", rc, again.file("config.log"), again.file("run.log"))
	}
	if got := again.file(".runner"); got != string(kept) {
		t.Fatalf("restored .runner %q, want %q", got, kept)
	}
	fresh := start(t, "RUNNER_TOKEN="+secret, "RUNNER_ORG=acme", "RUNNER_EPHEMERAL=false", "RUNNER_STATE_DIR="+t.TempDir())
	if rc := fresh.wait(t); rc != 0 || !strings.Contains(fresh.file("config.log"), "args:") {
		t.Fatalf("new pod: exit %d, config %q; want it registered", rc, fresh.file("config.log"))
	}
}
