package reconcile_test

import (
	"context"
	"crypto/x509"
	"encoding/pem"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"
	clocktesting "k8s.io/utils/clock/testing"

	"github.com/runnerscaler/runnerscaler/internal/githubapi"
	"github.com/runnerscaler/runnerscaler/internal/pool"
	"github.com/runnerscaler/runnerscaler/internal/poolstate"
	"github.com/runnerscaler/runnerscaler/internal/reconcile"
	"github.com/runnerscaler/runnerscaler/internal/runnerpod"
	"github.com/runnerscaler/runnerscaler/internal/scaling"
	"github.com/runnerscaler/runnerscaler/local/apispec"
	"github.com/runnerscaler/runnerscaler/local/githubsim"
	"github.com/runnerscaler/runnerscaler/local/testenv"
)

const benchPools, benchRunners = 50, 10

// BenchmarkSweep50x10 sweeps 50 pools of 10 registered, idle runners (500
// StatefulSets and pods on the local API server), four pools at a time as the
// sweeper does: once with nothing to do, and then after every pool's desired
// count drops to 8, the sweeps that stop 100 runners (mark and delete the pod;
// the benchmark plays each entrypoint ending its idle runner; unregister and
// delete). It reports wall time, Kubernetes reads and writes, GitHub calls and
// the rate-limit units they cost, and the number of sweeps the stop took.
func BenchmarkSweep50x10(b *testing.B) {
	w := newBenchWorld(b)
	w.sweepAll(b, benchRunners) // create
	w.startAll(b)
	w.sweepAll(b, benchRunners) // record registrations
	w.clock.Step(11 * time.Minute)
	w.sweepAll(b, benchRunners) // past the post-creation cleanup window
	for b.Loop() {
		steady := w.measure(b, benchRunners)
		changed, sweeps := w.measureStop(b, benchRunners-2)
		b.ReportMetric(float64(sweeps), "change-sweeps")
		for name, m := range map[string]sweepCost{"steady": steady, "change": changed} {
			b.ReportMetric(m.wall.Seconds(), name+"-s")
			b.ReportMetric(float64(m.reads)/benchPools, name+"-kube-reads/pool")
			b.ReportMetric(float64(m.writes), name+"-kube-writes")
			b.ReportMetric(float64(m.ghCalls), name+"-github-calls")
			b.ReportMetric(float64(m.units), name+"-github-rate-units")
		}
		if steady.writes != 0 || steady.reads != 2*benchPools || steady.units != 0 {
			b.Fatalf("steady sweep: %+v, want 0 writes, 2 reads per pool, 0 rate units", steady)
		}
		w.measure(b, benchRunners) // and back, so b.Loop may run again
		w.startAll(b)
		w.sweepAll(b, benchRunners)
		w.clock.Step(11 * time.Minute)
	}
}

type sweepCost struct {
	wall                          time.Duration
	reads, writes, ghCalls, units int
}

type benchWorld struct {
	kube     kubernetes.Interface
	ns       string
	sim      *githubsim.Server
	gh       *githubapi.Client
	clock    *clocktesting.FakeClock
	cfg      *pool.Config
	rec      *reconcile.Reconciler
	status   []poolstate.Status
	reads    atomic.Int64
	writes   atomic.Int64
	registry sync.Map // pod name → registered
}

func newBenchWorld(b *testing.B) *benchWorld {
	key := mustAppKey(b)
	_, ns := testenv.Namespace(b)
	w := &benchWorld{ns: ns, clock: clocktesting.NewFakeClock(time.Now().Truncate(time.Second)), status: make([]poolstate.Status, benchPools)}
	rc := testenv.RESTConfig(b)
	rc.Wrap(func(rt http.RoundTripper) http.RoundTripper { return countingTransport{rt: rt, w: w} })
	var err error
	if w.kube, err = kubernetes.NewForConfig(rc); err != nil {
		b.Fatal(err)
	}
	w.sim = githubsim.New(githubsim.Options{AppID: 1, AppKey: &key.PublicKey, Clock: w.clock, TokenLifetime: 48 * time.Hour, RegistrationTokenLifetime: 48 * time.Hour})
	apispec.Verify(b, w.sim)
	srv := httptest.NewServer(w.sim.Handler())
	b.Cleanup(srv.Close)
	keyPEM := pem.EncodeToMemory(&pem.Block{Type: "RSA PRIVATE KEY", Bytes: x509.MarshalPKCS1PrivateKey(key)})
	if w.gh, err = githubapi.New(githubapi.Config{BaseURL: srv.URL, Clock: w.clock, Auth: githubapi.Auth{AppID: 1, InstallationID: 1, PrivateKey: keyPEM}}); err != nil {
		b.Fatal(err)
	}
	var y strings.Builder
	y.WriteString("pools:\n")
	for i := range benchPools {
		// No scheduler has this name (see poolYAML): the benchmark plays the kubelet.
		fmt.Fprintf(&y, "  - {name: p%d, organization: org-%d, maxReplicas: 20, kubernetes: {namespace: %s, image: runner:1, "+
			"template: {spec: {schedulerName: runnerscaler.dev/no-scheduler}}}}\n", i, i%10, ns)
	}
	if w.cfg, err = pool.Parse([]byte(y.String())); err != nil {
		b.Fatal(err)
	}
	if w.rec, err = reconcile.New(w.cfg, w.kube, w.gh, w.clock, nil, reconcile.Options{JobLinks: &jobLinks{}, Roster: testenv.Roster(b)}); err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { releaseAll(w.kube, ns) })
	return w
}

type countingTransport struct {
	rt http.RoundTripper
	w  *benchWorld
}

func (c countingTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	if req.Method == http.MethodGet {
		c.w.reads.Add(1)
	} else {
		c.w.writes.Add(1)
	}
	return c.rt.RoundTrip(req)
}

func (w *benchWorld) sweepAll(b *testing.B, desired int) {
	sem := make(chan struct{}, 4)
	var wg sync.WaitGroup
	for i := range w.cfg.Pools {
		sem <- struct{}{}
		wg.Go(func() {
			defer func() { <-sem }()
			if err := w.rec.Reconcile(b.Context(), &w.cfg.Pools[i], scaling.Decision{Desired: desired}, &w.status[i]); err != nil {
				b.Error(err)
			}
		})
	}
	wg.Wait()
}

// measureStop sweeps toward desired until GitHub lists desired runners per
// pool, playing each stopped runner's entrypoint between sweeps, and sums the
// cost of those sweeps.
func (w *benchWorld) measureStop(b *testing.B, desired int) (sweepCost, int) {
	var total sweepCost
	for sweeps := 1; sweeps <= 5; sweeps++ {
		m := w.measure(b, desired)
		total.wall += m.wall
		total.reads, total.writes, total.ghCalls, total.units = total.reads+m.reads, total.writes+m.writes,
			total.ghCalls+m.ghCalls, total.units+m.units
		if len(w.sim.Runners()) == benchPools*desired {
			return total, sweeps
		}
		w.endStopped(b)
	}
	b.Fatalf("%d GitHub runners after 5 sweeps, want %d", len(w.sim.Runners()), benchPools*desired)
	return total, 0
}

// endStopped plays the entrypoint of every runner whose pod is being deleted:
// its idle runner ends at once (SIGTERM, 143).
func (w *benchWorld) endStopped(b *testing.B) {
	pods, err := w.kube.CoreV1().Pods(w.ns).List(b.Context(), metav1.ListOptions{})
	if err != nil {
		b.Fatal(err)
	}
	for i := range pods.Items {
		p := &pods.Items[i]
		if p.DeletionTimestamp == nil || len(p.Status.ContainerStatuses) == 0 || p.Status.ContainerStatuses[0].State.Running == nil {
			continue
		}
		p.Status.ContainerStatuses[0].State = corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{
			ExitCode: 143, Reason: "Error", FinishedAt: metav1.NewTime(w.clock.Now())}}
		if _, err := w.kube.CoreV1().Pods(w.ns).UpdateStatus(b.Context(), p, metav1.UpdateOptions{}); err != nil {
			b.Fatal(err)
		}
	}
}

func (w *benchWorld) measure(b *testing.B, desired int) sweepCost {
	r0, w0, g0 := w.reads.Load(), w.writes.Load(), w.gh.Stats().Calls
	u0 := w.sim.RateRemaining(1)
	start := time.Now()
	w.sweepAll(b, desired)
	return sweepCost{wall: time.Since(start), reads: int(w.reads.Load() - r0), writes: int(w.writes.Load() - w0),
		ghCalls: w.gh.Stats().Calls - g0, units: u0 - w.sim.RateRemaining(1)}
}

// startAll plays kubelet and agent for every pod not yet started.
func (w *benchWorld) startAll(b *testing.B) {
	var pods *corev1.PodList
	err := wait.PollUntilContextTimeout(b.Context(), 200*time.Millisecond, 2*time.Minute, true, func(ctx context.Context) (bool, error) {
		sts, err := w.kube.AppsV1().StatefulSets(w.ns).List(ctx, metav1.ListOptions{})
		if err != nil {
			return false, err
		}
		pods, err = w.kube.CoreV1().Pods(w.ns).List(ctx, metav1.ListOptions{})
		return err == nil && len(pods.Items) >= len(sts.Items), err
	})
	if err != nil {
		b.Fatalf("pods did not appear: %v", err)
	}
	// Started a minute ago, idle: the runner container runs and is not ready
	// (its job probe reports no job).
	now := metav1.NewTime(w.clock.Now().Add(-time.Minute))
	for i := range pods.Items {
		p := &pods.Items[i]
		if _, done := w.registry.Load(p.Name); done || p.DeletionTimestamp != nil {
			continue
		}
		p.Status = corev1.PodStatus{Phase: corev1.PodRunning, StartTime: &now,
			Conditions: []corev1.PodCondition{{Type: corev1.PodReady, Status: corev1.ConditionFalse, LastTransitionTime: now}},
			ContainerStatuses: []corev1.ContainerStatus{{Name: runnerpod.ContainerName,
				State: corev1.ContainerState{Running: &corev1.ContainerStateRunning{StartedAt: now}}}}}
		if _, err := w.kube.CoreV1().Pods(w.ns).UpdateStatus(b.Context(), p, metav1.UpdateOptions{}); err != nil {
			b.Fatal(err)
		}
		sec, err := w.kube.CoreV1().Secrets(w.ns).Get(b.Context(), strings.TrimSuffix(p.Name, "-0"), metav1.GetOptions{})
		if err != nil {
			b.Fatal(err)
		}
		if _, err := w.sim.Register(githubsim.Registration{JITConfig: string(sec.Data[runnerpod.SecretJITConfig])}); err != nil {
			b.Fatal(err)
		}
		w.registry.Store(p.Name, true)
	}
}

func releaseAll(kube kubernetes.Interface, ns string) {
	list, err := kube.CoreV1().Pods(ns).List(context.Background(), metav1.ListOptions{})
	if err != nil {
		return
	}
	for _, p := range list.Items {
		_, _ = kube.CoreV1().Pods(ns).Patch(context.Background(), p.Name, "application/merge-patch+json",
			[]byte(`{"metadata":{"finalizers":null}}`), metav1.PatchOptions{})
	}
}
