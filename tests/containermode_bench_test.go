package tests

import (
	"fmt"
	"testing"
	"time"

	"github.com/runnerscaler/runnerscaler/internal/pool"
	"github.com/runnerscaler/runnerscaler/local/githubsim"
	"github.com/runnerscaler/runnerscaler/local/loop"
)

// firstStepJobs is how many container jobs BenchmarkContainerJobFirstStep
// runs per pool, one at a time.
const firstStepJobs = 8

// BenchmarkContainerJobFirstStep measures, on the real node, how long a
// container job (a job container and a service, both of the job image) waits
// from being queued to its first step — its script's start, as the runner's
// worker reports it with the result (githubsim.Job.ScriptStartedAt) — when
// its pool is empty: firstStepJobs jobs one at a time, each queued once the
// last one's runner and what it left are gone, so that each one starts a
// runner (the webhook's nudge; the schedule every 2 s). In each container mode
// the first step comes after the hooks' prepare_job (local/fakehook: the
// permission gate, the workflow pod created and polled until Running;
// kubernetes-novolume also copies the workspace in) and runs in the workflow
// pod over exec; on a dind pool (dockerEnabled, the docker sidecar from
// local/fakedocker's stand-in image) it comes once the runner's entrypoint has
// found docker answering. The stand-in runs no container: the dind job's
// script runs on the runner, with none of docker's image pull and container
// start before it, so its figure is the floor of a dind container job's, not
// the same work as the container modes'. It reports queued → first step and
// job started (the runner took it) → first step, p50 and p95, per pool.
func BenchmarkContainerJobFirstStep(b *testing.B) {
	for _, mode := range append([]string{"dind"}, pool.ContainerModes...) {
		b.Run("mode="+mode, func(b *testing.B) {
			for b.Loop() {
				first, init := containerJobFirstSteps(b, mode)
				b.ReportMetric(ms(loop.Percentile(first, 50)), "queued-to-first-step-p50-ms")
				b.ReportMetric(ms(loop.Percentile(first, 95)), "queued-to-first-step-p95-ms")
				b.ReportMetric(ms(loop.Percentile(init, 50)), "started-to-first-step-p50-ms")
				b.ReportMetric(ms(loop.Percentile(init, 95)), "started-to-first-step-p95-ms")
			}
		})
	}
}

// containerJobFirstSteps runs firstStepJobs container jobs on a pool of mode
// ("dind", or a container mode) and returns their queued → first step and
// started → first step.
func containerJobFirstSteps(b *testing.B, mode string) (first, init []time.Duration) {
	opts := loop.Options{SweepEvery: 2 * time.Second}
	var w *world
	var img string
	if mode == "dind" {
		dockerStandIn(b)
		img = jobImage(b)
		w = newWorld(b, `
pools:
  - name: cm
    organization: acme
    labels: [cm]
    maxReplicas: 1
    scaleDownDelaySecondsAfterScaleOut: 1
    kubernetes: {namespace: %[1]s, dockerEnabled: true, template: %[2]s}
`, opts)
	} else {
		cm := newContainerModeStack(b, "")
		img = cm.jobImage
		fields := "jobsNamespace: " + cm.jobs
		if mode == pool.ContainerModeKubernetes {
			fields = cm.workVolumeClaim()
		}
		w = newWorldWith(b, containerModePool, opts, cm.template, func(string) string { return mode }, func(string) string { return fields })
		cm.prepare(b, w)
	}
	// The script names its host and, on the dind pool, asks docker.
	script := loop.ContainerScript
	if mode == "dind" {
		script += "; docker info >/dev/null"
	}
	for i := range firstStepJobs {
		queued := w.loop.Sim.QueueJob(githubsim.JobSpec{Repository: "acme/app", Organization: "acme",
			Labels: []string{"self-hosted", "cm"}, Duration: time.Second, Script: script,
			Container: &githubsim.JobContainer{Image: img}, Services: []githubsim.JobContainer{{Image: img}}})
		var done githubsim.Job
		w.waitFor(fmt.Sprintf("container job %d of %d completed", i+1, firstStepJobs), 3*time.Minute, func() bool {
			done = w.job(queued.ID)
			return done.State == githubsim.JobCompleted
		})
		if done.Conclusion != githubsim.JobSuccess || done.ScriptStartedAt.IsZero() {
			b.Fatalf("job %d on %s ended %s (exit %d, script started %s), output:\n%s", done.ID, done.RunnerName,
				done.Conclusion, done.ExitCode, done.ScriptStartedAt, done.Output)
		}
		first = append(first, done.ScriptStartedAt.Sub(done.QueuedAt))
		init = append(init, done.ScriptStartedAt.Sub(done.StartedAt))
		w.waitFor("back to zero", 2*time.Minute, w.quiescent)
	}
	w.noViolations()
	return first, init
}
