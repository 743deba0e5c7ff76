package reconcile_test

import (
	"errors"
	"strings"
	"testing"

	schedulingv1 "k8s.io/api/scheduling/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/runnerscaler/runnerscaler/internal/headroom"
	"github.com/runnerscaler/runnerscaler/internal/poolstate"
	"github.com/runnerscaler/runnerscaler/internal/reconcile"
)

const headroomPool = `
pools:
  - name: p
    organization: acme
    maxReplicas: 3
    headroom: {replicas: 1}
    kubernetes: {namespace: runners, image: runner:1}
`

// TestHeadroomWaitsForTheOperatorsPriorityClass: the sweeper never creates
// the placeholders' PriorityClass (it may only read it): while it is missing
// the pool gets no placeholders and its status's errors name the class and
// its manifest; once the operator applied it, the next sweep creates them. A
// class of that name at priority 0 or more is refused.
func TestHeadroomWaitsForTheOperatorsPriorityClass(t *testing.T) {
	t.Parallel()
	a := newAPILess(t, "d", headroomPool)
	var st poolstate.Status
	err := a.sweep("p", &st)
	if !errors.Is(err, reconcile.ErrNoPriorityClass) {
		t.Fatalf("sweep without the priority class: %v, want ErrNoPriorityClass", err)
	}
	if !st.Failed || len(st.Errors) != 1 || !strings.Contains(st.Errors[0].Error, headroom.PriorityClassName) ||
		!strings.Contains(st.Errors[0].Error, "infra/priorityclass.yaml") {
		t.Fatalf("pool status failed %v, errors %+v: want the missing class and its manifest named", st.Failed, st.Errors)
	}
	classes, err := a.kube.SchedulingV1().PriorityClasses().List(t.Context(), metav1.ListOptions{})
	if err != nil || len(classes.Items) != 0 {
		t.Fatalf("priority classes after the sweep: %v (%v), want none: the sweeper must not create one", classes.Items, err)
	}
	a.placeholders(0)

	if _, err := a.kube.SchedulingV1().PriorityClasses().Create(t.Context(), headroom.PriorityClass(), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if err := a.sweep("p", &st); err != nil {
		t.Fatalf("sweep once the operator created the class: %v", err)
	}
	a.placeholders(1)

	b := newAPILess(t, "d", headroomPool, &schedulingv1.PriorityClass{
		ObjectMeta: metav1.ObjectMeta{Name: headroom.PriorityClassName}, Value: 0})
	if err := b.sweep("p", &st); err == nil || !strings.Contains(err.Error(), "want a negative value") {
		t.Fatalf("sweep with the class at priority 0: %v, want it refused", err)
	}
	b.placeholders(0)
}

// placeholders fails the test unless the namespace holds n placeholder
// StatefulSets.
func (a *apiless) placeholders(n int) {
	a.t.Helper()
	list, err := a.kube.AppsV1().StatefulSets("runners").List(a.t.Context(), metav1.ListOptions{LabelSelector: headroom.LabelPool})
	if err != nil || len(list.Items) != n {
		a.t.Fatalf("placeholder statefulsets: %d (%v), want %d", len(list.Items), err, n)
	}
}
