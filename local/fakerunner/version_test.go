package fakerunner_test

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/runnerscaler/runnerscaler/internal/runnerversion"
	"github.com/runnerscaler/runnerscaler/local/githubsim"
)

// TestRefusedVersionIsSaidAndTakesNoJob: a fake runner of a version GitHub
// refuses — no jobs 30 days after the next release (JIT), or below the
// registration minimum (token) — exits 1 with the real runner's words, which
// the entrypoint makes the container's termination message, and takes no job.
// Without FAKERUNNER_VERSION it plays runner/Dockerfile's version.
func TestRefusedVersionIsSaidAndTakesNoJob(t *testing.T) {
	t.Parallel()
	e := newEnv(t, githubsim.Options{RunnerReleases: []githubsim.RunnerRelease{
		{Version: "2.331.0", PublishedAt: time.Now().Add(-40 * 24 * time.Hour)}}})
	_, jit := e.jitConfig("refused-jit")
	e.queue(time.Second)
	cases := []struct {
		name    string
		environ []string
		want    string
	}{
		{"no messages", []string{"ACTIONS_RUNNER_INPUT_JITCONFIG=" + jit, "FAKERUNNER_VERSION=2.330.0"},
			"runner refused by GitHub: An error occurred: Error: Forbidden Runner version v2.330.0 is deprecated and cannot receive messages."},
		{"no registration", []string{"RUNNER_TOKEN=" + e.registrationToken(), "RUNNER_ORG=acme", "RUNNER_LABELS=big", "FAKERUNNER_VERSION=2.328.0"},
			"runner refused by GitHub: config.sh: error: Your runner version is out of date and can no longer register with GitHub. " +
				"The minimum runner version required to register with GitHub Actions is now 2.329.0."},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			home := runnerHome(t)
			termLog := filepath.Join(t.TempDir(), "termination-log")
			p := entrypoint(t, e, home, t.TempDir(), append(tc.environ, "RUNNER_TERMINATION_LOG="+termLog)...)
			if code := p.wait(t, 30*time.Second); code != 1 {
				t.Fatalf("exit %d, want 1; output:\n%s", code, p.output())
			}
			msg, err := os.ReadFile(termLog)
			if err != nil {
				t.Fatalf("no termination message: %v; output:\n%s", err, p.output())
			}
			if got := strings.TrimSpace(string(msg)); !strings.HasPrefix(got, tc.want) {
				t.Fatalf("termination message %q, want it to begin %q", got, tc.want)
			}
		})
	}
	t.Run("default version", func(t *testing.T) {
		t.Parallel()
		_, jit := e.jitConfig("current")
		home := runnerHome(t)
		p := entrypoint(t, e, home, t.TempDir(), "ACTIONS_RUNNER_INPUT_JITCONFIG="+jit)
		want := "Current runner version: '" + runnerversion.Pinned + "'"
		e.waitFor("the runner's version line", 30*time.Second, func() bool { return strings.Contains(p.output(), want) })
	})
	t.Cleanup(func() {
		for _, j := range e.sim.Jobs() {
			if j.RunnerName == "refused-jit" {
				t.Errorf("job %d went to the refused runner %s", j.ID, j.RunnerName)
			}
		}
	})
}
