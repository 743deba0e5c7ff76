package tests

import (
	"bytes"
	"errors"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/runnerscaler/runnerscaler/internal/pool"
	"github.com/runnerscaler/runnerscaler/internal/runnerpod"
	"github.com/runnerscaler/runnerscaler/local/githubsim"
	"github.com/runnerscaler/runnerscaler/local/loop"
	"github.com/runnerscaler/runnerscaler/local/testenv"
)

// What the failure-path tests of container mode share: a pool in a container
// mode on the closed loop (set up as TestContainerJobsRunInWorkflowPods
// does), its container jobs, and the faults they inject into a runner pod.

// failurePool is a container-mode pool: %[1]s the runners' namespace, %[2]s
// the runner template, %[3]s the mode, %[4]s the mode's fields, %[5]s the
// hook template.
const failurePool = `
pools:
  - name: cm
    organization: acme
    labels: [cm]
    maxReplicas: 1
    scaleDownDelaySecondsAfterScaleOut: 1
    rerunsPerRun: 1
    kubernetes:
      namespace: %[1]s
      serviceAccountName: cm-runner
      containerMode: %[3]s
      %[4]s
      hookTemplate: %[5]s
      template: %[2]s
`

// cmSetup says how a container-mode world differs from the plain one.
type cmSetup struct {
	mode string
	opts loop.Options
	// env is added to the runner template's container.
	env []corev1.EnvVar
	// hookTemplate is the pool's hookTemplate (YAML flow; "": a label only).
	hookTemplate string
	// memoryLimit limits the runner container's memory (loop.Template).
	memoryLimit string
}

// cmWorld is a closed loop with the pool cm of failurePool.
type cmWorld struct {
	*world
	pool   *pool.Pool
	hookNS string
}

// newContainerModeWorld starts the loop with the pool cm in s.mode, its
// runners reaching the API server with their in-cluster configuration and the
// hooks' RBAC applied (as TestContainerJobsRunInWorkflowPods).
func newContainerModeWorld(t *testing.T, s cmSetup) *cmWorld {
	t.Helper()
	jobImage(t)
	kube, jobs := testenv.Namespace(t)
	access := testenv.PrepareInClusterAccess(t, kube)
	modeFields := "jobsNamespace: " + jobs
	if s.mode == pool.ContainerModeKubernetes {
		modeFields = fmt.Sprintf("workVolumeClaim: {storageClassName: %s, accessModes: [ReadWriteOnce], resources: {requests: {storage: 1Gi}}}",
			storageClass(t, kube))
	}
	hookTemplate := s.hookTemplate
	if hookTemplate == "" {
		hookTemplate = "{metadata: {labels: {team: ci}}}"
	}
	tmpl := func(img string) string {
		return loop.Template{Image: img, MemoryLimit: s.memoryLimit, Env: append(access.Env(), s.env...),
			Volumes:      []corev1.Volume{access.Volume("kube-api-access-stack")},
			VolumeMounts: []corev1.VolumeMount{access.VolumeMount("kube-api-access-stack")}}.Spec()
	}
	w := newWorldWith(t, failurePool, s.opts, tmpl, func(string) string { return s.mode },
		func(string) string { return modeFields }, func(string) string { return hookTemplate })
	testenv.PrepareInClusterAccess(t, kube, w.ns)
	p := &w.cfg.Pools[0]
	applyHookRBAC(t, kube, p)
	testenv.EphemeralVolumes(t, kube, w.ns, t.TempDir())
	return &cmWorld{world: w, pool: p, hookNS: p.Kubernetes.HookNamespace()}
}

// queueContainerJob queues a job of pool cm with a container (the job image)
// that runs script in it, lasting d in all. The fake runner sleeps what is
// left of d after the script in the runner container, not in the workflow
// pod: a test whose job must run in its workflow pod until its end sleeps in
// its script.
func (c *cmWorld) queueContainerJob(d time.Duration, script string) githubsim.Job {
	c.t.Helper()
	return c.loop.Sim.QueueJob(githubsim.JobSpec{Repository: "acme/app", Organization: "acme",
		Labels: []string{"self-hosted", "cm"}, Duration: d, Script: script,
		Container: &githubsim.JobContainer{Image: jobImage(c.t)}})
}

// inWorkflowPod waits for job id to run on a runner whose workflow pod (the
// hooks' name and label for it, in the hook namespace) is Running, and
// returns the job and that pod.
func (c *cmWorld) inWorkflowPod(id int64) (githubsim.Job, *corev1.Pod) {
	c.t.Helper()
	var j githubsim.Job
	var wp *corev1.Pod
	c.waitFor("the job running in its workflow pod", 3*time.Minute, func() bool {
		switch j = c.job(id); j.State {
		case githubsim.JobCompleted:
			c.t.Fatalf("job %d ended %s (exit %d; %s) before its workflow pod ran, output:\n%s\n%s", j.ID, j.Conclusion, j.ExitCode,
				j.FailureReason, j.Output, c.diagnose())
		case githubsim.JobInProgress:
		default:
			return false
		}
		pod, err := c.kube.CoreV1().Pods(c.hookNS).Get(c.t.Context(), runnerpod.WorkflowPodName(j.RunnerName), metav1.GetOptions{})
		switch {
		case apierrors.IsNotFound(err):
			return false
		case err != nil:
			c.t.Fatal(err)
		}
		wp = pod
		return pod.Labels[runnerpod.LabelHookRunnerPod] == j.RunnerName && pod.Status.Phase == corev1.PodRunning
	})
	return j, wp
}

// runnerPod reads the pod of the runner named name.
func (c *cmWorld) runnerPod(name string) *corev1.Pod {
	c.t.Helper()
	pod, err := c.kube.CoreV1().Pods(c.ns).Get(c.t.Context(), name, metav1.GetOptions{})
	if err != nil {
		c.t.Fatalf("reading runner pod %s: %v", name, err)
	}
	return pod
}

// workflowPodLook is whether the workflow pod uid named name exists in the
// hook namespace, and whether it is being deleted.
func (c *cmWorld) workflowPodLook(name string, uid string) (exists, deleting bool) {
	c.t.Helper()
	pod, err := c.kube.CoreV1().Pods(c.hookNS).Get(c.t.Context(), name, metav1.GetOptions{})
	if err != nil && !apierrors.IsNotFound(err) {
		c.t.Fatalf("reading workflow pod %s: %v", name, err)
	}
	exists = err == nil && string(pod.UID) == uid
	return exists, exists && pod.DeletionTimestamp != nil
}

// loseJobReport makes the runner container of pod report no job from now on,
// whatever it runs: its readiness probe (runnerpod.JobProbeCommand) is
// replaced, in the container's own filesystem reached from the host through
// /proc, by one that always answers "no job". The pod's own report of its job
// is then lost (its container turns not ready), as when the job hooks'
// marker and the worker process cannot be seen.
func loseJobReport(t *testing.T, pod *corev1.Pod) {
	t.Helper()
	cs := runnerpod.RunnerStatus(pod)
	if cs == nil {
		t.Fatalf("pod %s has no runner container status", pod.Name)
	}
	_, id, _ := strings.Cut(cs.ContainerID, "://")
	pid, err := processOf(id)
	if err != nil {
		t.Fatalf("pod %s: %v", pod.Name, err)
	}
	probe := filepath.Join(fmt.Sprintf("/proc/%d/root", pid), runnerpod.JobProbeCommand)
	tmp := probe + ".lost"
	if err := os.WriteFile(tmp, []byte("#!/bin/sh\nexit 1\n"), 0o755); err != nil {
		t.Fatalf("pod %s: writing the lost report's probe: %v", pod.Name, err)
	}
	if err := os.Rename(tmp, probe); err != nil {
		t.Fatalf("pod %s: replacing its job probe: %v", pod.Name, err)
	}
}

// processOf is the host pid of a process in container id's cgroup.
func processOf(id string) (int, error) {
	if id == "" {
		return 0, errors.New("no container id")
	}
	entries, err := os.ReadDir("/proc")
	if err != nil {
		return 0, err
	}
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		raw, err := os.ReadFile(filepath.Join("/proc", e.Name(), "cgroup"))
		if err == nil && bytes.Contains(raw, []byte("/"+id+"\n")) {
			return pid, nil
		}
	}
	return 0, fmt.Errorf("no process in container %s", id)
}

// evictUntil evicts pod (this very pod: its UID) through the eviction API as
// `kubectl drain` does, every retry until an eviction is not refused (429) or
// limit has passed, and returns the answers (loop.Eviction, as Drain reports
// them: 201 evicted, 429 refused, 404 gone).
func evictUntil(t *testing.T, c *cmWorld, pod *corev1.Pod, retry, limit time.Duration) []loop.Eviction {
	deadline := time.Now().Add(limit)
	var answers []loop.Eviction
	for {
		err := c.kube.PolicyV1().Evictions(pod.Namespace).Evict(t.Context(), &policyv1.Eviction{
			ObjectMeta:    metav1.ObjectMeta{Name: pod.Name, Namespace: pod.Namespace},
			DeleteOptions: &metav1.DeleteOptions{Preconditions: &metav1.Preconditions{UID: &pod.UID}}})
		a := loop.Eviction{Pod: pod.Name, At: time.Now(), Err: err}
		switch {
		case err == nil:
			a.Code = http.StatusCreated
		case apierrors.IsTooManyRequests(err):
			a.Code = http.StatusTooManyRequests
		case apierrors.IsNotFound(err), apierrors.IsConflict(err):
			a.Code = http.StatusNotFound
		}
		answers = append(answers, a)
		if a.Code != http.StatusTooManyRequests || time.Now().Add(retry).After(deadline) {
			return answers
		}
		select {
		case <-t.Context().Done():
			return answers
		case <-time.After(retry):
		}
	}
}
