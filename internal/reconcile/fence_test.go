package reconcile_test

import (
	"errors"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/runnerscaler/runnerscaler/internal/pool"
	"github.com/runnerscaler/runnerscaler/internal/poolstate"
	"github.com/runnerscaler/runnerscaler/internal/reconcile"
	"github.com/runnerscaler/runnerscaler/internal/runnerpod"
	"github.com/runnerscaler/runnerscaler/internal/scaling"
	"github.com/runnerscaler/runnerscaler/local/testenv"
)

// Two sweepers on one pool: the pool's lease is bypassed, as when a sweeper lost
// it without noticing yet. The second sweeper (other) is a reconciler of the
// same pool with its own Kubernetes client, whose first write can be held at a
// gate: it has read the pool and decided, and the test lets e.rec act before
// that write goes out.

// writeGate holds its client's first write until it is opened.
type writeGate struct {
	rt      http.RoundTripper
	hold    bool
	once    sync.Once
	arrived chan struct{} // closed when the first write is held
	open    chan struct{}
	opened  sync.Once
}

func (g *writeGate) release() { g.opened.Do(func() { close(g.open) }) }

func (g *writeGate) RoundTrip(req *http.Request) (*http.Response, error) {
	if req.Method != http.MethodGet && g.hold {
		first := false
		g.once.Do(func() { first = true })
		if first {
			close(g.arrived)
			select {
			case <-g.open:
			case <-req.Context().Done():
				return nil, req.Context().Err()
			}
		}
	}
	return g.rt.RoundTrip(req)
}

// otherSweeper is a second reconciler of e's pool.
type otherSweeper struct {
	e      *env
	rec    *reconcile.Reconciler
	gate   *writeGate
	status poolstate.Status
	done   chan error
}

// newOtherSweeper returns a second reconciler of e's pool; with hold, its first
// write waits at the gate.
func (e *env) newOtherSweeper(hold bool) *otherSweeper {
	e.t.Helper()
	g := &writeGate{hold: hold, arrived: make(chan struct{}), open: make(chan struct{})}
	cfg := testenv.RESTConfig(e.t)
	cfg.Wrap(func(rt http.RoundTripper) http.RoundTripper { g.rt = rt; return g })
	kube, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		e.t.Fatal(err)
	}
	e.t.Cleanup(g.release)
	pools, err := pool.Parse([]byte(poolYAML(e.ns, e.pool.IsEphemeral(), "runner:1")))
	if err != nil {
		e.t.Fatal(err)
	}
	rec, err := reconcile.New(pools, kube, e.gh, e.clock, nil, reconcile.Options{JobLinks: e.links, Roster: e.roster})
	if err != nil {
		e.t.Fatal(err)
	}
	return &otherSweeper{e: e, rec: rec, gate: g, done: make(chan error, 1)}
}

// start begins a sweep toward desired; with the gate holding, it returns once the
// sweep's first write is held there.
func (o *otherSweeper) start(desired int) {
	o.e.t.Helper()
	go func() {
		o.done <- o.rec.Reconcile(o.e.t.Context(), o.e.pool, scaling.Decision{Desired: desired}, &o.status)
	}()
	if !o.gate.hold {
		return
	}
	select {
	case <-o.gate.arrived:
	case err := <-o.done:
		o.e.t.Fatalf("the other sweep ended (%v) without writing", err)
	case <-time.After(time.Minute):
		o.e.t.Fatal("the other sweep never reached its first write")
	}
}

// finish lets a held write go and returns the sweep's error.
func (o *otherSweeper) finish() error {
	o.e.t.Helper()
	o.gate.release()
	select {
	case err := <-o.done:
		return err
	case <-time.After(time.Minute):
		o.e.t.Fatal("the other sweep did not finish")
		return nil
	}
}

// TestStaleSweeperLosesNoStopMark: the other sweeper reads a running idle
// runner, decides to scale it down, and is held before its first write. Meanwhile
// e.rec marks the runner (its StatefulSet and pod), records the stop's start and
// drains the pod. The other sweeper's mark, written on what it read, must not
// replace those: its write is refused (ErrStale) and it leaves the runner alone.
// e.rec then finishes the stop: the runner is removed from GitHub once.
func TestStaleSweeperLosesNoStopMark(t *testing.T) {
	t.Parallel()
	e := newEnv(t, true)
	e.mustSweep(1, time.Time{})
	name := e.statefulSets()[0]
	id := e.start(name).ID
	other := e.newOtherSweeper(true)
	other.start(0)

	e.clock.Step(10 * time.Second) // the two sweeps' stamps differ
	want := e.clock.Now().UTC().Format(time.RFC3339)
	if err := e.sweep(0, time.Time{}); err != nil {
		t.Fatalf("sweep: %v", err)
	}
	err := other.finish()
	if !errors.Is(err, reconcile.ErrStale) {
		t.Errorf("other sweep: %v, want its write refused with ErrStale", err)
	}
	// The refusal names what changed, the annotation's key, not its value.
	if msg := fmt.Sprint(err); !strings.Contains(msg, "annotation "+runnerpod.AnnotationUnregistrationRequest) || strings.Contains(msg, want) {
		t.Errorf("other sweep's refusal %q: want it to name annotation %s and not its value %s", msg, runnerpod.AnnotationUnregistrationRequest, want)
	}

	sts, err := e.raw.AppsV1().StatefulSets(e.ns).Get(t.Context(), name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if got := sts.Annotations[runnerpod.AnnotationUnregistrationRequest]; got != want {
		t.Errorf("statefulset marked at %q, want %q: the stale sweeper overwrote the mark", got, want)
	}
	pod, err := e.raw.CoreV1().Pods(e.ns).Get(t.Context(), runnerpod.PodName(name), metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if pod.DeletionTimestamp == nil {
		t.Error("the idle runner's pod was not drained")
	}
	for _, key := range []string{runnerpod.AnnotationUnregistrationRequest, runnerpod.AnnotationUnregistrationStart} {
		if got := pod.Annotations[key]; got != want {
			t.Errorf("pod %s %q, want %q: the stale sweeper overwrote it", key, got, want)
		}
	}
	if n := e.sim.Calls()[removeCall]; n != 0 {
		t.Fatalf("%d RemoveRunner calls before the runner's listener stopped", n)
	}

	e.mustSweep(0, time.Time{})
	if got := e.statefulSets(); len(got) != 0 {
		t.Fatalf("statefulsets %v, want the stop finished", got)
	}
	if _, ok := e.sim.Runner(id); ok || e.sim.Calls()[removeCall] != 1 {
		t.Fatalf("runner still on GitHub: %v, %d RemoveRunner calls; want it removed once", ok, e.sim.Calls()[removeCall])
	}
}

// TestStaleSweeperDoesNotDrainARunnerThatTookAJob: the other sweeper has seen
// every busy signal say idle after the idle confirmation and is held before it
// deletes the runner's pod (the drain). Meanwhile the runner takes a job and
// e.rec records the veto (the pod's report). The other sweeper's drain,
// decided on what it read, must not go through: the runner keeps its pod and
// GitHub is not asked to remove it.
func TestStaleSweeperDoesNotDrainARunnerThatTookAJob(t *testing.T) {
	t.Parallel()
	w := newBusyWorld(t)
	w.scaleDownAndConfirmIdle()
	other := w.newOtherSweeper(true)
	other.start(0)

	w.takeJob()
	w.reportJob(true)
	w.mustSweep(0, time.Time{})
	w.kept("the pod reports a job")
	if err := other.finish(); err != nil {
		t.Fatalf("other sweep: %v", err)
	}
	pod, err := w.raw.CoreV1().Pods(w.ns).Get(t.Context(), runnerpod.PodName(w.name), metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if pod.DeletionTimestamp != nil {
		t.Fatal("the stale sweeper deleted the pod of a runner that runs a job")
	}
	w.kept("the stale sweeper's drain")
}

// TestTwoSweepersCreateEachRunnerOnce: two sweepers scale the pool up at the same
// time, then both scale it down to fewer runners, then one alone finishes. Each
// runner is made once — one StatefulSet, one Secret it owns, one registration on
// GitHub — and every runner stopped is released on GitHub: no registration is
// left without its StatefulSet. A sweep that lost a race on a runner reports it
// as ErrStale and leaves that runner alone.
func TestTwoSweepersCreateEachRunnerOnce(t *testing.T) {
	t.Parallel()
	e := newEnv(t, true)
	other := e.newOtherSweeper(false)
	both := func(desired int) {
		t.Helper()
		other.start(desired)
		err := e.sweep(desired, time.Time{})
		if oerr := other.finish(); oerr != nil && !errors.Is(oerr, reconcile.ErrStale) {
			t.Fatalf("other sweep: %v", oerr)
		}
		if err != nil && !errors.Is(err, reconcile.ErrStale) {
			t.Fatalf("sweep: %v", err)
		}
	}
	both(3)
	if n := len(e.statefulSets()); n < 3 || n > 6 {
		t.Fatalf("%d statefulsets after two sweeps toward 3, want 3 to 6", n)
	}
	e.assertOneOfEach()
	both(2)
	e.assertOneOfEach()
	// One alone finishes: a write the other sweeper made last may still be
	// news to its first read (ErrStale: that runner waits one sweep).
	for i := 0; ; i++ {
		err := e.sweep(2, time.Time{})
		if err == nil {
			break
		}
		if !errors.Is(err, reconcile.ErrStale) || i == 2 {
			t.Fatalf("lone sweep %d: %v", i, err)
		}
	}
	e.endStoppedRunners()
	e.mustSweep(2, time.Time{})
	if n := len(e.statefulSets()); n != 2 {
		t.Fatalf("%d statefulsets, want 2", n)
	}
	e.assertOneOfEach()
}

// assertOneOfEach checks that each live runner has one StatefulSet, one Secret
// owned by it and one GitHub registration, and that GitHub has no runner of the
// pool without its StatefulSet.
func (e *env) assertOneOfEach() {
	e.t.Helper()
	stss, err := e.raw.AppsV1().StatefulSets(e.ns).List(e.t.Context(), metav1.ListOptions{})
	if err != nil {
		e.t.Fatal(err)
	}
	secs, err := e.raw.CoreV1().Secrets(e.ns).List(e.t.Context(), metav1.ListOptions{LabelSelector: runnerpod.LabelPool})
	if err != nil {
		e.t.Fatal(err)
	}
	registered := map[string]int{}
	for _, r := range e.sim.Runners() {
		registered[r.Name]++
	}
	var live []string
	for _, sts := range stss.Items {
		if sts.DeletionTimestamp != nil {
			continue
		}
		live = append(live, runnerpod.PodName(sts.Name))
		owned := 0
		for _, sec := range secs.Items {
			if sec.Name == sts.Name && slices.ContainsFunc(sec.OwnerReferences, func(o metav1.OwnerReference) bool { return o.UID == sts.UID }) {
				owned++
			}
		}
		if owned != 1 || registered[runnerpod.PodName(sts.Name)] != 1 {
			e.t.Errorf("runner %s: %d secrets owned by its statefulset, %d registrations; want one of each", sts.Name, owned, registered[runnerpod.PodName(sts.Name)])
		}
	}
	for name := range registered {
		if !slices.Contains(live, name) {
			e.t.Errorf("GitHub runner %s has no statefulset (live: %v)", name, live)
		}
	}
}
