package runner_test

import (
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
)

// TestExitBeforeTheRunnerStartsSaysSo: a container that exits before its
// runner starts (here: docker not ready in time) leaves "runner not started"
// as its termination message: the kubelet starts it again, and an ephemeral
// runner then runs like a first start, so the sweeper must not take it for
// finished. A runner that ran and exited says it ran.
func TestExitBeforeTheRunnerStartsSaysSo(t *testing.T) {
	t.Parallel()
	state := t.TempDir()
	termLog := filepath.Join(t.TempDir(), "termination-log")
	r := start(t, "ACTIONS_RUNNER_INPUT_JITCONFIG="+jit, "DOCKER_ENABLED=true", "STUB_DOCKER_FAILS=1000", "DOCKER_WAIT_TIMEOUT=1",
		"RUNNER_STATE_DIR="+state, "RUNNER_TERMINATION_LOG="+termLog)
	if rc := r.wait(t); rc != 1 || r.file("run.log") != "" {
		t.Fatalf("exit %d, runner started %v; want 1 before the runner starts", rc, r.file("run.log") != "")
	}
	want := "runner not started: docker did not become ready within 1s"
	if got := readTermLog(t, termLog); !strings.HasPrefix(got, want) {
		t.Fatalf("termination log %q, want it to begin %q", got, want)
	}

	// Started again with docker ready: it runs, as a first start.
	termLog = filepath.Join(t.TempDir(), "termination-log")
	again := start(t, "ACTIONS_RUNNER_INPUT_JITCONFIG="+jit, "STUB_RC=3", "RUNNER_STATE_DIR="+state, "RUNNER_TERMINATION_LOG="+termLog)
	if rc := again.wait(t); rc != 3 || again.file("run.log") == "" {
		t.Fatalf("restart exited %d, runner started %v; want the runner run (and its 3)", rc, again.file("run.log") != "")
	}
	if got := readTermLog(t, termLog); !strings.HasPrefix(got, "runner ran: started at ") {
		t.Fatalf("termination log %q after the runner ran, want it to say the runner ran", got)
	}
}

// TestKillBeforeTheRunMarkerSaysNotStarted: a container killed with SIGKILL
// before its runner started (an OOM kill while configuring, waiting for
// docker: nothing of the entrypoint runs then) leaves "runner not started" as
// its termination message, written from its first line, so the sweeper does
// not take a restart that runs the runner for a finished one; the restart runs
// it as a first start and then says it ran. The termination log is root's: a
// job step cannot write it.
func TestKillBeforeTheRunMarkerSaysNotStarted(t *testing.T) {
	t.Parallel()
	state := t.TempDir()
	termLog := filepath.Join(t.TempDir(), "termination-log")
	if err := os.WriteFile(termLog, nil, 0o666); err != nil { // as the kubelet makes it
		t.Fatal(err)
	}
	r := start(t, "ACTIONS_RUNNER_INPUT_JITCONFIG="+jit, "DOCKER_ENABLED=true", "STUB_DOCKER_FAILS=1000", "DOCKER_WAIT_TIMEOUT=60",
		"RUNNER_STATE_DIR="+state, "RUNNER_TERMINATION_LOG="+termLog)
	r.waitOutput(t, "jobs on this runner can use docker")
	_ = syscall.Kill(-r.cmd.Process.Pid, syscall.SIGKILL) // as the kernel's OOM killer: no trap runs
	r.wait(t)
	if got := readTermLog(t, termLog); !strings.HasPrefix(got, "runner not started:") {
		t.Fatalf("termination log %q after a SIGKILL before the run marker, want it to begin %q", got, "runner not started:")
	}
	info, err := os.Stat(termLog)
	if err != nil {
		t.Fatal(err)
	}
	if st, ok := info.Sys().(*syscall.Stat_t); !ok || st.Uid != 0 || info.Mode().Perm() != 0o644 {
		t.Fatalf("termination log mode %v owner %v, want root's, 0644: a job could write it", info.Mode().Perm(), info.Sys())
	}

	termLog = filepath.Join(t.TempDir(), "termination-log")
	again := start(t, "ACTIONS_RUNNER_INPUT_JITCONFIG="+jit, "RUNNER_STATE_DIR="+state, "RUNNER_TERMINATION_LOG="+termLog)
	if rc := again.wait(t); rc != 0 || again.file("run.log") == "" {
		t.Fatalf("restart exited %d, runner started %v; want the runner run as a first start", rc, again.file("run.log") != "")
	}
	if got := readTermLog(t, termLog); !strings.HasPrefix(got, "runner ran:") {
		t.Fatalf("termination log %q after the restart ran its runner, want it to say the runner ran", got)
	}
}

func readTermLog(t *testing.T, path string) string {
	t.Helper()
	msg, err := os.ReadFile(path)
	if err != nil && !errors.Is(err, fs.ErrNotExist) {
		t.Fatal(err)
	}
	return strings.TrimSpace(string(msg))
}
