package tests

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/runnerscaler/runnerscaler/internal/pool"
	"github.com/runnerscaler/runnerscaler/internal/runnerpod"
	"github.com/runnerscaler/runnerscaler/local/githubsim"
	"github.com/runnerscaler/runnerscaler/local/loop"
	"github.com/runnerscaler/runnerscaler/local/testenv"
)

var (
	jobImageOnce sync.Once
	jobImageRef  string
	jobImageErr  error
)

// jobImage is the image of the container jobs and their services
// (loop.JobImage), imported into the node once per test binary.
func jobImage(t testing.TB) string {
	t.Helper()
	jobImageOnce.Do(func() {
		jobImageRef, jobImageErr = loop.JobImage(context.Background(), testenv.ContainerdAddress(t), nil)
	})
	if jobImageErr != nil {
		t.Fatal(jobImageErr)
	}
	return jobImageRef
}

// containerModePool is a pool in a container mode: %[1]s the runners'
// namespace, %[2]s the runner template, %[3]s the mode, %[4]s the mode's
// fields (jobsNamespace, workVolumeClaim).
const containerModePool = `
pools:
  - name: cm
    organization: acme
    labels: [cm]
    maxReplicas: 1
    scaleDownDelaySecondsAfterScaleOut: 1
    kubernetes:
      namespace: %[1]s
      serviceAccountName: cm-runner
      containerMode: %[3]s
      %[4]s
      hookTemplate: {metadata: {labels: {team: ci}}}
      template: %[2]s
`

// TestContainerJobsRunInWorkflowPods: in each container mode, a job with a
// container and a service runs through the hooks (the fake runner's, written
// from their source: local/fakehook) in a workflow pod of the product's
// making — the runner pod's environment, service account and RBAC, work
// volume and hook template — succeeds with its script's output from the job
// container, and afterwards nothing is left: no pod or Secret labelled
// runner-pod, no work claim, no runner.
func TestContainerJobsRunInWorkflowPods(t *testing.T) {
	for _, mode := range pool.ContainerModes {
		t.Run(mode, func(t *testing.T) {
			t.Parallel()
			jobImg := jobImage(t)
			kube, jobs := testenv.Namespace(t)
			class := storageClass(t, kube)
			access := testenv.PrepareInClusterAccess(t, kube)
			modeFields := "jobsNamespace: " + jobs
			if mode == pool.ContainerModeKubernetes {
				modeFields = fmt.Sprintf("workVolumeClaim: {storageClassName: %s, accessModes: [ReadWriteOnce], resources: {requests: {storage: 1Gi}}}", class)
			}
			// The runner pods reach the API server with their in-cluster
			// configuration (testenv.InClusterAccess: what kube-proxy and the
			// ServiceAccount admission plugin give a pod in a cluster).
			tmpl := func(img string) string {
				return loop.Template{Image: img, Env: access.Env(),
					Volumes:      []corev1.Volume{access.Volume("kube-api-access-stack")},
					VolumeMounts: []corev1.VolumeMount{access.VolumeMount("kube-api-access-stack")}}.Spec()
			}
			w := newWorldWith(t, containerModePool, loop.Options{SweepEvery: time.Second}, tmpl,
				func(string) string { return mode }, func(string) string { return modeFields })
			runners := w.ns
			testenv.PrepareInClusterAccess(t, kube, runners)
			p := &w.cfg.Pools[0]
			applyHookRBAC(t, kube, p)
			testenv.EphemeralVolumes(t, kube, runners, t.TempDir())
			hookNS := p.Kubernetes.HookNamespace()

			queued := w.loop.Sim.QueueJob(githubsim.JobSpec{Repository: "acme/app", Organization: "acme",
				Labels: []string{"self-hosted", "cm"}, Duration: 3 * time.Second,
				Script:    `echo "host=$(cat /etc/hostname)"; pwd; test -d /__w/_temp`,
				Container: &githubsim.JobContainer{Image: jobImg}, Services: []githubsim.JobContainer{{Image: jobImg}}})

			// While the job runs: its workflow pod, as the hooks make it, in the
			// hook namespace, extended by the product's hook template.
			var workflow *corev1.Pod
			w.waitFor("the job's workflow pod", 3*time.Minute, func() bool {
				pods, err := kube.CoreV1().Pods(hookNS).List(t.Context(), metav1.ListOptions{LabelSelector: runnerpod.LabelHookRunnerPod})
				if err != nil {
					t.Fatal(err)
				}
				if len(pods.Items) == 1 {
					workflow = &pods.Items[0]
				}
				if j := w.job(queued.ID); workflow == nil && j.State == githubsim.JobCompleted {
					t.Fatalf("job %d on %s ended %s (exit %d) with no workflow pod seen, output:\n%s", j.ID, j.RunnerName, j.Conclusion, j.ExitCode, j.Output)
				}
				return workflow != nil
			})
			runner := workflow.Labels[runnerpod.LabelHookRunnerPod]
			if workflow.Name != runnerpod.WorkflowPodName(runner) || workflow.Labels[runnerpod.LabelWorkflowPool] != "cm" ||
				workflow.Labels["team"] != "ci" {
				t.Errorf("workflow pod %s/%s labels %v: want %s, the pool's workflow label and the hook template's", hookNS, workflow.Name,
					workflow.Labels, runnerpod.WorkflowPodName(runner))
			}
			var names []string
			for _, c := range workflow.Spec.Containers {
				names = append(names, c.Name)
			}
			if !slices.Equal(names, []string{"job", "busybox"}) {
				t.Errorf("workflow pod containers %v, want job and the service busybox", names)
			}
			if mode == pool.ContainerModeKubernetes {
				claim := ""
				for _, v := range workflow.Spec.Volumes {
					if v.Name == "work" && v.PersistentVolumeClaim != nil {
						claim = v.PersistentVolumeClaim.ClaimName
					}
				}
				if claim != runner+"-work" {
					t.Errorf("workflow pod's work claim %q, want the runner pod's ephemeral volume's %s-work", claim, runner)
				}
			}

			var done githubsim.Job
			w.waitFor("the job completed", 3*time.Minute, func() bool {
				done = w.job(queued.ID)
				return done.State == githubsim.JobCompleted
			})
			if done.Conclusion != githubsim.JobSuccess || !strings.Contains(done.Output, "host="+workflow.Name+"\n/__w/app/app\n") {
				t.Fatalf("job %d on %s ended %s (exit %d), output:\n%s\nwant success, run in %s's job container", done.ID, done.RunnerName,
					done.Conclusion, done.ExitCode, done.Output, workflow.Name)
			}
			w.waitFor("back to zero", 2*time.Minute, w.quiescent)
			w.waitFor("nothing of the hooks left", time.Minute, func() bool {
				left := hooksLeftovers(t, w, hookNS, runners)
				if len(left) > 0 {
					w.left = left
				}
				return len(left) == 0
			})
			w.noViolations()
		})
	}
}

// containerModeStack is what container-mode pools need on the stack (see
// TestContainerJobsRunInWorkflowPods): their runner template (with the runner
// pods' in-cluster access), the job image, a StorageClass for kubernetes
// mode's work claim and a jobs namespace for kubernetes-novolume's workflow
// pods. The chaos run and BenchmarkContainerJobFirstStep use it.
type containerModeStack struct {
	kube        kubernetes.Interface
	access      testenv.InClusterAccess
	class       string
	jobs        string
	jobImage    string
	memoryLimit string
}

// newContainerModeStack prepares it, the runner containers limited to
// memoryLimit ("": none).
func newContainerModeStack(t testing.TB, memoryLimit string) *containerModeStack {
	kube, jobs := testenv.Namespace(t)
	return &containerModeStack{kube: kube, access: testenv.PrepareInClusterAccess(t, kube), class: storageClass(t, kube),
		jobs: jobs, jobImage: jobImage(t), memoryLimit: memoryLimit}
}

// template is the runner template of image img with the in-cluster access
// the hooks use.
func (c *containerModeStack) template(img string) string {
	return loop.Template{Image: img, MemoryLimit: c.memoryLimit, Env: c.access.Env(),
		Volumes:      []corev1.Volume{c.access.Volume("kube-api-access-stack")},
		VolumeMounts: []corev1.VolumeMount{c.access.VolumeMount("kube-api-access-stack")}}.Spec()
}

func (c *containerModeStack) storageClass(string) string  { return c.class }
func (c *containerModeStack) jobsNamespace(string) string { return c.jobs }

// workVolumeClaim is a kubernetes-mode pool's workVolumeClaim field.
func (c *containerModeStack) workVolumeClaim() string {
	return fmt.Sprintf("workVolumeClaim: {storageClassName: %s, accessModes: [ReadWriteOnce], resources: {requests: {storage: 1Gi}}}", c.class)
}

// prepare gives the runners' namespace the stack's CA, the container-mode
// pools their hooks' RBAC, and their runner pods' ephemeral work volumes the
// controllers the stack lacks (testenv.EphemeralVolumes).
func (c *containerModeStack) prepare(t testing.TB, w *world) {
	testenv.PrepareInClusterAccess(t, c.kube, w.ns)
	for i := range w.cfg.Pools {
		if p := &w.cfg.Pools[i]; p.Kubernetes.InContainerMode() {
			applyHookRBAC(t, c.kube, p)
		}
	}
	testenv.EphemeralVolumes(t, c.kube, w.ns, t.TempDir())
}

// hooksLeftovers are the pods and Secrets labelled runner-pod in the hook
// namespace and the claims in the runners' namespace.
func hooksLeftovers(t *testing.T, w *world, hookNS, runners string) []string {
	sel := metav1.ListOptions{LabelSelector: runnerpod.LabelHookRunnerPod}
	var left []string
	pods, err := w.kube.CoreV1().Pods(hookNS).List(t.Context(), sel)
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range pods.Items {
		left = append(left, "pod "+p.Name)
	}
	secrets, err := w.kube.CoreV1().Secrets(hookNS).List(t.Context(), sel)
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range secrets.Items {
		left = append(left, "secret "+s.Name)
	}
	claims, err := w.kube.CoreV1().PersistentVolumeClaims(runners).List(t.Context(), metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range claims.Items {
		left = append(left, "claim "+c.Name)
	}
	return left
}

// storageClass is a StorageClass for the work volumes, whose claims
// testenv.EphemeralVolumes provisions (the stack runs no provisioner); it is
// deleted after the test.
func storageClass(t testing.TB, kube kubernetes.Interface) string {
	t.Helper()
	name := testenv.Name("work")
	sc := &storagev1.StorageClass{ObjectMeta: metav1.ObjectMeta{Name: name}, Provisioner: "runnerscaler.dev/testenv-ephemeral-volumes"}
	if _, err := kube.StorageV1().StorageClasses().Create(t.Context(), sc, metav1.CreateOptions{}); err != nil {
		t.Fatalf("creating StorageClass %s: %v", name, err)
	}
	t.Cleanup(func() {
		_ = kube.StorageV1().StorageClasses().Delete(context.Background(), name, metav1.DeleteOptions{})
	})
	return name
}
