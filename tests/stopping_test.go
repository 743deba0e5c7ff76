package tests

import (
	"context"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/runnerscaler/runnerscaler/local/githubsim"
	"github.com/runnerscaler/runnerscaler/local/loop"
)

// TestStoppingRunnerTakesNoNewJob: the pod of a busy persistent runner is deleted
// by hand (a drain does the same) while jobs are queued behind its job. Its job
// finishes; the runner, whose stop has begun, takes none of the queued jobs (the
// entrypoint holds its listener as the job ends, and the job's completed delivery
// has the sweeper unregister it at once); a new runner takes them. No job is
// cancelled or lost.
func TestStoppingRunnerTakesNoNewJob(t *testing.T) {
	t.Parallel()
	w := newWorld(t, `
pools:
  - name: keep
    organization: acme
    labels: [keep]
    ephemeral: false
    maxReplicas: 1
    scaleDownDelaySecondsAfterScaleOut: 1
    kubernetes: {namespace: %[1]s, template: %[2]s}
`, loop.Options{SweepEvery: time.Second})
	w.queue(1, 4*time.Second, "keep")
	var first githubsim.Job
	w.waitFor("the first job running", 2*time.Minute, func() bool {
		running := w.loop.Sim.RunningJobs()
		if len(running) == 1 {
			first = running[0]
		}
		return len(running) == 1
	})
	w.queue(3, time.Second, "keep")
	pod := first.RunnerName
	obj, err := w.kube.CoreV1().Pods(w.ns).Get(context.Background(), pod, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	// Deleted by hand (the monitor notes it: the stop under a job is the test's,
	// and what this test judges is how each job ended).
	if err := w.loop.DeletePod(context.Background(), obj); err != nil {
		t.Fatal(err)
	}
	w.waitFor("every job completed", 3*time.Minute, func() bool { return allDone(w.loop.Sim.Jobs()) })
	for _, j := range w.loop.Sim.Jobs() {
		if j.Conclusion != githubsim.JobSuccess {
			t.Errorf("job %d on %s ended %s (lost: %v): want every job to succeed", j.ID, j.RunnerName, j.Conclusion, j.LostRunner)
		}
		if j.ID != first.ID && j.RunnerName == pod {
			t.Errorf("job %d was handed to %s after its pod was deleted", j.ID, pod)
		}
	}
	w.waitFor("back to zero", 2*time.Minute, w.quiescent)
	w.noViolations()
}
