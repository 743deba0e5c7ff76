package main

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// TestSamBuildRefusesABadPoolsFile: the Makefile's targets that `sam build`
// calls check the pools file before anything is built or copied, so a file
// the sweeper would refuse never reaches AWS.
func TestSamBuildRefusesABadPoolsFile(t *testing.T) {
	t.Parallel()
	if _, err := exec.LookPath("make"); err != nil {
		t.Skip("no make")
	}
	bad, err := filepath.Abs("testdata/two-errors.yaml")
	if err != nil {
		t.Fatal(err)
	}
	for _, target := range []string{"build-SweeperFunction", "build-WebhookFunction"} {
		artifacts := t.TempDir()
		cmd := exec.CommandContext(t.Context(), "make", "-s", "-C", "../..", target, "ARTIFACTS_DIR="+artifacts, "POOLS_FILE="+bad)
		out, err := cmd.CombinedOutput()
		if err == nil {
			t.Fatalf("make %s with a bad pools file succeeded:\n%s", target, out)
		}
		for _, want := range []string{bad + ":4:5: pools[0].lables: unknown field", bad + ":13:15: "} {
			if !strings.Contains(string(out), want) {
				t.Errorf("make %s: output lacks %q:\n%s", target, want, out)
			}
		}
		if entries, _ := os.ReadDir(artifacts); len(entries) > 0 {
			t.Errorf("make %s wrote %d files to ARTIFACTS_DIR", target, len(entries))
		}
	}
}
