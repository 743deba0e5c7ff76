package reconcile_test

import (
	"context"
	"slices"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"

	"github.com/runnerscaler/runnerscaler/internal/inventory"
	"github.com/runnerscaler/runnerscaler/internal/pool"
	"github.com/runnerscaler/runnerscaler/internal/poolstate"
	"github.com/runnerscaler/runnerscaler/internal/reconcile"
	"github.com/runnerscaler/runnerscaler/internal/runnerpod"
	"github.com/runnerscaler/runnerscaler/internal/scaling"
	"github.com/runnerscaler/runnerscaler/local/testenv"
)

// TestRemovedPoolIsDrainedGracefully: the runners of a pool no longer in the
// file are found by their labels, their pool is rebuilt from what they record,
// and sweeps of it stop them like a scale-down to zero: the idle runner is
// unregistered and deleted, the busy one is kept until its job is over, and
// nothing is left.
func TestRemovedPoolIsDrainedGracefully(t *testing.T) {
	t.Parallel()
	e := newEnv(t, true)
	t0 := e.clock.Now()
	e.mustSweep(2, t0)
	names := e.statefulSets()
	ids := map[string]int64{}
	for _, n := range names {
		ids[n] = e.start(n).ID
	}
	e.mustSweep(2, t0)
	busy, idle := names[0], names[1]
	e.setBusy(ids[busy], true)

	ctx := t.Context()
	known := func(name string) bool { return name != "p" } // "p" was removed from the file
	removed, err := inventory.New(e.kube, "").Removed(ctx, []string{e.ns}, known)
	if err != nil || len(removed) != 1 {
		t.Fatalf("removed pools %v, error %v; want p", removed, err)
	}
	p := removed[0]
	if p.Name != "p" || p.Scope().String() != "organization/acme" || !p.IsEphemeral() || !p.IsDraining() || p.Kubernetes.Namespace != e.ns {
		t.Fatalf("rebuilt pool %+v scope %s", p, p.Scope())
	}
	if again, err := inventory.New(e.kube, "").Removed(ctx, []string{e.ns}, func(string) bool { return true }); err != nil || len(again) != 0 {
		t.Fatalf("a configured pool was taken for removed: %v (error %v)", again, err)
	}

	var st poolstate.Status
	sweep := func() {
		t.Helper()
		if err := e.rec.Reconcile(ctx, p, scaling.Decision{Desired: 0}, &st); err != nil {
			t.Fatalf("sweeping the removed pool: %v", err)
		}
		if e.endStoppedRunners() { // the idle runner's pod was deleted to stop it: the next sweep unregisters it
			if err := e.rec.Reconcile(ctx, p, scaling.Decision{Desired: 0}, &st); err != nil {
				t.Fatalf("sweeping the removed pool: %v", err)
			}
		}
	}
	e.clock.Step(time.Minute)
	sweep()
	if got := e.statefulSets(); !slices.Equal(got, []string{busy}) {
		t.Fatalf("after a sweep: statefulsets %v, want only the busy %s", got, busy)
	}
	e.waitGone(idle)
	if _, ok := e.sim.Runner(ids[idle]); ok {
		t.Fatal("the idle runner is still registered on GitHub")
	}
	sweep()
	if got := e.statefulSets(); len(got) != 1 {
		t.Fatalf("the busy runner was deleted: %v", got)
	}
	if _, ok := e.sim.Runner(ids[busy]); !ok {
		t.Fatal("the busy runner was unregistered under its job")
	}
	e.exit(busy, ids[busy])
	e.clock.Step(time.Minute)
	sweep()
	e.waitGone(busy)
	waitNothingLeft(t, e)
	if _, ok := e.sim.Runner(ids[busy]); ok {
		t.Fatal("the busy runner is still registered on GitHub after its job")
	}
}

// TestRemovedPoolWithoutRecordIsLeftAlone: runners made before they recorded
// their scope cannot be unregistered, so they are reported and not touched.
func TestRemovedPoolWithoutRecordIsLeftAlone(t *testing.T) {
	t.Parallel()
	e := newEnv(t, true)
	e.mustSweep(1, e.clock.Now())
	name := e.statefulSets()[0]
	e.pods() // the controller made the pod
	patch := `{"metadata":{"annotations":{"` + runnerpod.AnnotationScope + `":null}}}`
	ctx := t.Context()
	if _, err := e.kube.AppsV1().StatefulSets(e.ns).Patch(ctx, name, types.MergePatchType, []byte(patch), metav1.PatchOptions{}); err != nil {
		t.Fatal(err)
	}
	for _, kind := range []string{"secret", "pod"} {
		var err error
		if kind == "secret" {
			_, err = e.kube.CoreV1().Secrets(e.ns).Patch(ctx, name, types.MergePatchType, []byte(patch), metav1.PatchOptions{})
		} else {
			_, err = e.kube.CoreV1().Pods(e.ns).Patch(ctx, runnerpod.PodName(name), types.MergePatchType, []byte(patch), metav1.PatchOptions{})
		}
		if err != nil {
			t.Fatal(err)
		}
	}
	removed, err := inventory.New(e.kube, "").Removed(ctx, []string{e.ns}, func(string) bool { return false })
	if len(removed) != 0 || err == nil || !strings.Contains(err.Error(), "pool p: its runners do not record their scope") {
		t.Fatalf("removed %v, error %v; want none and an error naming pool p", removed, err)
	}
}

func waitNothingLeft(t *testing.T, e *env) {
	t.Helper()
	err := wait.PollUntilContextTimeout(t.Context(), 50*time.Millisecond, 20*time.Second, true, func(ctx context.Context) (bool, error) {
		left, err := inventory.New(e.kube, "").Remaining(ctx, []string{e.ns}, func(string) bool { return true })
		return err == nil && len(left) == 0, err
	})
	if err != nil {
		left, lerr := inventory.New(e.kube, "").Remaining(t.Context(), []string{e.ns}, func(string) bool { return true })
		t.Fatalf("left in the namespace: %v (%v, %v)", left, err, lerr)
	}
}

// TestAnotherDeploymentsRunnersAreNotRemoved: runners of a pool this deployment
// does not know are drained only if they carry this deployment's name: another
// deployment sharing the namespace keeps its runners, and a drain does not wait
// for them.
func TestAnotherDeploymentsRunnersAreNotRemoved(t *testing.T) {
	t.Parallel()
	e := newEnv(t, true)
	cfg, err := pool.Parse([]byte(poolYAML(e.ns, true, "runner:1")))
	if err != nil {
		t.Fatal(err)
	}
	ctx := t.Context()
	mine, err := reconcile.New(cfg, e.kube, e.gh, e.clock, nil, reconcile.Options{Deployment: "table-a", JobLinks: e.links, Roster: e.roster})
	if err != nil {
		t.Fatal(err)
	}
	var st poolstate.Status
	if err := mine.Reconcile(ctx, cfg.Pool("p"), scaling.Decision{Desired: 1, EffectiveTime: e.clock.Now()}, &st); err != nil {
		t.Fatal(err)
	}
	unknown := func(string) bool { return false }
	if got, err := inventory.New(e.kube, "table-b").Removed(ctx, []string{e.ns}, unknown); err != nil || len(got) != 0 {
		t.Fatalf("another deployment took %v as removed (error %v)", got, err)
	}
	if left, err := inventory.New(e.kube, "table-b").Remaining(ctx, []string{e.ns}, unknown); err != nil || len(left) != 0 {
		t.Fatalf("another deployment counts %v as its own (error %v)", left, err)
	}
	if got, err := inventory.New(e.kube, "table-a").Removed(ctx, []string{e.ns}, unknown); err != nil || len(got) != 1 || got[0].Name != "p" {
		t.Fatalf("the deployment that made them found %v (error %v), want pool p", got, err)
	}
	if left, err := inventory.New(e.kube, "table-a").Remaining(ctx, []string{e.ns}, unknown); err != nil || left["p"] == 0 {
		t.Fatalf("remaining %v (error %v), want p's objects counted", left, err)
	}
}

// TestRBACIsEnoughToDrainARemovedPool: as a member of the sweeper's group
// (infra/rbac.yaml), finding a removed pool's runners and draining them needs no
// verb the Role lacks.
func TestRBACIsEnoughToDrainARemovedPool(t *testing.T) {
	t.Parallel()
	e := newEnv(t, true)
	applyRBAC(t, e)
	user, err := kubernetes.NewForConfig(testenv.UserRESTConfig(t, "sweeper-"+e.ns, []string{"runnerscaler-sweeper"}))
	if err != nil {
		t.Fatal(err)
	}
	e.mustSweep(1, time.Time{})
	rec := e.newReconciler(user, e.gh)
	finder := inventory.New(user, "")
	ctx := t.Context()
	removed, err := finder.Removed(ctx, []string{e.ns}, func(string) bool { return false })
	if err != nil || len(removed) != 1 {
		t.Fatalf("removed %v, error %v", removed, err)
	}
	var st poolstate.Status
	for range 50 { // as the drain does: sweep until nothing is left
		if err := rec.Reconcile(ctx, removed[0], scaling.Decision{}, &st); err != nil {
			t.Fatalf("draining as the sweeper: %v", err)
		}
		if left, err := finder.Remaining(ctx, []string{e.ns}, func(string) bool { return false }); err == nil && len(left) == 0 {
			return
		}
		time.Sleep(200 * time.Millisecond)
	}
	inv, err := finder.List(ctx, []string{e.ns})
	t.Fatalf("left after 50 sweeps: %+v (error %v)", inv, err)
}
