package reconcile_test

import (
	"context"
	"errors"
	"io"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"

	"github.com/runnerscaler/runnerscaler/internal/pool"
	"github.com/runnerscaler/runnerscaler/internal/reconcile"
	"github.com/runnerscaler/runnerscaler/internal/scaling"
	"github.com/runnerscaler/runnerscaler/local/testenv"
)

// TestFinishedRunnersTakeTheirSecrets: sweeps killed between a runner's
// StatefulSet and its Secret's owner (step 4 of create) leave two runners whose
// Secrets have no owner, and write no status, so the last cleanup stays recent
// and the next is an hour away. The runners run, finish, and the pool goes to
// zero: their Secrets go with them, not at the next cleanup.
func TestFinishedRunnersTakeTheirSecrets(t *testing.T) {
	t.Parallel()
	e := newEnv(t, true)
	e.status.LastCleanup = e.clock.Now() // a cleanup just ran: the next is due in an hour
	k := newSweepKiller(e)
	t0 := e.clock.Now()
	k.sweep(1, t0)
	k.sweep(2, t0)
	names := e.statefulSets()
	if len(names) != 2 {
		t.Fatalf("statefulsets %v after two killed creations, want 2", names)
	}
	ids := map[string]int64{}
	for _, name := range names {
		sec, err := e.raw.CoreV1().Secrets(e.ns).Get(t.Context(), name, metav1.GetOptions{})
		if err != nil || len(sec.OwnerReferences) != 0 {
			t.Fatalf("secret of %s: owners %v (error %v), want none: the sweep was killed before step 4", name, ownerNames(sec.OwnerReferences), err)
		}
		ids[name] = e.start(name).ID
	}
	e.mustSweep(2, t0)
	for _, name := range names {
		e.exit(name, ids[name])
	}
	for range 3 {
		if len(e.statefulSets()) == 0 {
			break
		}
		e.clock.Step(time.Second)
		e.mustSweep(0, t0)
	}
	if got := e.statefulSets(); len(got) != 0 {
		t.Fatalf("statefulsets %v after the pool went to zero, want none", got)
	}
	if !e.status.LastCleanup.Equal(t0) {
		t.Fatalf("last cleanup %v, want %v: the test is about the sweeps that do not clean up", e.status.LastCleanup, t0)
	}
	for _, name := range names {
		waitSecretGone(t, e, name)
		e.waitGone(name) // and its pod
	}
}

// waitSecretGone waits for the runner's Secret to be gone (deleted, or
// garbage-collected), and fails the test with what is left of it if it is not
// within 20 s.
func waitSecretGone(t *testing.T, e *env, name string) {
	t.Helper()
	var left corev1.Secret
	err := wait.PollUntilContextTimeout(t.Context(), 50*time.Millisecond, 20*time.Second, true, func(ctx context.Context) (bool, error) {
		sec, err := e.raw.CoreV1().Secrets(e.ns).Get(ctx, name, metav1.GetOptions{})
		if err == nil {
			left = *sec
		}
		return apierrors.IsNotFound(err), nil
	})
	if err != nil {
		t.Fatalf("the secret of runner %s is still there (owners %v, annotations %v): %v", name, ownerNames(left.OwnerReferences), left.Annotations, err)
	}
}

func ownerNames(refs []metav1.OwnerReference) []string {
	var out []string
	for _, r := range refs {
		out = append(out, r.Kind+"/"+r.Name)
	}
	return out
}

// sweepKiller sweeps with a reconciler of its own whose sweeps die as a Lambda
// that times out does: at the write that would make a runner's StatefulSet the
// owner of its Secret, the sweep's context ends and the write fails. What such a
// sweep recorded in its status is lost (the sweeper could not write it).
type sweepKiller struct {
	e   *env
	rec *reconcile.Reconciler

	mu   sync.Mutex
	kill context.CancelFunc
}

func newSweepKiller(e *env) *sweepKiller {
	e.t.Helper()
	k := &sweepKiller{e: e}
	cfg := testenv.RESTConfig(e.t)
	cfg.Wrap(func(rt http.RoundTripper) http.RoundTripper { return killingTransport{rt: rt, k: k} })
	kube, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		e.t.Fatal(err)
	}
	pools, err := pool.Parse([]byte(poolYAML(e.ns, true, "runner:1")))
	if err != nil {
		e.t.Fatal(err)
	}
	if k.rec, err = reconcile.New(pools, kube, e.gh, e.clock, nil, reconcile.Options{JobLinks: e.links, Roster: e.roster}); err != nil {
		e.t.Fatal(err)
	}
	return k
}

// sweep runs one sweep toward desired, which must be killed.
func (k *sweepKiller) sweep(desired int, effective time.Time) {
	k.e.t.Helper()
	ctx, cancel := context.WithCancel(k.e.t.Context())
	defer cancel()
	k.mu.Lock()
	k.kill = cancel
	k.mu.Unlock()
	st := k.e.status // lost with the sweep
	err := k.rec.Reconcile(ctx, k.e.pool, scaling.Decision{Desired: desired, EffectiveTime: effective}, &st)
	if !errors.Is(err, errKilled) {
		k.e.t.Fatalf("sweep to %d: %v, want it killed at step 4 of a creation", desired, err)
	}
}

var errKilled = errors.New("the sweep was killed")

type killingTransport struct {
	rt http.RoundTripper
	k  *sweepKiller
}

func (t killingTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	// The owner reference names the StatefulSet kind (in JSON and in protobuf);
	// nothing else a Secret of ours holds does.
	if req.Method == http.MethodPut && strings.Contains(req.URL.Path, "/secrets/") && strings.Contains(requestBody(req), "StatefulSet") {
		t.k.mu.Lock()
		t.k.kill()
		t.k.mu.Unlock()
		return nil, errKilled
	}
	return t.rt.RoundTrip(req)
}

func requestBody(req *http.Request) string {
	if req.GetBody == nil {
		return ""
	}
	rc, err := req.GetBody()
	if err != nil {
		return ""
	}
	defer rc.Close()
	b, _ := io.ReadAll(rc)
	return string(b)
}

// TestCleanupAdoptsNoSecretForAStatefulSetGoneSinceTheSweepLooked: a runner's
// StatefulSet deleted with --cascade=orphan after the sweep observed it and
// before its cleanup lists the Secrets leaves an ownerless Secret whose
// StatefulSet the sweep still holds; cleanup must not make that Secret the
// gone StatefulSet's again (the garbage collector would delete it under the
// orphaned pod's runner): the Secret stays ownerless, for the orphan's stop.
// So too when a StatefulSet of the same name was created since (another UID),
// and when a finalizer still holds the deleted one.
func TestCleanupAdoptsNoSecretForAStatefulSetGoneSinceTheSweepLooked(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name string
		// finalizer: the StatefulSet carries a finalizer of another
		// controller; recreate: one of its name is created after the deletion.
		finalizer, recreate bool
	}{
		{"gone", false, false},
		{"recreated under its name", false, true},
		{"held by a finalizer", true, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			e := newEnv(t, false)
			e.mustSweep(1, time.Time{})
			name := e.statefulSets()[0]
			e.start(name)
			if tc.finalizer {
				e.statefulSetFinalizer(name)
			}
			e.status.LastCleanup = time.Time{} // cleanup due in the next sweep
			var once sync.Once
			orphan := func(req *http.Request) {
				if req.Method == http.MethodGet && strings.HasSuffix(req.URL.Path, "/secrets") {
					once.Do(func() { e.orphanStatefulSet(name, tc.recreate) })
				}
			}
			e.before.Store(&orphan)
			if err := e.sweep(1, time.Time{}); err != nil {
				t.Fatalf("sweep: %v", err)
			}
			e.before.Store(nil)
			sec, err := e.raw.CoreV1().Secrets(e.ns).Get(t.Context(), name, metav1.GetOptions{})
			if err != nil {
				t.Fatalf("secret of the orphaned runner: %v", err)
			}
			if len(sec.OwnerReferences) != 0 {
				t.Fatalf("secret %s was given owners %v: the StatefulSet the sweep saw is going, and the garbage collector deletes it", name, sec.OwnerReferences)
			}
		})
	}
}

// statefulSetFinalizer puts another controller's finalizer on StatefulSet
// name, and takes it off when the test ends.
func (e *env) statefulSetFinalizer(name string) {
	e.t.Helper()
	patch := []byte(`{"metadata":{"finalizers":["example.com/hold"]}}`)
	if _, err := e.raw.AppsV1().StatefulSets(e.ns).Patch(e.t.Context(), name, types.MergePatchType, patch, metav1.PatchOptions{}); err != nil {
		e.t.Fatalf("adding a finalizer to statefulset %s: %v", name, err)
	}
	e.t.Cleanup(func() {
		_, err := e.raw.AppsV1().StatefulSets(e.ns).Patch(context.Background(), name, types.MergePatchType,
			[]byte(`{"metadata":{"finalizers":null}}`), metav1.PatchOptions{})
		if err != nil && !apierrors.IsNotFound(err) {
			e.t.Errorf("removing the finalizer of statefulset %s: %v", name, err)
		}
	})
}

// orphanStatefulSet deletes StatefulSet name with --cascade=orphan and waits
// until the garbage collector has orphaned its Secret; with recreate, it then
// creates a StatefulSet of the same name and spec.
func (e *env) orphanStatefulSet(name string, recreate bool) {
	t := e.t
	old, err := e.raw.AppsV1().StatefulSets(e.ns).Get(t.Context(), name, metav1.GetOptions{})
	if err != nil {
		t.Errorf("reading statefulset %s: %v", name, err)
		return
	}
	policy := metav1.DeletePropagationOrphan
	if err := e.raw.AppsV1().StatefulSets(e.ns).Delete(t.Context(), name, metav1.DeleteOptions{PropagationPolicy: &policy}); err != nil {
		t.Errorf("deleting statefulset %s with --cascade=orphan: %v", name, err)
		return
	}
	err = wait.PollUntilContextTimeout(t.Context(), 50*time.Millisecond, 20*time.Second, true, func(ctx context.Context) (bool, error) {
		sec, err := e.raw.CoreV1().Secrets(e.ns).Get(ctx, name, metav1.GetOptions{})
		return err == nil && len(sec.OwnerReferences) == 0, err
	})
	if err != nil {
		t.Errorf("the garbage collector never orphaned secret %s: %v", name, err)
		return
	}
	if !recreate {
		return
	}
	err = wait.PollUntilContextTimeout(t.Context(), 50*time.Millisecond, 20*time.Second, true, func(ctx context.Context) (bool, error) {
		_, err := e.raw.AppsV1().StatefulSets(e.ns).Get(ctx, name, metav1.GetOptions{})
		return apierrors.IsNotFound(err), nil
	})
	if err != nil {
		t.Errorf("statefulset %s never went: %v", name, err)
		return
	}
	fresh := &appsv1.StatefulSet{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: e.ns, Labels: old.Labels, Annotations: old.Annotations},
		Spec: old.Spec}
	if _, err := e.raw.AppsV1().StatefulSets(e.ns).Create(t.Context(), fresh, metav1.CreateOptions{}); err != nil {
		t.Errorf("creating statefulset %s again: %v", name, err)
	}
}
