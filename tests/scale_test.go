package tests

import (
	"context"
	"crypto/rand"
	"crypto/rsa"
	"crypto/x509"
	"encoding/pem"
	"fmt"
	"net/http/httptest"
	"runtime/metrics"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"
	clocktesting "k8s.io/utils/clock/testing"

	"github.com/runnerscaler/runnerscaler/internal/githubapi"
	"github.com/runnerscaler/runnerscaler/internal/lease"
	"github.com/runnerscaler/runnerscaler/internal/pool"
	"github.com/runnerscaler/runnerscaler/internal/poolstate"
	"github.com/runnerscaler/runnerscaler/internal/reconcile"
	"github.com/runnerscaler/runnerscaler/internal/reservation"
	"github.com/runnerscaler/runnerscaler/internal/roster"
	"github.com/runnerscaler/runnerscaler/internal/runnerpod"
	"github.com/runnerscaler/runnerscaler/internal/scope"
	"github.com/runnerscaler/runnerscaler/internal/sweeper"
	"github.com/runnerscaler/runnerscaler/local/apispec"
	"github.com/runnerscaler/runnerscaler/local/githubsim"
	"github.com/runnerscaler/runnerscaler/local/testenv"
)

// The scale envelope: the sweeper, as deployed (one scheduled invocation a
// minute sweeping every pool, SWEEP_PARALLELISM pools at a time), on the local
// control plane (kube-apiserver, the StatefulSet controller, dynalite) against
// the GitHub simulator with GitHub's documented budget enforced
// (githubsim.GitHubBudget) for one App installation. Time is the sweeper's and
// GitHub's fake clock, stepped a minute between invocations (the schedule), so
// that GitHub's per-minute and per-hour windows pass as they would; each
// invocation's own duration is measured on the wall clock. The harness plays
// what is not the product: the webhook's reservations (2 per job: queued,
// then completed), the kubelet (pods are never scheduled: the harness marks
// them running) and the runner agents (registering with their JIT configs, and
// ending when their pod is deleted).

// scaleSpec is the size of a run.
type scaleSpec struct {
	pools, runners, parallelism int
	// steadySweeps are the invocations measured in the steady state.
	steadySweeps int
	// sample: check a sample of the exchanges against GitHub's description (see conform).
	sample bool
	// token: the pools register their runners with the registration token
	// (registration: token) instead of a JIT config each.
	token bool
}

// scaleWorld is one run's control plane, GitHub and sweeper.
type scaleWorld struct {
	tb      testing.TB
	spec    scaleSpec
	kube    kubernetes.Interface
	ns      string
	sim     *githubsim.Server
	gh      *githubapi.Client
	clock   *clocktesting.FakeClock
	cfg     *pool.Config
	rs      *reservation.Store // the webhook's: unmetered
	sweeper *sweeper.Sweeper
	meter   *capacityMeter
	started map[string]bool // pods the harness played as started
	t0      time.Time       // the jobs' arrival
	// description checks the simulator's exchanges after each invocation
	// (apispec.Verify would keep them all: far more than its record holds).
	description *apispec.Description
}

func newScaleWorld(tb testing.TB, spec scaleSpec) *scaleWorld {
	tb.Helper()
	key, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		tb.Fatal(err)
	}
	kube, ns := testenv.Namespace(tb)
	db, tableName := testenv.Table(tb)
	w := &scaleWorld{tb: tb, spec: spec, kube: kube, ns: ns, meter: &capacityMeter{}, started: map[string]bool{},
		clock: clocktesting.NewFakeClock(time.Now().Truncate(time.Second))}
	budget := githubsim.GitHubBudget()
	w.sim = githubsim.New(githubsim.Options{AppID: 1, AppKey: &key.PublicKey, Clock: w.clock,
		TokenLifetime: 48 * time.Hour, RegistrationTokenLifetime: 48 * time.Hour, Budget: &budget})
	if w.description, err = apispec.Load(); err != nil {
		tb.Fatal(err)
	}
	srv := httptest.NewServer(w.sim.Handler())
	tb.Cleanup(srv.Close)
	keyPEM := pem.EncodeToMemory(&pem.Block{Type: "RSA PRIVATE KEY", Bytes: x509.MarshalPKCS1PrivateKey(key)})
	if w.gh, err = githubapi.New(githubapi.Config{BaseURL: srv.URL, Clock: w.clock,
		Auth: githubapi.Auth{AppID: 1, InstallationID: 1, PrivateKey: keyPEM}}); err != nil {
		tb.Fatal(err)
	}
	var y strings.Builder
	y.WriteString("pools:\n")
	registration := pool.RegistrationJIT
	if spec.token {
		registration = pool.RegistrationToken
	}
	for i := range spec.pools {
		// One organization, one installation; no scheduler has this name: the
		// harness plays the kubelet.
		fmt.Fprintf(&y, "  - {name: p%d, organization: acme, registration: %s, maxReplicas: 100, scaleDownDelaySecondsAfterScaleOut: 60, "+
			"kubernetes: {namespace: %s, image: runner:1, template: {spec: {schedulerName: runnerscaler.dev/no-scheduler}}}}\n", i, registration, ns)
	}
	if w.cfg, err = pool.Parse([]byte(y.String())); err != nil {
		tb.Fatal(err)
	}
	metered := w.meter.client(db)
	w.rs = reservation.New(db, tableName, w.clock)
	store := reservation.New(metered, tableName, w.clock)
	rec, err := reconcile.New(w.cfg, kube, w.gh, w.clock, nil, reconcile.Options{JobLinks: store, Deployment: tableName, Roster: roster.NewStore(db, tableName),
		RunnerListMaxAge: sweeper.DefaultRunnerListMaxAge})
	if err != nil {
		tb.Fatal(err)
	}
	leases, err := lease.New(metered, tableName, w.clock, time.Minute)
	if err != nil {
		tb.Fatal(err)
	}
	if w.sweeper, err = sweeper.New(w.cfg, store, poolstate.NewStore(metered, tableName), leases, rec, w.clock, nil,
		sweeper.Options{Parallelism: spec.parallelism}); err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { releasePods(kube, ns) })
	return w
}

// jobs records what the webhook would for jobs 1..n, spread over the pools.
func (w *scaleWorld) jobs(state reservation.State) {
	w.tb.Helper()
	ctx := w.tb.Context()
	var wg sync.WaitGroup
	errs := make(chan error, w.spec.runners)
	sem := make(chan struct{}, 16)
	for j := range w.spec.runners {
		sem <- struct{}{}
		wg.Go(func() {
			defer func() { <-sem }()
			_, err := w.rs.Record(ctx, reservation.Delivery{Pool: fmt.Sprintf("p%d", j%w.spec.pools), JobID: int64(j + 1),
				State: state, Amount: 1, Duration: 3 * time.Hour})
			if err != nil {
				errs <- err
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		w.tb.Fatalf("recording a job: %v", err)
	}
}

// sweepCost is what one scheduled invocation took and spent.
type sweepCost struct {
	wall                   time.Duration
	heapPeak               uint64 // bytes of live heap objects at most during the sweep
	calls, units, refusals int    // GitHub requests, primary units, refused by the budget
	capacity               capacity
	failed                 int // pools whose sweep failed (retried next time)
}

// add sums costs (the wall times and peaks: the sum and the larger).
func (c sweepCost) add(o sweepCost) sweepCost {
	return sweepCost{wall: c.wall + o.wall, heapPeak: max(c.heapPeak, o.heapPeak), calls: c.calls + o.calls,
		units: c.units + o.units, refusals: c.refusals + o.refusals,
		capacity: capacity{c.capacity.rru + o.capacity.rru, c.capacity.wru + o.capacity.wru}, failed: c.failed + o.failed}
}

var scheduledEvent = sweeper.Event{Source: "aws.events", DetailType: "Scheduled Event"}

// sweep runs one scheduled invocation and measures it.
func (w *scaleWorld) sweep() sweepCost {
	w.tb.Helper()
	calls0, stats0, refused0, cap0 := productCalls(w.sim.Calls()), w.gh.Stats(), total(w.sim.Refusals()), w.meter.read()
	stop := make(chan struct{})
	peak := make(chan uint64)
	go samplePeakHeap(stop, peak)
	start := time.Now()
	ctx, cancel := context.WithTimeout(w.tb.Context(), lambdaTimeout) // Lambda's deadline
	r, err := w.sweeper.Handle(ctx, scheduledEvent)
	cancel()
	wall := time.Since(start)
	close(stop)
	if err != nil && len(r.Failed) == 0 {
		w.tb.Fatalf("scheduled sweep: %v", err)
	}
	stats := w.gh.Stats()
	c := sweepCost{wall: wall, heapPeak: <-peak, calls: productCalls(w.sim.Calls()) - calls0,
		refusals: total(w.sim.Refusals()) - refused0, capacity: w.meter.read().minus(cap0), failed: len(r.Failed)}
	c.units = c.calls - (stats.NotModified - stats0.NotModified) - c.refusals
	w.tb.Logf("invocation at +%v: %v, %d pools failed, %d skipped near the deadline, %d GitHub calls (%d units, %d refused), heap peak %.0f MiB",
		w.clock.Since(w.t0), wall.Round(time.Millisecond), c.failed, len(r.Skipped), c.calls, c.units, c.refusals, float64(c.heapPeak)/(1<<20))
	w.conform()
	return c
}

// conform checks the exchanges since the last check against GitHub's
// description: all of them, or with spec.sample the first of each kind (method,
// path with its numbers as #, status) of each invocation — validating every
// page of every list of a 2,000-runner run would take longer than the run.
func (w *scaleWorld) conform() {
	w.tb.Helper()
	rec := w.sim.Conformance()
	if w.spec.sample {
		seen := map[string]bool{}
		rec.Exchanges = slices.DeleteFunc(rec.Exchanges, func(x githubsim.Exchange) bool {
			kind := fmt.Sprint(x.Method, " ", strings.Map(func(r rune) rune {
				if r >= '0' && r <= '9' {
					return '#'
				}
				return r
			}, x.Path), " ", x.Status)
			dup := seen[kind]
			seen[kind] = true
			return dup
		})
	}
	report := w.description.Check(w.tb.Context(), rec)
	for _, f := range report.Failures {
		w.tb.Errorf("GitHub API conformance: %s", f)
	}
}

// skipStalled steps the clock to the reset of the installation's primary
// window when the invocation before made no GitHub call and changed nothing
// while that window is exhausted: every invocation until then would do the
// same. It returns the invocations skipped.
func (w *scaleWorld) skipStalled(c sweepCost, changed bool) int {
	reset := w.sim.RateReset(1)
	if c.calls > 0 || changed || reset.IsZero() || w.sim.RateRemaining(1) > 0 {
		return 0
	}
	skipped := int(reset.Sub(w.clock.Now()) / time.Minute)
	w.clock.SetTime(w.clock.Now().Add(time.Duration(skipped) * time.Minute))
	w.tb.Logf("primary budget exhausted: %d invocations skipped to its reset", skipped)
	return skipped
}

func total(m map[string]int) int {
	n := 0
	for _, v := range m {
		n += v
	}
	return n
}

// samplePeakHeap reports on peak, once stop closes, the most live heap bytes
// seen every 5 ms meanwhile (runtime/metrics: no stop of the world).
func samplePeakHeap(stop <-chan struct{}, peak chan<- uint64) {
	s := []metrics.Sample{{Name: "/memory/classes/heap/objects:bytes"}}
	var most uint64
	t := time.NewTicker(5 * time.Millisecond)
	defer t.Stop()
	for {
		metrics.Read(s)
		most = max(most, s[0].Value.Uint64())
		select {
		case <-stop:
			peak <- most
			return
		case <-t.C:
		}
	}
}

// counts are the StatefulSets in the namespace and the runners GitHub lists.
func (w *scaleWorld) counts() (statefulSets, runners int) {
	w.tb.Helper()
	list, err := w.kube.AppsV1().StatefulSets(w.ns).List(w.tb.Context(), metav1.ListOptions{})
	if err != nil {
		w.tb.Fatal(err)
	}
	return len(list.Items), len(w.sim.Runners())
}

// startPods plays the kubelet and the runner agent for every pod not yet
// started: it waits for the StatefulSet controller to make a pod per
// StatefulSet, marks each running (its runner idle) and registers its runner
// with its JIT config, or its registration token as the entrypoint would
// (config.sh --ephemeral with the pod's name).
func (w *scaleWorld) startPods() {
	w.tb.Helper()
	ctx := w.tb.Context()
	var pods *corev1.PodList
	err := wait.PollUntilContextTimeout(ctx, 250*time.Millisecond, 5*time.Minute, true, func(ctx context.Context) (bool, error) {
		sts, err := w.kube.AppsV1().StatefulSets(w.ns).List(ctx, metav1.ListOptions{})
		if err != nil {
			return false, err
		}
		pods, err = w.kube.CoreV1().Pods(w.ns).List(ctx, metav1.ListOptions{})
		return err == nil && len(pods.Items) >= len(sts.Items), err
	})
	if err != nil {
		w.tb.Fatalf("pods did not appear: %v", err)
	}
	now := metav1.NewTime(w.clock.Now().Add(-time.Minute))
	var todo []*corev1.Pod
	for i := range pods.Items {
		if p := &pods.Items[i]; !w.started[p.Name] && p.DeletionTimestamp == nil {
			todo = append(todo, p)
			w.started[p.Name] = true
		}
	}
	w.parallel(len(todo), func(i int) error {
		p := todo[i]
		p.Status = corev1.PodStatus{Phase: corev1.PodRunning, StartTime: &now,
			Conditions: []corev1.PodCondition{{Type: corev1.PodReady, Status: corev1.ConditionFalse, LastTransitionTime: now}},
			ContainerStatuses: []corev1.ContainerStatus{{Name: runnerpod.ContainerName,
				State: corev1.ContainerState{Running: &corev1.ContainerStateRunning{StartedAt: now}}}}}
		if _, err := w.kube.CoreV1().Pods(w.ns).UpdateStatus(ctx, p, metav1.UpdateOptions{}); err != nil {
			return err
		}
		sec, err := w.kube.CoreV1().Secrets(w.ns).Get(ctx, strings.TrimSuffix(p.Name, "-0"), metav1.GetOptions{})
		if err != nil {
			return err
		}
		if jit := sec.Data[runnerpod.SecretJITConfig]; len(jit) > 0 {
			_, err = w.sim.Register(githubsim.Registration{JITConfig: string(jit)})
			return err
		}
		_, err = w.sim.Register(githubsim.Registration{Token: string(sec.Data[runnerpod.SecretToken]),
			Scope: scope.Scope{Organization: "acme"}.String(), Name: p.Name, Labels: []string{"self-hosted"}, Ephemeral: true})
		return err
	})
}

// endStopped plays the entrypoint of every runner whose pod is being deleted:
// its idle runner ends at once (SIGTERM, 143).
func (w *scaleWorld) endStopped() {
	w.tb.Helper()
	ctx := w.tb.Context()
	pods, err := w.kube.CoreV1().Pods(w.ns).List(ctx, metav1.ListOptions{})
	if err != nil {
		w.tb.Fatal(err)
	}
	var todo []*corev1.Pod
	for i := range pods.Items {
		p := &pods.Items[i]
		if p.DeletionTimestamp != nil && len(p.Status.ContainerStatuses) > 0 && p.Status.ContainerStatuses[0].State.Running != nil {
			todo = append(todo, p)
		}
	}
	w.parallel(len(todo), func(i int) error {
		p := todo[i]
		p.Status.ContainerStatuses[0].State = corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{
			ExitCode: 143, Reason: "Error", FinishedAt: metav1.NewTime(w.clock.Now())}}
		_, err := w.kube.CoreV1().Pods(w.ns).UpdateStatus(ctx, p, metav1.UpdateOptions{})
		return err
	})
}

// parallel runs do(0..n-1), 16 at a time, and fails the test on an error.
func (w *scaleWorld) parallel(n int, do func(i int) error) {
	w.tb.Helper()
	var wg sync.WaitGroup
	var mu sync.Mutex
	var first error
	sem := make(chan struct{}, 16)
	for i := range n {
		sem <- struct{}{}
		wg.Go(func() {
			defer func() { <-sem }()
			if err := do(i); err != nil {
				mu.Lock()
				first = cmpErr(first, err)
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	if first != nil {
		w.tb.Fatal(first)
	}
}

func cmpErr(a, b error) error {
	if a != nil {
		return a
	}
	return b
}

// envelope is what a run measured. Times are schedule time (a minute per
// invocation) plus the last invocation's wall time.
type envelope struct {
	toHalf, toAll time.Duration // from the jobs queued to half, then all, of the StatefulSets and runners there
	burst         sweepCost     // summed over the burst's invocations
	burstSweeps   int
	burstMaxWall  time.Duration
	steady        sweepCost // summed over steadySweeps invocations
	steadySweeps  int
	down          time.Duration // from the jobs completed to nothing left
	downCost      sweepCost
	downSweeps    int            // invocations of the schedule, those skipped included
	maxWall       time.Duration  // the longest invocation of the run
	maxHeap       uint64         // the most live heap seen during an invocation
	refusalsBy    map[string]int // the budget's refusals over the run, by limit
}

// run drives a burst from zero to spec.runners, a steady state, and the scale
// back to zero, one scheduled invocation a minute, and measures each.
func (w *scaleWorld) run(maxSweeps int) envelope {
	w.tb.Helper()
	var e envelope
	note := func(c sweepCost) {
		e.maxWall, e.maxHeap = max(e.maxWall, c.wall), max(e.maxHeap, c.heapPeak)
	}
	n := w.spec.runners
	w.t0 = w.clock.Now()
	w.jobs(reservation.Queued)
	for i := 0; ; i++ {
		if i == maxSweeps {
			sts, rn := w.counts()
			w.tb.Fatalf("burst: %d StatefulSets, %d runners after %d invocations, want %d", sts, rn, i, n)
		}
		if i > 0 {
			w.clock.Step(time.Minute)
		}
		c := w.sweep()
		note(c)
		e.burst, e.burstSweeps, e.burstMaxWall = e.burst.add(c), i+1, max(e.burstMaxWall, c.wall)
		at := time.Duration(i)*time.Minute + c.wall
		w.startPods() // the kubelet starts the new runners, whose agents register (token mode)
		sts, rn := w.counts()
		if e.toHalf == 0 && min(sts, rn) >= n/2 {
			e.toHalf = at
		}
		if sts >= n && rn >= n {
			e.toAll = at
			break
		}
	}
	// Steady: past half the registration timeout of the last runners made (the
	// sweeps record their registrations then), then a quarter of an hour.
	for range 6 {
		w.clock.Step(time.Minute)
		note(w.sweep())
	}
	for range w.spec.steadySweeps {
		w.clock.Step(time.Minute)
		c := w.sweep()
		note(c)
		e.steady = e.steady.add(c)
	}
	e.steadySweeps = w.spec.steadySweeps
	if sts, rn := w.counts(); sts != n || rn != n {
		w.tb.Fatalf("steady: %d StatefulSets, %d runners, want %d", sts, rn, n)
	}
	w.jobs(reservation.Completed)
	before := n
	for i, swept := 0, 0; ; i++ {
		if swept == maxSweeps {
			sts, rn := w.counts()
			w.tb.Fatalf("scale to zero: %d StatefulSets, %d runners left after %d invocations", sts, rn, swept)
		}
		w.clock.Step(time.Minute)
		c := w.sweep()
		note(c)
		swept++
		e.downCost, e.downSweeps = e.downCost.add(c), i+1
		sts, rn := w.counts()
		if sts == 0 && rn == 0 {
			e.down = time.Duration(i)*time.Minute + c.wall
			break
		}
		w.endStopped()
		i += w.skipStalled(c, sts+rn != before)
		before = sts + rn
	}
	e.refusalsBy = w.sim.Refusals()
	return e
}

// TestScaleEnvelopeSmall runs the scale envelope at 30 pools and 200 runners
// with GitHub's budget enforced: the burst's 200 JIT configs (5 points each)
// exceed an endpoint's 900 points a minute, so GitHub refuses the 181st; the
// sweeper stops asking at the first refusal (its client waits the
// retry-after) and makes the rest in the next minute's invocation; every
// runner registers, the steady state spends no primary budget beyond
// recording registrations, and the pools go back to zero — every exchange
// conforming to GitHub's description.
func TestScaleEnvelopeSmall(t *testing.T) {
	t.Parallel()
	w := newScaleWorld(t, scaleSpec{pools: 30, runners: 200, parallelism: 4, steadySweeps: 2})
	e := w.run(15)
	if e.burstSweeps != 2 {
		t.Errorf("burst took %d invocations, want 2 (180 JIT configs a minute)", e.burstSweeps)
	}
	if got := e.refusalsBy[githubsim.LimitPoints]; got < 1 || got > 4*e.burstSweeps {
		t.Errorf("%d refusals by points a minute, want at least 1 and at most one per pool swept at once per invocation", got)
	}
	if e.refusalsBy[githubsim.LimitCore]+e.refusalsBy[githubsim.LimitConcurrent]+e.refusalsBy[githubsim.LimitRegistrations] != 0 {
		t.Errorf("refusals %v: want none but points a minute", e.refusalsBy)
	}
	if e.steady.units > 0 {
		t.Errorf("steady state spent %d primary units in %d invocations, want 0", e.steady.units, e.steadySweeps)
	}
	t.Logf("burst to %d: all in %v (%d invocations, %d GitHub calls, %d refused); steady %d calls/%d invocations; "+
		"to zero in %v (%d invocations, %d calls); longest invocation %v, heap peak %.0f MiB",
		w.spec.runners, e.toAll, e.burstSweeps, e.burst.calls, e.burst.refusals, e.steady.calls, e.steadySweeps,
		e.down, e.downSweeps, e.downCost.calls, e.maxWall, float64(e.maxHeap)/(1<<20))
}

// TestScaleEnvelopeSmallToken: the same with `registration: token`: one
// registration token serves every runner of the organization (one request,
// though 4 pools are swept at once), so the burst is made in the first
// invocation, with no JIT config and no refusal.
func TestScaleEnvelopeSmallToken(t *testing.T) {
	t.Parallel()
	w := newScaleWorld(t, scaleSpec{pools: 30, runners: 200, parallelism: 4, steadySweeps: 2, token: true})
	e := w.run(15)
	if e.burstSweeps != 1 {
		t.Errorf("burst took %d invocations, want 1", e.burstSweeps)
	}
	calls := w.sim.Calls()
	if n := calls["POST /orgs/{org}/actions/runners/generate-jitconfig"]; n != 0 {
		t.Errorf("%d JIT configs, want 0", n)
	}
	if n := calls["POST /orgs/{org}/actions/runners/registration-token"]; n != 1 {
		t.Errorf("%d registration tokens, want 1 (cached for the hour)", n)
	}
	if e.burst.refusals != 0 {
		t.Errorf("%d refusals during the burst, want none", e.burst.refusals)
	}
	t.Logf("burst to %d: all in %v (%d GitHub calls); steady %d calls/%d invocations; to zero in %v (%d invocations, %d calls)",
		w.spec.runners, e.toAll, e.burst.calls, e.steady.calls, e.steadySweeps, e.down, e.downSweeps, e.downCost.calls)
}

// lambdaTimeout is the sweeper's Timeout in template.yaml, which
// BenchmarkScaleEnvelope holds every invocation to.
const lambdaTimeout = 120 * time.Second

// BenchmarkScaleEnvelope measures the scale envelope at 300 pools and 2,000
// runners (2,000 queued jobs) in one organization served by one installation,
// GitHub's budget enforced (see the top of this file): the burst from zero
// (schedule time until half, then all, of the StatefulSets exist with their
// runners on GitHub; GitHub calls, refusals, DynamoDB units), the steady state
// (invocation time; GitHub calls and primary units an hour against the 5,000
// of one installation), the scale back to zero (time, calls), and per
// invocation the longest wall time and the most live Go heap — of this test
// process, the simulator's and the harness's included: an upper bound for the
// sweeper's memory in Lambda, not a measure of it. Every invocation must end
// within the template's sweeper timeout.
func BenchmarkScaleEnvelope(b *testing.B) {
	b.Run("registration=jit", func(b *testing.B) { benchmarkScaleEnvelope(b, false) })
	b.Run("registration=token", func(b *testing.B) { benchmarkScaleEnvelope(b, true) })
}

func benchmarkScaleEnvelope(b *testing.B, token bool) {
	for b.Loop() {
		w := newScaleWorld(b, scaleSpec{pools: 300, runners: 2000, parallelism: 4, steadySweeps: 5, sample: true, token: token})
		e := w.run(40)
		if e.maxWall > lambdaTimeout {
			b.Errorf("an invocation took %v, more than the sweeper's %v timeout", e.maxWall, lambdaTimeout)
		}
		perHour := 60 / float64(e.steadySweeps)
		b.ReportMetric(e.toHalf.Seconds(), "to-1000-s")
		b.ReportMetric(e.toAll.Seconds(), "to-2000-s")
		b.ReportMetric(float64(e.burstSweeps), "burst-invocations")
		b.ReportMetric(float64(e.burst.calls), "burst-github-calls")
		b.ReportMetric(float64(e.burst.refusals), "burst-github-refused")
		b.ReportMetric(e.burstMaxWall.Seconds(), "burst-invocation-max-s")
		b.ReportMetric(e.burst.capacity.rru, "burst-RRU")
		b.ReportMetric(e.burst.capacity.wru, "burst-WRU")
		b.ReportMetric(e.steady.wall.Seconds()/float64(e.steadySweeps), "steady-invocation-s")
		b.ReportMetric(float64(e.steady.calls)*perHour, "steady-github-calls/h")
		b.ReportMetric(float64(e.steady.units)*perHour, "steady-github-units/h")
		b.ReportMetric(e.steady.capacity.rru/float64(e.steadySweeps), "steady-RRU/invocation")
		b.ReportMetric(e.steady.capacity.wru/float64(e.steadySweeps), "steady-WRU/invocation")
		b.ReportMetric(e.down.Seconds(), "to-zero-s")
		b.ReportMetric(float64(e.downCost.calls), "to-zero-github-calls")
		b.ReportMetric(float64(e.downCost.refusals), "to-zero-github-refused")
		b.ReportMetric(e.maxWall.Seconds(), "invocation-max-s")
		b.ReportMetric(float64(e.maxHeap)/(1<<20), "heap-peak-MiB")
	}
}
