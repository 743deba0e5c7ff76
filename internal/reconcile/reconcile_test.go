package reconcile_test

import (
	"slices"
	"strconv"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/runnerscaler/runnerscaler/internal/scaling"

	"github.com/runnerscaler/runnerscaler/internal/runnerpod"
)

// TestScaleUpThenDownAroundABusyRunner: 0→3 creates three runners with their
// Secrets; 3→0 unregisters and deletes the idle ones at once and keeps the busy
// one until its job is over.
func TestScaleUpThenDownAroundABusyRunner(t *testing.T) {
	t.Parallel()
	e := newEnv(t, true)
	t0 := e.clock.Now()
	e.mustSweep(3, t0)
	names := e.statefulSets()
	if len(names) != 3 || e.status.Phases["pending"] != 3 || !e.status.LastSync.Equal(t0) {
		t.Fatalf("after 0→3: statefulsets %v, phases %v, lastSync %v", names, e.status.Phases, e.status.LastSync)
	}
	ids := map[string]int64{}
	for _, n := range names {
		sec, err := e.kube.CoreV1().Secrets(e.ns).Get(t.Context(), n, metav1.GetOptions{})
		if err != nil || len(sec.OwnerReferences) != 1 || sec.OwnerReferences[0].Name != n {
			t.Fatalf("secret of %s: %v owners %v; want owned by its statefulset", n, err, sec.OwnerReferences)
		}
		ids[n] = e.start(n).ID
	}
	// Runners with JIT ids are looked up once half the registration timeout has
	// passed (TestJITRegistrationLookedUpLate).
	e.clock.Step(5 * time.Minute)
	e.mustSweep(3, t0) // records registrations
	for n, p := range e.pods() {
		if p.Annotations[runnerpod.AnnotationRunnerID] != idString(ids[n]) {
			t.Fatalf("pod %s annotations %v, want runner id %d", n, p.Annotations, ids[n])
		}
	}
	if e.status.Phases["running"] != 3 {
		t.Fatalf("phases %v, want 3 running", e.status.Phases)
	}
	busy := names[1]
	e.setBusy(ids[busy], true)

	e.clock.Step(time.Minute)
	e.mustSweep(0, t0)
	if got := e.statefulSets(); !slices.Equal(got, []string{busy}) {
		t.Fatalf("after 3→0: statefulsets %v, want only the busy %s", got, busy)
	}
	pod := e.pods()[busy]
	if pod.Annotations[runnerpod.AnnotationRunnerCompletionWaitStart] == "" || pod.Annotations[runnerpod.AnnotationUnregistrationRequest] == "" {
		t.Fatalf("busy pod annotations %v, want unregistration requested and completion wait", pod.Annotations)
	}
	for _, n := range names {
		if n != busy {
			e.waitGone(n)
			if _, ok := e.sim.Runner(ids[n]); ok {
				t.Fatalf("idle runner %s is still registered on GitHub", n)
			}
		}
	}
	e.mustSweep(0, t0) // still busy: nothing changes
	if got := e.statefulSets(); len(got) != 1 {
		t.Fatalf("the busy runner was deleted: %v", got)
	}
	e.exit(busy, ids[busy])
	e.mustSweep(0, t0)
	if got := e.statefulSets(); len(got) != 0 {
		t.Fatalf("after the job: statefulsets %v, want none", got)
	}
	e.waitGone(busy)
}

// TestEphemeralCompletionHold: a finished ephemeral runner's owner is deleted and
// not recreated while the webhook may not have caught up; it is after the delay.
func TestEphemeralCompletionHold(t *testing.T) {
	t.Parallel()
	e := newEnv(t, true)
	effective := e.clock.Now()
	e.clock.Step(time.Second)
	e.mustSweep(1, effective)
	name := e.statefulSets()[0]
	r := e.start(name)
	e.setBusy(r.ID, true)
	e.exit(name, r.ID)
	e.clock.Step(time.Minute)
	e.mustSweep(1, effective) // desired still 1: the completed delivery is late
	if got := e.statefulSets(); len(got) != 0 {
		t.Fatalf("statefulsets %v: the completed runner must be deleted and not recreated", got)
	}
	e.clock.Step(9 * time.Minute)
	e.mustSweep(1, effective)
	if got := e.statefulSets(); len(got) != 1 || got[0] == name {
		t.Fatalf("after the 10-minute fallback: %v, want one new runner", got)
	}
	// A newer reservation lifts the hold at once.
	e.exit(e.statefulSets()[0], 0)
	e.clock.Step(time.Second)
	e.mustSweep(1, e.clock.Now())
	if got := e.statefulSets(); len(got) != 1 {
		t.Fatalf("a newer reservation must be served at once: %v", got)
	}
}

// TestSaturatedBacklogIsNotHeld: at maxReplicas with queued jobs waiting, a runner
// that finishes is replaced at once — ARC's hold alone would starve the backlog for
// ten minutes; without a waiting job the hold applies.
func TestSaturatedBacklogIsNotHeld(t *testing.T) {
	t.Parallel()
	e := newEnv(t, true)
	effective := e.clock.Now()
	e.clock.Step(time.Second)
	sweep := func(queued int) error {
		d := scaling.Decision{Desired: 1, Reserved: 3, Queued: queued, EffectiveTime: effective, Saturated: true}
		return e.rec.Reconcile(t.Context(), e.pool, d, &e.status)
	}
	if err := sweep(3); err != nil {
		t.Fatal(err)
	}
	name := e.statefulSets()[0]
	r := e.start(name)
	e.setBusy(r.ID, true)
	e.exit(name, r.ID)
	e.clock.Step(time.Second)
	if err := sweep(0); err != nil { // no job waits: the finished runner's completion is late
		t.Fatal(err)
	}
	if got := e.statefulSets(); len(got) != 0 {
		t.Fatalf("with no queued job: %v, want the hold", got)
	}
	if err := sweep(2); err != nil { // two jobs wait for a runner
		t.Fatal(err)
	}
	if got := e.statefulSets(); len(got) != 1 {
		t.Fatalf("with queued jobs: %v, want a new runner at once", got)
	}
}

// TestRemovalOutcomes: 404 (already gone) completes the stop; a rate limit makes
// it wait for the reset; 403 (no permission) keeps every runner GitHub lists
// (TestForbiddenNeverCompletesAStop), and one GitHub no longer lists goes.
func TestRemovalOutcomes(t *testing.T) {
	t.Parallel()
	e := newEnv(t, false)
	e.mustSweep(3, time.Time{})
	names := e.statefulSets()
	ids := map[string]int64{}
	for _, n := range names {
		ids[n] = e.start(n).ID
	}
	e.mustSweep(3, time.Time{})

	// 404: someone removed the runner already.
	if err := e.gh.RemoveRunner(t.Context(), e.pool.Scope(), ids[names[2]]); err != nil {
		t.Fatal(err)
	}
	e.mustSweep(2, time.Time{})
	if got := e.statefulSets(); len(got) != 2 {
		t.Fatalf("404 path: %v", got)
	}
	// Rate limited: nothing is removed until the reset.
	e.sim.ExhaustRateLimit()
	e.mustSweep(1, time.Time{})
	if got := e.statefulSets(); len(got) != 2 {
		t.Fatalf("rate-limited: %v, want both kept", got)
	}
	e.clock.Step(61 * time.Minute)
	gh := &forbiddenGitHub{GitHub: e.gh}
	gh.forbid.Store(true)
	e.useGitHub(gh)
	e.mustSweep(1, time.Time{})
	got := e.statefulSets()
	for _, n := range names {
		if _, listed := e.sim.Runner(ids[n]); listed && !slices.Contains(got, n) {
			t.Fatalf("after the reset with a 403: %v, want %s kept while GitHub lists it", got, n)
		}
	}
	gh.forbid.Store(false)
	oldest := e.oldestStatefulSet()
	e.mustSweep(1, time.Time{})
	if got := e.statefulSets(); len(got) != 1 || got[0] != oldest {
		t.Fatalf("once removal is allowed: %v, want the oldest %s kept", got, oldest)
	}
}

// oldestStatefulSet is the runner scale-down keeps last: the oldest by creation
// time (a second's precision), the first by name among equals (the API
// server's list order).
func (e *env) oldestStatefulSet() string {
	e.t.Helper()
	list, err := e.raw.AppsV1().StatefulSets(e.ns).List(e.t.Context(), metav1.ListOptions{LabelSelector: "!" + barrierLabel})
	if err != nil {
		e.t.Fatal(err)
	}
	oldest := ""
	var at metav1.Time
	for _, s := range list.Items {
		if s.DeletionTimestamp == nil && (oldest == "" || s.CreationTimestamp.Before(&at)) {
			oldest, at = s.Name, s.CreationTimestamp
		}
	}
	return oldest
}

// TestRegistrationTimeoutReplaces: a pod Running and Ready for 10 minutes whose
// runner never came online is replaced.
func TestRegistrationTimeoutReplaces(t *testing.T) {
	t.Parallel()
	e := newEnv(t, true)
	e.mustSweep(1, time.Time{})
	stuck := e.statefulSets()[0]
	pod := e.pods()[stuck]
	now := metav1.NewTime(e.clock.Now())
	pod.Status.Phase = "Running"
	pod.Status.Conditions = append(pod.Status.Conditions, readyCondition(now))
	if _, err := e.kube.CoreV1().Pods(e.ns).UpdateStatus(t.Context(), pod, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	e.clock.Step(9 * time.Minute)
	e.mustSweep(1, time.Time{})
	if got := e.statefulSets(); len(got) != 1 || got[0] != stuck {
		t.Fatalf("before the timeout: %v", got)
	}
	e.clock.Step(time.Minute)
	e.mustSweep(1, time.Time{})
	got := e.statefulSets()
	if len(got) != 1 || got[0] == stuck {
		t.Fatalf("after the timeout: %v, want %s replaced (phases %v)", got, stuck, e.status.Phases)
	}
	if len(e.sim.Runners()) != 1 {
		t.Fatalf("GitHub runners %d, want 1 (the timed-out JIT runner unregistered)", len(e.sim.Runners()))
	}
}

// TestTemplateChangeReplacesIdleAndWaitsForBusy.
func TestTemplateChangeReplacesIdleAndWaitsForBusy(t *testing.T) {
	t.Parallel()
	e := newEnv(t, true)
	e.mustSweep(2, time.Time{})
	names := e.statefulSets()
	a, b := e.start(names[0]), e.start(names[1])
	e.mustSweep(2, time.Time{})
	e.setBusy(b.ID, true)
	e.setPool(true, "runner:2")
	e.mustSweep(2, time.Time{})
	got := e.statefulSets()
	if len(got) != 3 || !slices.Contains(got, names[1]) || slices.Contains(got, names[0]) {
		t.Fatalf("after the change: %v; want the busy %s kept, idle %s replaced, two new", got, names[1], names[0])
	}
	if _, ok := e.sim.Runner(a.ID); ok {
		t.Fatal("the idle outdated runner is still registered")
	}
	for _, n := range got {
		if n == names[1] {
			continue
		}
		sts, err := e.kube.AppsV1().StatefulSets(e.ns).Get(t.Context(), n, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if img := sts.Spec.Template.Spec.Containers[0].Image; img != "runner:2" {
			t.Fatalf("replacement %s runs %s", n, img)
		}
	}
	e.exit(names[1], b.ID)
	e.mustSweep(2, time.Time{})
	if got := e.statefulSets(); len(got) != 2 || slices.Contains(got, names[1]) {
		t.Fatalf("after the busy job: %v", got)
	}
}

// TestHandDeletedPodIsUnregisteredFirst: the finalizer holds a pod someone deleted
// until its runner is unregistered.
func TestHandDeletedPodIsUnregisteredFirst(t *testing.T) {
	t.Parallel()
	e := newEnv(t, true)
	e.mustSweep(1, time.Time{})
	name := e.statefulSets()[0]
	r := e.start(name)
	e.mustSweep(1, time.Time{})
	e.setBusy(r.ID, true)
	if err := e.kube.CoreV1().Pods(e.ns).Delete(t.Context(), name+"-0", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	e.mustSweep(1, time.Time{})
	pod, err := e.kube.CoreV1().Pods(e.ns).Get(t.Context(), name+"-0", metav1.GetOptions{})
	if err != nil || pod.DeletionTimestamp == nil || len(pod.Finalizers) == 0 {
		t.Fatalf("busy hand-deleted pod: %v; want it held by the finalizer", err)
	}
	if _, ok := e.sim.Runner(r.ID); !ok {
		t.Fatal("a busy runner was unregistered")
	}
	e.finishJob(r.ID)         // ephemeral: GitHub removes it
	e.clock.Step(time.Minute) // past the busy back-off (the pod's container status did not change)
	e.mustSweep(1, time.Time{})
	e.waitGone(name)
	if got := e.statefulSets(); len(got) != 1 || got[0] == name {
		t.Fatalf("statefulsets %v, want the runner replaced", got)
	}
}

// TestSteadyStateCost: a sweep with nothing to do reads twice and writes nothing.
func TestSteadyStateCost(t *testing.T) {
	t.Parallel()
	e := newEnv(t, true)
	e.mustSweep(2, time.Time{})
	for _, n := range e.statefulSets() {
		e.start(n)
	}
	e.mustSweep(2, time.Time{})
	e.clock.Step(11 * time.Minute) // past the post-creation cleanup window
	e.mustSweep(2, time.Time{})
	r0, w0, c0 := e.reads.Load(), e.writes.Load(), e.gh.Stats()
	e.mustSweep(2, time.Time{})
	if r, w := e.reads.Load()-r0, e.writes.Load()-w0; r != 2 || w != 0 {
		t.Fatalf("steady sweep: %d reads, %d writes; want 2 and 0", r, w)
	}
	if c := e.gh.Stats(); c.Calls != c0.Calls {
		t.Fatalf("steady sweep made %d GitHub calls, want 0", c.Calls-c0.Calls)
	}
}

// TestCrashAnywhereDuringScaleDown fails the N-th Kubernetes write of a scale-down
// for every N, then sweeps cleanly: the end state is right and the busy runner is
// never deleted.
func TestCrashAnywhereDuringScaleDown(t *testing.T) {
	t.Parallel()
	for n := int32(1); ; n++ {
		e := newEnv(t, true)
		e.mustSweep(3, time.Time{})
		names := e.statefulSets()
		var busyID int64
		for i, name := range names {
			r := e.start(name)
			if i == 0 {
				busyID = r.ID
				e.setBusy(r.ID, true)
			}
		}
		e.mustSweep(3, time.Time{})
		e.writes.Store(0)
		e.failAt.Store(n)
		err := e.sweep(0, time.Time{})
		e.failAt.Store(0)
		failed := err != nil
		for range 3 {
			e.mustSweep(0, time.Time{})
		}
		if got := e.statefulSets(); !slices.Equal(got, names[:1]) {
			t.Fatalf("write %d failed: statefulsets %v, want only the busy %s", n, got, names[0])
		}
		if _, ok := e.sim.Runner(busyID); !ok {
			t.Fatalf("write %d failed: the busy runner was unregistered", n)
		}
		if len(e.sim.Runners()) != 1 {
			t.Fatalf("write %d failed: %d GitHub runners left, want 1", n, len(e.sim.Runners()))
		}
		if !failed {
			t.Logf("scale-down has %d writes; every one was failed once", n-1)
			return
		}
	}
}

func idString(id int64) string { return strconv.FormatInt(id, 10) }

func readyCondition(at metav1.Time) corev1.PodCondition {
	return corev1.PodCondition{Type: corev1.PodReady, Status: corev1.ConditionTrue, LastTransitionTime: at}
}

// TestJITRegistrationLookedUpLate: a runner whose JIT config gave its id is not
// looked up in GitHub's runner list while it is younger than half the
// registration timeout — a busy pool always has a runner starting, and the list
// would cost a call on nearly every sweep — and is recorded registered after that,
// well before the timeout, which then does not replace it.
func TestJITRegistrationLookedUpLate(t *testing.T) {
	t.Parallel()
	const listCall = "GET /orgs/{org}/actions/runners"
	e := newEnv(t, true)
	e.mustSweep(1, time.Time{})
	name := e.statefulSets()[0]
	id := e.start(name).ID
	for range 3 {
		e.clock.Step(time.Minute)
		e.mustSweep(1, time.Time{})
	}
	if n := e.sim.Calls()[listCall]; n != 0 {
		t.Fatalf("runner list fetched %d times for a JIT runner 3 minutes old, want 0", n)
	}
	if a := e.pods()[name].Annotations[runnerpod.AnnotationRunnerID]; a != "" {
		t.Fatalf("registration recorded without a list: %q", a)
	}
	e.clock.Step(2 * time.Minute) // half the timeout (10m)
	e.mustSweep(1, time.Time{})
	if n := e.sim.Calls()[listCall]; n != 1 {
		t.Fatalf("runner list fetched %d times at half the timeout, want 1", n)
	}
	if a := e.pods()[name].Annotations[runnerpod.AnnotationRunnerID]; a != idString(id) {
		t.Fatalf("pod runner id annotation %q, want %d", a, id)
	}
	e.clock.Step(6 * time.Minute) // past the registration timeout
	e.mustSweep(1, time.Time{})
	if got := e.statefulSets(); !slices.Equal(got, []string{name}) || e.status.Phases["running"] != 1 {
		t.Fatalf("statefulsets %v, phases %v: the registered runner must stay, running", got, e.status.Phases)
	}
}
