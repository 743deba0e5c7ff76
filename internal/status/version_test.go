package status_test

import (
	"bytes"
	"strings"
	"testing"
	"time"

	"github.com/runnerscaler/runnerscaler/internal/status"
)

// TestRenderRunnerVersions: the report lists each pool's runner version with
// its state, deadline and days left, a refused one saying what to do; the
// pool's own view has it on one line; pools without one are left out.
func TestRenderRunnerVersions(t *testing.T) {
	t.Parallel()
	refused := &status.RunnerVersion{Version: "2.320.0", Stated: true, Latest: "2.332.0", State: status.VersionRefused,
		DaysLeft: 0, Reason: "GitHub refuses runners older than 2.329.0", CheckedAt: now}
	behind := &status.RunnerVersion{Version: "2.331.0", Latest: "2.332.0", State: status.VersionBehind,
		Deadline: time.Date(2026, 12, 20, 0, 0, 0, 0, time.UTC), DeadlineExact: true, DaysLeft: 5,
		Reason: "2.332.0 was published 2026-11-20", CheckedAt: now}
	r := status.Report{At: now, Pools: []status.Pool{{Name: "old", RunnerVersion: refused}, {Name: "soon", RunnerVersion: behind},
		{Name: "unknown-pool"}}}
	var out bytes.Buffer
	if err := status.RenderReport(&out, r); err != nil {
		t.Fatal(err)
	}
	text := out.String()
	for _, want := range []string{"RUNNER VERSIONS",
		"old   2.320.0",
		"refused", "GitHub refuses runners older than 2.329.0; upgrade the pool's image",
		"2.331.0 (runner/Dockerfile)", "2026-12-20", " 5 "} {
		if !strings.Contains(text, want) {
			t.Errorf("report lacks %q:\n%s", want, text)
		}
	}
	if strings.Count(text[strings.Index(text, "RUNNER VERSIONS"):], "\n") != 4 {
		t.Errorf("want a header and one row for each of the 2 pools with a version:\n%s", text)
	}
	out.Reset()
	if err := status.RenderPool(&out, now, r.Pools[1]); err != nil {
		t.Fatal(err)
	}
	if want := "runner version: 2.331.0 (runner/Dockerfile), behind (latest 2.332.0), deadline 2026-12-20, 5 days left: 2.332.0 was published 2026-11-20\n"; !strings.Contains(out.String(), want) {
		t.Errorf("pool view lacks %q:\n%s", want, out.String())
	}
}
