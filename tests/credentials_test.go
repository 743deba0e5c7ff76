package tests

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"
	"k8s.io/utils/clock"

	"github.com/runnerscaler/runnerscaler/internal/githubapi"
	"github.com/runnerscaler/runnerscaler/internal/pool"
	"github.com/runnerscaler/runnerscaler/internal/poolstate"
	"github.com/runnerscaler/runnerscaler/internal/reconcile"
	"github.com/runnerscaler/runnerscaler/internal/reservation"
	"github.com/runnerscaler/runnerscaler/internal/roster"
	"github.com/runnerscaler/runnerscaler/internal/runnerpod"
	"github.com/runnerscaler/runnerscaler/internal/scaling"
	"github.com/runnerscaler/runnerscaler/local/apispec"
	"github.com/runnerscaler/runnerscaler/local/githubsim"
	"github.com/runnerscaler/runnerscaler/local/runnerimage"
	"github.com/runnerscaler/runnerscaler/local/testenv"
)

// maliciousStep is a job step that tries what a hostile pull request would to
// get the runner's credentials or to make its container run again: every
// process's environment and command line, its own environment, the state
// directory (the run-once marker, a kept registration, the registration
// token's file), a service account token, the runner's home. Each attempt that
// succeeds where it must not prints a line with "BREACH".
const maliciousStep = `
echo "== id: $(id)"
echo "== own environment"; env
echo "== every process's environment"
for f in /proc/[0-9]*/environ; do echo "-- $f"; cat "$f"; echo; done 2>&1
echo "== every process's command line"
for f in /proc/[0-9]*/cmdline; do echo "-- $f: $(tr '\0' ' ' <"$f")"; done 2>&1
echo "== state directory"
ls -la /runner-state && echo "BREACH: listed the state directory"
for f in ran .runner .credentials .credentials_rsaparams registration/token; do cat "/runner-state/$f" && echo "BREACH: read /runner-state/$f"; done
rm /runner-state/ran && echo "BREACH: removed the marker"
echo again >>/runner-state/ran && echo "BREACH: wrote the marker"
echo '{}' >/runner-state/.runner && echo "BREACH: replaced the kept registration"
touch /runner-state/new && echo "BREACH: created a file in the state directory"
chmod 777 /runner-state && echo "BREACH: opened the state directory"
echo "== service account"
ls -la /var/run/secrets/kubernetes.io/serviceaccount /run/secrets/kubernetes.io/serviceaccount
cat /var/run/secrets/kubernetes.io/serviceaccount/token && echo "BREACH: read a service account token"
echo "== root's process"
cat /proc/1/environ >/dev/null && echo "BREACH: read PID 1's environment"
ls /proc/1/root/ >/dev/null && echo "BREACH: entered PID 1's root"
echo "== runner home"; ls -la /home/runner
echo "== done"
`

var (
	credImageOnce sync.Once
	credImage     string
	credImageErr  error
)

// runnerImageOnNode builds the local runner image (runner/entrypoint.sh around
// the fake runner) and imports it into the stack node's containerd, once per
// test binary.
func runnerImageOnNode(t *testing.T) string {
	t.Helper()
	credImageOnce.Do(func() {
		img, err := runnerimage.Build(context.Background(), runnerimage.Options{})
		if err != nil {
			credImageErr = err
			return
		}
		credImage = img.Ref
		testenv.ImportImage(t, img.Tarball)
	})
	if credImageErr != nil {
		t.Fatalf("building the runner image: %v", credImageErr)
	}
	return credImage
}

// TestJobStepCannotReadTheCredentials runs a real runner pod on the stack's
// node — made by the real reconciler, from the real entrypoint in the local
// runner image, under the kubelet — for a persistent pool (registration token)
// and an ephemeral one (JIT config), gives it a job whose step tries everything
// in maliciousStep, and checks that the step's output has neither credential,
// that nothing it tried on the state directory worked, and (ephemeral) that the
// container, restarted by the kubelet after its job, still finds its run-once
// marker and exits 0 without running the runner again.
func TestJobStepCannotReadTheCredentials(t *testing.T) {
	t.Parallel()
	image := runnerImageOnNode(t)
	for _, ephemeral := range []bool{false, true} {
		name := map[bool]string{false: "persistent pool, registration token", true: "ephemeral pool, JIT config"}[ephemeral]
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			w := newCredWorld(t, image, ephemeral)
			sts := w.createRunner()
			secret := w.credential(sts)

			job := w.sim.QueueJob(githubsim.JobSpec{Repository: "acme/app", Organization: "acme", Labels: []string{"big"},
				Script: maliciousStep})
			done := w.waitJob(job.ID)
			t.Logf("the job step's output (exit %d):\n%s", done.ExitCode, done.Output)
			if !strings.Contains(done.Output, "== id: uid=1001(runner)") || !strings.Contains(done.Output, "== done") {
				t.Fatalf("the step did not run as the runner user to its end (exit %d):\n%s", done.ExitCode, done.Output)
			}
			for what, leak := range map[string]string{"the runner's credential": secret, "RUNNER_TOKEN": "RUNNER_TOKEN=",
				"a runner input": "ACTIONS_RUNNER_INPUT_"} {
				if strings.Contains(done.Output, leak) {
					t.Errorf("the job step's output has %s", what)
				}
			}
			for _, line := range strings.Split(done.Output, "\n") {
				if strings.HasPrefix(line, "BREACH") {
					t.Errorf("the job step could: %s", line)
				}
			}
			if t.Failed() {
				t.FailNow()
			}
			pod := w.pod(sts)
			if c := pod.Spec.Containers[0]; c.SecurityContext == nil || c.SecurityContext.RunAsUser == nil || *c.SecurityContext.RunAsUser != 0 ||
				pod.Spec.AutomountServiceAccountToken == nil || *pod.Spec.AutomountServiceAccountToken {
				t.Fatalf("pod spec: runner securityContext %+v, automountServiceAccountToken %v; want root and no token",
					c.SecurityContext, pod.Spec.AutomountServiceAccountToken)
			}
			if ephemeral {
				w.waitRanOnce(sts)
			}
		})
	}
}

// credWorld is one pool's world: a namespace on the stack, a GitHub simulator on
// 127.0.0.1 (which the pod reaches: host network) and the real reconciler.
type credWorld struct {
	t    *testing.T
	kube kubernetes.Interface
	ns   string
	sim  *githubsim.Server
	pool *pool.Pool
	rec  *reconcile.Reconciler
}

func newCredWorld(t *testing.T, image string, ephemeral bool) *credWorld {
	t.Helper()
	kube, ns := testenv.Namespace(t)
	const pat = "ghp_credentials"
	sim := githubsim.New(githubsim.Options{PATs: []string{pat}})
	apispec.Verify(t, sim)
	srv := httptest.NewServer(sim.Handler())
	t.Cleanup(srv.Close)
	gh, err := githubapi.New(githubapi.Config{BaseURL: srv.URL + "/", Auth: githubapi.Auth{Token: pat}})
	if err != nil {
		t.Fatal(err)
	}
	tmpl, _ := json.Marshal(map[string]any{"spec": map[string]any{
		"hostNetwork": true, "dnsPolicy": "Default",
		"containers": []any{map[string]any{"name": "runner", "image": image, "imagePullPolicy": "Never",
			"resources": map[string]any{"requests": map[string]string{"cpu": "10m", "memory": "24Mi"}},
			"env":       []any{map[string]string{"name": "RUNNER_GRACEFUL_STOP_TIMEOUT", "value": "2"}}}},
	}})
	cfg, err := pool.Parse(fmt.Appendf(nil, `
pools:
  - name: cred
    organization: acme
    labels: [big]
    ephemeral: %v
    maxReplicas: 1
    kubernetes:
      namespace: %s
      template: %s
`, ephemeral, ns, tmpl))
	if err != nil {
		t.Fatal(err)
	}
	db, table := testenv.Table(t)
	rec, err := reconcile.New(cfg, kube, gh, clock.RealClock{}, nil, reconcile.Options{GitHubURL: srv.URL,
		JobLinks: reservation.New(db, table, clock.RealClock{}), Roster: roster.NewStore(db, table)})
	if err != nil {
		t.Fatal(err)
	}
	w := &credWorld{t: t, kube: kube, ns: ns, sim: sim, pool: cfg.Pool("cred"), rec: rec}
	t.Cleanup(w.release)
	return w
}

// createRunner has the reconciler create the pool's one runner; it returns the
// runner's (StatefulSet's) name.
func (w *credWorld) createRunner() string {
	w.t.Helper()
	var status poolstate.Status
	if err := w.rec.Reconcile(w.t.Context(), w.pool, scaling.Decision{Desired: 1, EffectiveTime: time.Now()}, &status); err != nil {
		w.t.Fatalf("reconcile: %v", err)
	}
	list, err := w.kube.AppsV1().StatefulSets(w.ns).List(w.t.Context(), metav1.ListOptions{})
	if err != nil || len(list.Items) != 1 {
		w.t.Fatalf("statefulsets: %v %v, want the runner's", list, err)
	}
	return list.Items[0].Name
}

// credential is the runner's credential, from its Secret: what no job may see.
func (w *credWorld) credential(name string) string {
	w.t.Helper()
	sec, err := w.kube.CoreV1().Secrets(w.ns).Get(w.t.Context(), name, metav1.GetOptions{})
	if err != nil {
		w.t.Fatal(err)
	}
	key := runnerpod.SecretToken
	if w.pool.IsEphemeral() {
		key = runnerpod.SecretJITConfig
	}
	if len(sec.Data[key]) < 16 {
		w.t.Fatalf("the runner's Secret has no %s: %v", key, sec.Data)
	}
	return string(sec.Data[key])
}

func (w *credWorld) waitJob(id int64) githubsim.Job {
	w.t.Helper()
	var job githubsim.Job
	err := wait.PollUntilContextTimeout(w.t.Context(), 200*time.Millisecond, 3*time.Minute, true, func(context.Context) (bool, error) {
		job = w.sim.Jobs()[id-1]
		return job.State == githubsim.JobCompleted, nil
	})
	if err != nil {
		w.t.Fatalf("job %+v never completed: %v; runner pods: %s", job, err, w.podStates())
	}
	return job
}

func (w *credWorld) pod(name string) *corev1.Pod {
	w.t.Helper()
	pod, err := w.kube.CoreV1().Pods(w.ns).Get(w.t.Context(), runnerpod.PodName(name), metav1.GetOptions{})
	if err != nil {
		w.t.Fatal(err)
	}
	return pod
}

// waitRanOnce waits for the kubelet to have restarted the ephemeral runner's
// container twice after its job: the run before the last one exited 0 at once —
// it found the marker the job tried to remove. (Without the marker it would have
// run the runner again, whose spent JIT credentials GitHub refuses: exit 1.)
func (w *credWorld) waitRanOnce(name string) {
	w.t.Helper()
	var st corev1.ContainerStatus
	err := wait.PollUntilContextTimeout(w.t.Context(), 250*time.Millisecond, 2*time.Minute, true, func(context.Context) (bool, error) {
		pod := w.pod(name)
		if len(pod.Status.ContainerStatuses) == 0 {
			return false, nil
		}
		st = pod.Status.ContainerStatuses[0]
		return st.RestartCount >= 2 && st.LastTerminationState.Terminated != nil, nil
	})
	if err != nil {
		w.t.Fatalf("the runner container was not restarted twice: %+v: %v", st, err)
	}
	if last := st.LastTerminationState.Terminated; last.ExitCode != 0 {
		w.t.Fatalf("a restarted ephemeral runner container exited %d (%s), want 0: it did not find its run-once marker", last.ExitCode, last.Reason)
	}
	if rs := w.sim.Runners(); len(rs) != 0 {
		w.t.Fatalf("runners %+v exist: the ephemeral runner registered again", rs)
	}
}

func (w *credWorld) podStates() string {
	list, err := w.kube.CoreV1().Pods(w.ns).List(context.Background(), metav1.ListOptions{})
	if err != nil {
		return err.Error()
	}
	var b strings.Builder
	for _, p := range list.Items {
		fmt.Fprintf(&b, "%s %s %+v; ", p.Name, p.Status.Phase, p.Status.ContainerStatuses)
	}
	return b.String()
}

// release deletes the runner's StatefulSet, lets its pod go (our finalizer) and
// waits for the kubelet to have stopped it, before the simulator closes.
func (w *credWorld) release() {
	ctx := context.Background()
	_ = w.kube.AppsV1().StatefulSets(w.ns).DeleteCollection(ctx, metav1.DeleteOptions{}, metav1.ListOptions{})
	_ = wait.PollUntilContextTimeout(ctx, 250*time.Millisecond, time.Minute, true, func(ctx context.Context) (bool, error) {
		list, err := w.kube.CoreV1().Pods(w.ns).List(ctx, metav1.ListOptions{})
		if err != nil {
			return false, nil
		}
		for _, p := range list.Items {
			if len(p.Finalizers) > 0 {
				_, _ = w.kube.CoreV1().Pods(w.ns).Patch(ctx, p.Name, "application/merge-patch+json",
					[]byte(`{"metadata":{"finalizers":null}}`), metav1.PatchOptions{})
			}
			if p.DeletionTimestamp == nil {
				_ = w.kube.CoreV1().Pods(w.ns).Delete(ctx, p.Name, metav1.DeleteOptions{})
			}
		}
		return len(list.Items) == 0, nil
	})
}
