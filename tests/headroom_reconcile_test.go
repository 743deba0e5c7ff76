package tests

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	authorizationv1 "k8s.io/api/authorization/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	schedulingv1 "k8s.io/api/scheduling/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"k8s.io/client-go/kubernetes"
	clocktesting "k8s.io/utils/clock/testing"

	"github.com/runnerscaler/runnerscaler/internal/githubapi"
	"github.com/runnerscaler/runnerscaler/internal/headroom"
	"github.com/runnerscaler/runnerscaler/internal/inventory"
	"github.com/runnerscaler/runnerscaler/internal/pool"
	"github.com/runnerscaler/runnerscaler/internal/poolstate"
	"github.com/runnerscaler/runnerscaler/internal/reconcile"
	"github.com/runnerscaler/runnerscaler/internal/reservation"
	"github.com/runnerscaler/runnerscaler/internal/roster"
	"github.com/runnerscaler/runnerscaler/internal/scaling"
	"github.com/runnerscaler/runnerscaler/internal/scope"
	"github.com/runnerscaler/runnerscaler/local/testenv"
)

// noGitHub is a GitHub that no call may reach: counting them shows that
// placeholders never register, nor make the reconciler ask GitHub anything.
type noGitHub struct{ calls atomic.Int32 }

var errNoGitHub = errors.New("no GitHub call expected")

func (g *noGitHub) Runners(context.Context, scope.Scope) ([]githubapi.Runner, error) {
	g.calls.Add(1)
	return nil, errNoGitHub
}

func (g *noGitHub) Runner(context.Context, scope.Scope, int64) (githubapi.Runner, error) {
	g.calls.Add(1)
	return githubapi.Runner{}, errNoGitHub
}

func (g *noGitHub) RemoveRunner(context.Context, scope.Scope, int64) error {
	g.calls.Add(1)
	return errNoGitHub
}

func (g *noGitHub) RemoveRunnerLabels(context.Context, scope.Scope, int64) error {
	g.calls.Add(1)
	return errNoGitHub
}

func (g *noGitHub) JITConfig(context.Context, scope.Scope, string, []string, int64) (githubapi.JITConfig, error) {
	g.calls.Add(1)
	return githubapi.JITConfig{}, errNoGitHub
}

func (g *noGitHub) RegistrationToken(context.Context, scope.Scope) (githubapi.RegistrationToken, error) {
	g.calls.Add(1)
	return githubapi.RegistrationToken{}, errNoGitHub
}

func (g *noGitHub) RunnerGroupID(context.Context, scope.Scope, string) (int64, error) {
	g.calls.Add(1)
	return 0, errNoGitHub
}

// noLinks is a job↔runner link with no job.
type noLinks struct{}

func (noLinks) RunnerJobs(context.Context, string) ([]reservation.RunnerJob, error) { return nil, nil }

func (noLinks) Job(context.Context, string, int64) (reservation.Reservation, bool, error) {
	return reservation.Reservation{}, false, nil
}

// headroomEnv reconciles the pools of a file in a fresh namespace on the
// stack (its scheduler and node), on a fake clock, wanting no runner.
type headroomEnv struct {
	t     *testing.T
	kube  kubernetes.Interface
	ns    string
	clock *clocktesting.FakeClock
	gh    *noGitHub
	// rosters: each deployment's roster, by its name.
	rosters map[string]*roster.Store
}

func newHeadroomEnv(t *testing.T) *headroomEnv {
	t.Helper()
	kube, ns := testenv.Namespace(t)
	applyPriorityClass(t, kube)
	return &headroomEnv{t: t, kube: kube, ns: ns, clock: clocktesting.NewFakeClock(time.Now().Truncate(time.Second)), gh: &noGitHub{}}
}

// reconciler for the pools of poolsYAML (%[1]s: the namespace, %[2]s: the
// placeholders' image, %[3]s: the headroom setting) as deployment, acting as kube.
func (e *headroomEnv) reconciler(kube kubernetes.Interface, deployment, poolsYAML, headroomSetting string) (*reconcile.Reconciler, *pool.Config) {
	e.t.Helper()
	poolsYAML = strings.ReplaceAll(poolsYAML, "%[3]s", headroomSetting)
	cfg, err := pool.Parse(fmt.Appendf(nil, poolsYAML, e.ns, pauseImage("")))
	if err != nil {
		e.t.Fatal(err)
	}
	rec, err := reconcile.New(cfg, kube, e.gh, e.clock, nil, reconcile.Options{JobLinks: noLinks{}, Deployment: deployment,
		Roster: e.roster(deployment)})
	if err != nil {
		e.t.Fatal(err)
	}
	return rec, cfg
}

// sweep reconciles p to no runner, as the sweeper would at the fake clock's
// time; the pool status must record no runner.
func (e *headroomEnv) sweep(rec *reconcile.Reconciler, p *pool.Pool) {
	e.t.Helper()
	st := poolstate.Status{}
	d := scaling.Decide(p, nil, scaling.Previous{}, e.clock.Now())
	if err := rec.Reconcile(e.t.Context(), p, d, &st); err != nil {
		e.t.Fatalf("sweeping %s: %v", p.Name, err)
	}
	if len(st.Phases) != 0 {
		e.t.Fatalf("pool %s: runner phases %v, want none (placeholders are no runners)", p.Name, st.Phases)
	}
	if n := e.gh.calls.Load(); n != 0 {
		e.t.Fatalf("%d GitHub calls, want none", n)
	}
}

// placeholders waits until the pool's placeholder pods in the namespace are
// n, all running at the headroom priority, with one StatefulSet (none for 0).
func (e *headroomEnv) placeholders(poolName string, n int) {
	e.t.Helper()
	sel := metav1.ListOptions{LabelSelector: headroom.LabelPool + "=" + poolName}
	poll(e.t, fmt.Sprintf("%d placeholders of %s", n, poolName), time.Minute, func() (bool, error) {
		pods, err := e.kube.CoreV1().Pods(e.ns).List(e.t.Context(), sel)
		if err != nil || len(pods.Items) != n {
			return false, err
		}
		for _, p := range pods.Items {
			if !running(&p) || priority(&p) != headroom.Priority {
				return false, nil
			}
		}
		stss, err := e.kube.AppsV1().StatefulSets(e.ns).List(e.t.Context(), sel)
		return err == nil && (n > 0) == (len(stss.Items) == 1) && len(stss.Items) <= 1, err
	})
}

// Pools p (with headroom, as %[3]s says) and q (without), in the namespace,
// their runners never wanted: only the placeholders are sized from them.
const headroomPools = `
pools:
  - name: p
    organization: acme
    maxReplicas: 3
    headroom: %[3]s
    kubernetes: {namespace: %[1]s, image: runner:unused}
  - name: q
    organization: acme
    maxReplicas: 3
    kubernetes: {namespace: %[1]s, image: runner:unused}
`

// headroomOf is a headroom setting of n placeholders, in the env's image.
func headroomOf(n int) string { return fmt.Sprintf("{image: %%[2]s, replicas: %d}", n) }

// TestHeadroomScheduleEndsAndNothingIsLeft: placeholders follow their
// schedule on a fake clock — two while its window is open, none once it ended
// (the StatefulSet and its pods go); they are never registered, never counted
// as runners (pool status, inventory), and cost no GitHub call; a draining
// pool's go (teardown); and a pool removed from the file has this
// deployment's placeholders removed by the sweep of another pool of the
// namespace, while another deployment's stay.
func TestHeadroomScheduleEndsAndNothingIsLeft(t *testing.T) {
	t.Parallel()
	e := newHeadroomEnv(t)
	start, end := e.clock.Now().Add(-time.Minute), e.clock.Now().Add(time.Hour)
	scheduled := fmt.Sprintf(`{image: %%[2]s, scheduledOverrides: [{startTime: "%s", endTime: "%s", replicas: 2}]}`,
		start.Format(time.RFC3339), end.Format(time.RFC3339))
	rec, cfg := e.reconciler(e.kube, "d1", headroomPools, scheduled)
	e.sweep(rec, cfg.Pool("p"))
	e.placeholders("p", 2)
	inv, err := inventory.New(e.kube, "d1").List(t.Context(), []string{e.ns})
	if err != nil || len(inv) != 0 {
		t.Fatalf("the inventory counts %+v (%v), want nothing", inv, err)
	}
	e.clock.Step(30 * time.Minute)
	e.sweep(rec, cfg.Pool("p"))
	e.placeholders("p", 2)
	e.clock.SetTime(end.Add(time.Second))
	e.sweep(rec, cfg.Pool("p"))
	e.placeholders("p", 0)

	always, cfgAlways := e.reconciler(e.kube, "d1", headroomPools, headroomOf(1))
	e.sweep(always, cfgAlways.Pool("p"))
	e.placeholders("p", 1)
	e.sweep(always, cfgAlways.Pool("p").Draining())
	e.placeholders("p", 0)

	e.sweep(always, cfgAlways.Pool("p"))
	e.placeholders("p", 1)
	other, otherCfg := e.reconciler(e.kube, "d2", strings.Replace(headroomPools, "name: p\n", "name: o\n", 1), headroomOf(1))
	e.sweep(other, otherCfg.Pool("o"))
	e.placeholders("o", 1)
	removed, removedCfg := e.reconciler(e.kube, "d1", "pools:\n"+headroomPools[strings.Index(headroomPools, "  - name: q"):], "")
	e.sweep(removed, removedCfg.Pool("q"))
	e.placeholders("p", 0)
	e.placeholders("o", 1)
}

// TestHeadroomRBACIsEnough: as a member of a group that infra/rbac.yaml's Role
// and ClusterRole (bound to that group for the test) grant, the reconciler
// creates, resizes and deletes a pool's placeholders, once the operator
// applied infra/priorityclass.yaml; the group may get the placeholders'
// priority class, and neither create one nor get another.
func TestHeadroomRBACIsEnough(t *testing.T) {
	t.Parallel()
	e := newHeadroomEnv(t)
	group := "sweeper-" + e.ns
	applyHeadroomRBAC(t, e.kube, e.ns, group)
	user, err := kubernetes.NewForConfig(testenv.UserRESTConfig(t, "sweeper-"+e.ns, []string{group}))
	if err != nil {
		t.Fatal(err)
	}
	one, cfg := e.reconciler(user, "d", headroomPools, headroomOf(1))
	e.sweep(one, cfg.Pool("p"))
	e.placeholders("p", 1)
	two, cfg := e.reconciler(user, "d", headroomPools, headroomOf(2))
	e.sweep(two, cfg.Pool("p"))
	e.placeholders("p", 2)
	e.sweep(two, cfg.Pool("p").Draining())
	e.placeholders("p", 0)
	for _, tc := range []struct {
		verb, name string
		allowed    bool
	}{{"create", "", false}, {"create", headroom.PriorityClassName, false}, {"get", headroom.PriorityClassName, true}, {"get", "system-node-critical", false}} {
		review, err := e.kube.AuthorizationV1().SubjectAccessReviews().Create(t.Context(), &authorizationv1.SubjectAccessReview{
			Spec: authorizationv1.SubjectAccessReviewSpec{User: "sweeper-" + e.ns, Groups: []string{group},
				ResourceAttributes: &authorizationv1.ResourceAttributes{Group: "scheduling.k8s.io", Resource: "priorityclasses", Verb: tc.verb, Name: tc.name}},
		}, metav1.CreateOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if review.Status.Allowed != tc.allowed {
			t.Errorf("%s priorityclasses %q: allowed %v, want %v", tc.verb, tc.name, review.Status.Allowed, tc.allowed)
		}
	}
}

// applyPriorityClass creates infra/priorityclass.yaml's class as the operator
// does before pools with headroom are deployed (the sweeper may only read it).
// It is cluster-wide, shared by the tests and never deleted: a test finding it
// already there goes on.
func applyPriorityClass(t testing.TB, kube kubernetes.Interface) {
	t.Helper()
	raw, err := os.ReadFile("../infra/priorityclass.yaml")
	if err != nil {
		t.Fatal(err)
	}
	var pc schedulingv1.PriorityClass
	if err := utilyaml.NewYAMLOrJSONDecoder(bytes.NewReader(raw), 4096).Decode(&pc); err != nil {
		t.Fatalf("infra/priorityclass.yaml: %v", err)
	}
	if _, err := kube.SchedulingV1().PriorityClasses().Create(t.Context(), &pc, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		t.Fatalf("applying infra/priorityclass.yaml: %v", err)
	}
}

// applyHeadroomRBAC applies infra/rbac.yaml's Role and RoleBinding to ns and
// its ClusterRole and ClusterRoleBinding under names of the test's, all bound
// to group instead of the sweeper's (so no other test's user gains them).
func applyHeadroomRBAC(t *testing.T, kube kubernetes.Interface, ns, group string) {
	t.Helper()
	raw, err := os.ReadFile("../infra/rbac.yaml")
	if err != nil {
		t.Fatal(err)
	}
	dec := utilyaml.NewYAMLOrJSONDecoder(bytes.NewReader(raw), 4096)
	kinds := map[string]bool{}
	for {
		var obj map[string]any
		if err := dec.Decode(&obj); errors.Is(err, io.EOF) {
			break
		} else if err != nil {
			t.Fatal(err)
		}
		doc, err := json.Marshal(obj)
		if err != nil {
			t.Fatal(err)
		}
		kind, _ := obj["kind"].(string)
		kinds[kind] = true
		if err := applyRBACObject(t, kube, kind, doc, ns, group); err != nil {
			t.Fatalf("%s: %v", kind, err)
		}
	}
	for _, k := range []string{"Role", "RoleBinding", "ClusterRole", "ClusterRoleBinding"} {
		if !kinds[k] {
			t.Fatalf("infra/rbac.yaml has no %s", k)
		}
	}
}

func applyRBACObject(t *testing.T, kube kubernetes.Interface, kind string, doc []byte, ns, group string) error {
	ctx, rbac := t.Context(), kube.RbacV1()
	subjects := []rbacv1.Subject{{APIGroup: rbacv1.GroupName, Kind: rbacv1.GroupKind, Name: group}}
	switch kind {
	case "Role":
		var r rbacv1.Role
		if err := json.Unmarshal(doc, &r); err != nil {
			return err
		}
		r.Namespace = ns
		_, err := rbac.Roles(ns).Create(ctx, &r, metav1.CreateOptions{})
		return err
	case "RoleBinding":
		var b rbacv1.RoleBinding
		if err := json.Unmarshal(doc, &b); err != nil {
			return err
		}
		b.Namespace, b.Subjects = ns, subjects
		_, err := rbac.RoleBindings(ns).Create(ctx, &b, metav1.CreateOptions{})
		return err
	case "ClusterRole":
		var r rbacv1.ClusterRole
		if err := json.Unmarshal(doc, &r); err != nil {
			return err
		}
		r.Name += "-" + ns
		t.Cleanup(func() { _ = rbac.ClusterRoles().Delete(context.Background(), r.Name, metav1.DeleteOptions{}) })
		_, err := rbac.ClusterRoles().Create(ctx, &r, metav1.CreateOptions{})
		return err
	case "ClusterRoleBinding":
		var b rbacv1.ClusterRoleBinding
		if err := json.Unmarshal(doc, &b); err != nil {
			return err
		}
		b.Name += "-" + ns
		b.RoleRef.Name += "-" + ns
		b.Subjects = subjects
		t.Cleanup(func() { _ = rbac.ClusterRoleBindings().Delete(context.Background(), b.Name, metav1.DeleteOptions{}) })
		_, err := rbac.ClusterRoleBindings().Create(ctx, &b, metav1.CreateOptions{})
		return err
	}
	return nil
}

// roster is deployment's roster (one table per deployment, as in AWS).
func (e *headroomEnv) roster(deployment string) *roster.Store {
	if e.rosters == nil {
		e.rosters = map[string]*roster.Store{}
	}
	if e.rosters[deployment] == nil {
		e.rosters[deployment] = testenv.Roster(e.t)
	}
	return e.rosters[deployment]
}
