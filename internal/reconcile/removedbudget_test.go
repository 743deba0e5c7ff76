package reconcile_test

import (
	"slices"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	k8stesting "k8s.io/client-go/testing"

	"github.com/runnerscaler/runnerscaler/internal/poolstate"
	"github.com/runnerscaler/runnerscaler/internal/runnerpod"
)

const budgetPool = `
pools:
  - name: p
    organization: acme
    maxReplicas: 3
    kubernetes: {namespace: runners, image: runner:1}
`

// leftoverBudget is a budget of pool in the runners namespace, as deployment
// made it.
func leftoverBudget(pool, deployment string) *policyv1.PodDisruptionBudget {
	return &policyv1.PodDisruptionBudget{ObjectMeta: metav1.ObjectMeta{Name: pool + "-busy-runners", Namespace: "runners", UID: types.UID("uid-" + pool),
		Labels: map[string]string{runnerpod.LabelPool: pool}, Annotations: map[string]string{runnerpod.AnnotationDeployment: deployment}}}
}

// TestRemovedPoolsBudgetIsDeleted: a pool removed from the pools file while it
// had no runner object is never swept (removed pools are found by their
// runners); its budget is deleted by the sweep of another pool of its
// namespace. Kept: another deployment's budget, and the budget of a removed
// pool that still has a StatefulSet or a live pod (its drain deletes it with
// the last runner). The namespace's budgets are listed once per
// CleanupInterval; a removed pool whose last runner went since loses its
// budget at the next look.
func TestRemovedPoolsBudgetIsDeleted(t *testing.T) {
	t.Parallel()
	labels := func(pool string) map[string]string { return map[string]string{runnerpod.LabelPool: pool} }
	objects := []runtime.Object{
		leftoverBudget("gone", "d"), leftoverBudget("other", "d2"), leftoverBudget("left", "d"), leftoverBudget("orphan", "d"),
		&appsv1.StatefulSet{ObjectMeta: metav1.ObjectMeta{Name: "left-abcde", Namespace: "runners", Labels: labels("left")}},
		&corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "orphan-abcde-0", Namespace: "runners", Labels: labels("orphan")}},
	}
	a := newAPILess(t, "d", budgetPool, objects...)
	var st poolstate.Status
	if err := a.sweep("p", &st); err != nil {
		t.Fatal(err)
	}
	if got, want := a.budgets(), []string{"left-busy-runners", "orphan-busy-runners", "other-busy-runners", "p-busy-runners"}; !slices.Equal(got, want) {
		t.Fatalf("budgets after a sweep: %v, want %v", got, want)
	}

	if err := a.kube.AppsV1().StatefulSets("runners").Delete(t.Context(), "left-abcde", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	lists := a.budgetLists()
	a.clock.Step(time.Minute)
	if err := a.sweep("p", &st); err != nil {
		t.Fatal(err)
	}
	if n := a.budgetLists(); n != lists {
		t.Fatalf("%d lists of the namespace's budgets within CleanupInterval, want none", n-lists)
	}
	a.clock.Step(time.Hour)
	if err := a.sweep("p", &st); err != nil {
		t.Fatal(err)
	}
	if got, want := a.budgets(), []string{"orphan-busy-runners", "other-busy-runners", "p-busy-runners"}; !slices.Equal(got, want) {
		t.Fatalf("budgets once removed pool left has no runner: %v, want %v", got, want)
	}
}

// budgets names the budgets of the runners namespace, sorted.
func (a *apiless) budgets() []string {
	a.t.Helper()
	list, err := a.kube.PolicyV1().PodDisruptionBudgets("runners").List(a.t.Context(), metav1.ListOptions{})
	if err != nil {
		a.t.Fatal(err)
	}
	var names []string
	for _, b := range list.Items {
		names = append(names, b.Name)
	}
	slices.Sort(names)
	return names
}

// budgetLists counts the reconciler's list calls of budgets so far.
func (a *apiless) budgetLists() int {
	n := 0
	for _, act := range a.kube.Actions() {
		if l, ok := act.(k8stesting.ListAction); ok && l.GetResource().Resource == "poddisruptionbudgets" {
			n++
		}
	}
	return n
}
