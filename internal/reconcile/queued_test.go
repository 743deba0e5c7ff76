package reconcile_test

import (
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/runnerscaler/runnerscaler/internal/reconcile"
	"github.com/runnerscaler/runnerscaler/internal/runnerpod"
	"github.com/runnerscaler/runnerscaler/internal/scaling"
)

// TestScaleDownHeldWhileAJobWaits: while a job of the pool waits for a runner,
// GitHub may hand it to any idle runner, the one being stopped included; so
// scale-down then takes only runners that never started, and the started ones
// go once no job waits.
func TestScaleDownHeldWhileAJobWaits(t *testing.T) {
	t.Parallel()
	e := newEnv(t, true)
	t0 := e.clock.Now()
	e.mustSweep(3, t0)
	names := e.statefulSets()
	started := names[:2] // names[2] never starts: its pod stays unbound
	for _, n := range started {
		e.start(n)
	}
	e.clock.Step(5 * time.Minute)
	e.mustSweep(3, t0)

	e.clock.Step(time.Minute)
	waiting := scaling.Decision{Desired: 1, Reserved: 1, Reservations: 1, Queued: 1, EffectiveTime: t0}
	if err := e.rec.Reconcile(t.Context(), e.pool, waiting, &e.status); err != nil {
		t.Fatal(err)
	}
	marked := e.markedRunners()
	for _, n := range started {
		if marked[n] {
			t.Fatalf("runner %s was marked for stopping while a job waits for a runner (marked %v)", n, marked)
		}
	}
	if !marked[names[2]] && len(e.statefulSets()) != 2 {
		t.Fatalf("the never-started runner %s was neither marked nor removed (marked %v, statefulsets %v)", names[2], marked, e.statefulSets())
	}

	e.clock.Step(time.Minute)
	taken := scaling.Decision{Desired: 1, Reserved: 1, Reservations: 1, EffectiveTime: t0}
	if err := e.rec.Reconcile(t.Context(), e.pool, taken, &e.status); err != nil {
		t.Fatal(err)
	}
	marked = e.markedRunners()
	n := 0
	for _, name := range started {
		if marked[name] {
			n++
		}
	}
	if n != 1 {
		t.Fatalf("once no job waits, %d of the started runners are marked, want 1 (marked %v)", n, marked)
	}
}

// markedRunners lists the pool's StatefulSets marked for unregistration.
func (e *env) markedRunners() map[string]bool {
	e.t.Helper()
	list, err := e.raw.AppsV1().StatefulSets(e.ns).List(e.t.Context(), metav1.ListOptions{})
	if err != nil {
		e.t.Fatal(err)
	}
	out := map[string]bool{}
	for _, s := range list.Items {
		if _, ok := s.Annotations[runnerpod.AnnotationUnregistrationRequest]; ok {
			out[s.Name] = true
		}
	}
	return out
}

// TestIdleStopWaitsWhileAJobWaits: a runner already being stopped, idle by
// every signal, keeps its pod while a job of the pool waits for a runner (GitHub
// could hand it that job as its listener stops, which would cancel it); once no
// job waits, its pod is deleted.
func TestIdleStopWaitsWhileAJobWaits(t *testing.T) {
	t.Parallel()
	w := newBusyWorld(t)
	w.scaleDownAndConfirmIdle()
	waiting := scaling.Decision{Reserved: 1, Reservations: 1, Queued: 1}
	if err := w.rec.Reconcile(t.Context(), w.pool, waiting, &w.status); err != nil {
		t.Fatal(err)
	}
	if w.podDeleting() {
		t.Fatal("the idle runner's pod was deleted while a job of the pool waits for a runner")
	}
	w.kept("while a job waits")
	if err := w.rec.Reconcile(t.Context(), w.pool, scaling.Decision{}, &w.status); err != nil {
		t.Fatal(err)
	}
	if !w.podDeleting() {
		t.Fatal("once no job waits, the idle runner's pod was not deleted to stop it")
	}
}

// podDeleting reports whether the runner's pod is being deleted.
func (w *busyWorld) podDeleting() bool {
	w.t.Helper()
	pod, err := w.raw.CoreV1().Pods(w.ns).Get(w.t.Context(), w.name+"-0", metav1.GetOptions{})
	if err != nil {
		w.t.Fatal(err)
	}
	return pod.DeletionTimestamp != nil
}

// TestDrainIsNotHeldByWaitingJobs: a teardown (the pool in its Draining form)
// stops idle runners even while jobs wait: no runner will be left to take them.
func TestDrainIsNotHeldByWaitingJobs(t *testing.T) {
	t.Parallel()
	w := newBusyWorld(t)
	w.scaleDownAndConfirmIdle()
	waiting := scaling.Decision{Reserved: 1, Reservations: 1, Queued: 1}
	if err := w.rec.Reconcile(t.Context(), w.pool.Draining(), waiting, &w.status); err != nil {
		t.Fatal(err)
	}
	if !w.podDeleting() {
		t.Fatal("a draining pool's idle runner kept its pod because a job waits")
	}
}

// TestSaturatedPoolIsNotHeldByWaitingJobs: jobs beyond maxReplicas wait as long
// as the pool is saturated; the surplus above a lowered maxReplicas still goes.
func TestSaturatedPoolIsNotHeldByWaitingJobs(t *testing.T) {
	t.Parallel()
	e := newEnv(t, true)
	t0 := e.clock.Now()
	e.mustSweep(2, t0)
	for _, n := range e.statefulSets() {
		e.start(n)
	}
	e.clock.Step(5 * time.Minute)
	e.mustSweep(2, t0)
	saturated := scaling.Decision{Desired: 1, Reserved: 5, Reservations: 5, Queued: 4, Saturated: true, EffectiveTime: t0}
	if err := e.rec.Reconcile(t.Context(), e.pool, saturated, &e.status); err != nil {
		t.Fatal(err)
	}
	if marked := e.markedRunners(); len(marked) != 1 {
		t.Fatalf("marked %v, want one runner above the saturated pool's desired count", marked)
	}
}

// TestOutdatedRunnerIsReplacedWhileAJobWaits: a runner replaced for an outdated
// template is not held by a waiting job (its labels may not be the job's, and
// holding it could keep the slot the job needs): its pod goes.
func TestOutdatedRunnerIsReplacedWhileAJobWaits(t *testing.T) {
	t.Parallel()
	w := newBusyWorld(t)
	w.setPool(false, "runner:2") // the template changed: the runner is outdated
	waiting := scaling.Decision{Desired: 1, Reserved: 1, Reservations: 1, Queued: 1}
	if err := w.rec.Reconcile(t.Context(), w.pool, waiting, &w.status); err != nil {
		t.Fatal(err)
	}
	w.clock.Step(reconcile.DefaultIdleConfirmation)
	if err := w.rec.Reconcile(t.Context(), w.pool, waiting, &w.status); err != nil {
		t.Fatal(err)
	}
	if !w.podDeleting() {
		t.Fatal("the outdated runner kept its pod because a job waits")
	}
}
