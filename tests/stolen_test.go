package tests

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/runnerscaler/runnerscaler/internal/status"
	"github.com/runnerscaler/runnerscaler/local/githubsim"
	"github.com/runnerscaler/runnerscaler/local/loop"
)

// stolenPools: a gpu runner's labels (gpu, self-hosted, linux, x64) cover a
// linux job's (self-hosted, linux), and linux's runners never start (their pods
// cannot be scheduled), so the only runner a queued linux job can get is a gpu
// one.
const stolenPools = `
pools:
  - name: linux
    organization: acme
    maxReplicas: 2
    scaleDownDelaySecondsAfterScaleOut: 1
    kubernetes: {namespace: %[1]s, template: %[3]s}
  - name: gpu
    organization: acme
    labels: [gpu]
    maxReplicas: 2
    scaleDownDelaySecondsAfterScaleOut: 1
    kubernetes: {namespace: %[1]s, template: %[2]s}
`

// TestRunnerOfAnotherPoolTakesAJob: the simulator hands the oldest queued job
// a runner's labels cover to the runner, as GitHub does, so the gpu runner
// created for the gpu job takes the older linux job. The gpu pool then counts
// the linux job, and its own job gets a replacement runner: it starts while
// the linux job still runs on the first gpu runner. Status lists the linux job
// in both pools, the webhook writes JobsOnAnotherPoolsRunner for gpu, both jobs
// complete, and nothing is left.
func TestRunnerOfAnotherPoolTakesAJob(t *testing.T) {
	t.Parallel()
	metrics := &logBuffer{}
	w := newWorldWith(t, stolenPools, loop.Options{SweepEvery: time.Second, WebhookMetrics: metrics},
		loop.RunnerTemplate, pendingTemplate)
	// Queued first, the linux job is the older: the first gpu runner online takes it.
	linux := w.loop.Sim.QueueJob(githubsim.JobSpec{Repository: "acme/app", Organization: "acme",
		Labels: []string{"self-hosted", "linux"}, Duration: time.Minute})
	gpu := w.loop.Sim.QueueJob(githubsim.JobSpec{Repository: "acme/app", Organization: "acme",
		Labels: []string{"self-hosted", "gpu"}, Duration: time.Second})
	w.waitFor("the linux job running on a gpu runner", 2*time.Minute, func() bool {
		return w.job(linux.ID).State == githubsim.JobInProgress
	})
	thief := w.job(linux.ID).RunnerName
	if !strings.HasPrefix(thief, "gpu-") {
		t.Fatalf("the linux job runs on %q, want a gpu runner", thief)
	}
	w.statusShowsStolen(linux.ID, thief)
	w.waitFor("both jobs completed", 3*time.Minute, func() bool { return allDone(w.loop.Sim.Jobs()) })
	l, g := w.job(linux.ID), w.job(gpu.ID)
	if g.RunnerName == thief || !strings.HasPrefix(g.RunnerName, "gpu-") || !g.StartedAt.Before(l.EndedAt) {
		t.Fatalf("gpu job ran on %s from %s, linux job on %s until %s: want the gpu job on another gpu runner before the linux job ended",
			g.RunnerName, g.StartedAt, l.RunnerName, l.EndedAt)
	}
	if got := stolenMetric(t, metrics); got != "gpu" {
		t.Fatalf("JobsOnAnotherPoolsRunner written for %q, want once for gpu", got)
	}
	w.waitFor("back to zero", 2*time.Minute, w.quiescent)
	w.noViolations()
}

// statusShowsStolen waits, within the linux job's run, for `runnerscaler
// status` to list it in both pools: counted by gpu, whose runner runs it.
func (w *world) statusShowsStolen(job int64, runner string) {
	w.t.Helper()
	g := w.gatherer()
	text := fmt.Sprintf("job %d of pool linux runs on runner %s", job, runner)
	var r status.Report
	w.waitFor("status showing the linux job counted in gpu", 30*time.Second, func() bool {
		var err error
		if r, err = g.Report(w.t.Context(), ""); err != nil {
			w.t.Fatal(err)
		}
		return hasMove(r, "linux", status.MovedAway, text) && hasMove(r, "gpu", status.MovedHere, text)
	})
	var out strings.Builder
	if err := status.RenderReport(&out, r); err != nil {
		w.t.Fatal(err)
	}
	if !strings.Contains(out.String(), "JOBS COUNTED IN ANOTHER POOL") || !strings.Contains(out.String(), text) {
		w.t.Fatalf("status:\n%s\nwant %q under JOBS COUNTED IN ANOTHER POOL", out.String(), text)
	}
}

func hasMove(r status.Report, pool, direction, text string) bool {
	for _, p := range r.Pools {
		for _, m := range p.Moves {
			if p.Name == pool && m.Direction == direction && m.Text == text {
				return true
			}
		}
	}
	return false
}

// stolenMetric is the pool of the one JobsOnAnotherPoolsRunner record ("" and
// a failure when there are others).
func stolenMetric(t *testing.T, metrics *logBuffer) string {
	t.Helper()
	lines := metrics.matching([]string{"JobsOnAnotherPoolsRunner"}, 100)
	if len(lines) != 1 {
		t.Fatalf("%d JobsOnAnotherPoolsRunner records, want 1: %v", len(lines), lines)
	}
	var rec struct {
		Pool                     string
		JobsOnAnotherPoolsRunner float64
	}
	if err := json.Unmarshal([]byte(lines[0]), &rec); err != nil {
		t.Fatalf("metric line %s: %v", lines[0], err)
	}
	if rec.JobsOnAnotherPoolsRunner != 1 {
		t.Fatalf("metric line %s: want JobsOnAnotherPoolsRunner 1", lines[0])
	}
	return rec.Pool
}
