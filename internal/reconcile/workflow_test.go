package reconcile_test

import (
	"bytes"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/runnerscaler/runnerscaler/internal/emf"
	"github.com/runnerscaler/runnerscaler/internal/pool"
	"github.com/runnerscaler/runnerscaler/internal/reconcile"
	"github.com/runnerscaler/runnerscaler/internal/reservation"
	"github.com/runnerscaler/runnerscaler/internal/runnerpod"
)

// containerPoolYAML is poolYAML's persistent pool in containerMode kubernetes:
// its workflow pods run in the runners' namespace.
func containerPoolYAML(ns string) string {
	return fmt.Sprintf(`
pools:
  - name: p
    organization: acme
    labels: [big]
    ephemeral: false
    allowJobsToReadRegistrationToken: true
    maxReplicas: 10
    kubernetes:
      namespace: %s
      image: runner:1
      serviceAccountName: p-hooks
      containerMode: kubernetes
      workVolumeClaim: {resources: {requests: {storage: 1Gi}}}
      template:
        spec:
          schedulerName: runnerscaler.dev/no-scheduler
`, ns)
}

// newContainerWorld is newBusyWorld's runner in a container-mode pool.
func newContainerWorld(t *testing.T) *busyWorld {
	t.Helper()
	e := newEnv(t, false)
	w := &busyWorld{env: e, metrics: &bytes.Buffer{}}
	mw, err := emf.NewWriter(w.metrics, "")
	if err != nil {
		t.Fatal(err)
	}
	cfg, err := pool.Parse([]byte(containerPoolYAML(e.ns)))
	if err != nil {
		t.Fatal(err)
	}
	e.pool = cfg.Pool("p")
	if e.rec, err = reconcile.New(cfg, e.kube, e.gh, e.clock, nil, reconcile.Options{JobLinks: e.links, Metrics: mw, Roster: e.roster}); err != nil {
		t.Fatal(err)
	}
	e.mustSweep(1, time.Time{})
	w.name = e.statefulSets()[0]
	w.id = e.start(w.name).ID
	e.mustSweep(1, time.Time{})
	e.links.link(w.name+"-0", 1, reservation.Completed, e.clock.Now())
	return w
}

// workflowPod creates, as the hooks do, a pod labelled with runner pod
// runnerPod's name (never scheduled: the test plays the kubelet).
func (w *busyWorld) workflowPod(name, runnerPod string, extra map[string]string) *corev1.Pod {
	w.t.Helper()
	labels := map[string]string{runnerpod.LabelHookRunnerPod: runnerPod}
	for k, v := range extra {
		labels[k] = v
	}
	pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: labels},
		Spec: corev1.PodSpec{SchedulerName: "runnerscaler.dev/no-scheduler", RestartPolicy: corev1.RestartPolicyNever,
			Containers: []corev1.Container{{Name: "job", Image: "job:1", Command: []string{"tail", "-f", "/dev/null"}}}}}
	created, err := w.raw.CoreV1().Pods(w.ns).Create(w.t.Context(), pod, metav1.CreateOptions{})
	if err != nil {
		w.t.Fatal(err)
	}
	return created
}

func (w *busyWorld) labelsKept(why string) {
	w.t.Helper()
	r, ok := w.sim.Runner(w.id)
	if !ok || !slices.Contains(r.Labels, "big") || w.sim.Calls()[labelsCall] != 0 {
		w.t.Fatalf("%s: the runner's labels were withdrawn on GitHub (%+v, %d calls)", why, r, w.sim.Calls()[labelsCall])
	}
}

// TestWorkflowPodVetoesRemoval: GitHub lists the runner idle twice, the pod's
// report and the link say idle, but its workflow pod exists: the runner is
// kept, its labels too. Once the workflow pod is gone it goes.
func TestWorkflowPodVetoesRemoval(t *testing.T) {
	t.Parallel()
	w := newContainerWorld(t)
	w.scaleDownAndConfirmIdle()
	w.workflowPod(runnerpod.WorkflowPodName(w.name+"-0"), w.name+"-0", nil)
	w.mustSweep(0, time.Time{})
	w.kept("GitHub idle twice, the workflow pod exists")
	w.labelsKept("the workflow pod exists")
	if got := w.metric("RemovalsVetoedByWorkflowPod"); got < 1 {
		t.Fatalf("RemovalsVetoedByWorkflowPod %v, want the veto counted", got)
	}

	if err := w.raw.CoreV1().Pods(w.ns).Delete(t.Context(), runnerpod.WorkflowPodName(w.name+"-0"), metav1.DeleteOptions{GracePeriodSeconds: new(int64)}); err != nil {
		t.Fatal(err)
	}
	w.clock.Step(reconcile.DefaultIdleConfirmation)
	w.mustSweep(0, time.Time{})
	w.clock.Step(reconcile.DefaultIdleConfirmation)
	w.mustSweep(0, time.Time{})
	if got := w.statefulSets(); len(got) != 0 || w.removals() != 1 {
		t.Fatalf("after the workflow pod went: %v, %d RemoveRunner calls; want the runner removed once", got, w.removals())
	}
}

// TestWorkflowPodMadeRightBeforeTheDeleteVetoesIt: the workflow pod appears
// after the sweep listed the namespace (a job's prepare step just then): the
// read right before the pod's delete sees it, and the pod is not deleted.
func TestWorkflowPodMadeRightBeforeTheDeleteVetoesIt(t *testing.T) {
	t.Parallel()
	w := newContainerWorld(t)
	w.scaleDownAndConfirmIdle()
	runnerPod := w.name + "-0"
	made := false
	before := func(req *http.Request) {
		// The stop reads the runner's pod again right before its delete.
		if !made && req.Method == http.MethodGet && strings.HasSuffix(req.URL.Path, "/pods") &&
			strings.Contains(req.URL.Query().Get("fieldSelector"), "metadata.name="+runnerPod) {
			made = true
			w.workflowPod(runnerpod.WorkflowPodName(runnerPod), runnerPod, nil)
		}
	}
	w.before.Store(&before)
	w.mustSweep(0, time.Time{})
	w.before.Store(nil)
	if !made {
		t.Fatal("the stop never read the runner's pod again before deleting it")
	}
	w.kept("the workflow pod appeared right before the delete")
	if pod := w.pods()[w.name]; pod.DeletionTimestamp != nil {
		t.Fatal("the runner's pod was deleted under its workflow pod")
	}
	if got := w.metric("RemovalsVetoedByWorkflowPod"); got < 1 {
		t.Fatalf("RemovalsVetoedByWorkflowPod %v, want the veto counted", got)
	}
}

// TestLeftoverWorkflowPodsAreRemovedAfterTheGrace: once its runner is gone
// (retired), a workflow pod and a Secret labelled with its pod's name are
// deleted after Options.WorkflowPodGrace, not before; a pod naming a runner
// that is not on the pool's roster, and a pod that bears a runner's own label,
// are left alone.
func TestLeftoverWorkflowPodsAreRemovedAfterTheGrace(t *testing.T) {
	t.Parallel()
	w := newContainerWorld(t)
	runnerPod := w.name + "-0"
	wf := w.workflowPod(runnerpod.WorkflowPodName(runnerPod), runnerPod, nil)
	forged := w.workflowPod("forged-workflow", "q-zzzzz-0", nil)
	own := w.workflowPod("own-workflow", runnerPod, map[string]string{runnerpod.LabelRunner: w.name})
	sec := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: runnerPod + "-secret-abcdefgh", Labels: map[string]string{runnerpod.LabelHookRunnerPod: runnerPod}}}
	if _, err := w.raw.CoreV1().Secrets(w.ns).Create(t.Context(), sec, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	// The runner goes: its job ended and the pool scaled to zero (the
	// workflow pod, the hooks' cleanup having failed, is left).
	if err := w.raw.CoreV1().Pods(w.ns).Delete(t.Context(), wf.Name, metav1.DeleteOptions{GracePeriodSeconds: new(int64)}); err != nil {
		t.Fatal(err)
	}
	w.clock.Step(reconcile.DefaultIdleConfirmation)
	w.mustSweep(0, time.Time{})
	w.clock.Step(reconcile.DefaultIdleConfirmation)
	w.mustSweep(0, time.Time{})
	if got := w.statefulSets(); len(got) != 0 {
		t.Fatalf("runner not removed: %v", got)
	}
	wf = w.workflowPod(runnerpod.WorkflowPodName(runnerPod), runnerPod, nil) // left behind by the dead runner
	w.mustSweep(0, time.Time{})
	if !w.exists(wf) {
		t.Fatal("a leftover workflow pod was deleted before the grace")
	}
	w.clock.Step(reconcile.DefaultWorkflowPodGrace)
	w.mustSweep(0, time.Time{})
	if w.exists(wf) {
		t.Fatal("the leftover workflow pod of a retired runner is still there after the grace")
	}
	if _, err := w.raw.CoreV1().Secrets(w.ns).Get(t.Context(), sec.Name, metav1.GetOptions{}); !apierrors.IsNotFound(err) {
		t.Fatalf("the hooks' leftover secret: %v, want it deleted", err)
	}
	for _, p := range []*corev1.Pod{forged, own} {
		if !w.exists(p) {
			t.Errorf("pod %s was deleted: it names no runner of the roster, or is a runner's own", p.Name)
		}
	}
	if got := w.metric("WorkflowPodsRemoved"); got != 1 {
		t.Errorf("WorkflowPodsRemoved %v, want 1", got)
	}
}

func (w *busyWorld) exists(p *corev1.Pod) bool {
	w.t.Helper()
	got, err := w.raw.CoreV1().Pods(w.ns).Get(w.t.Context(), p.Name, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		return false
	}
	if err != nil {
		w.t.Fatal(err)
	}
	return got.UID == p.UID && got.DeletionTimestamp == nil
}
