package tests

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"

	"github.com/runnerscaler/runnerscaler/internal/headroom"
	"github.com/runnerscaler/runnerscaler/internal/inventory"
	"github.com/runnerscaler/runnerscaler/internal/runnerpod"
	"github.com/runnerscaler/runnerscaler/local/loop"
	"github.com/runnerscaler/runnerscaler/local/stack"
	"github.com/runnerscaler/runnerscaler/local/testenv"
)

// The headroom tests fill the node for one resource of their own: the node
// advertises a few units of an extended resource named for the test (as a
// device plugin or an operator would, in its status), and the runner pods of
// the test's pool ask for one unit each. The node is then full for them and
// for nothing else, so the tests beside keep their CPU and memory.

// slots is a test's extended resource on the stack's node.
type slots struct {
	t    testing.TB
	kube kubernetes.Interface
	name corev1.ResourceName
}

// newSlots names a fresh extended resource; the node advertises none of it
// until set, and none after the test.
func newSlots(t testing.TB) *slots {
	t.Helper()
	kube, err := kubernetes.NewForConfig(testenv.RESTConfig(t))
	if err != nil {
		t.Fatal(err)
	}
	s := &slots{t: t, kube: kube, name: corev1.ResourceName("runnerscaler.test/" + testenv.Name("slot"))}
	t.Cleanup(func() { s.patch(context.Background(), "null") })
	return s
}

// set makes the node's capacity and allocatable of the resource n (the kubelet
// keeps an extended resource it does not manage as the status says).
func (s *slots) set(n int) {
	s.t.Helper()
	if err := s.patch(s.t.Context(), fmt.Sprintf("%q", fmt.Sprint(n))); err != nil {
		s.t.Fatal(err)
	}
}

func (s *slots) patch(ctx context.Context, value string) error {
	body := fmt.Sprintf(`{"status":{"capacity":{%[1]q:%[2]s},"allocatable":{%[1]q:%[2]s}}}`, s.name, value)
	_, err := s.kube.CoreV1().Nodes().Patch(ctx, stack.NodeName, types.MergePatchType, []byte(body), metav1.PatchOptions{}, "status")
	if err != nil {
		return fmt.Errorf("node %s: setting %s to %s: %w", stack.NodeName, s.name, value, err)
	}
	return nil
}

// template is loop.RunnerTemplate asking for one slot.
func (s *slots) template(img string) string {
	var tmpl map[string]any
	if err := json.Unmarshal([]byte(loop.RunnerTemplate(img)), &tmpl); err != nil {
		s.t.Fatal(err)
	}
	c := tmpl["spec"].(map[string]any)["containers"].([]any)[0].(map[string]any)
	res := c["resources"].(map[string]any)
	res["requests"].(map[string]any)[string(s.name)] = "1"
	res["limits"] = map[string]any{string(s.name): "1"}
	raw, err := json.Marshal(tmpl)
	if err != nil {
		s.t.Fatal(err)
	}
	return string(raw)
}

func pauseImage(string) string { return stack.PauseImage }

// poll waits for cond, failing the test with what after limit.
func poll(t testing.TB, what string, limit time.Duration, cond func() (bool, error)) {
	t.Helper()
	err := wait.PollUntilContextTimeout(t.Context(), 100*time.Millisecond, limit, true, func(context.Context) (bool, error) { return cond() })
	if err != nil {
		t.Fatalf("%s: not within %s: %v", what, limit, err)
	}
}

// pod returns the pod name in ns, nil if there is none.
func pod(t testing.TB, kube kubernetes.Interface, ns, name string) *corev1.Pod {
	t.Helper()
	p, err := kube.CoreV1().Pods(ns).Get(t.Context(), name, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		return nil
	}
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// priority is the pod's resolved priority (-1 when admission set none).
func priority(p *corev1.Pod) int32 {
	if p.Spec.Priority == nil {
		return -1
	}
	return *p.Spec.Priority
}

func running(p *corev1.Pod) bool { return p != nil && p.Status.Phase == corev1.PodRunning }

// unschedulable: the scheduler tried the pod and found no node for it.
func unschedulable(p *corev1.Pod) bool {
	if p == nil {
		return false
	}
	for _, c := range p.Status.Conditions {
		if c.Type == corev1.PodScheduled && c.Status == corev1.ConditionFalse && c.Reason == corev1.PodReasonUnschedulable {
			return true
		}
	}
	return false
}

// runnerPods are the pods of the world's pool p (the runners, by their label).
func (w *world) runnerPods() []corev1.Pod {
	list, err := w.kube.CoreV1().Pods(w.ns).List(w.t.Context(), metav1.ListOptions{LabelSelector: runnerpod.LabelPool + "=p"})
	if err != nil {
		w.t.Fatal(err)
	}
	return list.Items
}

// preempted: the scheduler reported preempting the pod with that uid.
func preempted(t testing.TB, kube kubernetes.Interface, ns string, uid types.UID) bool {
	t.Helper()
	evs, err := kube.CoreV1().Events(ns).List(t.Context(), metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range evs.Items {
		if e.InvolvedObject.UID == uid && e.Reason == "Preempted" {
			return true
		}
	}
	return false
}

// notCounted fails the test when the placeholders of the world count as
// runners: GitHub lists a runner, the inventory (teardown's "what is left",
// removed pools) finds an object, or the loop finds something left over.
func (w *world) notCounted() {
	w.t.Helper()
	if rs := w.loop.Sim.Runners(); len(rs) != 0 {
		w.t.Errorf("GitHub lists %d runners, want none: %+v", len(rs), rs)
	}
	// The loop's reconciler records no deployment name.
	inv, err := inventory.New(w.kube, "").List(w.t.Context(), []string{w.ns})
	if err != nil {
		w.t.Fatal(err)
	}
	if len(inv) != 0 {
		w.t.Errorf("the inventory counts %+v, want nothing", inv)
	}
	if !w.quiescent() {
		w.t.Errorf("left over: %v, want nothing", w.left)
	}
}

// TestHeadroomRunnerPreemptsAPlaceholder: on a node full for the runner's
// size, a pool with headroom keeps a placeholder there that counts as no
// runner; a job's runner pod starts on that node by preempting it (the real
// scheduler's preemption: its Preempted event), at priority 0 above the
// placeholder's -10; the placeholder comes back Pending (unschedulable: where
// a cluster autoscaler adds a node), and takes the node again once the runner
// is gone.
func TestHeadroomRunnerPreemptsAPlaceholder(t *testing.T) {
	t.Parallel()
	s := newSlots(t)
	s.set(1)
	applyPriorityClass(t, s.kube)
	w := newWorldWith(t, `
pools:
  - name: p
    organization: acme
    maxReplicas: 2
    scaleDownDelaySecondsAfterScaleOut: 1
    headroom: {replicas: 1, image: %[3]s}
    kubernetes: {namespace: %[1]s, template: %[2]s}
`, loop.Options{}, s.template, pauseImage)
	name := headroom.Name("p") + "-0"
	var first *corev1.Pod
	poll(t, "the placeholder running on the node", time.Minute, func() (bool, error) {
		first = pod(t, w.kube, w.ns, name)
		return running(first), nil
	})
	if priority(first) != headroom.Priority || first.Spec.NodeName != stack.NodeName {
		t.Fatalf("placeholder priority %d on node %q, want %d on %s", priority(first), first.Spec.NodeName, headroom.Priority, stack.NodeName)
	}
	w.notCounted()

	w.queue(1, 8*time.Second)
	var runner corev1.Pod
	poll(t, "the runner pod running", time.Minute, func() (bool, error) {
		for _, p := range w.runnerPods() {
			if running(&p) {
				runner = p
				return true, nil
			}
		}
		return false, nil
	})
	if runner.Spec.NodeName != stack.NodeName || runner.Spec.Priority == nil || *runner.Spec.Priority != 0 {
		t.Fatalf("runner pod %s on %q at priority %d, want %s at 0", runner.Name, runner.Spec.NodeName, priority(&runner), stack.NodeName)
	}
	if !preempted(t, w.kube, w.ns, first.UID) {
		t.Fatalf("the scheduler reported no preemption of placeholder %s (%s)", name, first.UID)
	}
	poll(t, "the recreated placeholder unschedulable", time.Minute, func() (bool, error) {
		p := pod(t, w.kube, w.ns, name)
		return p != nil && p.UID != first.UID && unschedulable(p), nil
	})
	w.waitFor("the job completed", 2*time.Minute, func() bool { return allDone(w.loop.Sim.Jobs()) })
	poll(t, "the placeholder running again", 2*time.Minute, func() (bool, error) { return running(pod(t, w.kube, w.ns, name)), nil })
	w.waitFor("back to zero runners", 2*time.Minute, w.quiescent)
	for _, r := range w.loop.Sim.Runners() {
		if strings.Contains(r.Name, "headroom") {
			t.Errorf("a placeholder registered with GitHub: %+v", r)
		}
	}
	w.noViolations()
}

// TestNoHeadroomRunnerStaysPending: on the same full node without headroom —
// the unit taken by a pod at the runners' own priority — a job's runner pod
// stays Pending, unschedulable, and preempts nothing; once the unit is freed
// it starts.
func TestNoHeadroomRunnerStaysPending(t *testing.T) {
	t.Parallel()
	s := newSlots(t)
	s.set(1)
	w := newWorldWith(t, `
pools:
  - name: p
    organization: acme
    maxReplicas: 2
    scaleDownDelaySecondsAfterScaleOut: 1
    kubernetes: {namespace: %[1]s, template: %[2]s}
`, loop.Options{}, s.template)
	filler := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "filler", Namespace: w.ns},
		Spec: corev1.PodSpec{
			HostNetwork:                   true,
			TerminationGracePeriodSeconds: new(int64),
			Containers: []corev1.Container{{Name: "pause", Image: stack.PauseImage, ImagePullPolicy: corev1.PullIfNotPresent,
				Resources: corev1.ResourceRequirements{Limits: corev1.ResourceList{s.name: resource.MustParse("1")}}}},
		},
	}
	filler, err := w.kube.CoreV1().Pods(w.ns).Create(t.Context(), filler, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	poll(t, "the filler running", time.Minute, func() (bool, error) { return running(pod(t, w.kube, w.ns, "filler")), nil })

	w.queue(1, time.Second)
	var stuck corev1.Pod
	poll(t, "the runner pod unschedulable", time.Minute, func() (bool, error) {
		for _, p := range w.runnerPods() {
			if unschedulable(&p) {
				stuck = p
				return true, nil
			}
		}
		return false, nil
	})
	if stuck.Spec.NodeName != "" {
		t.Fatalf("runner pod %s bound to %q", stuck.Name, stuck.Spec.NodeName)
	}
	if f := pod(t, w.kube, w.ns, "filler"); f == nil || f.UID != filler.UID || !running(f) || preempted(t, w.kube, w.ns, filler.UID) {
		t.Fatalf("the filler was disturbed: %+v", f)
	}
	if err := w.kube.CoreV1().Pods(w.ns).Delete(t.Context(), "filler", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	w.waitFor("the job completed once the unit was free", 2*time.Minute, func() bool { return allDone(w.loop.Sim.Jobs()) })
	w.waitFor("back to zero", 2*time.Minute, w.quiescent)
	w.noViolations()
}

// placeholderSets are the headroom StatefulSets in ns.
func placeholderSets(t testing.TB, kube kubernetes.Interface, ns string) []appsv1.StatefulSet {
	t.Helper()
	list, err := kube.AppsV1().StatefulSets(ns).List(t.Context(), metav1.ListOptions{LabelSelector: headroom.LabelPool})
	if err != nil {
		t.Fatal(err)
	}
	return list.Items
}
