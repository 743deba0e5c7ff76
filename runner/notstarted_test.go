package runner_test

import (
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestExitBeforeTheRunnerStartsSaysSo: a container that exits before its
// runner starts (here: docker not ready in time) leaves "runner not started"
// as its termination message: the kubelet starts it again, and an ephemeral
// runner then runs like a first start, so the sweeper must not take it for
// finished. A runner that ran and exited leaves no such message, and a
// restarted ephemeral container that finds its run marker starts nothing.
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
	if got := readTermLog(t, termLog); got != "" {
		t.Fatalf("termination log %q after the runner ran, want none", got)
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
