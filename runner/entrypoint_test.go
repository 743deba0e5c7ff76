// Tests of runner/entrypoint.sh: it runs under bash with stub config.sh, run.sh,
// docker, dockerd and sudo that record their arguments and environment. The tests
// run as root, as the entrypoint does in a runner pod, so the privilege drop to
// the runner user (uid 1001, through the host's util-linux setpriv) is real.
package runner_test

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

const secret = "s3cr3t-registration-token"

// Stub run.sh modes (STUB_RUN): exit (with STUB_RC), idle (until TERM), job (a
// Runner.Worker-like process for STUB_JOB seconds, then exit 0).
// runnerUID is the runner user of the images (runner/Dockerfile, local/runnerimage);
// this host has no such user, so the tests name it RUNNER_USER=1001:1001.
const runnerUID = 1001

// Stub run.sh modes (STUB_RUN): exit (with STUB_RC), idle (until TERM), job (a
// Runner.Worker-like process for STUB_JOB seconds, or until the file
// STUB_DIR/release exists with STUB_JOB=release, then exit 0). Before that it
// records who it runs as and what it can reach, as a job step would: the
// entrypoint's environment (its parent's /proc/PID/environ) and the files of the
// state directory.
const stubRun = `#!/usr/bin/env bash
echo "args:$*" >> "$STUB_DIR/run.log"
echo "jit:${ACTIONS_RUNNER_INPUT_JITCONFIG:-}" >> "$STUB_DIR/run.log"
echo "token:${RUNNER_TOKEN:-}${ACTIONS_RUNNER_INPUT_TOKEN:-}" >> "$STUB_DIR/run.log"
{
	echo "uid:$(id -u):$(id -g) home:$HOME"
	echo "ppid:$PPID"
	if cat "/proc/$PPID/environ" >/dev/null 2>&1; then echo "entrypoint-environ:readable"; else echo "entrypoint-environ:denied"; fi
	if [ -n "${RUNNER_STATE_DIR:-}" ]; then
		for f in ran .runner .credentials; do
			cat "$RUNNER_STATE_DIR/$f" >/dev/null 2>&1 && echo "state $f: read"
			(echo tampered >> "$RUNNER_STATE_DIR/$f") 2>/dev/null && echo "state $f: written"
			rm -f "$RUNNER_STATE_DIR/$f" 2>/dev/null && echo "state $f: removed"
		done
		touch "$RUNNER_STATE_DIR/new" 2>/dev/null && echo "state: created a file"
		ls "$RUNNER_STATE_DIR" >/dev/null 2>&1 && echo "state: listed"
	fi
} >> "$STUB_DIR/run.log"
env > "$STUB_DIR/run.env"
worker=''
trap 'echo term >> "$STUB_DIR/events"; [ -n "$worker" ] && kill "$worker" 2>/dev/null; exit 143' TERM
case ${STUB_RUN:-exit} in
exit) exit "${STUB_RC:-0}" ;;
refused)
	echo "Current runner version: '2.320.0'"
	echo "An error occurred: Error: Forbidden Runner version v2.320.0 is deprecated and cannot receive messages." >&2
	echo "Runner listener exit with terminated error, stop the service, no retry needed." >&2
	exit 1 ;;
idle) echo idle >> "$STUB_DIR/events"; while :; do sleep 0.1; done ;;
job)
	# The worker records job-done itself before it exits: what the entrypoint
	# sees (no worker process) is then never ahead of the events file.
	(exec -a "$RUNNER_WORKER_PATTERN" bash -c 'if [ "$1" = release ]; then (until [ -e "$2/release" ]; do sleep 0.05; done) & else sleep "$1" & fi
		trap "kill $!; exit 143" TERM; wait $! && echo job-done >> "$2/events"' worker "$STUB_JOB" "$STUB_DIR") &
	worker=$!
	# job-started only once the worker is what the entrypoint looks for (exec done)
	until tr '\0' ' ' < "/proc/$worker/cmdline" 2>/dev/null | grep -q "$RUNNER_WORKER_PATTERN" || ! kill -0 "$worker" 2>/dev/null; do sleep 0.01; done
	echo job-started >> "$STUB_DIR/events"
	wait "$worker"
	while :; do sleep 0.1; done ;;
forking)
	# A job runs; once told to (fork), its worker forks a process that keeps the
	# worker's command line for a second (a step before its exec, slowed down),
	# then the job ends once released.
	echo "Running job: job-1"
	(exec -a "$RUNNER_WORKER_PATTERN" bash -c 'until [ -e "$1/fork" ]; do sleep 0.02; done
		( sleep 1; : ) & echo forked >> "$1/events"; wait $!
		until [ -e "$1/release" ]; do sleep 0.02; done' worker "$STUB_DIR") &
	worker=$!
	until tr '\0' ' ' < "/proc/$worker/cmdline" 2>/dev/null | grep -q "$RUNNER_WORKER_PATTERN"; do sleep 0.01; done
	echo job-started >> "$STUB_DIR/events"
	wait "$worker"
	echo "Job job-1 completed with result: Succeeded"
	while :; do sleep 0.1; done ;;
between)
	# A job runs; once released, the listener reports it completed and takes and
	# completes a second one that no look for a worker could see, before the
	# first job's worker exits (once the test saw the entrypoint count both).
	echo "Running job: job-1"
	(exec -a "$RUNNER_WORKER_PATTERN" bash -c 'until [ -e "$1/worker-go" ]; do sleep 0.02; done' worker "$STUB_DIR") &
	worker=$!
	until tr '\0' ' ' < "/proc/$worker/cmdline" 2>/dev/null | grep -q "$RUNNER_WORKER_PATTERN"; do sleep 0.01; done
	echo job-started >> "$STUB_DIR/events"
	until [ -e "$STUB_DIR/release" ]; do sleep 0.02; done
	printf '%s\n' "Job job-1 completed with result: Succeeded" "Running job: job-2" "Job job-2 completed with result: Succeeded"
	wait "$worker"
	while :; do sleep 0.1; done ;;
esac
`

const stubConfig = `#!/usr/bin/env bash
echo "args:$*" >> "$STUB_DIR/config.log"
if [ "${STUB_CONFIG:-}" = refused ]; then
	echo "Http response code: NotFound from 'POST https://api.github.com/actions/runner-registration'" >&2
	echo "ERROR: Your runner version is out of date and can no longer register with GitHub. The minimum runner version required to register with GitHub Actions is now 2.329.0." >&2
	exit 1
fi
echo "token:${ACTIONS_RUNNER_INPUT_TOKEN:-}" >> "$STUB_DIR/config.log"
echo "uid:$(id -u):$(id -g)" >> "$STUB_DIR/config.log"
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

const stubDockerd = `#!/usr/bin/env bash
echo "uid:$(id -u) $*" >> "$STUB_DIR/dockerd.log"
`

// jitConfig encodes files as actions/runner's JIT configs are: base64 of a JSON
// object mapping each file name to base64 of its content.
func jitConfig(files map[string]string) string {
	enc := map[string]string{}
	for name, content := range files {
		enc[name] = base64.StdEncoding.EncodeToString([]byte(content))
	}
	raw, _ := json.Marshal(enc)
	return base64.StdEncoding.EncodeToString(raw)
}

// jitCredential is in the .credentials of jit, the JIT config most tests use.
const jitCredential = "s3cr3t-jit-credential"

var jit = jitConfig(map[string]string{".runner": `{"agentId":7,"serverUrl":"http://127.0.0.1:1"}`,
	".credentials": `{"scheme":"OAuthAccessToken","data":{"token":"` + jitCredential + `"}}`})

type run struct {
	dir    string
	cmd    *exec.Cmd
	out    *syncBuffer
	doneCh chan error
}

// sharedDir is a fresh directory that the runner user can use (t.TempDir's are
// root's alone), owned by uid:gid.
func sharedDir(t *testing.T, uid, gid int) string {
	t.Helper()
	dir, err := os.MkdirTemp("", "entrypoint-test-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = os.RemoveAll(dir) })
	if err := os.Chmod(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Chown(dir, uid, gid); err != nil {
		t.Fatal(err)
	}
	return dir
}

// start runs the entrypoint as root, as in a runner pod: its runner home (with
// the stubs) belongs to the runner user, whom it runs config.sh and run.sh as.
func start(t *testing.T, env ...string) *run {
	t.Helper()
	return startAs(t, 0, env...)
}

// startAs runs the entrypoint as uid (0, or the runner user for a template that
// sets runAsUser).
func startAs(t *testing.T, uid int, env ...string) *run {
	t.Helper()
	dir := sharedDir(t, runnerUID, runnerUID)
	bin := filepath.Join(dir, "bin")
	if err := os.Mkdir(bin, 0o755); err != nil {
		t.Fatal(err)
	}
	for name, body := range map[string]string{"run.sh": stubRun, "config.sh": stubConfig, "bin/docker": stubDocker,
		"bin/sudo": stubSudo, "bin/dockerd": stubDockerd} {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(body), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	cmd := exec.Command("bash", "entrypoint.sh")
	cmd.Env = append([]string{
		"PATH=" + bin + ":" + os.Getenv("PATH"), "HOME=" + dir, "RUNNER_HOME=" + dir, "STUB_DIR=" + dir,
		fmt.Sprintf("RUNNER_USER=%d:%d", runnerUID, runnerUID),
		"DOCKERD_LOG=" + filepath.Join(dir, "dockerd.out"),
		"RUNNER_WORKER_PATTERN=fake-worker-" + strings.NewReplacer("/", "-", " ", "-").Replace(t.Name()), // unique: tests run in parallel
	}, env...)
	r := &run{dir: dir, cmd: cmd, out: &syncBuffer{}, doneCh: make(chan error, 1)}
	cmd.Stdout, cmd.Stderr = r.out, r.out
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true} // so a test can kill the whole container
	if uid != 0 {
		cmd.SysProcAttr.Credential = &syscall.Credential{Uid: uint32(uid), Gid: uint32(uid)}
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() { r.doneCh <- cmd.Wait() }()
	t.Cleanup(func() { _ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL) })
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

// TestSIGTERMSaysSoOfAJobTakenBetweenTwoLooks: without the job hooks the
// entrypoint looks for the worker now and then; a job the listener takes and
// ends between two looks, after the stop began, is still said, from the
// listener's own lines.
func TestSIGTERMSaysSoOfAJobTakenBetweenTwoLooks(t *testing.T) {
	t.Parallel()
	tmp := sharedDir(t, 0, 0)
	r := start(t, "ACTIONS_RUNNER_INPUT_JITCONFIG="+jit, "STUB_RUN=between", "RUNNER_GRACEFUL_STOP_TIMEOUT=20", "TMPDIR="+tmp)
	r.waitFor(t, "events", "job-started")
	_ = r.cmd.Process.Signal(syscall.SIGTERM)
	r.waitOutput(t, "waiting up to 20s")
	if err := os.WriteFile(filepath.Join(r.dir, "release"), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	// The entrypoint counts the listener's jobs in a directory of its own under
	// TMPDIR; the first job's worker exits once both are counted there.
	deadline := time.Now().Add(10 * time.Second)
	for {
		taken, _ := filepath.Glob(filepath.Join(tmp, "*", "taken"))
		finished, _ := filepath.Glob(filepath.Join(tmp, "*", "finished"))
		if len(taken) == 1 && len(finished) == 1 && readTrim(taken[0]) == "2" && readTrim(finished[0]) == "2" {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the entrypoint never counted two jobs taken and finished under %s:\n%s", tmp, r.out)
		}
		time.Sleep(20 * time.Millisecond)
	}
	if err := os.WriteFile(filepath.Join(r.dir, "worker-go"), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	if rc := r.wait(t); rc != 143 {
		t.Fatalf("exit %d; output:\n%s", rc, r.out)
	}
	if !strings.Contains(r.out.String(), "WARNING: a job started after this runner's stop began (1 seen only in the listener's output") {
		t.Fatalf("the job taken between two looks was not said:\n%s", r.out)
	}
}

// TestSIGTERMTakesNoForkOfTheWorkerForANewJob: a process the job's worker
// forks carries the worker's command line until its exec; seen by a look for
// workers after SIGTERM, it is the same job's, not a job taken after the stop
// began: no warning, and the stop still waits for the job.
func TestSIGTERMTakesNoForkOfTheWorkerForANewJob(t *testing.T) {
	t.Parallel()
	r := start(t, "ACTIONS_RUNNER_INPUT_JITCONFIG="+jit, "STUB_RUN=forking", "RUNNER_GRACEFUL_STOP_TIMEOUT=20")
	r.waitFor(t, "events", "job-started")
	_ = r.cmd.Process.Signal(syscall.SIGTERM)
	r.waitOutput(t, "waiting up to 20s")
	if err := os.WriteFile(filepath.Join(r.dir, "fork"), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	r.waitFor(t, "events", "forked")
	if err := os.WriteFile(filepath.Join(r.dir, "release"), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	if rc := r.wait(t); rc != 143 {
		t.Fatalf("exit %d; output:\n%s", rc, r.out)
	}
	if strings.Contains(r.out.String(), "a job started after this runner's stop began") {
		t.Fatalf("a fork of the job's worker was taken for a new job:\n%s", r.out)
	}
	if ev := r.file("events"); !strings.HasSuffix(ev, "forked\nterm\n") {
		t.Fatalf("events %q: the runner must be told to stop only after its job", ev)
	}
}

func readTrim(path string) string {
	raw, _ := os.ReadFile(path)
	return strings.TrimSpace(string(raw))
}

// waitOutput waits until the entrypoint's output contains content.
func (r *run) waitOutput(t *testing.T, content string) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !strings.Contains(r.out.String(), content) {
		if time.Now().After(deadline) {
			t.Fatalf("the output never contained %q:\n%s", content, r.out)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// mustNotLeak fails when a secret is in the entrypoint's output, or in run.sh's
// environment (and so in every job's).
func (r *run) mustNotLeak(t *testing.T, secrets ...string) {
	t.Helper()
	for _, s := range secrets {
		if strings.Contains(r.out.String(), s) {
			t.Fatalf("the output shows a secret:\n%s", r.out)
		}
		if env := r.file("run.env"); strings.Contains(env, s) {
			t.Fatalf("run.sh's environment, which every job step inherits, has a secret:\n%s", env)
		}
	}
}

// mustBeRunner checks that the named stub ran as the runner user.
func (r *run) mustBeRunner(t *testing.T, log string) {
	t.Helper()
	if want := fmt.Sprintf("uid:%d:%d", runnerUID, runnerUID); !strings.Contains(r.file(log), want) {
		t.Fatalf("%s: %q, want it run as the runner user (%s); output:\n%s", log, r.file(log), want, r.out)
	}
}

func fileOwner(t *testing.T, path string) (uid int, mode os.FileMode) {
	t.Helper()
	fi, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	return int(fi.Sys().(*syscall.Stat_t).Uid), fi.Mode()
}

// TestJITConfig: the JIT config becomes the runner's files in its home (the
// runner user's, 0600) before run.sh starts, as run.sh would write them itself;
// run.sh gets no argument and no credential in its environment.
func TestJITConfig(t *testing.T) {
	t.Parallel()
	r := start(t, "ACTIONS_RUNNER_INPUT_JITCONFIG="+jit)
	if rc := r.wait(t); rc != 0 {
		t.Fatalf("exit %d, want 0 after the ephemeral job; output:\n%s", rc, r.out)
	}
	if r.file("config.log") != "" {
		t.Fatalf("config.sh ran with a JIT config: %s", r.file("config.log"))
	}
	if run := r.file("run.log"); !strings.Contains(run, "args:\n") || !strings.Contains(run, "jit:\n") {
		t.Fatalf("run.sh must get the JIT config neither in its arguments nor in its environment: %s", run)
	}
	r.mustBeRunner(t, "run.log")
	for name, want := range map[string]string{".runner": `{"agentId":7,"serverUrl":"http://127.0.0.1:1"}`,
		".credentials": `{"scheme":"OAuthAccessToken","data":{"token":"` + jitCredential + `"}}`} {
		if got := r.file(name); got != want {
			t.Fatalf("%s: %q, want the JIT config's %q", name, got, want)
		}
		if uid, mode := fileOwner(t, filepath.Join(r.dir, name)); uid != runnerUID || mode.Perm() != 0o600 {
			t.Fatalf("%s: owner %d mode %v, want the runner user's, 0600", name, uid, mode)
		}
	}
	r.mustNotLeak(t, jit, jitCredential)
	if strings.Contains(r.file("run.env"), "ACTIONS_RUNNER_INPUT_") {
		t.Fatalf("run.sh's environment has a runner input:\n%s", r.file("run.env"))
	}
}

// TestJITConfigFormats: JSON as a .NET or Go encoder may write it (spaces,
// escaped / and +, any order), every file written; what the runner could not read
// either is refused without showing it.
func TestJITConfigFormats(t *testing.T) {
	t.Parallel()
	// "\xfb\xff\xfe" is "+//+" in base64: escapes to undo.
	odd := "\xfb\xff\xfe"
	raw := " {\n  \".credentials_rsaparams\" : \"\\u002B\\/\\/\\u002b\" ,\n \".runner\":\"" +
		base64.StdEncoding.EncodeToString([]byte(`{"agentId":8}`)) + "\",\".credentials\":\"e30=\"\n}\n"
	r := start(t, "ACTIONS_RUNNER_INPUT_JITCONFIG="+base64.StdEncoding.EncodeToString([]byte(raw)))
	if rc := r.wait(t); rc != 0 {
		t.Fatalf("exit %d; output:\n%s", rc, r.out)
	}
	if r.file(".runner") != `{"agentId":8}` || r.file(".credentials") != "{}" || r.file(".credentials_rsaparams") != odd {
		t.Fatalf("files %q %q %q", r.file(".runner"), r.file(".credentials"), r.file(".credentials_rsaparams"))
	}

	b64 := func(s string) string { return base64.StdEncoding.EncodeToString([]byte(s)) }
	bad := []struct {
		name, jit, want string
	}{
		{"not base64", "s3cr3t-not-base64!", "not a runner JIT config"},
		{"not JSON", b64("s3cr3t-not-json"), "not a runner JIT config"},
		{"not base64 files", b64(`{".runner":"s3cr3t!"}`), "not a runner JIT config"},
		{"a path", b64(`{".runner":"e30=","../../etc/s3cr3t":"e30="}`), "a file named '../../etc/s3cr3t'"},
		{"no .runner", b64(`{".credentials":"czNjcjN0"}`), "has no .runner"},
	}
	for _, tc := range bad {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			r := start(t, "ACTIONS_RUNNER_INPUT_JITCONFIG="+tc.jit)
			if rc := r.wait(t); rc != 1 || !strings.Contains(r.out.String(), tc.want) {
				t.Fatalf("exit %d, output %q; want 1 and %q", rc, r.out, tc.want)
			}
			if r.file("run.log") != "" {
				t.Fatal("run.sh started with a JIT config it cannot use")
			}
			r.mustNotLeak(t, tc.jit, "s3cr3t!", "czNjcjN0", "s3cr3t-not")
		})
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
			r.mustBeRunner(t, "config.log")
			r.mustBeRunner(t, "run.log")
			r.mustNotLeak(t, secret)
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
		{"two credentials", []string{"RUNNER_TOKEN=" + secret, "ACTIONS_RUNNER_INPUT_JITCONFIG=" + jit, "RUNNER_ORG=a"}, "set only one"},
		{"token and its file", []string{"RUNNER_TOKEN=" + secret, "RUNNER_TOKEN_FILE=/run/token", "RUNNER_ORG=a"}, "set only one"},
		{"token file, no scope", []string{"RUNNER_TOKEN_FILE=/run/token"}, "exactly one of RUNNER_ENTERPRISE, RUNNER_ORG, RUNNER_REPO (got 0)"},
		{"no scope", []string{"RUNNER_TOKEN=" + secret}, "exactly one of RUNNER_ENTERPRISE, RUNNER_ORG, RUNNER_REPO (got 0)"},
		{"two scopes", []string{"RUNNER_TOKEN=" + secret, "RUNNER_ORG=a", "RUNNER_REPO=a/b"}, "(got 2)"},
		{"bad ephemeral", []string{"RUNNER_TOKEN=" + secret, "RUNNER_ORG=a", "RUNNER_EPHEMERAL=yes"}, "RUNNER_EPHEMERAL must be true or false"},
		{"bad grace", []string{"ACTIONS_RUNNER_INPUT_JITCONFIG=" + jit, "RUNNER_GRACEFUL_STOP_TIMEOUT=soon"}, "RUNNER_GRACEFUL_STOP_TIMEOUT must be a number"},
		{"unknown runner user", []string{"RUNNER_TOKEN=" + secret, "RUNNER_ORG=a", "RUNNER_USER=no-such-user"}, "no user 'no-such-user' in /etc/passwd"},
		{"root as the runner user", []string{"RUNNER_TOKEN=" + secret, "RUNNER_ORG=a", "RUNNER_USER=0:0"}, "RUNNER_USER must not be root"},
		{"no setpriv", []string{"RUNNER_TOKEN=" + secret, "RUNNER_ORG=a", "RUNNER_SETPRIV=/no/setpriv"}, "cannot drop privileges: no '/no/setpriv'"},
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
	r := start(t, "ACTIONS_RUNNER_INPUT_JITCONFIG="+jit, "STUB_RC=3")
	if rc := r.wait(t); rc != 3 {
		t.Fatalf("exit %d, want run.sh's 3", rc)
	}
}

func TestWaitsForDocker(t *testing.T) {
	t.Parallel()
	r := start(t, "ACTIONS_RUNNER_INPUT_JITCONFIG="+jit, "DOCKER_ENABLED=true", "STUB_DOCKER_FAILS=2")
	if rc := r.wait(t); rc != 0 || strings.TrimSpace(r.file("docker-calls")) != "3" || r.file("run.log") == "" {
		t.Fatalf("exit %d after %s docker calls; want the runner started after the third", rc, r.file("docker-calls"))
	}
	r = start(t, "ACTIONS_RUNNER_INPUT_JITCONFIG="+jit, "DOCKER_ENABLED=true", "STUB_DOCKER_FAILS=1000", "DOCKER_WAIT_TIMEOUT=1")
	if rc := r.wait(t); rc != 1 || !strings.Contains(r.out.String(), "docker did not become ready within 1s") || r.file("run.log") != "" {
		t.Fatalf("exit %d, output %q; want a bounded wait and a clear error", rc, r.out)
	}
	r = start(t, "ACTIONS_RUNNER_INPUT_JITCONFIG="+jit, "DOCKERD_IN_RUNNER=true")
	rc := r.wait(t)
	r.waitFor(t, "dockerd.log", "uid:") // started in the background
	if rc != 0 || r.file("dockerd.log") != "uid:0 \n" || r.file("sudo.log") != "" {
		t.Fatalf("exit %d, dockerd %q, sudo %q; want dockerd started by the entrypoint, as root", rc, r.file("dockerd.log"), r.file("sudo.log"))
	}
	if !strings.Contains(r.out.String(), "not protected") {
		t.Fatalf("no warning that jobs with docker can read the credentials:\n%s", r.out)
	}
}

func TestSIGTERMIdleRunnerStopsAtOnce(t *testing.T) {
	t.Parallel()
	r := start(t, "ACTIONS_RUNNER_INPUT_JITCONFIG="+jit, "STUB_RUN=idle", "RUNNER_GRACEFUL_STOP_TIMEOUT=30")
	r.waitFor(t, "events", "idle") // the stub's TERM trap is set by then
	_ = r.cmd.Process.Signal(syscall.SIGTERM)
	if rc := r.wait(t); rc != 143 || !strings.Contains(r.file("events"), "term") {
		t.Fatalf("exit %d, events %q; want TERM forwarded and exit 143", rc, r.file("events"))
	}
	if strings.Contains(r.out.String(), "waiting up to") {
		t.Fatalf("an idle runner must not wait for a job:\n%s", r.out)
	}
}

// TestSIGTERMWaitsForTheJob: a SIGTERM while a job runs is held until the
// job ends (the job ends only once the entrypoint said it waits: a barrier, not
// a job short enough to outlast the entrypoint's reaction on a loaded machine).
func TestSIGTERMWaitsForTheJob(t *testing.T) {
	t.Parallel()
	r := start(t, "ACTIONS_RUNNER_INPUT_JITCONFIG="+jit, "STUB_RUN=job", "STUB_JOB=release", "RUNNER_GRACEFUL_STOP_TIMEOUT=20")
	r.waitFor(t, "events", "job-started")
	_ = r.cmd.Process.Signal(syscall.SIGTERM)
	r.waitOutput(t, "waiting up to 20s")
	if err := os.WriteFile(filepath.Join(r.dir, "release"), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	if rc := r.wait(t); rc != 143 {
		t.Fatalf("exit %d", rc)
	}
	if ev := r.file("events"); ev != "job-started\njob-done\nterm\n" {
		t.Fatalf("events %q: the runner must be told to stop only after its job finished; output:\n%s", ev, r.out)
	}
}

func TestSIGTERMAfterGraceStopsTheRunner(t *testing.T) {
	t.Parallel()
	r := start(t, "ACTIONS_RUNNER_INPUT_JITCONFIG="+jit, "STUB_RUN=job", "STUB_JOB=60", "RUNNER_GRACEFUL_STOP_TIMEOUT=1")
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
// exit — never starts the runner a second time with spent credentials, and exits
// with the run's outcome on every restart (0, the runner's code, or 137 when the
// container was killed under the runner), naming a death in its termination log:
// the sweeper reads a runner's death from it after any number of restarts.
func TestEphemeralRunsOnceAcrossRestarts(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name   string
		first  []string
		kill   bool
		rc     int
		reason string // in the termination log
	}{
		{"after the job (exit 0)", []string{"ACTIONS_RUNNER_INPUT_JITCONFIG=" + jit}, false, 0,
			"runner ran: its runner exited 0 in an earlier start of this container: not run again"},
		{"after a crash (exit 3)", []string{"ACTIONS_RUNNER_INPUT_JITCONFIG=" + jit, "STUB_RC=3"}, false, 3, "runner died: its runner exited with code 3"},
		{"after SIGKILL mid-job", []string{"ACTIONS_RUNNER_INPUT_JITCONFIG=" + jit, "STUB_RUN=job", "STUB_JOB=60"}, true, 137,
			"runner died: its container was killed before its runner exited"},
		{"token mode, ephemeral", []string{"RUNNER_TOKEN=" + secret, "RUNNER_ORG=acme"}, false, 0,
			"runner ran: its runner exited 0 in an earlier start of this container: not run again"},
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
			for i := range 3 { // any number of restarts
				termLog := filepath.Join(t.TempDir(), "termination-log")
				again := start(t, append(tc.first, "RUNNER_STATE_DIR="+state, "RUNNER_TERMINATION_LOG="+termLog)...)
				if rc := again.wait(t); rc != tc.rc {
					t.Fatalf("restart %d exited %d, want %d; output:\n%s", i, rc, tc.rc, again.out)
				}
				msg, err := os.ReadFile(termLog)
				if err != nil && !errors.Is(err, fs.ErrNotExist) {
					t.Fatal(err)
				}
				if got := strings.TrimSpace(string(msg)); got != tc.reason {
					t.Fatalf("restart %d: termination log %q, want %q", i, got, tc.reason)
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
	r := start(t, "ACTIONS_RUNNER_INPUT_JITCONFIG="+jit)
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
	for _, f := range []string{".runner", ".credentials"} {
		if uid, mode := fileOwner(t, filepath.Join(state, f)); uid != 0 || mode.Perm() != 0o600 {
			t.Fatalf("kept %s: owner %d, mode %v; want root's, 0600", f, uid, mode)
		}
	}
	if first.file("run.log") == "" || strings.Contains(first.file("run.log"), "state ") {
		t.Fatalf("run.sh (as every job) reached the kept registration: %s", first.file("run.log"))
	}
	again := start(t, env...) // a fresh container file system, the same pod
	if rc := again.wait(t); rc != 0 || again.file("config.log") != "" || again.file("run.log") == "" {
		t.Fatalf("restart: exit %d, config %q, run %q; want the runner resumed without config.sh", rc, again.file("config.log"), again.file("run.log"))
	}
	if got := again.file(".runner"); got != string(kept) {
		t.Fatalf("restored .runner %q, want %q", got, kept)
	}
	if uid, mode := fileOwner(t, filepath.Join(again.dir, ".credentials")); uid != runnerUID || mode.Perm() != 0o600 {
		t.Fatalf("restored .credentials: owner %d, mode %v; want the runner user's, 0600", uid, mode)
	}
	again.mustBeRunner(t, "run.log")
	fresh := start(t, "RUNNER_TOKEN="+secret, "RUNNER_ORG=acme", "RUNNER_EPHEMERAL=false", "RUNNER_STATE_DIR="+t.TempDir())
	if rc := fresh.wait(t); rc != 0 || !strings.Contains(fresh.file("config.log"), "args:") {
		t.Fatalf("new pod: exit %d, config %q; want it registered", rc, fresh.file("config.log"))
	}
}

// TestJobCannotReadTheCredentials: run.sh — and so every job step, which runs as
// its user — runs as the runner user; it cannot read the environment of the
// entrypoint, which does hold the credentials, nor read, change or delete the
// files of the state directory (the run-once marker, a kept registration). The
// registration token is in config.sh's environment only.
func TestJobCannotReadTheCredentials(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name   string
		env    []string
		secret string
	}{
		{"JIT config", []string{"ACTIONS_RUNNER_INPUT_JITCONFIG=" + jit}, jit},
		{"registration token, ephemeral", []string{"RUNNER_TOKEN=" + secret, "RUNNER_ORG=acme"}, secret},
		{"registration token, persistent", []string{"RUNNER_TOKEN=" + secret, "RUNNER_ORG=acme", "RUNNER_EPHEMERAL=false"}, secret},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			state := t.TempDir()
			if err := os.Chmod(state, 0o777); err != nil { // as an emptyDir is created
				t.Fatal(err)
			}
			r := start(t, append(tc.env, "RUNNER_STATE_DIR="+state, "STUB_RUN=idle")...)
			r.waitFor(t, "events", "idle")
			environ, err := os.ReadFile(fmt.Sprintf("/proc/%d/environ", r.cmd.Process.Pid))
			if err != nil || !strings.Contains(string(environ), tc.secret) {
				t.Fatalf("the entrypoint's environment (%v) does not hold the secret: this test would prove nothing", err)
			}
			_ = r.cmd.Process.Signal(syscall.SIGTERM)
			if rc := r.wait(t); rc != 143 {
				t.Fatalf("exit %d; output:\n%s", rc, r.out)
			}
			log := r.file("run.log")
			r.mustBeRunner(t, "run.log")
			if !strings.Contains(log, fmt.Sprintf("ppid:%d\n", r.cmd.Process.Pid)) || !strings.Contains(log, "entrypoint-environ:denied") {
				t.Fatalf("run.sh read its parent's, the entrypoint's, environment: %s", log)
			}
			if strings.Contains(log, "state") {
				t.Fatalf("run.sh reached the state directory: %s", log)
			}
			if uid, mode := fileOwner(t, state); uid != 0 || mode.Perm() != 0o700 {
				t.Fatalf("state directory: owner %d, mode %v; want root's alone", uid, mode)
			}
			if tc.secret == secret && !strings.Contains(r.file("config.log"), "token:"+secret) {
				t.Fatalf("config.sh did not get the token: %s", r.file("config.log"))
			}
			r.mustNotLeak(t, tc.secret, jitCredential)
			if strings.Contains(r.file("run.env"), "RUNNER_TOKEN") {
				t.Fatalf("run.sh's environment names the token:\n%s", r.file("run.env"))
			}
		})
	}
}

// TestEphemeralMarkerIsRoots: the run-once marker is root's file in root's
// directory; a restarted container still finds it after the runner user tried to
// remove it.
func TestEphemeralMarkerIsRoots(t *testing.T) {
	t.Parallel()
	state := t.TempDir()
	first := start(t, "ACTIONS_RUNNER_INPUT_JITCONFIG="+jit, "RUNNER_STATE_DIR="+state)
	if rc := first.wait(t); rc != 0 {
		t.Fatalf("exit %d; output:\n%s", rc, first.out)
	}
	if uid, mode := fileOwner(t, filepath.Join(state, "ran")); uid != 0 || mode.Perm() != 0o600 {
		t.Fatalf("marker: owner %d, mode %v; want root's, 0600", uid, mode)
	}
	again := start(t, "ACTIONS_RUNNER_INPUT_JITCONFIG="+jit, "RUNNER_STATE_DIR="+state)
	if rc := again.wait(t); rc != 0 || again.file("run.log") != "" || !strings.Contains(again.out.String(), "already ran") {
		t.Fatalf("restart: exit %d, run %q; output:\n%s", rc, again.file("run.log"), again.out)
	}
}

// TestNotRoot: started as the runner user (a template that sets runAsUser), the
// entrypoint works as before, with nobody to drop privileges to, and says loudly
// that the credentials are not protected; dockerd then needs sudo.
func TestNotRoot(t *testing.T) {
	t.Parallel()
	state := sharedDir(t, runnerUID, runnerUID)
	r := startAs(t, runnerUID, "RUNNER_TOKEN="+secret, "RUNNER_ORG=acme", "RUNNER_STATE_DIR="+state, "DOCKERD_IN_RUNNER=true")
	if rc := r.wait(t); rc != 0 {
		t.Fatalf("exit %d; output:\n%s", rc, r.out)
	}
	if !strings.Contains(r.out.String(), "WARNING: the container runs as uid 1001, not root") {
		t.Fatalf("no warning:\n%s", r.out)
	}
	r.mustBeRunner(t, "config.log")
	r.mustBeRunner(t, "run.log")
	r.waitFor(t, "sudo.log", "-n dockerd") // started in the background
	if !strings.Contains(r.file("config.log"), "token:"+secret) {
		t.Fatalf("config %q, sudo %q", r.file("config.log"), r.file("sudo.log"))
	}
	r.mustNotLeak(t, secret)
}

type syncBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *syncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

// TestJobHooksInstalled: run.sh (and so actions/runner) gets our job hooks, the
// pool's own hooks kept under RUNNER_USER_HOOK_JOB_*, and the hooks' directory,
// made for the runner user.
func TestJobHooksInstalled(t *testing.T) {
	t.Parallel()
	hooks, err := filepath.Abs(".")
	if err != nil {
		t.Fatal(err)
	}
	jobDir := filepath.Join(sharedDir(t, 0, 0), "job")
	r := start(t, "ACTIONS_RUNNER_INPUT_JITCONFIG="+jit, "RUNNER_HOOKS_DIR="+hooks, "RUNNER_JOB_DIR="+jobDir,
		"ACTIONS_RUNNER_HOOK_JOB_STARTED=/pool/started.sh")
	if rc := r.wait(t); rc != 0 {
		t.Fatalf("exit %d; output:\n%s", rc, r.out)
	}
	env := r.file("run.env")
	for _, want := range []string{"ACTIONS_RUNNER_HOOK_JOB_STARTED=" + hooks + "/runner-job-started.sh\n",
		"ACTIONS_RUNNER_HOOK_JOB_COMPLETED=" + hooks + "/runner-job-completed.sh\n",
		"RUNNER_USER_HOOK_JOB_STARTED=/pool/started.sh\n", "RUNNER_JOB_DIR=" + jobDir + "\n"} {
		if !strings.Contains(env, want) {
			t.Errorf("run.sh's environment lacks %q:\n%s", want, env)
		}
	}
	if strings.Contains(env, "RUNNER_USER_HOOK_JOB_COMPLETED") {
		t.Errorf("no pool hook for job-completed, yet:\n%s", env)
	}
	if uid, mode := fileOwner(t, jobDir); uid != runnerUID || mode.Perm() != 0o755 {
		t.Fatalf("job directory: owner %d, mode %v; want the runner user's, 0755", uid, mode)
	}
}

// TestHookScripts: the hooks keep the marker, never fail the job for their own
// sake, and run the pool's hooks, whose exit code is theirs; the probe answers 0
// exactly while the marker exists (or a worker runs).
func TestHookScripts(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	job := filepath.Join(dir, "job")
	if err := os.Mkdir(job, 0o755); err != nil {
		t.Fatal(err)
	}
	failing := filepath.Join(dir, "failing.sh")
	if err := os.WriteFile(failing, []byte("echo pool-hook; exit 7\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	run := func(script string, env ...string) (int, string) {
		cmd := exec.Command("bash", "-e", script)
		cmd.Env = append([]string{"PATH=" + os.Getenv("PATH"), "RUNNER_JOB_DIR=" + job,
			"RUNNER_WORKER_PATTERN=no-such-worker-" + t.Name()}, env...)
		out, err := cmd.CombinedOutput()
		var exit *exec.ExitError
		if errors.As(err, &exit) {
			return exit.ExitCode(), string(out)
		}
		if err != nil {
			t.Fatal(err)
		}
		return 0, string(out)
	}
	if rc, _ := run("runner-job-running"); rc != 1 {
		t.Fatalf("probe before a job: %d, want 1", rc)
	}
	if rc, out := run("runner-job-started.sh"); rc != 0 || out != "" {
		t.Fatalf("started hook: %d %q", rc, out)
	}
	if rc, _ := run("runner-job-running"); rc != 0 {
		t.Fatalf("probe during a job: %d, want 0", rc)
	}
	if rc, out := run("runner-job-completed.sh", "RUNNER_USER_HOOK_JOB_COMPLETED="+failing); rc != 7 || out != "pool-hook\n" {
		t.Fatalf("completed hook with the pool's failing one: %d %q, want the pool hook's 7", rc, out)
	}
	if rc, _ := run("runner-job-running"); rc != 1 {
		t.Fatalf("probe after the job: %d, want 1", rc)
	}
	if rc, out := run("runner-job-started.sh", "RUNNER_JOB_DIR=/nonexistent/dir"); rc != 0 || !strings.Contains(out, "warning: cannot record") {
		t.Fatalf("started hook that cannot record: %d %q, want 0 and a warning", rc, out)
	}
}

// TestSIGTERMBeforeTheRunnerStartsStartsNoRunner: a SIGTERM while the
// entrypoint is still preparing (here: waiting for docker) ends it with 143 and
// the runner never starts, so it can take no job the grace period would kill.
func TestSIGTERMBeforeTheRunnerStartsStartsNoRunner(t *testing.T) {
	t.Parallel()
	r := start(t, "ACTIONS_RUNNER_INPUT_JITCONFIG="+jit, "DOCKER_ENABLED=true", "STUB_DOCKER_FAILS=1000", "DOCKER_WAIT_TIMEOUT=60")
	r.waitFor(t, "docker-calls", "1")
	_ = r.cmd.Process.Signal(syscall.SIGTERM)
	if rc := r.wait(t); rc != 143 || r.file("run.log") != "" || !strings.Contains(r.out.String(), "the runner has not started") {
		t.Fatalf("exit %d, run.log %q, output %q; want exit 143 and no runner started", rc, r.file("run.log"), r.out)
	}
}

// TestVersionRefusalIsTheTerminationMessage: when GitHub refuses the runner's
// version — config.sh cannot register it, or the listener gets no messages —
// the container's termination message says so, with the image's version when
// GitHub's words do not name it, and a restarted ephemeral container repeats
// it instead of a bare exit code.
func TestVersionRefusalIsTheTerminationMessage(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name string
		env  []string
		want string
	}{
		{"listener refused", []string{"ACTIONS_RUNNER_INPUT_JITCONFIG=" + jit, "STUB_RUN=refused"},
			"runner refused by GitHub: An error occurred: Error: Forbidden Runner version v2.320.0 is deprecated and cannot receive messages."},
		{"registration refused", []string{"RUNNER_TOKEN=" + secret, "RUNNER_ORG=acme", "STUB_CONFIG=refused", "ACTIONS_RUNNER_VERSION=2.320.0"},
			"runner refused by GitHub: ERROR: Your runner version is out of date and can no longer register with GitHub. " +
				"The minimum runner version required to register with GitHub Actions is now 2.329.0. (this image runs actions/runner 2.320.0)"},
		{"listener refused, version named already", []string{"ACTIONS_RUNNER_INPUT_JITCONFIG=" + jit, "STUB_RUN=refused", "ACTIONS_RUNNER_VERSION=2.320.0"},
			"runner refused by GitHub: An error occurred: Error: Forbidden Runner version v2.320.0 is deprecated and cannot receive messages."},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			state := t.TempDir()
			for i := range 2 { // the run, and a restart of the container
				termLog := filepath.Join(t.TempDir(), "termination-log")
				r := start(t, append(tc.env, "RUNNER_STATE_DIR="+state, "RUNNER_TERMINATION_LOG="+termLog)...)
				if rc := r.wait(t); rc != 1 {
					t.Fatalf("run %d exited %d, want 1; output:\n%s", i, rc, r.out)
				}
				msg, err := os.ReadFile(termLog)
				if err != nil {
					t.Fatalf("run %d: no termination message: %v; output:\n%s", i, err, r.out)
				}
				if got := strings.TrimSpace(string(msg)); got != tc.want {
					t.Fatalf("run %d: termination message %q, want %q", i, got, tc.want)
				}
			}
		})
	}
}

// tokenFile lays out a state directory as the kubelet makes it for a token
// runner: an emptyDir (mode 0777) with the runner's Secret mounted in it
// (registration/token, 0444, as the sweeper asks). It returns the state
// directory and the token's file.
func tokenFile(t *testing.T) (state, file string) {
	t.Helper()
	state = t.TempDir()
	if err := os.Chmod(state, 0o777); err != nil {
		t.Fatal(err)
	}
	dir := filepath.Join(state, "registration")
	if err := os.Mkdir(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	file = filepath.Join(dir, "token")
	if err := os.WriteFile(file, []byte(secret), 0o444); err != nil {
		t.Fatal(err)
	}
	return state, file
}

// environs returns the environment of every process of the run's process group
// (the container's processes: the entrypoint, run.sh and what it started), by pid.
func (r *run) environs(t *testing.T) map[string]string {
	t.Helper()
	pids, err := filepath.Glob("/proc/[0-9]*")
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]string{}
	for _, dir := range pids {
		pid := filepath.Base(dir)
		var n int
		if _, err := fmt.Sscan(pid, &n); err != nil {
			continue
		}
		if pgid, err := syscall.Getpgid(n); err != nil || pgid != r.cmd.Process.Pid {
			continue
		}
		if environ, err := os.ReadFile(filepath.Join(dir, "environ")); err == nil {
			out[pid] = string(environ)
		}
	}
	return out
}

// TestTokenFromAFile: given RUNNER_TOKEN_FILE (the runner's Secret, mounted in
// the state directory), the entrypoint gives the token to config.sh alone: no
// process of the container — the entrypoint, run.sh, a job — has it in its
// environment, which root (what docker gives a job) could read from
// /proc/PID/environ for the process's life; run.sh (and so every job step) cannot
// open the file, inside the state directory the entrypoint made root's alone.
func TestTokenFromAFile(t *testing.T) {
	t.Parallel()
	for _, ephemeral := range []string{"true", "false"} {
		t.Run("ephemeral="+ephemeral, func(t *testing.T) {
			t.Parallel()
			state, file := tokenFile(t)
			r := start(t, "RUNNER_TOKEN_FILE="+file, "RUNNER_ORG=acme", "RUNNER_EPHEMERAL="+ephemeral, "RUNNER_STATE_DIR="+state, "STUB_RUN=idle")
			r.waitFor(t, "events", "idle")
			environs := r.environs(t)
			if len(environs) < 2 {
				t.Fatalf("environments of %v: want the entrypoint's and run.sh's at least", environs)
			}
			for pid, environ := range environs {
				if strings.Contains(environ, secret) {
					t.Errorf("process %s has the token in its environment", pid)
				}
			}
			_ = r.cmd.Process.Signal(syscall.SIGTERM)
			if rc := r.wait(t); rc != 143 {
				t.Fatalf("exit %d; output:\n%s", rc, r.out)
			}
			if cfg := r.file("config.log"); !strings.Contains(cfg, "token:"+secret+"\n") || !strings.Contains(cfg, "args:--unattended") {
				t.Fatalf("config.sh got:\n%s\nwant the token in ACTIONS_RUNNER_INPUT_TOKEN; output:\n%s", cfg, r.out)
			}
			r.mustBeRunner(t, "config.log")
			r.mustBeRunner(t, "run.log")
			if log := r.file("run.log"); strings.Contains(log, "state") || !strings.Contains(log, "token:\n") {
				t.Fatalf("run.sh reached the state directory or a token: %s", log)
			}
			if strings.Contains(r.file("run.env"), "RUNNER_TOKEN") {
				t.Fatalf("run.sh's environment names the token:\n%s", r.file("run.env"))
			}
			r.mustNotLeak(t, secret)
			if !strings.Contains(r.out.String(), "(token from "+file+")") {
				t.Fatalf("the output does not say where the token came from:\n%s", r.out)
			}
		})
	}
}

// TestRestartAfterTheTokenWasRemoved: once the runner registered, the sweeper
// removes the token from its Secret and the kubelet the file. A restarted
// container needs none: an ephemeral runner exits on its run marker (0, as its
// run did), a persistent one resumes the registration it kept. A new pod with
// neither, and no token, fails saying why, and never runs config.sh.
func TestRestartAfterTheTokenWasRemoved(t *testing.T) {
	t.Parallel()
	for _, ephemeral := range []string{"true", "false"} {
		t.Run("ephemeral="+ephemeral, func(t *testing.T) {
			t.Parallel()
			state, file := tokenFile(t)
			env := []string{"RUNNER_TOKEN_FILE=" + file, "RUNNER_ORG=acme", "RUNNER_EPHEMERAL=" + ephemeral, "RUNNER_STATE_DIR=" + state}
			first := start(t, env...)
			if rc := first.wait(t); rc != 0 || !strings.Contains(first.file("config.log"), "token:"+secret) {
				t.Fatalf("first run: exit %d, config %q; output:\n%s", rc, first.file("config.log"), first.out)
			}
			if err := os.Remove(file); err != nil { // the kubelet, after the sweeper removed the key
				t.Fatal(err)
			}
			again := start(t, env...)
			if rc := again.wait(t); rc != 0 || again.file("config.log") != "" {
				t.Fatalf("restart: exit %d, config %q; want 0 without config.sh; output:\n%s", rc, again.file("config.log"), again.out)
			}
			if ran := again.file("run.log") != ""; ran == (ephemeral == "true") {
				t.Fatalf("restart: run.sh ran: %v; want it resumed only when persistent; output:\n%s", ran, again.out)
			}
		})
	}
	t.Run("new pod", func(t *testing.T) {
		t.Parallel()
		state, file := tokenFile(t)
		if err := os.Remove(file); err != nil {
			t.Fatal(err)
		}
		r := start(t, "RUNNER_TOKEN_FILE="+file, "RUNNER_ORG=acme", "RUNNER_EPHEMERAL=false", "RUNNER_STATE_DIR="+state)
		if rc := r.wait(t); rc != 1 || !strings.Contains(r.out.String(), "no registration token in "+file) ||
			r.file("config.log") != "" || r.file("run.log") != "" {
			t.Fatalf("exit %d, config %q, run %q; want 1, saying there is no token, and nothing run; output:\n%s",
				rc, r.file("config.log"), r.file("run.log"), r.out)
		}
	})
}
