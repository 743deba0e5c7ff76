package reconcile_test

import (
	"errors"
	"net/http"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/runnerscaler/runnerscaler/internal/roster"
	"github.com/runnerscaler/runnerscaler/internal/runnerpod"
	"github.com/runnerscaler/runnerscaler/internal/table"
	"github.com/runnerscaler/runnerscaler/local/testenv"
)

// refuseOnce makes the reconciler's first request that match accepts fail,
// and reports through the returned counter how many were refused.
func (e *env) refuseOnce(match func(*http.Request) bool) *atomic.Int32 {
	var n atomic.Int32
	refuse := func(req *http.Request) error {
		if match(req) && n.Add(1) == 1 {
			return errors.New("injected: the request was lost")
		}
		return nil
	}
	e.refuse.Store(&refuse)
	return &n
}

func deleteOf(resource string) func(*http.Request) bool {
	return func(req *http.Request) bool {
		return req.Method == http.MethodDelete && strings.Contains(req.URL.Path, "/"+resource+"/")
	}
}

func (e *env) live() []string {
	e.t.Helper()
	live, err := e.roster.Live(e.t.Context(), "p")
	if err != nil {
		e.t.Fatal(err)
	}
	var names []string
	for _, rn := range live {
		names = append(names, rn.Name)
	}
	return names
}

// TestDeleteCutAfterRetireStillDeletesTheRunner: deleteRunner retires the
// runner before it deletes its StatefulSet. When the StatefulSet delete is
// lost (or the sweep ends there), the runner is off the live roster while its
// StatefulSet, pod and Secret are there: every later sweep must still finish
// the deletion, not call the StatefulSet foreign and leave it forever.
func TestDeleteCutAfterRetireStillDeletesTheRunner(t *testing.T) {
	t.Parallel()
	e := newEnv(t, true)
	e.mustSweep(1, time.Time{})
	name := e.statefulSets()[0]
	e.pods() // never bound: scaling to 0 deletes the runner at once
	refused := e.refuseOnce(deleteOf("statefulsets"))
	for i := 0; refused.Load() == 0; i++ {
		if i == 3 {
			t.Fatal("no sweep tried to delete the StatefulSet")
		}
		_ = e.sweep(0, time.Time{})
		e.clock.Step(time.Minute)
	}
	e.refuse.Store(nil)
	if slices.Contains(e.live(), runnerpod.PodName(name)) {
		t.Fatal("the runner is still live on the roster: the cut did not come between its retirement and the delete")
	}
	for range 3 {
		e.clock.Step(2 * time.Minute)
		_ = e.sweep(0, time.Time{})
	}
	if got := e.statefulSets(); len(got) != 0 {
		t.Fatalf("statefulsets %v left after the sweeps (status foreign: %q); want the deleted runner's gone", got, e.status.Foreign)
	}
}

// TestSecretDeleteCutAfterRetireIsFinished: cleanup releases an orphaned
// Secret's runner, retires it, then deletes the Secret. When that delete is
// lost, the Secret (with the runner's credentials) is left ownerless with its
// runner retired: a later cleanup must still delete it.
func TestSecretDeleteCutAfterRetireIsFinished(t *testing.T) {
	t.Parallel()
	e := newEnv(t, true)
	leftover := e.crashedCreation()
	refused := e.refuseOnce(deleteOf("secrets"))
	for i := 0; refused.Load() == 0; i++ {
		if i == 5 {
			t.Fatal("no sweep tried to delete the orphaned Secret")
		}
		e.clock.Step(2 * time.Minute)
		_ = e.sweep(0, time.Time{})
	}
	e.refuse.Store(nil)
	if _, ok := e.sim.Runner(leftover); ok {
		t.Fatal("the leftover registration is still there")
	}
	for range 3 {
		e.clock.Step(2 * time.Hour)
		_ = e.sweep(0, time.Time{})
	}
	if got := e.secrets(); len(got) != 0 {
		t.Fatalf("secrets %v left (status foreign: %q); want the released runner's Secret deleted", got, e.status.Foreign)
	}
}

// TestRunnerAddedThenCutIsRetired: a sweep that put a runner on the roster
// and ended before it created anything of it (killed, or the Secret create
// refused and the retirement with it) leaves a live entry with no object. It
// must be retired once no object of it can appear any more (past the orphan
// grace): otherwise it stays live for ever, read by every sweep, and the
// webhook takes its name for the deployment's.
func TestRunnerAddedThenCutIsRetired(t *testing.T) {
	t.Parallel()
	e := newEnv(t, true)
	name := runnerpod.PodName(runnerpod.NewName("p"))
	if err := e.roster.Add(t.Context(), roster.Runner{Pool: "p", Name: name, Namespace: e.ns, Scope: e.pool.Scope().String()}, e.clock.Now()); err != nil {
		t.Fatal(err)
	}
	for range 4 {
		e.clock.Step(2 * time.Hour)
		e.mustSweep(0, time.Time{})
	}
	if slices.Contains(e.live(), name) {
		t.Fatalf("runner %s, of which nothing was ever created, is still live on the roster after 8 hours of sweeps", name)
	}
}

// TestUpgradeOrphanOfAnEntryWithoutUIDsIsFinished: a runner of the previous
// version (its roster item records no UID: that version wrote only the name
// and createdAt) whose StatefulSet was deleted before the upgrade — its pod
// held by our finalizer while its stop waited — is an orphan on the first
// sweep of this version. Its roster entry is live, its pod is the one its
// StatefulSet made: the sweep must still stop it, unregister it and release
// its pod, not leave the pod with our finalizer for ever and the runner
// registered.
func TestUpgradeOrphanOfAnEntryWithoutUIDsIsFinished(t *testing.T) {
	t.Parallel()
	e := newEnv(t, true)
	db, tableName := testenv.Table(t)
	e.roster = roster.NewStore(db, tableName)
	e.setPool(true, "runner:1")
	e.mustSweep(1, time.Time{})
	name := e.statefulSets()[0]
	gr := e.start(name)
	// What the previous version's roster.Add wrote for it: no namespace,
	// scope, UID or id.
	old := table.Key(table.RosterPK("p"), runnerpod.PodName(name))
	old["createdAt"] = table.Millis(e.clock.Now())
	if _, err := db.PutItem(t.Context(), &dynamodb.PutItemInput{TableName: &tableName, Item: old}); err != nil {
		t.Fatal(err)
	}
	e.deleteStatefulSet(name) // before the upgrade
	e.waitStatefulSetGone(name)
	e.waitPodDeleting(name)
	for range 4 {
		e.clock.Step(2 * time.Minute)
		_ = e.sweep(1, time.Time{})
		e.endStoppedRunners()
	}
	if _, ok := e.sim.Runner(gr.ID); ok {
		t.Errorf("the orphan's runner is still registered on GitHub (status foreign: %q)", e.status.Foreign)
	}
	pod, err := e.raw.CoreV1().Pods(e.ns).Get(t.Context(), runnerpod.PodName(name), metav1.GetOptions{})
	if err == nil && slices.Contains(pod.Finalizers, runnerpod.Finalizer) {
		t.Fatalf("the orphan pod still carries our finalizer after 4 sweeps (status foreign: %q)", e.status.Foreign)
	} else if err != nil && !apierrors.IsNotFound(err) {
		t.Fatal(err)
	}
}

// loseAnswer passes every request on, and loses the answer of the first that
// match accepts: the server did it, the client hears an error.
type loseAnswer struct {
	rt    http.RoundTripper
	match func(*http.Request) bool
	lost  atomic.Int32
}

func (l *loseAnswer) RoundTrip(req *http.Request) (*http.Response, error) {
	resp, err := l.rt.RoundTrip(req)
	if err == nil && l.match(req) && l.lost.Add(1) == 1 {
		resp.Body.Close()
		return nil, errors.New("injected: the answer was lost")
	}
	return resp, err
}

// TestStatefulSetCreateWithALostAnswerIsCleanedUp: the API server created the
// runner's StatefulSet but its answer was lost. create undoes the runner
// (removes its registration, retires it, deletes its Secret), while the
// StatefulSet — and the pod its controller makes, which carries our
// finalizer — exists. Later sweeps must delete them, not leave them foreign
// for ever (a pod that can never start, holding its node's resources).
func TestStatefulSetCreateWithALostAnswerIsCleanedUp(t *testing.T) {
	t.Parallel()
	e := newEnv(t, true)
	la := &loseAnswer{match: func(req *http.Request) bool {
		return req.Method == http.MethodPost && strings.HasSuffix(req.URL.Path, "/statefulsets") && req.URL.Query().Get("dryRun") == ""
	}}
	cfg := testenv.RESTConfig(t)
	cfg.Wrap(func(rt http.RoundTripper) http.RoundTripper { la.rt = rt; return la })
	kube, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	e.rec = e.newReconciler(kube, e.gh)
	if err := e.sweep(1, time.Time{}); err == nil || la.lost.Load() != 1 {
		t.Fatalf("sweep: %v, answers lost %d; want the StatefulSet create's answer lost", err, la.lost.Load())
	}
	lost := e.statefulSets()
	if len(lost) != 1 {
		t.Fatalf("statefulsets %v, want the one whose answer was lost", lost)
	}
	for range 4 {
		e.clock.Step(10 * time.Minute)
		_ = e.sweep(0, time.Time{})
	}
	if slices.Contains(e.statefulSets(), lost[0]) {
		t.Fatalf("statefulset %s is still there after 40 minutes of sweeps to 0 (status foreign: %q)", lost[0], e.status.Foreign)
	}
}
