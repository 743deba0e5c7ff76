package reconcile_test

import (
	"context"
	"crypto/rand"
	"crypto/rsa"
	"crypto/x509"
	"encoding/pem"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"
	clocktesting "k8s.io/utils/clock/testing"

	"github.com/runnerscaler/runnerscaler/internal/githubapi"
	"github.com/runnerscaler/runnerscaler/internal/pool"
	"github.com/runnerscaler/runnerscaler/internal/poolstate"
	"github.com/runnerscaler/runnerscaler/internal/reconcile"
	"github.com/runnerscaler/runnerscaler/internal/reservation"
	"github.com/runnerscaler/runnerscaler/internal/roster"
	"github.com/runnerscaler/runnerscaler/internal/runnerpod"
	"github.com/runnerscaler/runnerscaler/internal/scaling"
	"github.com/runnerscaler/runnerscaler/local/apispec"
	"github.com/runnerscaler/runnerscaler/local/githubsim"
	"github.com/runnerscaler/runnerscaler/local/testenv"
)

func TestMain(m *testing.M) { testenv.Main(m) }

// appKey is the GitHub App's key, made once per test binary.
var appKey = sync.OnceValues(func() (*rsa.PrivateKey, error) { return rsa.GenerateKey(rand.Reader, 2048) })

// mustAppKey returns appKey, failing the test when it could not be made.
func mustAppKey(t testing.TB) *rsa.PrivateKey {
	t.Helper()
	key, err := appKey()
	if err != nil {
		t.Fatalf("generating the App key: %v", err)
	}
	return key
}

// env is one test's world: a namespace on the real API server (with the
// StatefulSet controller and garbage collector), a GitHub simulator, and a
// reconciler for one pool, all on a fake clock.
type env struct {
	t      *testing.T
	kube   kubernetes.Interface
	ns     string
	sim    *githubsim.Server
	gh     *githubapi.Client
	clock  *clocktesting.FakeClock
	pool   *pool.Pool
	rec    *reconcile.Reconciler
	status poolstate.Status
	// writes counts mutating Kubernetes requests; failAt > 0 fails that one.
	writes atomic.Int32
	failAt atomic.Int32
	reads  atomic.Int32
	// links plays the job↔runner link the webhook records.
	links *jobLinks
	// roster is the deployment's record of its runners (every reconciler of
	// the test's world shares it).
	roster *roster.Store
	// raw is a client of the API server that counts and fails nothing (the
	// test playing the kubelet).
	raw kubernetes.Interface
	// before, when set, runs before each request the reconciler sends (what
	// another writer does at that moment).
	before atomic.Pointer[func(*http.Request)]
	// refuse, when set, fails each request of the reconciler it returns an error for.
	refuse atomic.Pointer[func(*http.Request) error]
}

// jobLinks is an in-memory job↔runner link (reservation.Store's RunnerJobs),
// and the jobs' own records (its Job): completed holds the jobs whose
// `completed` their record has, by pool/id.
type jobLinks struct {
	mu        sync.Mutex
	jobs      map[string][]reservation.RunnerJob
	completed map[string]bool
	reads     int
	err       error
}

func (l *jobLinks) Job(_ context.Context, pool string, job int64) (reservation.Reservation, bool, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if !l.completed[fmt.Sprintf("%s/%d", pool, job)] {
		return reservation.Reservation{}, false, l.err
	}
	return reservation.Reservation{Pool: pool, JobID: job, State: reservation.Completed}, true, l.err
}

// complete records job of pool completed on its own record only (a
// `completed` delivery that named no runner).
func (l *jobLinks) complete(pool string, job int64) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.completed == nil {
		l.completed = map[string]bool{}
	}
	l.completed[fmt.Sprintf("%s/%d", pool, job)] = true
}

func (l *jobLinks) RunnerJobs(_ context.Context, runner string) ([]reservation.RunnerJob, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.reads++
	return slices.Clone(l.jobs[runner]), l.err
}

// link records that runner took job (in_progress) or finished it (completed) at at.
func (l *jobLinks) link(runner string, job int64, state reservation.State, at time.Time) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.jobs == nil {
		l.jobs = map[string][]reservation.RunnerJob{}
	}
	for i, j := range l.jobs[runner] {
		if j.JobID == job {
			l.jobs[runner][i].State, l.jobs[runner][i].AtMillis = state, at.UnixMilli()
			return
		}
	}
	l.jobs[runner] = append(l.jobs[runner], reservation.RunnerJob{Runner: runner, JobID: job, State: state, AtMillis: at.UnixMilli()})
}

func poolYAML(ns string, ephemeral bool, image string) string {
	return fmt.Sprintf(`
pools:
  - name: p
    organization: acme
    labels: [big]
    ephemeral: %v
    maxReplicas: 10
    kubernetes:
      namespace: %s
      image: %s
      template:
        spec:
          # No scheduler has this name: the stack's scheduler and kubelet leave
          # these pods alone, and the tests play the kubelet by writing pod status.
          schedulerName: runnerscaler.dev/no-scheduler
`, ephemeral, ns, image)
}

// newEnv makes a test's world; opts adjust the simulator's options.
func newEnv(t *testing.T, ephemeral bool, opts ...func(*githubsim.Options)) *env {
	t.Helper()
	key := mustAppKey(t)
	_, ns := testenv.Namespace(t)
	e := &env{t: t, ns: ns, clock: clocktesting.NewFakeClock(time.Now().Truncate(time.Second)), links: &jobLinks{},
		roster: testenv.Roster(t)}
	cfg := testenv.RESTConfig(t)
	cfg.Wrap(func(rt http.RoundTripper) http.RoundTripper { return faultyTransport{rt: rt, e: e} })
	kube, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	e.kube = kube
	if e.raw, err = kubernetes.NewForConfig(testenv.RESTConfig(t)); err != nil {
		t.Fatal(err)
	}
	simOpts := githubsim.Options{AppID: 1, AppKey: &key.PublicKey, Clock: e.clock, TokenLifetime: 48 * time.Hour,
		RegistrationTokenLifetime: 48 * time.Hour}
	for _, o := range opts {
		o(&simOpts)
	}
	e.sim = githubsim.New(simOpts)
	apispec.Verify(t, e.sim)
	srv := httptest.NewServer(e.sim.Handler())
	t.Cleanup(srv.Close)
	keyPEM := pem.EncodeToMemory(&pem.Block{Type: "RSA PRIVATE KEY", Bytes: x509.MarshalPKCS1PrivateKey(key)})
	e.gh, err = githubapi.New(githubapi.Config{BaseURL: srv.URL, Clock: e.clock, Auth: githubapi.Auth{AppID: 1, InstallationID: 1, PrivateKey: keyPEM}})
	if err != nil {
		t.Fatal(err)
	}
	e.setPool(ephemeral, "runner:1")
	t.Cleanup(e.releaseFinalizers)
	return e
}

func (e *env) setPool(ephemeral bool, image string) {
	e.t.Helper()
	cfg, err := pool.Parse([]byte(poolYAML(e.ns, ephemeral, image)))
	if err != nil {
		e.t.Fatal(err)
	}
	e.pool = cfg.Pool("p")
	e.rec, err = reconcile.New(cfg, e.kube, e.gh, e.clock, nil, reconcile.Options{JobLinks: e.links, Roster: e.roster})
	if err != nil {
		e.t.Fatal(err)
	}
}

// faultyTransport counts requests and fails the configured write.
type faultyTransport struct {
	rt http.RoundTripper
	e  *env
}

func (f faultyTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	if before := f.e.before.Load(); before != nil {
		(*before)(req)
	}
	if refuse := f.e.refuse.Load(); refuse != nil {
		if err := (*refuse)(req); err != nil {
			return nil, err
		}
	}
	if req.Method == http.MethodGet {
		f.e.reads.Add(1)
		return f.rt.RoundTrip(req)
	}
	n := f.e.writes.Add(1)
	if at := f.e.failAt.Load(); at > 0 && n == at {
		return nil, fmt.Errorf("injected failure of write %d (%s %s)", n, req.Method, req.URL.Path)
	}
	return f.rt.RoundTrip(req)
}

// sweep reconciles toward desired with a reservation effective at effective.
func (e *env) sweep(desired int, effective time.Time) error {
	e.t.Helper()
	d := scaling.Decision{Desired: desired, EffectiveTime: effective}
	return e.rec.Reconcile(e.t.Context(), e.pool, d, &e.status)
}

// mustSweep sweeps; when the sweep deleted the pod of an idle runner to stop it,
// it plays that runner's entrypoint and the kubelet (the container ends at once,
// as runner/entrypoint.sh ends an idle runner on SIGTERM) and sweeps once more,
// as the next scheduled sweep would.
func (e *env) mustSweep(desired int, effective time.Time) {
	e.t.Helper()
	e.sweepAgainWhenStale(desired, effective)
	if e.endStoppedRunners() {
		e.sweepAgainWhenStale(desired, effective)
	}
}

// sweepAgainWhenStale sweeps, and once more when the sweep left a runner to
// the next because another writer changed it after the sweep read it
// (ErrStale: the stack's controllers write too, the garbage collector
// deleting a pod the StatefulSet controller recreated from a stale cache);
// any other error, or a second ErrStale, fails the test.
func (e *env) sweepAgainWhenStale(desired int, effective time.Time) {
	e.t.Helper()
	err := e.sweep(desired, effective)
	if errors.Is(err, reconcile.ErrStale) {
		e.t.Logf("sweep left a runner to the next: %v", err)
		err = e.sweep(desired, effective)
	}
	if err != nil {
		e.t.Fatalf("sweep: %v", err)
	}
}

// endStoppedRunners plays the entrypoint and the kubelet for pods being deleted
// whose runner container runs and whose runner runs no job (by the simulator's
// truth): the container ends (143, SIGTERM). It reports whether it ended any.
func (e *env) endStoppedRunners() bool {
	e.t.Helper()
	list, err := e.raw.CoreV1().Pods(e.ns).List(e.t.Context(), metav1.ListOptions{})
	if err != nil {
		e.t.Fatal(err)
	}
	busy := map[string]bool{}
	for _, r := range e.sim.Runners() {
		busy[r.Name] = busy[r.Name] || r.Busy
	}
	ended := false
	for i := range list.Items {
		pod := &list.Items[i]
		if pod.DeletionTimestamp == nil || busy[pod.Name] || !slices.Contains(pod.Finalizers, runnerpod.Finalizer) {
			continue
		}
		ended = true // the next sweep unregisters it
		if len(pod.Status.ContainerStatuses) == 0 || pod.Status.ContainerStatuses[0].State.Running == nil {
			continue
		}
		pod.Status.ContainerStatuses[0].State = corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{
			ExitCode: 143, Reason: "Error", FinishedAt: metav1.NewTime(e.clock.Now())}}
		pod.Status.ContainerStatuses[0].Ready = false
		if _, err := e.raw.CoreV1().Pods(e.ns).UpdateStatus(e.t.Context(), pod, metav1.UpdateOptions{}); err != nil {
			e.t.Fatal(err)
		}
	}
	return ended
}

// statefulSets lists the StatefulSets not being deleted (but a controller
// barrier's) by name.
func (e *env) statefulSets() []string {
	e.t.Helper()
	list, err := e.kube.AppsV1().StatefulSets(e.ns).List(e.t.Context(), metav1.ListOptions{LabelSelector: "!" + barrierLabel})
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

// pods waits until the controller has made one pod per StatefulSet and returns them.
func (e *env) pods() map[string]*corev1.Pod {
	e.t.Helper()
	var out map[string]*corev1.Pod
	err := wait.PollUntilContextTimeout(e.t.Context(), 50*time.Millisecond, 20*time.Second, true, func(ctx context.Context) (bool, error) {
		want := e.statefulSets()
		list, err := e.kube.CoreV1().Pods(e.ns).List(ctx, metav1.ListOptions{LabelSelector: "!" + barrierLabel})
		if err != nil {
			return false, err
		}
		out = map[string]*corev1.Pod{}
		for i := range list.Items {
			p := &list.Items[i]
			if p.DeletionTimestamp == nil {
				out[strings.TrimSuffix(p.Name, "-0")] = p
			}
		}
		for _, name := range want {
			if out[name] == nil {
				return false, nil
			}
		}
		return true, nil
	})
	if err != nil {
		e.t.Fatalf("pods of %v never appeared: %v", e.statefulSets(), err)
	}
	return out
}

// start plays the kubelet and the runner agent: the pod becomes Running/Ready and
// its runner registers with the credentials in its Secret.
func (e *env) start(name string) githubsim.Runner {
	e.t.Helper()
	e.run(name)
	return e.register(name)
}

// run plays the kubelet: the pod becomes Running, its runner container running
// (since a minute ago: long enough for its job probe to have reported a job) and
// not ready (no job), the pod's Ready condition false since the container started.
func (e *env) run(name string) {
	e.t.Helper()
	pod := e.pods()[name]
	now := metav1.NewTime(e.clock.Now().Add(-time.Minute))
	pod.Status = corev1.PodStatus{Phase: corev1.PodRunning, StartTime: &now,
		Conditions:        []corev1.PodCondition{{Type: corev1.PodReady, Status: corev1.ConditionFalse, LastTransitionTime: now}},
		ContainerStatuses: []corev1.ContainerStatus{{Name: "runner", State: corev1.ContainerState{Running: &corev1.ContainerStateRunning{StartedAt: now}}}}}
	if _, err := e.kube.CoreV1().Pods(e.ns).UpdateStatus(e.t.Context(), pod, metav1.UpdateOptions{}); err != nil {
		e.t.Fatal(err)
	}
}

// register plays the runner agent registering with the credentials in its Secret now.
func (e *env) register(name string) githubsim.Runner {
	e.t.Helper()
	sec, err := e.kube.CoreV1().Secrets(e.ns).Get(e.t.Context(), name, metav1.GetOptions{})
	if err != nil {
		e.t.Fatal(err)
	}
	reg := githubsim.Registration{JITConfig: string(sec.Data[runnerpod.SecretJITConfig]), Token: string(sec.Data[runnerpod.SecretToken]),
		Scope: "organization/acme", Name: name + "-0", Labels: []string{"big"}, Ephemeral: e.pool.IsEphemeral()}
	r, err := e.sim.Register(reg)
	if err != nil {
		e.t.Fatalf("runner %s registering: %v", name, err)
	}
	return r
}

// exit plays the runner finishing its job and exiting 0.
func (e *env) exit(name string, runnerID int64) {
	e.t.Helper()
	if runnerID != 0 {
		e.finishJob(runnerID)
	}
	pod := e.pods()[name]
	pod.Status.ContainerStatuses = []corev1.ContainerStatus{{Name: "runner", State: corev1.ContainerState{
		Terminated: &corev1.ContainerStateTerminated{ExitCode: 0, Reason: "Completed", FinishedAt: metav1.NewTime(e.clock.Now())}}}}
	if _, err := e.kube.CoreV1().Pods(e.ns).UpdateStatus(e.t.Context(), pod, metav1.UpdateOptions{}); err != nil {
		e.t.Fatal(err)
	}
}

// waitGone waits for the garbage collector to remove the StatefulSet's pod and Secret.
func (e *env) waitGone(name string) {
	e.t.Helper()
	err := wait.PollUntilContextTimeout(e.t.Context(), 50*time.Millisecond, 20*time.Second, true, func(ctx context.Context) (bool, error) {
		_, perr := e.kube.CoreV1().Pods(e.ns).Get(ctx, name+"-0", metav1.GetOptions{})
		_, serr := e.kube.CoreV1().Secrets(e.ns).Get(ctx, name, metav1.GetOptions{})
		return apierrors.IsNotFound(perr) && apierrors.IsNotFound(serr), nil
	})
	if err != nil {
		e.t.Fatalf("pod and secret of %s were not garbage-collected: %v", name, err)
	}
}

// releaseFinalizers lets the namespace go after the test.
func (e *env) releaseFinalizers() {
	list, err := e.kube.CoreV1().Pods(e.ns).List(context.Background(), metav1.ListOptions{})
	if err != nil {
		return
	}
	for _, p := range list.Items {
		_, _ = e.kube.CoreV1().Pods(e.ns).Patch(context.Background(), p.Name, "application/merge-patch+json",
			[]byte(`{"metadata":{"finalizers":null}}`), metav1.PatchOptions{})
	}
}

// setBusy plays GitHub marking runner id busy (it took a job) or idle.
func (e *env) setBusy(id int64, busy bool) {
	e.t.Helper()
	if err := e.sim.SetBusy(id, busy); err != nil {
		e.t.Fatalf("marking runner %d busy=%v: %v", id, busy, err)
	}
}

// finishJob plays runner id finishing its job (an ephemeral runner is then
// removed, as GitHub does).
func (e *env) finishJob(id int64) {
	e.t.Helper()
	if err := e.sim.FinishJob(id); err != nil {
		e.t.Fatalf("runner %d finishing its job: %v", id, err)
	}
}
