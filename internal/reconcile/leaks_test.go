package reconcile_test

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"

	"github.com/runnerscaler/runnerscaler/internal/githubapi"
	"github.com/runnerscaler/runnerscaler/internal/pool"
	"github.com/runnerscaler/runnerscaler/internal/reconcile"
	"github.com/runnerscaler/runnerscaler/internal/roster"
	"github.com/runnerscaler/runnerscaler/internal/runnerpod"
	"github.com/runnerscaler/runnerscaler/internal/scope"
	"github.com/runnerscaler/runnerscaler/local/githubsim"
	"github.com/runnerscaler/runnerscaler/local/testenv"
)

// TestDeletionCannotRecreateThePod: a busy runner's pod is
// deleted by hand; once its job is over the runner is deleted, with the
// StatefulSet controller given time to act between the reconciler's writes. No
// pod may be left behind: a pod the controller recreated after the finalizer
// went, and orphaned when its StatefulSet was deleted, would stay Terminating
// with our finalizer forever.
func TestDeletionCannotRecreateThePod(t *testing.T) {
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
	e.mustSweep(0, time.Time{})
	e.finishJob(r.ID)
	// Every write of the deletion sweep waits until the controller has seen the
	// writes before it, so that it can act on each step.
	barrier := e.newControllerBarrier()
	var writes atomic.Int32
	e.useFailingClient(func(req *http.Request) error {
		if req.Method == http.MethodGet {
			return nil
		}
		writes.Add(1)
		return barrier.settle()
	})
	e.clock.Step(time.Minute)
	e.mustSweep(0, time.Time{})
	if got := e.statefulSets(); len(got) != 0 {
		t.Fatalf("statefulsets %v, want the finished runner deleted", got)
	}
	if writes.Load() == 0 {
		t.Fatal("the deletion sweep wrote nothing: the test proves nothing")
	}
	e.waitNoPods(5 * time.Second)
	// The controller has seen the sweep's last write: a pod it made of the
	// deleted StatefulSet in answer is there now.
	if err := barrier.settle(); err != nil {
		t.Fatal(err)
	}
	e.waitNoPods(5 * time.Second)
}

// TestOrphanedPodIsUnregisteredBeforeRelease: a runner's StatefulSet is
// deleted by hand while its runner runs a job. The pod, held by our finalizer,
// has no owner left; sweeps still finish it: RemoveRunner (busy: wait; idle:
// removed), and only then the finalizer goes.
func TestOrphanedPodIsUnregisteredBeforeRelease(t *testing.T) {
	t.Parallel()
	e := newEnv(t, true)
	e.mustSweep(1, time.Time{})
	name := e.statefulSets()[0]
	r := e.start(name)
	e.mustSweep(1, time.Time{})
	e.setBusy(r.ID, true)
	e.deleteStatefulSet(name)
	e.waitPodDeleting(name)
	e.mustSweep(0, time.Time{})
	pod, err := e.kube.CoreV1().Pods(e.ns).Get(t.Context(), name+"-0", metav1.GetOptions{})
	if err != nil || !slices.Contains(pod.Finalizers, runnerpod.Finalizer) {
		t.Fatalf("orphaned pod of a busy runner: %v; want it held by the finalizer", err)
	}
	if _, ok := e.sim.Runner(r.ID); !ok {
		t.Fatal("a busy runner was removed")
	}
	e.setBusy(r.ID, false)
	e.clock.Step(10 * time.Minute)
	e.mustSweep(0, time.Time{})
	if _, ok := e.sim.Runner(r.ID); ok {
		t.Fatal("the orphaned pod's idle runner is still registered")
	}
	e.waitNoPods(10 * time.Second)
}

// TestPodOrphanedOnPurposeIsUnregisteredAndDeleted: `kubectl delete sts
// --cascade=orphan` leaves the pod running with no owner and nothing that would
// delete it; the sweeper unregisters its runner and deletes it.
func TestPodOrphanedOnPurposeIsUnregisteredAndDeleted(t *testing.T) {
	t.Parallel()
	e := newEnv(t, true)
	e.mustSweep(1, time.Time{})
	name := e.statefulSets()[0]
	r := e.start(name)
	e.mustSweep(1, time.Time{})
	e.deleteStatefulSetWith(name, metav1.DeletePropagationOrphan)
	e.mustSweep(0, time.Time{})
	if _, ok := e.sim.Runner(r.ID); ok {
		t.Fatal("the orphaned pod's runner is still registered")
	}
	e.waitNoPods(10 * time.Second)
}

// TestCleanupLeavesAnOrphanedBusyRunnerToItsStop: `kubectl delete sts
// --cascade=orphan` on a runner running a job, while GitHub's REST view lies
// idle (as it does for up to a minute after an assignment): the pod's own report
// vetoes the orphan's stop, and the cleanup of the now ownerless Secret, due in
// the same sweep, does not remove the runner either. Once the job ends the stop
// releases the runner and its Secret.
func TestCleanupLeavesAnOrphanedBusyRunnerToItsStop(t *testing.T) {
	t.Parallel()
	e := newEnv(t, true)
	e.mustSweep(1, time.Time{})
	name := e.statefulSets()[0]
	r := e.start(name)
	e.mustSweep(1, time.Time{})
	pod := e.pods()[name]
	pod.Status.ContainerStatuses[0].Ready = true // its job probe: a job runs
	if _, err := e.kube.CoreV1().Pods(e.ns).UpdateStatus(t.Context(), pod, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	e.deleteStatefulSetWith(name, metav1.DeletePropagationOrphan)
	err := wait.PollUntilContextTimeout(t.Context(), 50*time.Millisecond, 20*time.Second, true, func(ctx context.Context) (bool, error) {
		_, err := e.kube.AppsV1().StatefulSets(e.ns).Get(ctx, name, metav1.GetOptions{})
		sec, serr := e.kube.CoreV1().Secrets(e.ns).Get(ctx, name, metav1.GetOptions{})
		return apierrors.IsNotFound(err) && serr == nil && len(sec.OwnerReferences) == 0, serr
	})
	if err != nil {
		t.Fatalf("statefulset %s deleted with its dependents orphaned: %v", name, err)
	}
	e.clock.Step(2 * time.Minute) // the Secret is past the orphan grace: cleanup is due
	e.mustSweep(0, time.Time{})
	if _, ok := e.sim.Runner(r.ID); !ok {
		t.Fatal("the runner of an orphaned pod running a job was removed")
	}
	if _, err := e.kube.CoreV1().Secrets(e.ns).Get(t.Context(), name, metav1.GetOptions{}); err != nil {
		t.Fatalf("the Secret of an orphaned pod running a job: %v; want it kept", err)
	}
	e.exit(name, r.ID)
	e.clock.Step(10 * time.Minute)
	e.mustSweep(0, time.Time{})
	e.waitNoPods(10 * time.Second)
	if _, err := e.kube.CoreV1().Secrets(e.ns).Get(t.Context(), name, metav1.GetOptions{}); !apierrors.IsNotFound(err) {
		t.Fatalf("the Secret after the orphan's stop: %v; want it deleted", err)
	}
}

// TestOrphanedPodReleasesItsJITRegistration (item 5): a StatefulSet deleted by
// hand before its runner ever ran leaves a pod whose only link to GitHub is the
// JIT registration its StatefulSet made; finishing the pod removes that runner.
func TestOrphanedPodReleasesItsJITRegistration(t *testing.T) {
	t.Parallel()
	e := newEnv(t, true)
	e.mustSweep(1, time.Time{})
	name := e.statefulSets()[0]
	e.pods()
	if n := len(e.sim.Runners()); n != 1 {
		t.Fatalf("%d GitHub runners after creation, want the JIT one", n)
	}
	e.deleteStatefulSet(name)
	e.waitPodDeleting(name)
	e.mustSweep(0, time.Time{})
	e.waitNoPods(10 * time.Second)
	if n := len(e.sim.Runners()); n != 0 {
		t.Fatalf("%d GitHub runners left: the orphaned pod's JIT registration leaked", n)
	}
}

// TestRefusedTemplateRegistersNothing (item 6): a StatefulSet the API server
// refuses (here a quota of zero StatefulSets) costs no GitHub registration and no
// Secret, however often the pool is swept.
func TestRefusedTemplateRegistersNothing(t *testing.T) {
	t.Parallel()
	e := newEnv(t, true)
	e.quota(0)
	for range 3 {
		if err := e.sweep(2, time.Time{}); err == nil {
			t.Fatal("a sweep whose creations are refused reported no error")
		}
	}
	if n := len(e.secrets()); n != 0 {
		t.Fatalf("%d secrets left by refused creations", n)
	}
	if n := len(e.sim.Runners()); n != 0 {
		t.Fatalf("%d GitHub runners left by refused creations", n)
	}
}

// TestFailedCreationIsUndone (item 6): the API server admits the first
// StatefulSet and refuses the next ones (quota). Each refused creation is undone
// (its JIT registration removed, its Secret deleted); when GitHub cannot be told,
// the Secret stays as the record, and a later sweep's cleanup finishes it although
// no creation has succeeded for a long time.
func TestFailedCreationIsUndone(t *testing.T) {
	t.Parallel()
	e := newEnv(t, true)
	gh := &flakyGitHub{GitHub: e.gh}
	e.useGitHub(gh)
	e.quota(1)
	e.mustSweep(1, time.Time{})
	e.start(e.statefulSets()[0])
	e.mustSweep(1, time.Time{})
	e.clock.Step(time.Hour) // long after the only successful creation
	check := func(when string, secrets, runners int) {
		t.Helper()
		if got := e.secrets(); len(got) != secrets {
			t.Fatalf("%s: secrets %v, want %d", when, got, secrets)
		}
		if got := e.sim.Runners(); len(got) != runners {
			t.Fatalf("%s: %d GitHub runners, want %d", when, len(got), runners)
		}
	}
	for i := range 3 {
		if err := e.sweep(3, time.Time{}); err == nil {
			t.Fatal("a refused creation reported no error")
		}
		e.clock.Step(time.Second)
		check(fmt.Sprintf("refused sweep %d", i), 1, 1)
	}
	gh.failRemove.Store(true)
	if err := e.sweep(3, time.Time{}); err == nil {
		t.Fatal("a refused creation whose undo failed reported no error")
	}
	check("undo with GitHub down", 2, 2)
	gh.failRemove.Store(false)
	e.clock.Step(2 * time.Minute)
	if err := e.sweep(3, time.Time{}); err == nil {
		t.Fatal("a refused creation reported no error")
	}
	check("after the next sweep's cleanup", 1, 1)
}

// TestCleanupSparesRunnersItDidNotCreate (item 7): an idle runner named like
// ours but created by someone else (another deployment, an ARC runner) survives
// cleanup; a runner this deployment registered before a crash (its Secret is the
// record) is removed with its Secret.
func TestCleanupSparesRunnersItDidNotCreate(t *testing.T) {
	t.Parallel()
	e := newEnv(t, true)
	foreign := e.foreignRunner("p-bcdfg-0")
	leftover := e.crashedCreation()
	e.mustSweep(1, time.Time{})
	e.clock.Step(2 * time.Minute)
	e.mustSweep(1, time.Time{})
	if _, ok := e.sim.Runner(foreign.ID); !ok {
		t.Fatal("cleanup removed a runner this deployment did not create")
	}
	if _, ok := e.sim.Runner(leftover); ok {
		t.Fatal("the runner a crashed creation registered is still there")
	}
	if got := e.secrets(); len(got) != 1 {
		t.Fatalf("secrets %v, want only the live runner's", got)
	}
}

// TestOnlyOurFinalizerIsRemoved (item 8): a runner pod that carries another
// controller's finalizer keeps it when the runner is deleted — also when that
// finalizer is added between the sweep's read and its patch.
func TestOnlyOurFinalizerIsRemoved(t *testing.T) {
	t.Parallel()
	e := newEnv(t, true)
	e.mustSweep(1, time.Time{})
	name := e.statefulSets()[0]
	e.pods()
	e.addFinalizer(name, "example.com/second")
	e.addFinalizer(name, "example.com/first") // [first, second, ours]
	var once atomic.Bool
	e.useClient(func(req *http.Request) {
		if req.Method == http.MethodPatch && strings.HasSuffix(req.URL.Path, "/pods/"+name+"-0") &&
			strings.Contains(body(req), "finalizers") && !once.Swap(true) {
			// Lands between the sweep's read and its patch, moving our finalizer to
			// another index. (Removing: the pod may be deleting by now, and a
			// deleting object accepts no new finalizer.)
			patch := `[{"op":"test","path":"/metadata/finalizers/0","value":"example.com/first"},{"op":"remove","path":"/metadata/finalizers/0"}]`
			if _, err := e.kube.CoreV1().Pods(e.ns).Patch(context.Background(), name+"-0", types.JSONPatchType, []byte(patch), metav1.PatchOptions{}); err != nil {
				t.Error(err)
			}
		}
	})
	e.mustSweep(0, time.Time{})
	if got := e.statefulSets(); len(got) != 0 {
		t.Fatalf("statefulsets %v, want the runner deleted", got)
	}
	pod, err := e.kube.CoreV1().Pods(e.ns).Get(t.Context(), name+"-0", metav1.GetOptions{})
	if err != nil {
		t.Fatalf("the pod held by other finalizers is gone: %v", err)
	}
	if want := []string{"example.com/second"}; !slices.Equal(pod.Finalizers, want) {
		t.Fatalf("finalizers %v, want %v", pod.Finalizers, want)
	}
}

// useClient gives the reconciler its own client whose requests pass through hook first.
func (e *env) useClient(hook func(*http.Request)) {
	e.useFailingClient(func(req *http.Request) error { hook(req); return nil })
}

// useGitHub gives the reconciler a different GitHub client.
func (e *env) useGitHub(gh reconcile.GitHub) { e.rec = e.newReconciler(e.kube, gh) }

func (e *env) newReconciler(kube kubernetes.Interface, gh reconcile.GitHub) *reconcile.Reconciler {
	e.t.Helper()
	cfg, err := pool.Parse([]byte(poolYAML(e.ns, e.pool.IsEphemeral(), "runner:1")))
	if err != nil {
		e.t.Fatal(err)
	}
	rec, err := reconcile.New(cfg, kube, gh, e.clock, nil, reconcile.Options{JobLinks: e.links, Roster: e.roster})
	if err != nil {
		e.t.Fatal(err)
	}
	return rec
}

// flakyGitHub fails RemoveRunner with a server error while failRemove is set.
type flakyGitHub struct {
	reconcile.GitHub
	failRemove atomic.Bool
}

func (f *flakyGitHub) RemoveRunner(ctx context.Context, s scope.Scope, id int64) error {
	if f.failRemove.Load() {
		return fmt.Errorf("injected: %w", githubapi.ErrServer)
	}
	return f.GitHub.RemoveRunner(ctx, s, id)
}

// deleteStatefulSet deletes a runner's StatefulSet as a person would (kubectl delete).
func (e *env) deleteStatefulSet(name string) {
	e.t.Helper()
	e.deleteStatefulSetWith(name, metav1.DeletePropagationBackground)
}

func (e *env) deleteStatefulSetWith(name string, policy metav1.DeletionPropagation) {
	e.t.Helper()
	if err := e.kube.AppsV1().StatefulSets(e.ns).Delete(e.t.Context(), name, metav1.DeleteOptions{PropagationPolicy: &policy}); err != nil {
		e.t.Fatal(err)
	}
}

// waitPodDeleting waits for the garbage collector to delete the runner's pod
// (held by our finalizer).
func (e *env) waitPodDeleting(name string) {
	e.t.Helper()
	err := wait.PollUntilContextTimeout(e.t.Context(), 50*time.Millisecond, 20*time.Second, true, func(ctx context.Context) (bool, error) {
		pod, err := e.kube.CoreV1().Pods(e.ns).Get(ctx, name+"-0", metav1.GetOptions{})
		return err == nil && pod.DeletionTimestamp != nil, nil
	})
	if err != nil {
		e.t.Fatalf("pod of %s was not deleted by the garbage collector: %v", name, err)
	}
}

// waitNoPods waits until the namespace has no pod left (but a controller
// barrier's).
func (e *env) waitNoPods(limit time.Duration) {
	e.t.Helper()
	var left []string
	err := wait.PollUntilContextTimeout(e.t.Context(), 50*time.Millisecond, limit, true, func(ctx context.Context) (bool, error) {
		list, err := e.kube.CoreV1().Pods(e.ns).List(ctx, metav1.ListOptions{LabelSelector: "!" + barrierLabel})
		if err != nil {
			return false, err
		}
		left = nil
		for _, p := range list.Items {
			left = append(left, fmt.Sprintf("%s (deleting %v, finalizers %v, owners %d, annotations %v)",
				p.Name, p.DeletionTimestamp != nil, p.Finalizers, len(p.OwnerReferences), p.Annotations))
		}
		return len(left) == 0, nil
	})
	if err != nil {
		e.t.Fatalf("pods left: %v", left)
	}
}

// quota limits the namespace to n StatefulSets. The stack runs no quota
// controller, so the test writes the quota's status as it would (nothing used);
// the API server's quota admission then counts creations itself.
func (e *env) quota(n int) {
	e.t.Helper()
	hard := corev1.ResourceList{"count/statefulsets.apps": *resource.NewQuantity(int64(n), resource.DecimalSI)}
	q := &corev1.ResourceQuota{ObjectMeta: metav1.ObjectMeta{Name: "statefulsets"}, Spec: corev1.ResourceQuotaSpec{Hard: hard}}
	q, err := e.kube.CoreV1().ResourceQuotas(e.ns).Create(e.t.Context(), q, metav1.CreateOptions{})
	if err != nil {
		e.t.Fatal(err)
	}
	q.Status = corev1.ResourceQuotaStatus{Hard: hard, Used: corev1.ResourceList{"count/statefulsets.apps": resource.MustParse("0")}}
	if _, err := e.kube.CoreV1().ResourceQuotas(e.ns).UpdateStatus(e.t.Context(), q, metav1.UpdateOptions{}); err != nil {
		e.t.Fatal(err)
	}
}

// secrets lists the pool's Secrets by name.
func (e *env) secrets() []string {
	e.t.Helper()
	list, err := e.kube.CoreV1().Secrets(e.ns).List(e.t.Context(), metav1.ListOptions{LabelSelector: runnerpod.LabelPool + "=p"})
	if err != nil {
		e.t.Fatal(err)
	}
	var names []string
	for _, s := range list.Items {
		if s.DeletionTimestamp == nil {
			names = append(names, s.Name)
		}
	}
	return names
}

// foreignRunner registers an idle runner in the pool's organization as another
// deployment would, with its own registration token.
func (e *env) foreignRunner(name string) githubsim.Runner {
	e.t.Helper()
	tok, err := e.gh.RegistrationToken(e.t.Context(), e.pool.Scope())
	if err != nil {
		e.t.Fatal(err)
	}
	r, err := e.sim.Register(githubsim.Registration{Token: tok.Token, Scope: "organization/acme", Name: name, Labels: []string{"big"}, Ephemeral: true})
	if err != nil {
		e.t.Fatal(err)
	}
	return r
}

// crashedCreation leaves what a sweeper killed right after asking GitHub for a JIT
// config leaves: the runner's Secret (no owner, no credentials yet) and its
// registration. It returns the runner id.
func (e *env) crashedCreation() int64 {
	e.t.Helper()
	name := runnerpod.NewName("p")
	// As create does: the runner on the roster first; the sweep then ended
	// before it recorded anything else of it.
	if err := e.roster.Add(e.t.Context(), roster.Runner{Pool: "p", Name: runnerpod.PodName(name), Namespace: e.ns,
		Scope: e.pool.Scope().String()}, e.clock.Now()); err != nil {
		e.t.Fatal(err)
	}
	sec := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: name,
		Labels: map[string]string{runnerpod.LabelPool: "p", runnerpod.LabelRunner: name}}}
	if _, err := e.kube.CoreV1().Secrets(e.ns).Create(e.t.Context(), sec, metav1.CreateOptions{}); err != nil {
		e.t.Fatal(err)
	}
	jit, err := e.gh.JITConfig(e.t.Context(), e.pool.Scope(), runnerpod.PodName(name), []string{"big"}, githubapi.DefaultRunnerGroupID)
	if err != nil {
		e.t.Fatal(err)
	}
	return jit.RunnerID
}

// addFinalizer puts another controller's finalizer first on the runner's pod.
func (e *env) addFinalizer(name, finalizer string) {
	e.t.Helper()
	patch := fmt.Sprintf(`[{"op":"add","path":"/metadata/finalizers/0","value":%q}]`, finalizer)
	if _, err := e.kube.CoreV1().Pods(e.ns).Patch(context.Background(), name+"-0", types.JSONPatchType, []byte(patch), metav1.PatchOptions{}); err != nil {
		e.t.Fatal(err)
	}
}

// TestTemplatesTheServerRefusesAreRejectedAtLoad (item 6): each template below is
// one the API server refuses in a StatefulSet (checked by a server-side dry run);
// the reconciler refuses it when it is built, naming the pool and the field.
func TestTemplatesTheServerRefusesAreRejectedAtLoad(t *testing.T) {
	t.Parallel()
	kube, ns := testenv.Namespace(t)
	cases := []struct{ name, spec, field string }{
		{"restart policy", `{restartPolicy: Never, containers: [{name: runner, image: r}]}`, "spec.restartPolicy"},
		{"active deadline", `{activeDeadlineSeconds: 60, containers: [{name: runner, image: r}]}`, "spec.activeDeadlineSeconds"},
		{"sidecar without image", `{containers: [{name: runner, image: r}, {name: side}]}`, "spec.containers[1].image"},
		{"duplicate container", `{containers: [{name: runner, image: r}, {name: runner, image: s}]}`, "spec.containers[1].name"},
		{"init container name", `{initContainers: [{name: runner, image: r}], containers: [{name: runner, image: r}]}`, "spec.initContainers[0].name"},
		{"bad container name", `{containers: [{name: runner, image: r}, {name: Side_Car, image: s}]}`, "spec.containers[1].name"},
		{"unknown volume", `{containers: [{name: runner, image: r, volumeMounts: [{name: cache, mountPath: /c}]}]}`, "spec.containers[0].volumeMounts[0].name"},
		{"requests over limits", `{containers: [{name: runner, image: r, resources: {requests: {cpu: "2"}, limits: {cpu: "1"}}}]}`, "spec.containers[0].resources.requests"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			raw := fmt.Sprintf("pools:\n  - name: p\n    organization: acme\n    maxReplicas: 1\n    kubernetes:\n      namespace: %s\n      template: {spec: %s}\n", ns, c.spec)
			cfg, err := pool.Parse([]byte(raw))
			if err != nil {
				t.Fatal(err)
			}
			tmpl, err := runnerpod.Template(cfg.Pool("p"))
			if err != nil {
				t.Fatalf("decoding: %v", err)
			}
			sts := runnerpod.StatefulSet(runnerpod.Spec{Pool: cfg.Pool("p"), Template: tmpl, Name: "p-bcdfg", Creds: runnerpod.Credentials{Token: "t"}})
			_, err = kube.AppsV1().StatefulSets(ns).Create(t.Context(), sts, metav1.CreateOptions{DryRun: []string{metav1.DryRunAll}})
			if !apierrors.IsInvalid(err) {
				t.Fatalf("the API server accepts it (%v): the check is stricter than the server", err)
			}
			t.Logf("the API server: %v", err)
			_, err = reconcile.New(cfg, kube, nil, nil, nil, reconcile.Options{})
			if err == nil || !strings.Contains(err.Error(), "pool p") || !strings.Contains(err.Error(), c.field) {
				t.Fatalf("New: %v; want an error naming pool p and %s", err, c.field)
			}
		})
	}
}

func body(req *http.Request) string {
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

// TestStatefulSetDeletedMidSweepLeavesNothing: someone deletes a runner's
// StatefulSet with --cascade=orphan while a sweep is stopping the runner (after
// its list, before its writes). The sweep carries on — GitHub releases the
// runner — and the pod, which nothing else would delete, goes too.
func TestStatefulSetDeletedMidSweepLeavesNothing(t *testing.T) {
	t.Parallel()
	e := newEnv(t, true)
	e.mustSweep(1, time.Time{})
	name := e.statefulSets()[0]
	r := e.start(name)
	e.mustSweep(1, time.Time{})
	var deleted atomic.Bool
	e.useClient(func(req *http.Request) {
		if req.Method == http.MethodPatch && strings.HasSuffix(req.URL.Path, "/statefulsets/"+name) && !deleted.Swap(true) {
			e.deleteStatefulSetWith(name, metav1.DeletePropagationOrphan)
			e.waitStatefulSetGone(name)
		}
	})
	e.mustSweep(0, time.Time{})
	if !deleted.Load() {
		t.Fatal("the sweep never marked the runner: the test proves nothing")
	}
	if _, ok := e.sim.Runner(r.ID); ok {
		t.Fatal("the runner is still registered")
	}
	e.waitNoPods(10 * time.Second)
}

// waitStatefulSetGone waits until the StatefulSet is gone from the API server
// (an orphaning deletion waits for the garbage collector).
func (e *env) waitStatefulSetGone(name string) {
	e.t.Helper()
	err := wait.PollUntilContextTimeout(e.t.Context(), 20*time.Millisecond, 20*time.Second, true, func(ctx context.Context) (bool, error) {
		_, err := e.kube.AppsV1().StatefulSets(e.ns).Get(ctx, name, metav1.GetOptions{})
		return apierrors.IsNotFound(err), nil
	})
	if err != nil {
		e.t.Fatalf("statefulset %s not gone: %v", name, err)
	}
}

// useFailingClient gives the reconciler its own client on which a request fails
// when hook returns an error.
func (e *env) useFailingClient(hook func(*http.Request) error) {
	e.t.Helper()
	cfg := testenv.RESTConfig(e.t)
	cfg.Wrap(func(rt http.RoundTripper) http.RoundTripper { return failTransport{rt: rt, hook: hook} })
	kube, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		e.t.Fatal(err)
	}
	e.rec = e.newReconciler(kube, e.gh)
}

type failTransport struct {
	rt   http.RoundTripper
	hook func(*http.Request) error
}

func (f failTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	if err := f.hook(req); err != nil {
		return nil, err
	}
	return f.rt.RoundTrip(req)
}
