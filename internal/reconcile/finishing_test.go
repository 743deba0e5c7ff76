package reconcile_test

import (
	"errors"
	"slices"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

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
	e.sweepFinished(a + "-0")
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
