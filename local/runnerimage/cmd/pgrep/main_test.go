package main

import (
	"os/exec"
	"testing"
)

func TestPgrep(t *testing.T) {
	t.Parallel()
	name := "pgrep-test-" + t.Name() + "-Runner.Worker"
	cmd := &exec.Cmd{Path: "/bin/sleep", Args: []string{name, "30"}}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
	cases := []struct {
		args []string
		want int
	}{
		{[]string{"-f", "Runner.Worker 30$"}, 0},      // the command line
		{[]string{"-f", "pgrep-test-TestPgrep-R"}, 0}, // a part of it
		{[]string{"-f", "-x", name + " 30"}, 0},       // all of it
		{[]string{"-fx", "Runner.Worker"}, 1},         // not all of it
		{[]string{"sleep"}, 0},                        // the name, without -f
		{[]string{"-f", "no-such-process-" + t.Name() + "x{2}"}, 1},
		{[]string{"-q", "x"}, 2},
		{[]string{"-f"}, 2},
		{[]string{"-f", "("}, 2},
	}
	for _, tc := range cases {
		if got := run(tc.args); got != tc.want {
			t.Errorf("pgrep %q: %d, want %d", tc.args, got, tc.want)
		}
	}
}
