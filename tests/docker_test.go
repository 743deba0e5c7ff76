package tests

import (
	"context"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/runnerscaler/runnerscaler/local/fakedocker"
	"github.com/runnerscaler/runnerscaler/local/githubsim"
	"github.com/runnerscaler/runnerscaler/local/loop"
	"github.com/runnerscaler/runnerscaler/local/testenv"
)

var (
	dockerOnce sync.Once
	dockerErr  error
)

// dockerStandIn puts local/fakedocker's stand-in for dockerd into the node under
// the docker sidecar's image name (docker:27-dind cannot be pulled here), once
// per test binary, so that pools with dockerEnabled run the product's own pod.
func dockerStandIn(t testing.TB) {
	t.Helper()
	dockerOnce.Do(func() { dockerErr = loop.DockerImage(context.Background(), testenv.ContainerdAddress(t)) })
	if dockerErr != nil {
		t.Fatal(dockerErr)
	}
}

// dockerAfterTheStop is a job step that uses docker at its end, after its
// runner's graceful stop has begun: it waits for the entrypoint's stop marker
// (RUNNER_JOB_DIR/stopping, written on SIGTERM), two seconds more (a docker
// that got SIGTERM with the runner is gone by then), and runs `docker info`.
const dockerAfterTheStop = `for i in $(seq 60); do [ -e "$RUNNER_JOB_DIR/stopping" ] && break; sleep 1; done
[ -e "$RUNNER_JOB_DIR/stopping" ] || { echo "the runner's stop did not begin within 60 s"; exit 3; }
sleep 2
docker info`

// TestDockerOutlivesTheRunnersGracefulStop: a docker pool's runner pod is
// deleted (a drain, a scale-down) while its job runs; the job uses docker after
// the stop began and within the graceful stop, and succeeds: the docker sidecar
// is a native sidecar, which the kubelet stops only after the runner container
// has exited. (As a plain container it got SIGTERM with the runner, and the
// job's docker call failed.) The sidecar is the product's, run from the
// stand-in image of local/fakedocker, which exits at once on SIGTERM as dockerd
// takes its containers down.
func TestDockerOutlivesTheRunnersGracefulStop(t *testing.T) {
	t.Parallel()
	dockerStandIn(t)
	w := newWorld(t, `
pools:
  - name: dind
    organization: acme
    labels: [dind]
    maxReplicas: 1
    scaleDownDelaySecondsAfterScaleOut: 1
    kubernetes: {namespace: %[1]s, dockerEnabled: true, template: %[2]s}
`, loop.Options{SweepEvery: time.Second})
	queued := w.loop.Sim.QueueJob(githubsim.JobSpec{Repository: "acme/app", Organization: "acme",
		Labels: []string{"self-hosted", "dind"}, Duration: time.Second, Script: dockerAfterTheStop})
	var running githubsim.Job
	w.waitFor("the job running", 3*time.Minute, func() bool {
		for _, j := range w.loop.Sim.RunningJobs() {
			if j.ID == queued.ID {
				running = j
				return true
			}
		}
		return false
	})
	// The kubelet reports the containers' states some time after they
	// change (a CI run read "PodInitializing" here with the job already
	// running): wait for its report that docker runs, within the job's own
	// wait for the stop.
	var pod *corev1.Pod
	w.waitFor("the kubelet reporting the job's docker running", 30*time.Second, func() bool {
		var err error
		pod, err = w.kube.CoreV1().Pods(w.ns).Get(context.Background(), running.RunnerName, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		return dockerRunning(pod)
	})
	// Deleted by hand under its job, as a drain does (the monitor notes it).
	if err := w.loop.DeletePod(context.Background(), pod); err != nil {
		t.Fatal(err)
	}
	var done githubsim.Job
	w.waitFor("the job completed", 2*time.Minute, func() bool {
		for _, j := range w.loop.Sim.Jobs() {
			if j.ID == queued.ID && j.State == githubsim.JobCompleted {
				done = j
				return true
			}
		}
		return false
	})
	if done.Conclusion != githubsim.JobSuccess || !strings.Contains(done.Output, "Server Version: "+fakedocker.Version) {
		t.Fatalf("job %d on %s ended %s (exit code %d), output:\n%s\nwant success, its `docker info` answered during the graceful stop",
			done.ID, done.RunnerName, done.Conclusion, done.ExitCode, done.Output)
	}
	w.waitFor("back to zero", 2*time.Minute, w.quiescent)
	w.noViolations()
}

// dockerRunning: the pod's docker container — a native sidecar, or a plain
// container as before — is running.
func dockerRunning(pod *corev1.Pod) bool {
	for _, cs := range append(pod.Status.InitContainerStatuses, pod.Status.ContainerStatuses...) {
		if cs.Name == "docker" && cs.State.Running != nil {
			return true
		}
	}
	return false
}
