package reconcile_test

import (
	"bytes"
	"encoding/json"
	"io"
	"os"
	"testing"
	"time"

	policyv1 "k8s.io/api/policy/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"k8s.io/client-go/kubernetes"

	"github.com/runnerscaler/runnerscaler/internal/reconcile"
	"github.com/runnerscaler/runnerscaler/internal/scaling"
	"github.com/runnerscaler/runnerscaler/local/testenv"
)

// TestSweeperRBACIsEnough applies the Role and RoleBinding of infra/rbac.yaml to a
// namespace and runs a scale-up and a scale-down as a member of the sweeper's
// group, with a busy runner, a pool budget changed by hand and a teardown sweep:
// the rules must allow everything the reconciler does.
func TestSweeperRBACIsEnough(t *testing.T) {
	t.Parallel()
	e := newEnv(t, true)
	applyRBAC(t, e)
	user, err := kubernetes.NewForConfig(testenv.UserRESTConfig(t, "sweeper-"+e.ns, []string{"runnerscaler-sweeper"}))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := user.CoreV1().Pods("default").List(t.Context(), metav1.ListOptions{}); err == nil {
		t.Fatal("the sweeper's group can list pods outside its namespace")
	}
	e.rec = e.newReconciler(user, e.gh)
	e.mustSweep(2, time.Time{})
	names := e.statefulSets()
	if len(names) != 2 {
		t.Fatalf("scale-up as the sweeper: %v", names)
	}
	for _, n := range names {
		e.start(n)
	}
	e.mustSweep(2, time.Time{})
	e.setJobReport(names[0], true) // a busy runner's pod is annotated
	e.mustSweep(2, time.Time{})
	e.setJobReport(names[0], false)
	// The pool's budget, changed by hand, is read and put back by a sweeper
	// starting afresh.
	e.changeBudget(func(pdb *policyv1.PodDisruptionBudget) { pdb.Spec.MaxUnavailable = ptrTo(intstr.FromInt32(1)) })
	e.rec = e.newReconciler(user, e.gh)
	e.mustSweep(2, time.Time{})
	if got := e.budget().Spec.MaxUnavailable; got.IntValue() != 0 {
		t.Fatalf("budget not put back as the sweeper: maxUnavailable %s", got.String())
	}
	for range 2 { // the runner that ran a job is removed after its idle confirmation
		e.clock.Step(2 * time.Minute)
		e.mustSweep(0, time.Time{})
	}
	if got := e.statefulSets(); len(got) != 0 {
		t.Fatalf("scale-down as the sweeper: %v", got)
	}
	// A teardown: the drained pool's budget goes.
	if err := e.rec.Reconcile(t.Context(), e.pool.Draining(), scaling.Decision{}, &e.status); err != nil {
		t.Fatalf("teardown sweep as the sweeper: %v", err)
	}
	if _, err := e.raw.PolicyV1().PodDisruptionBudgets(e.ns).Get(t.Context(), reconcile.BudgetName(e.pool), metav1.GetOptions{}); !apierrors.IsNotFound(err) {
		t.Fatalf("budget after the teardown sweep: %v, want it deleted", err)
	}
}

func applyRBAC(t *testing.T, e *env) {
	t.Helper()
	raw, err := os.ReadFile("../../infra/rbac.yaml")
	if err != nil {
		t.Fatal(err)
	}
	dec := utilyaml.NewYAMLOrJSONDecoder(bytes.NewReader(raw), 4096)
	for {
		var obj map[string]any
		if err := dec.Decode(&obj); err == io.EOF {
			return
		} else if err != nil {
			t.Fatal(err)
		}
		doc, err := json.Marshal(obj)
		if err != nil {
			t.Fatal(err)
		}
		switch obj["kind"] {
		case "Role":
			var r rbacv1.Role
			mustJSON(t, doc, &r)
			r.Namespace = e.ns
			if _, err := e.kube.RbacV1().Roles(e.ns).Create(t.Context(), &r, metav1.CreateOptions{}); err != nil {
				t.Fatal(err)
			}
		case "RoleBinding":
			var b rbacv1.RoleBinding
			mustJSON(t, doc, &b)
			b.Namespace = e.ns
			if _, err := e.kube.RbacV1().RoleBindings(e.ns).Create(t.Context(), &b, metav1.CreateOptions{}); err != nil {
				t.Fatal(err)
			}
		}
	}
}

func mustJSON(t *testing.T, raw []byte, v any) {
	t.Helper()
	if err := json.Unmarshal(raw, v); err != nil {
		t.Fatal(err)
	}
}
