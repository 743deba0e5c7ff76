package reconcile_test

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/runnerscaler/runnerscaler/internal/reconcile"
	"github.com/runnerscaler/runnerscaler/internal/reservation"
	"github.com/runnerscaler/runnerscaler/internal/runnerpod"
	"github.com/runnerscaler/runnerscaler/internal/scaling"
)

// sweepFinished sweeps a saturated pool (desired 10, jobs waiting) as a refill
// nudge naming the runners (GitHub names) does, once more when the sweep left
// a runner to the next (ErrStale).
func (e *env) sweepFinished(finished ...string) {
	e.t.Helper()
	d := scaling.Decision{Desired: 10, Queued: 3, Saturated: true, EffectiveTime: e.clock.Now(), Finished: finished}
	err := e.rec.Reconcile(e.t.Context(), e.pool, d, &e.status)
	if errors.Is(err, reconcile.ErrStale) {
		err = e.rec.Reconcile(e.t.Context(), e.pool, d, &e.status)
	}
	if err != nil {
		e.t.Fatalf("sweep: %v", err)
	}
}

// fullPool fills the pool (maxReplicas 10) with started runners and returns
// their GitHub ids by StatefulSet name.
func (e *env) fullPool() map[string]int64 {
	e.t.Helper()
	e.mustSweep(10, e.clock.Now())
	ids := map[string]int64{}
	for _, n := range e.statefulSets() {
		ids[n] = e.start(n).ID
	}
	if len(ids) != 10 {
		e.t.Fatalf("%d runners, want the pool's maxReplicas 10", len(ids))
	}
	return ids
}

// TestFinishedRunnerFreesItsSlotAtOnce: a saturated pool (maxReplicas 10,
// jobs waiting). Runner a's job is linked in progress: a nudge naming a counts
// nothing out. Once its job is linked completed, a nudge naming it has its
// replacement created while a's container still runs — 11 StatefulSets, a
// neither marked nor deleted — and a later sweep that names no runner still
// counts a out, but makes no 12th: one finishing runner frees one slot. A
// runner whose job is linked completed but that no nudge named is counted (its
// slot frees at its exit). Once a's container has exited it is stopped and
// deleted as before, and the pool is back to 10.
func TestFinishedRunnerFreesItsSlotAtOnce(t *testing.T) {
	t.Parallel()
	e := newEnv(t, true)
	ids := e.fullPool()
	names := e.statefulSets()
	a, b := names[0], names[1]
	e.setBusy(ids[a], true)
	e.links.link(a+"-0", 1, reservation.InProgress, e.clock.Now())
	e.sweepFinished(a + "-0")
	if got := e.statefulSets(); len(got) != 10 {
		t.Fatalf("a job linked in progress: %d statefulsets, want 10 (the runner is busy: it holds its slot)", len(got))
	}
	e.clock.Step(time.Second)
	e.finishJob(ids[a])
	e.links.link(a+"-0", 1, reservation.Completed, e.clock.Now())
	metrics := e.writeMetrics("INFO")
	e.sweepFinished(a + "-0")
	var rec struct{ Running, Pending, Deleting float64 }
	if err := json.Unmarshal(bytes.TrimSpace(metrics.Bytes()), &rec); err != nil {
		t.Fatalf("the sweep's metric record: %v\n%s", err, metrics.Bytes())
	}
	if rec.Running != 9 || rec.Deleting != 1 {
		t.Fatalf("metrics %+v; want 9 running and a finishing runner among those deleting", rec)
	}
	got := e.statefulSets()
	if len(got) != 11 || !slices.Contains(got, a) {
		t.Fatalf("statefulsets %v: want 11, a still among them (its container runs) beside its replacement", got)
	}
	sts, pod := e.statefulSet(a), e.pods()[a]
	if _, ok := sts.Annotations[runnerpod.AnnotationJobCompleted]; !ok {
		t.Fatalf("a's StatefulSet lacks %s: %v", runnerpod.AnnotationJobCompleted, sts.Annotations)
	}
	if _, marked := pod.Annotations[runnerpod.AnnotationUnregistrationRequest]; marked || pod.DeletionTimestamp != nil {
		t.Fatalf("a is being stopped before its container exited: %v, deleting %v", pod.Annotations, pod.DeletionTimestamp)
	}
	e.links.link(b+"-0", 2, reservation.Completed, e.clock.Now())
	e.sweepFinished()
	if got := e.statefulSets(); len(got) != 11 {
		t.Fatalf("a sweep naming no runner: %d statefulsets, want 11 (a still counted out, b, not named, counted)", len(got))
	}
	e.exit(a, 0)
	e.sweepFinished()
	e.endStoppedRunners()
	e.sweepFinished()
	if got := e.statefulSets(); len(got) != 10 || slices.Contains(got, a) {
		t.Fatalf("statefulsets %v once a exited: want a gone, 10 in all", got)
	}
}

// TestFinishingEndsAfterFinishingFor: a finishing runner whose container does
// not exit is counted again FinishingFor after it was found finishing: then a
// second finished runner's nudge frees only its own slot, and no runner beyond
// maxReplicas + 1 is made.
func TestFinishingEndsAfterFinishingFor(t *testing.T) {
	t.Parallel()
	e := newEnv(t, true)
	ids := e.fullPool()
	names := e.statefulSets()
	a, b := names[0], names[1]
	for _, n := range []string{a, b} {
		e.finishJob(ids[n])
	}
	e.links.link(a+"-0", 1, reservation.Completed, e.clock.Now())
	e.links.link(b+"-0", 2, reservation.Completed, e.clock.Now())
	e.sweepFinished(a + "-0")
	if got := e.statefulSets(); len(got) != 11 {
		t.Fatalf("a finishing: %d statefulsets, want 11", len(got))
	}
	e.clock.Step(reconcile.DefaultFinishingFor)
	e.sweepFinished(b + "-0")
	if got := e.statefulSets(); len(got) != 11 {
		t.Fatalf("a past FinishingFor, b finishing: %d statefulsets, want 11 (a counted again)", len(got))
	}
}

// TestPersistentRunnerIsNeverFinishing: a persistent runner takes job after
// job: a nudge naming one whose jobs are all completed frees no slot.
func TestPersistentRunnerIsNeverFinishing(t *testing.T) {
	t.Parallel()
	e := newEnv(t, false)
	e.fullPool()
	a := e.statefulSets()[0]
	e.links.link(a+"-0", 1, reservation.Completed, e.clock.Now())
	e.sweepFinished(a + "-0")
	if got := e.statefulSets(); len(got) != 10 {
		t.Fatalf("%d statefulsets, want 10", len(got))
	}
	if _, ok := e.statefulSet(a).Annotations[runnerpod.AnnotationJobCompleted]; ok {
		t.Fatal("a persistent runner was marked finishing")
	}
}

// TestFinishedRunnerWithoutALinkHoldsItsSlot: a nudge names a runner with no
// job linked to it (a `completed` GitHub sent for a job of another runner of
// that name, or a link not yet written): it is not counted out.
func TestFinishedRunnerWithoutALinkHoldsItsSlot(t *testing.T) {
	t.Parallel()
	e := newEnv(t, true)
	e.fullPool()
	a := e.statefulSets()[0]
	e.sweepFinished(a+"-0", "p-zzzzz-0")
	if got := e.statefulSets(); len(got) != 10 {
		t.Fatalf("%d statefulsets, want 10", len(got))
	}
}

// statefulSet reads the runner's StatefulSet.
func (e *env) statefulSet(name string) *appsv1.StatefulSet {
	e.t.Helper()
	sts, err := e.kube.AppsV1().StatefulSets(e.ns).Get(e.t.Context(), name, metav1.GetOptions{})
	if err != nil {
		e.t.Fatal(err)
	}
	return sts
}

// annotateByHand writes an annotation on the runner's StatefulSet as another
// writer (an operator, a restored backup) would.
func (e *env) annotateByHand(name, key, value string) {
	e.t.Helper()
	patch, _ := json.Marshal(map[string]any{"metadata": map[string]any{"annotations": map[string]string{key: value}}})
	if _, err := e.raw.AppsV1().StatefulSets(e.ns).Patch(e.t.Context(), name, types.MergePatchType, patch, metav1.PatchOptions{}); err != nil {
		e.t.Fatal(err)
	}
}

// TestExitedRunnerNamedFinishedIsStopped: the refill nudge's second sweep
// names the runner once its container exited. The runner is completed, not
// finishing: that sweep marks it for unregistration (the nudge's reason to
// sweep again), and writes no job-completed-at on it.
func TestExitedRunnerNamedFinishedIsStopped(t *testing.T) {
	t.Parallel()
	e := newEnv(t, true)
	ids := e.fullPool()
	a := e.statefulSets()[0]
	e.links.link(a+"-0", 1, reservation.Completed, e.clock.Now())
	e.exit(a, ids[a])
	e.sweepFinished(a + "-0")
	sts, err := e.kube.AppsV1().StatefulSets(e.ns).Get(t.Context(), a, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		return // stopped and deleted within the sweep
	}
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := sts.Annotations[runnerpod.AnnotationJobCompleted]; ok {
		t.Fatalf("an exited runner was marked finishing: %v", sts.Annotations)
	}
	if _, marked := sts.Annotations[runnerpod.AnnotationUnregistrationRequest]; !marked && sts.DeletionTimestamp == nil {
		t.Fatalf("the sweep naming an exited runner did not stop it: %v", sts.Annotations)
	}
}

// TestStoppingRunnerHoldsItsSlotWhenFinished: a runner marked for
// unregistration holds its slot until its stop ends (grow), whatever its job
// link says: a nudge naming it finished does not count it out.
func TestStoppingRunnerHoldsItsSlotWhenFinished(t *testing.T) {
	t.Parallel()
	e := newEnv(t, true)
	e.fullPool()
	a := e.statefulSets()[0]
	e.annotateByHand(a, runnerpod.AnnotationUnregistrationRequest, e.clock.Now().UTC().Format(time.RFC3339))
	e.links.link(a+"-0", 1, reservation.Completed, e.clock.Now())
	e.sweepFinished(a + "-0")
	e.holdsItsSlot(a, "a, being stopped, holds its slot")
}

// TestRefusedFinishingMarkIsSweptAgain: another writer changes runner a's
// StatefulSet right before the sweep writes job-completed-at on it: the write
// is refused, a stays counted in that sweep (no replacement), and the sweep
// returns ErrStale, so that the sweeper sweeps again at once (Retrier) and that
// sweep counts a out.
func TestRefusedFinishingMarkIsSweptAgain(t *testing.T) {
	t.Parallel()
	e := newEnv(t, true)
	e.fullPool()
	a := e.statefulSets()[0]
	e.links.link(a+"-0", 1, reservation.Completed, e.clock.Now())
	changed := false
	before := func(req *http.Request) {
		if !changed && req.Method == http.MethodPatch && strings.HasSuffix(req.URL.Path, "/statefulsets/"+a) {
			changed = true
			e.annotateByHand(a, "example.com/other-writer", "1")
		}
	}
	e.before.Store(&before)
	d := scaling.Decision{Desired: 10, Queued: 3, Saturated: true, EffectiveTime: e.clock.Now(), Finished: []string{a + "-0"}}
	err := e.rec.Reconcile(t.Context(), e.pool, d, &e.status)
	e.before.Store(nil)
	if !changed {
		t.Fatal("the sweep never wrote on a's StatefulSet")
	}
	if !errors.Is(err, reconcile.ErrStale) {
		t.Fatalf("sweep: %v; want ErrStale, so that the sweeper sweeps again at once", err)
	}
	if got := e.statefulSets(); len(got) != 10 {
		t.Fatalf("statefulsets %v after the refused mark: want 10 (a still counted)", got)
	}
	e.sweepFinished(a + "-0")
	if got := e.statefulSets(); len(got) != 11 {
		t.Fatalf("statefulsets %v after the sweep again: want 11 (a counted out, replaced)", got)
	}
}

// TestFutureJobCompletedStampCountsTheRunner: a job-completed-at no sweep can
// have written — ahead of the sweeper's clock by FinishingFor or more (an
// object restored or copied from elsewhere, a hand edit) — does not count the
// runner out: otherwise it would hold no slot, and never be scaled down,
// until that time.
func TestFutureJobCompletedStampCountsTheRunner(t *testing.T) {
	t.Parallel()
	e := newEnv(t, true)
	e.fullPool()
	a := e.statefulSets()[0]
	e.annotateByHand(a, runnerpod.AnnotationJobCompleted, e.clock.Now().Add(time.Hour).UTC().Format(time.RFC3339Nano))
	e.sweepFinished()
	if got := e.statefulSets(); len(got) != 10 {
		t.Fatalf("statefulsets %v: want 10 (a counted: its stamp is in the future)", got)
	}
}

// TestDrainingPoolKeepsItsBudgetWhileARunnerFinishes: a draining pool's last
// runner finished its job while jobs still wait (a refill nudge names it): it
// holds no slot, but its pod runs until its container exits, and the pool's
// PodDisruptionBudget stays until then.
func TestDrainingPoolKeepsItsBudgetWhileARunnerFinishes(t *testing.T) {
	t.Parallel()
	e := newEnv(t, true)
	e.mustSweep(1, time.Time{})
	a := e.statefulSets()[0]
	id := e.start(a).ID
	e.mustSweep(1, time.Time{})
	e.budget()
	e.finishJob(id)
	e.links.link(a+"-0", 1, reservation.Completed, e.clock.Now())
	d := scaling.Decision{Queued: 1, EffectiveTime: e.clock.Now(), Finished: []string{a + "-0"}}
	if err := e.rec.Reconcile(t.Context(), e.pool.Draining(), d, &e.status); err != nil {
		t.Fatal(err)
	}
	if _, ok := e.statefulSet(a).Annotations[runnerpod.AnnotationJobCompleted]; !ok {
		t.Fatal("a was not found finishing")
	}
	if _, err := e.raw.PolicyV1().PodDisruptionBudgets(e.ns).Get(t.Context(), reconcile.BudgetName(e.pool), metav1.GetOptions{}); err != nil {
		t.Fatalf("budget of the draining pool while a's pod runs: %v, want it kept", err)
	}
}

// TestLinkOlderThanTheRunnerDoesNotCountItOut: a nudge names runner a, whose
// name's only link was recorded before a was created — another runner's of
// that name, retired since (a late `completed` of its job names a too). a
// never ran a job it proves completed: it keeps its slot.
func TestLinkOlderThanTheRunnerDoesNotCountItOut(t *testing.T) {
	t.Parallel()
	e := newEnv(t, true)
	e.fullPool()
	a := e.statefulSets()[0]
	e.links.link(a+"-0", 1, reservation.Completed, e.clock.Now().Add(-time.Hour))
	e.sweepFinished(a + "-0")
	e.holdsItsSlot(a, "a's only link is older than a")
}

// TestRetiredStatefulSetHoldsItsSlot: a full pool (maxReplicas 10) whose
// finished runner was retired but whose StatefulSet's deletion was refused:
// while that StatefulSet stands, it holds its slot — a sweep that cannot
// delete it yet makes no eleventh runner — and once it is gone the slot is
// refilled.
func TestRetiredStatefulSetHoldsItsSlot(t *testing.T) {
	t.Parallel()
	e := newEnv(t, true)
	ids := e.fullPool()
	a := e.statefulSets()[0]
	e.exit(a, ids[a])
	refuse := func(req *http.Request) error {
		if req.Method == http.MethodDelete && strings.Contains(req.URL.Path, "/statefulsets/") {
			return fmt.Errorf("injected: deleting a statefulset refused")
		}
		return nil
	}
	e.refuse.Store(&refuse)
	for i := range 2 {
		if err := e.sweep(10, time.Time{}); err == nil || !strings.Contains(err.Error(), "injected: deleting a statefulset refused") {
			t.Fatalf("sweep %d with the deletion refused: %v; want the refusal reported", i+1, err)
		}
		if got := e.statefulSets(); len(got) != 10 || !slices.Contains(got, a) {
			t.Fatalf("sweep %d: statefulsets %v; want the retired runner's still standing, 10 in all", i+1, got)
		}
	}
	if live, err := e.roster.Live(t.Context(), "p"); err != nil || len(live) != 9 {
		t.Fatalf("%d live runners on the roster (%v); want 9, the finished one retired", len(live), err)
	}
	e.refuse.Store(nil)
	e.mustSweep(10, time.Time{})
	e.mustSweep(10, time.Time{})
	if got := e.statefulSets(); len(got) != 10 || slices.Contains(got, a) {
		t.Fatalf("statefulsets %v once the deletion went through: want a replaced, 10 in all", got)
	}
}

// holdsItsSlot fails the test unless the full pool still has its 10
// StatefulSets and runner a is not marked finishing (why: why a holds its slot).
func (e *env) holdsItsSlot(a, why string) {
	e.t.Helper()
	if got := e.statefulSets(); len(got) != 10 {
		e.t.Fatalf("statefulsets %v: want 10 (%s)", got, why)
	}
	if _, ok := e.statefulSet(a).Annotations[runnerpod.AnnotationJobCompleted]; ok {
		e.t.Fatalf("runner %s marked finishing; want it to hold its slot (%s)", a, why)
	}
}
