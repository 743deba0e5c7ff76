package reconcile_test

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/runnerscaler/runnerscaler/internal/pool"
	"github.com/runnerscaler/runnerscaler/internal/reconcile"
	rosterpkg "github.com/runnerscaler/runnerscaler/internal/roster"
	"github.com/runnerscaler/runnerscaler/internal/runnerpod"
)

// recordingRoster is the env's roster, recording what the sweeper adds and
// retires, whether the runner's Secret existed when it was added, and failing
// Add and Retire while fail is set.
type recordingRoster struct {
	*rosterpkg.Store
	e               *env
	mu              sync.Mutex
	added, retired  []string
	secretBeforeAdd []string
	fail            bool // Add and Retire fail
	failRetire      bool // Retire fails
}

var errRosterDown = errors.New("injected: the roster cannot be written")

func (r *recordingRoster) Add(ctx context.Context, rn rosterpkg.Runner, now time.Time) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.fail {
		return errRosterDown
	}
	name := rn.Name[:len(rn.Name)-len("-0")]
	if _, err := r.e.raw.CoreV1().Secrets(r.e.ns).Get(ctx, name, metav1.GetOptions{}); err == nil {
		r.secretBeforeAdd = append(r.secretBeforeAdd, rn.Name)
	}
	r.added = append(r.added, rn.Name)
	return r.Store.Add(ctx, rn, now)
}

func (r *recordingRoster) Retire(ctx context.Context, pool, runner string, now time.Time) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.fail || r.failRetire {
		return errRosterDown
	}
	r.retired = append(r.retired, runner)
	return r.Store.Retire(ctx, pool, runner, now)
}

// withRoster makes e's reconciler keep its runners on roster.
func (e *env) withRoster(roster reconcile.Roster) {
	e.t.Helper()
	cfg, err := pool.Parse([]byte(poolYAML(e.ns, false, "runner:1")))
	if err != nil {
		e.t.Fatal(err)
	}
	e.pool = cfg.Pool("p")
	if e.rec, err = reconcile.New(cfg, e.kube, e.gh, e.clock, nil, reconcile.Options{JobLinks: e.links, Roster: roster}); err != nil {
		e.t.Fatal(err)
	}
}

// TestRosterHoldsEachRunnerFromBeforeItsSecretUntilItGoes: each runner the
// sweeper creates is on the roster before its Secret exists, under its GitHub
// (pod) name, and is retired when it is deleted. While the roster cannot be
// written, no runner is created, and a runner being removed keeps its
// StatefulSet until the roster can be written.
func TestRosterHoldsEachRunnerFromBeforeItsSecretUntilItGoes(t *testing.T) {
	t.Parallel()
	e := newEnv(t, false)
	roster := &recordingRoster{Store: e.roster, e: e}
	e.withRoster(roster)

	roster.fail = true
	if err := e.sweep(1, time.Time{}); !errors.Is(err, errRosterDown) {
		t.Fatalf("sweep with the roster down: %v, want its error", err)
	}
	if got := e.statefulSets(); len(got) != 0 {
		t.Fatalf("runners created with the roster down: %v", got)
	}
	roster.fail = false
	e.mustSweep(2, time.Time{})
	names := e.statefulSets()
	var pods []string
	for _, n := range names {
		pods = append(pods, runnerpod.PodName(n))
	}
	if slices.Sort(roster.added); !slices.Equal(roster.added, pods) || len(roster.secretBeforeAdd) != 0 {
		t.Fatalf("roster added %v (with a Secret already there: %v), want exactly %v, each before its Secret",
			roster.added, roster.secretBeforeAdd, pods)
	}
	for _, n := range names {
		e.start(n)
	}
	e.mustSweep(2, time.Time{})
	e.clock.Step(3 * time.Second)

	roster.fail = true
	// The sweeps stop the unused runners; their deletion stops at the roster.
	var err error
	for range 4 {
		err = e.sweep(0, time.Time{})
		e.endStoppedRunners()
	}
	if !errors.Is(err, errRosterDown) {
		t.Fatalf("sweep deleting runners with the roster down: %v, want its error", err)
	}
	if got := e.statefulSets(); len(got) != 2 || len(roster.retired) != 0 {
		t.Fatalf("with the roster down: runners %v left, retired %v; want both runners kept, none retired", got, roster.retired)
	}
	roster.fail = false
	e.mustSweep(0, time.Time{})
	if got := e.statefulSets(); len(got) != 0 {
		t.Fatalf("runners %v left, want none", got)
	}
	if slices.Sort(roster.retired); !slices.Equal(roster.retired, pods) {
		t.Fatalf("retired %v, want %v", roster.retired, pods)
	}
}

// refuseCreate makes the reconciler's creations of kind (the resource's
// plural) fail until the test ends.
func (e *env) refuseCreate(kind string) {
	refuse := func(req *http.Request) error {
		if req.Method == http.MethodPost && strings.HasSuffix(req.URL.Path, "/"+kind) && req.URL.Query().Get("dryRun") == "" {
			return fmt.Errorf("injected: creating %s refused", kind)
		}
		return nil
	}
	e.refuse.Store(&refuse)
	e.t.Cleanup(func() { e.refuse.Store(nil) })
}

// TestRosterRetiresARunnerEveryWayItEnds: besides a deletion, a runner ends
// when its Secret's creation fails, when its StatefulSet's creation fails (the
// creation is undone), when its pod is orphaned (the orphan is finished), and
// when only its Secret is left (cleanup releases it). Each retires the runner
// before its last object goes; while the roster cannot be written, that
// object stays, for the next sweep to retire it. (A runner whose Secret could
// not be created has no object left: a retirement that fails then leaves its
// name on the roster, that of a runner that never existed.)
func TestRosterRetiresARunnerEveryWayItEnds(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name string
		// end brings a runner to its end and returns its StatefulSet's name
		// ("": the sweep that creates it ends it); the sweeps that finish it
		// follow, first with the roster down.
		end func(e *env) string
		// kept: the runner's last object, which stays while the roster is down.
		kept func(e *env, name string) bool
	}{
		{"its secret cannot be created", func(e *env) string {
			e.refuseCreate("secrets")
			return ""
		}, nil},
		{"its statefulset cannot be created", func(e *env) string {
			e.refuseCreate("statefulsets")
			return ""
		}, func(e *env, name string) bool { return slices.Contains(e.secrets(), name) }},
		{"its pod is orphaned", func(e *env) string {
			e.mustSweep(1, time.Time{})
			name := e.statefulSets()[0]
			e.start(name)
			e.mustSweep(1, time.Time{})
			e.deleteStatefulSetWith(name, metav1.DeletePropagationOrphan)
			return name
		}, func(e *env, name string) bool {
			_, err := e.raw.CoreV1().Pods(e.ns).Get(e.t.Context(), runnerpod.PodName(name), metav1.GetOptions{})
			return err == nil
		}},
		{"only its secret is left", func(e *env) string {
			e.mustSweep(1, time.Time{})
			name := e.statefulSets()[0]
			e.deleteStatefulSetWith(name, metav1.DeletePropagationOrphan)
			if err := e.raw.CoreV1().Pods(e.ns).Delete(e.t.Context(), runnerpod.PodName(name), metav1.DeleteOptions{}); err != nil {
				e.t.Fatal(err)
			}
			e.releaseFinalizers()
			e.waitNoPods(20 * time.Second)
			e.status.LastCleanup = time.Time{}
			e.clock.Step(2 * time.Minute) // past OrphanGrace
			return name
		}, func(e *env, name string) bool { return slices.Contains(e.secrets(), name) }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			e := newEnv(t, true)
			roster := &recordingRoster{Store: e.roster, e: e}
			e.withRoster(roster)
			name := tc.end(e)
			desired := 0
			if name == "" {
				desired = 1
			}
			// sweeps sweeps n times, playing the kubelet for the runners it stops.
			sweeps := func(n int) {
				for range n {
					_ = e.sweep(desired, time.Time{})
					e.endStoppedRunners()
				}
				if name == "" {
					name = roster.firstAdded()
				}
			}
			if tc.kept != nil {
				roster.setFail(true, false)
				sweeps(4)
				if !tc.kept(e, name) {
					t.Fatalf("runner %q: its last object went with the roster down", name)
				}
				roster.setFail(false, false)
				e.status.LastCleanup = time.Time{}
				e.clock.Step(2 * time.Minute) // a Secret left is past OrphanGrace: cleanup finishes it
			}
			sweeps(1)
			if name == "" || !slices.Contains(roster.retiredNames(), runnerpod.PodName(name)) {
				t.Fatalf("runner %q not retired: retired %v", name, roster.retiredNames())
			}
			if tc.kept != nil && tc.kept(e, name) {
				t.Fatalf("runner %s retired, and its last object still there", name)
			}
		})
	}
}

// setFail makes the roster's retirements, and additions with add too, fail
// (or not) from now on.
func (r *recordingRoster) setFail(retire, add bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.failRetire, r.fail = retire, add
}

func (r *recordingRoster) retiredNames() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return slices.Clone(r.retired)
}

// firstAdded is the StatefulSet name of the runner added first ("" if none).
func (r *recordingRoster) firstAdded() string {
	r.mu.Lock()
	defer r.mu.Unlock()
	if len(r.added) == 0 {
		return ""
	}
	return strings.TrimSuffix(r.added[0], "-0")
}
