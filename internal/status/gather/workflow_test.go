package gather_test

import (
	"bytes"
	"fmt"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	clocktesting "k8s.io/utils/clock/testing"
	"k8s.io/utils/ptr"

	"github.com/runnerscaler/runnerscaler/internal/pool"
	"github.com/runnerscaler/runnerscaler/internal/poolstate"
	"github.com/runnerscaler/runnerscaler/internal/redeliver"
	"github.com/runnerscaler/runnerscaler/internal/reservation"
	"github.com/runnerscaler/runnerscaler/internal/runnerpod"
	"github.com/runnerscaler/runnerscaler/internal/status"
	"github.com/runnerscaler/runnerscaler/internal/status/gather"
	"github.com/runnerscaler/runnerscaler/local/testenv"
)

// TestStatusShowsTheRunnersWorkflowPodAndWhyItWaits: in a kubernetes-novolume
// pool, a runner whose workflow pod (in the jobs namespace) cannot be
// scheduled shows that pod, its phase and the scheduler's reason, in the
// report and in the rendered table.
func TestStatusShowsTheRunnersWorkflowPodAndWhyItWaits(t *testing.T) {
	t.Parallel()
	db, name := testenv.Table(t)
	kube, ns := testenv.Namespace(t)
	_, jobs := testenv.Namespace(t)
	cfg, err := pool.Parse(fmt.Appendf(nil, `pools:
  - {name: p, organization: o, maxReplicas: 1, kubernetes: {namespace: %s, image: i, serviceAccountName: p-hooks,
     containerMode: kubernetes-novolume, jobsNamespace: %s}}
`, ns, jobs))
	if err != nil {
		t.Fatal(err)
	}
	ctx := t.Context()
	labels := map[string]string{runnerpod.LabelPool: "p", runnerpod.LabelRunner: "p-abcde"}
	sts := &appsv1.StatefulSet{ObjectMeta: metav1.ObjectMeta{Name: "p-abcde", Labels: labels},
		Spec: appsv1.StatefulSetSpec{Replicas: ptr.To[int32](0), Selector: &metav1.LabelSelector{MatchLabels: labels},
			Template: corev1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: labels},
				Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "runner", Image: "i"}}}}}}
	if _, err := kube.AppsV1().StatefulSets(ns).Create(ctx, sts, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	wf := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "p-abcde-0-workflow", Labels: map[string]string{runnerpod.LabelHookRunnerPod: "p-abcde-0"}},
		Spec: corev1.PodSpec{SchedulerName: "runnerscaler.dev/no-scheduler", Containers: []corev1.Container{{Name: "job", Image: "j"}}}}
	created, err := kube.CoreV1().Pods(jobs).Create(ctx, wf, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	created.Status = corev1.PodStatus{Phase: corev1.PodPending, Conditions: []corev1.PodCondition{{Type: corev1.PodScheduled,
		Status: corev1.ConditionFalse, Reason: "Unschedulable", Message: "0/1 nodes are available: 1 Insufficient cpu."}}}
	if _, err := kube.CoreV1().Pods(jobs).UpdateStatus(ctx, created, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	clk := clocktesting.NewFakeClock(time.Now())
	g := gather.New(cfg, reservation.New(db, name, clk), poolstate.NewStore(db, name), redeliver.NewStore(db, name), kube, clk)
	r, err := g.Report(ctx, "p")
	if err != nil {
		t.Fatal(err)
	}
	if len(r.Pools) != 1 || len(r.Pools[0].Runners) != 1 {
		t.Fatalf("report %+v, want the pool's one runner", r.Pools)
	}
	want := "p-abcde-0-workflow Pending (Unschedulable: 0/1 nodes are available: 1 Insufficient cpu.)"
	if got := r.Pools[0].Runners[0].WorkflowPod; got != want {
		t.Fatalf("workflow pod %q, want %q", got, want)
	}
	var out bytes.Buffer
	if err := status.RenderPool(&out, clk.Now(), r.Pools[0]); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(out.String(), "workflow pod "+want) {
		t.Fatalf("rendered pool does not show the workflow pod:\n%s", out.String())
	}
}
