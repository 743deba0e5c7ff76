package reconcile_test

import (
	"encoding/json"
	"errors"
	"maps"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/client-go/util/retry"

	"github.com/runnerscaler/runnerscaler/internal/pool"
	"github.com/runnerscaler/runnerscaler/internal/poolstate"
	"github.com/runnerscaler/runnerscaler/internal/reconcile"
	"github.com/runnerscaler/runnerscaler/internal/runnerpod"
	"github.com/runnerscaler/runnerscaler/internal/scaling"
)

// TestBudgetNameFitsALabel: the budget of a pool with the longest name allowed
// has a name of at most 63 characters.
func TestBudgetNameFitsALabel(t *testing.T) {
	t.Parallel()
	name := reconcile.BudgetName(&pool.Pool{Name: strings.Repeat("a", pool.MaxNameLength)})
	if errs := validation.IsDNS1123Label(name); len(errs) > 0 {
		t.Fatalf("budget name %q: %v", name, errs)
	}
}

// TestBusyRunnerPodsAreAnnotatedAgainstDisruption: the pod of a runner whose
// container reports a job gets karpenter.sh/do-not-disrupt "true" and
// cluster-autoscaler.kubernetes.io/safe-to-evict "false", in one patch, and a
// sweep that finds them in place writes nothing; once the runner is idle they
// go.
func TestBusyRunnerPodsAreAnnotatedAgainstDisruption(t *testing.T) {
	t.Parallel()
	e := newEnv(t, true)
	e.mustSweep(1, time.Time{})
	name := e.statefulSets()[0]
	e.start(name)
	e.mustSweep(1, time.Time{})
	if a := e.pods()[name].Annotations; hasDisruptionAnnotation(a) {
		t.Fatalf("idle runner's pod annotated %v", a)
	}
	e.setJobReport(name, true)
	e.mustSweep(1, time.Time{})
	pod := e.pods()[name]
	if a := pod.Annotations; a[runnerpod.AnnotationDoNotDisrupt] != "true" || a[runnerpod.AnnotationSafeToEvict] != "false" {
		t.Fatalf("busy runner's pod annotations %v, want do-not-disrupt true and safe-to-evict false", a)
	}
	e.mustSweep(1, time.Time{})
	if again := e.pods()[name]; again.ResourceVersion != pod.ResourceVersion {
		t.Fatalf("a sweep rewrote the pod of a runner still busy (resourceVersion %s → %s)", pod.ResourceVersion, again.ResourceVersion)
	}
	e.setJobReport(name, false)
	e.mustSweep(1, time.Time{})
	if a := e.pods()[name].Annotations; hasDisruptionAnnotation(a) {
		t.Fatalf("runner idle again, its pod still annotated %v", a)
	}
}

// TestBudgetKeptCheaplyAndDroppedWithItsPool: the first sweep creates the
// pool's budget (maxUnavailable 0, AlwaysAllow, the pool's runner pods); later
// sweeps of the same reconciler send it no request until the recheck is due; a
// reconciler that starts afresh finds it changed by hand and puts it back; and
// once the pool drains to nothing, its budget is deleted.
func TestBudgetKeptCheaplyAndDroppedWithItsPool(t *testing.T) {
	t.Parallel()
	e := newEnv(t, true)
	var requests atomic.Int32
	e.useClient(func(req *http.Request) {
		if strings.Contains(req.URL.Path, "/poddisruptionbudgets") {
			requests.Add(1)
		}
	})
	e.mustSweep(1, time.Time{})
	e.start(e.statefulSets()[0])
	pdb := e.budget()
	want := policyv1.PodDisruptionBudgetSpec{
		Selector: &metav1.LabelSelector{MatchLabels: map[string]string{runnerpod.LabelPool: "p"},
			MatchExpressions: []metav1.LabelSelectorRequirement{{Key: runnerpod.LabelRunner, Operator: metav1.LabelSelectorOpExists}}},
		MaxUnavailable: ptrTo(intstr.FromInt32(0)), UnhealthyPodEvictionPolicy: ptrTo(policyv1.AlwaysAllow)}
	if got := specJSON(t, pdb.Spec); got != specJSON(t, want) {
		t.Fatalf("budget spec %s, want %s", got, specJSON(t, want))
	}
	first := requests.Load()
	for range 3 {
		e.clock.Step(10 * time.Minute)
		e.mustSweep(1, time.Time{})
	}
	if n := requests.Load() - first; n != 0 {
		t.Fatalf("%d budget requests in sweeps after it was made, want 0", n)
	}
	e.clock.Step(time.Hour) // the recheck (CleanupInterval)
	e.mustSweep(1, time.Time{})
	if n := requests.Load() - first; n != 3 {
		t.Fatalf("%d budget requests at the recheck, want 3 (create: exists, get; the namespace's list for removed pools' budgets)", n)
	}

	e.changeBudget(func(pdb *policyv1.PodDisruptionBudget) { pdb.Spec.MaxUnavailable = ptrTo(intstr.FromInt32(1)) })
	e.useClient(func(*http.Request) {}) // a cold start
	e.mustSweep(1, time.Time{})
	if got := e.budget().Spec.MaxUnavailable; got.IntValue() != 0 {
		t.Fatalf("budget changed by hand to maxUnavailable %s was not put back", got.String())
	}

	drained := e.pool.Draining()
	for range 10 {
		if err := e.rec.Reconcile(t.Context(), drained, scaling.Decision{}, &e.status); err != nil {
			t.Fatal(err)
		}
		e.endStoppedRunners()
		if len(e.statefulSets()) == 0 {
			break
		}
		e.clock.Step(time.Minute)
	}
	if err := e.rec.Reconcile(t.Context(), drained, scaling.Decision{}, &e.status); err != nil {
		t.Fatal(err)
	}
	if _, err := e.raw.PolicyV1().PodDisruptionBudgets(e.ns).Get(t.Context(), reconcile.BudgetName(e.pool), metav1.GetOptions{}); !apierrors.IsNotFound(err) {
		t.Fatalf("budget of the drained pool: %v, want it deleted (runners left %v)", err, e.statefulSets())
	}
}

// TestBudgetOfAnotherOwnerIsNotTouched: a PodDisruptionBudget with the pool's
// budget name that records another deployment is neither changed nor deleted,
// and each sweep says so (ErrBudgetNotOurs, naming it); the pool's runners are
// still made and drained.
func TestBudgetOfAnotherOwnerIsNotTouched(t *testing.T) {
	t.Parallel()
	e := newEnv(t, true)
	one := intstr.FromInt32(1)
	theirs, err := e.raw.PolicyV1().PodDisruptionBudgets(e.ns).Create(t.Context(), &policyv1.PodDisruptionBudget{
		ObjectMeta: metav1.ObjectMeta{Name: reconcile.BudgetName(e.pool), Annotations: map[string]string{runnerpod.AnnotationDeployment: "someone-else"}},
		Spec:       policyv1.PodDisruptionBudgetSpec{MinAvailable: &one, Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "theirs"}}},
	}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	err = e.sweep(1, time.Time{})
	if !errors.Is(err, reconcile.ErrBudgetNotOurs) || !strings.Contains(err.Error(), e.ns+"/"+theirs.Name) {
		t.Fatalf("sweep: %v, want ErrBudgetNotOurs naming %s/%s", err, e.ns, theirs.Name)
	}
	if got := e.statefulSets(); len(got) != 1 {
		t.Fatalf("statefulsets %v: the budget's error kept the pool from growing", got)
	}
	drained := e.pool.Draining()
	var st poolstate.Status
	for range 3 {
		if err := e.rec.Reconcile(t.Context(), drained, scaling.Decision{}, &st); err != nil && !errors.Is(err, reconcile.ErrBudgetNotOurs) {
			t.Fatal(err)
		}
	}
	// Its status is the disruption controller's to write: the spec and
	// metadata must be as they were.
	if got := e.budget(); got.Generation != theirs.Generation || specJSON(t, got.Spec) != specJSON(t, theirs.Spec) ||
		!maps.Equal(got.Annotations, theirs.Annotations) || !maps.Equal(got.Labels, theirs.Labels) {
		t.Fatalf("another owner's budget was changed: %+v", got)
	}
}

// setJobReport plays the kubelet running the runner container's job probe: the
// container is ready exactly while a job runs, and the pod's Ready condition follows.
func (e *env) setJobReport(name string, job bool) {
	e.t.Helper()
	pod := e.pods()[name]
	status := corev1.ConditionFalse
	if job {
		status = corev1.ConditionTrue
	}
	pod.Status.Conditions = []corev1.PodCondition{{Type: corev1.PodReady, Status: status, LastTransitionTime: metav1.NewTime(e.clock.Now())}}
	pod.Status.ContainerStatuses[0].Ready = job
	if _, err := e.raw.CoreV1().Pods(e.ns).UpdateStatus(e.t.Context(), pod, metav1.UpdateOptions{}); err != nil {
		e.t.Fatal(err)
	}
}

// changeBudget changes the pool's PodDisruptionBudget by hand (again on a
// conflict: the disruption controller writes its status).
func (e *env) changeBudget(change func(*policyv1.PodDisruptionBudget)) {
	e.t.Helper()
	err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		pdb := e.budget()
		change(pdb)
		_, err := e.raw.PolicyV1().PodDisruptionBudgets(e.ns).Update(e.t.Context(), pdb, metav1.UpdateOptions{})
		return err
	})
	if err != nil {
		e.t.Fatalf("changing the pool's budget: %v", err)
	}
}

// budget reads the pool's PodDisruptionBudget.
func (e *env) budget() *policyv1.PodDisruptionBudget {
	e.t.Helper()
	pdb, err := e.raw.PolicyV1().PodDisruptionBudgets(e.ns).Get(e.t.Context(), reconcile.BudgetName(e.pool), metav1.GetOptions{})
	if err != nil {
		e.t.Fatalf("the pool's budget: %v", err)
	}
	return pdb
}

func hasDisruptionAnnotation(a map[string]string) bool {
	_, dnd := a[runnerpod.AnnotationDoNotDisrupt]
	_, ste := a[runnerpod.AnnotationSafeToEvict]
	return dnd || ste
}

func specJSON(t *testing.T, spec policyv1.PodDisruptionBudgetSpec) string {
	t.Helper()
	raw, err := json.Marshal(spec)
	if err != nil {
		t.Fatal(err)
	}
	return string(raw)
}

func ptrTo[T any](v T) *T { return &v }
