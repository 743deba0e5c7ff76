// Package loop closes the loop on the local stack: the GitHub simulator acts as
// the Actions service (jobs queue, and it sends signed workflow_job deliveries to
// the real webhook handler over HTTP), the real sweeper runs on a short schedule
// plus the webhook's nudges against the real kube-apiserver, and the runners are
// real pods on the stack's node: the kubelet runs the runner image
// (local/runnerimage: runner/entrypoint.sh under tini around the fake actions
// runner of local/fakerunner), whose runners register with the credentials the
// sweeper gave them, long-poll the simulator for jobs, run each in a
// Runner.Worker process, and (ephemeral ones) exit 0 after one. Restarts, crash
// loops, SIGTERM and grace periods, evictions and hand deletions are the
// kubelet's own. An invariant monitor (Monitor) judges what happens to runner
// pods and jobs by the simulator's truth. `make run`, the end-to-end tests, the
// chaos suite and the benchmarks use it.
//
// What is still simulated, and why:
//   - GitHub and its Actions service (local/githubsim): there is no local GitHub.
//     The runner's protocol is the simulator's own (its /_runner/ endpoints), not
//     actions/runner's private broker protocol; a job's worker runs the job's
//     script, if it has one, and otherwise sleeps for the job's duration.
//   - GitHub's REST busy flag lies (docs/concepts.md) when Options.BusyLie
//     says so: the simulator then shows a runner idle for a while after it took
//     a job and at moments mid-job, and a removal in such a moment loses the
//     job (githubsim.BusyLie), which the monitor counts against the product.
//   - A job whose runner died mid-job (its worker killed with its container) is
//     failed by the loop on the Actions service's behalf once its runner has been
//     seen offline for Options.LostAfter (failLostJobs); GitHub does it after
//     minutes, when the worker stops renewing the job's lock.
//   - Lambda: the webhook and the sweeper run in-process (a nudge is a goroutine,
//     a killed invocation a cancelled context, a throttled function PauseSweeps).
//   - The OOM kill is the kernel's, at the container's memory limit, but the
//     allocation that triggers it is a process of the machine charged to the
//     container's memory cgroup, not a job step, and the victim is aimed: on this
//     cgroup v1 machine the OOM killer kills one process of the container, so
//     OOMKill makes it the container's init (see OOMKill).
package loop

import (
	"bytes"
	"context"
	"crypto/hmac"
	"crypto/rand"
	"crypto/rsa"
	"crypto/sha256"
	"crypto/x509"
	"encoding/hex"
	"encoding/pem"
	"fmt"
	"io"
	"log/slog"
	mrand "math/rand/v2"
	"net"
	"net/http"
	"net/http/httptest"
	"sync"
	"sync/atomic"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/utils/clock"

	"github.com/runnerscaler/runnerscaler/internal/emf"
	"github.com/runnerscaler/runnerscaler/internal/githubapi"
	"github.com/runnerscaler/runnerscaler/internal/groupaccess"
	"github.com/runnerscaler/runnerscaler/internal/lease"
	"github.com/runnerscaler/runnerscaler/internal/nudge"
	"github.com/runnerscaler/runnerscaler/internal/pool"
	"github.com/runnerscaler/runnerscaler/internal/poolstate"
	"github.com/runnerscaler/runnerscaler/internal/queuewait"
	"github.com/runnerscaler/runnerscaler/internal/reconcile"
	"github.com/runnerscaler/runnerscaler/internal/redeliver"
	"github.com/runnerscaler/runnerscaler/internal/rerun"
	"github.com/runnerscaler/runnerscaler/internal/reservation"
	"github.com/runnerscaler/runnerscaler/internal/roster"
	"github.com/runnerscaler/runnerscaler/internal/runnerversion"
	"github.com/runnerscaler/runnerscaler/internal/sweeper"
	"github.com/runnerscaler/runnerscaler/internal/webhook"
	"github.com/runnerscaler/runnerscaler/local/githubsim"
)

// Options configure a loop.
type Options struct {
	Pools *pool.Config
	DB    *dynamodb.Client
	Table string
	Kube  kubernetes.Interface
	// SweepEvery is the sweeper's schedule (default 2s; in AWS one minute).
	SweepEvery time.Duration
	// NoFastPath turns the webhook's nudges off (the schedule alone drives scale-up).
	NoFastPath bool
	// Secret is the webhook secret (default "loop-webhook-secret").
	Secret string
	// WebhookAddr, when set, is where the webhook listens (default: any free port).
	WebhookAddr string
	// WebhookMetrics, when set, receives the webhook's metric lines, as the
	// function writes them to its stdout.
	WebhookMetrics io.Writer
	// Chaos injects faults into the deliveries.
	Chaos Chaos
	// NoRedelivery turns off the sweeper's recovery of lost deliveries.
	NoRedelivery bool
	// SweeperKube, when set, is the sweeper's Kubernetes client (a faulty one, for
	// chaos); the monitor and the faults keep using Kube.
	SweeperKube kubernetes.Interface
	// RegistrationTimeout is the reconciler's (default: its own, 10 minutes).
	RegistrationTimeout time.Duration
	// IdleConfirmation is the reconciler's (default: ScaledIdleConfirmation of
	// SweepEvery); keep it over the simulator's busy-flag lag when that lies.
	IdleConfirmation time.Duration
	// SessionTimeout: a runner whose agent has not polled the simulator for this
	// long goes offline (default 15s).
	SessionTimeout time.Duration
	// LostAfter: a job whose runner has been offline this long fails (default 10s).
	LostAfter time.Duration
	// Lease is the sweeper's lease length (default 30s; chaos uses a short one, as
	// killed sweepers leave their leases to expire).
	Lease time.Duration
	// WaitBound: a job queued longer than this while its pool has fewer runners
	// than its jobs need and room for more is a violation (default 30s; see
	// judgeWaits).
	WaitBound time.Duration
	// BusyLie, when set, makes the simulator's REST busy flag lie as GitHub's
	// does (githubsim.BusyLie; ScaledBusyLie is GitHub's in the loop's time).
	BusyLie *githubsim.BusyLie
	// RunnerReleases are the actions/runner releases the simulator publishes
	// (githubsim.Options.RunnerReleases).
	RunnerReleases []githubsim.RunnerRelease
	// SweeperMetrics, when set, also receives the sweeper's metric lines.
	SweeperMetrics io.Writer
	Log            *slog.Logger
}

// Chaos says which delivery faults to inject.
type Chaos struct {
	// Drop is the fraction of delivery attempts lost before reaching the webhook.
	Drop float64
	// Duplicate is the fraction of deliveries sent twice.
	Duplicate float64
	// Delay is the longest random delay before a delivery; concurrent deliveries
	// overtake each other.
	Delay time.Duration
	// KillSweeps is the fraction of sweeper invocations killed at a random point
	// (their context ends within 150 ms, as a Lambda that times out or crashes).
	KillSweeps float64
}

// Faults counts what Chaos and the node faults (faults.go) injected.
type Faults struct {
	Dropped, Duplicated, Delayed, KilledSweeps                          int
	RunnerKills, OOMKills, PodDeletes, Drains, Evictions, SweeperPauses int
	// ThrottledSweeps counts sweeper invocations dropped while paused.
	ThrottledSweeps int
	// KubeletRestarts counts restarts of the node's kubelet (RestartKubelet).
	KubeletRestarts int
	// EvictionsRefused counts the drains' evictions the API refused (429: a
	// busy runner's disruption budget); they hit no pod.
	EvictionsRefused int
}

// Loop is a running closed loop.
type Loop struct {
	Sim        *githubsim.Server
	WebhookURL string
	Monitor    *Monitor

	opts    Options
	secret  []byte
	cancel  context.CancelFunc
	wg      sync.WaitGroup
	servers []*httptest.Server
	status  *poolstate.Store
	faultMu sync.Mutex
	faults  Faults

	gh        *githubapi.Client
	ghURL     string
	recoverer *redeliver.Recoverer
	sweeper   atomic.Pointer[sweeper.Sweeper]
	pools     atomic.Pointer[pool.Config]
	// pausedUntil (unix nanoseconds): no sweep runs before then (PauseSweeps).
	pausedUntil atomic.Int64
	lost        atomic.Int64                      // jobs failed by failLostJobs
	metrics     *metricSums                       // the sweeper's EMF records, summed (busysignals.go)
	emf         *emf.Writer                       // writes them into metrics
	usage       usageMeter                        // the functions' invocations (usage.go)
	informers   []informers.SharedInformerFactory // the monitor's watches of runner pods
	// shortSince: pool → since when it has lacked runners for its waiting jobs
	// (judgeWaits, in the watchJobs goroutine only).
	shortSince map[string]time.Time
	// swept: when each pool's last clean sweeps began (judgeWaits' barrier).
	swept cleanSweeps
	// nudgesSent counts the webhook's nudges; nudgesDone those whose sweeper
	// invocation has returned (Nudges).
	nudgesSent, nudgesDone atomic.Int64
}

// Start brings the loop up; Stop ends it.
func Start(ctx context.Context, opts Options) (*Loop, error) {
	if opts.SweepEvery <= 0 {
		opts.SweepEvery = 2 * time.Second
	}
	if opts.IdleConfirmation <= 0 {
		opts.IdleConfirmation = ScaledIdleConfirmation(opts.SweepEvery)
	}
	if opts.Lease <= 0 {
		opts.Lease = 30 * time.Second
	}
	if opts.WaitBound <= 0 {
		opts.WaitBound = 30 * time.Second
	}
	if opts.SessionTimeout <= 0 {
		opts.SessionTimeout = 15 * time.Second
	}
	if opts.LostAfter <= 0 {
		opts.LostAfter = 10 * time.Second
	}
	if opts.Log == nil {
		opts.Log = slog.New(slog.DiscardHandler)
	}
	ctx, cancel := context.WithCancel(ctx)
	if opts.Secret == "" {
		opts.Secret = "loop-webhook-secret"
	}
	l := &Loop{opts: opts, secret: []byte(opts.Secret), cancel: cancel, Monitor: newMonitor(opts.Log),
		shortSince: map[string]time.Time{}, metrics: newMetricSums()}
	var err error
	var sweeperMetrics io.Writer = l.metrics
	if opts.SweeperMetrics != nil {
		sweeperMetrics = io.MultiWriter(l.metrics, opts.SweeperMetrics)
	}
	if l.emf, err = emf.NewWriter(sweeperMetrics, ""); err != nil {
		cancel()
		return nil, err
	}
	if err := l.build(ctx); err != nil {
		cancel()
		l.closeServers()
		return nil, err
	}
	if err := l.watchPods(ctx); err != nil {
		cancel()
		l.closeServers()
		return nil, err
	}
	l.wg.Go(func() { l.schedule(ctx) })
	l.wg.Go(func() { l.watchJobs(ctx) })
	l.wg.Go(func() { l.failLostJobs(ctx) })
	return l, nil
}

func (l *Loop) build(ctx context.Context) error {
	key, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		return err
	}
	l.Sim = githubsim.New(githubsim.Options{AppID: 1, AppKey: &key.PublicKey, SessionTimeout: l.opts.SessionTimeout,
		BusyLie: l.opts.BusyLie, RunnerReleases: l.opts.RunnerReleases})
	ghSrv := l.serve(l.Sim.Handler())
	keyPEM := pem.EncodeToMemory(&pem.Block{Type: "RSA PRIVATE KEY", Bytes: x509.MarshalPKCS1PrivateKey(key)})
	gh, err := githubapi.New(githubapi.Config{BaseURL: ghSrv.URL, Auth: githubapi.Auth{AppID: 1, InstallationID: 1, PrivateKey: keyPEM}})
	if err != nil {
		return err
	}
	l.gh, l.ghURL = gh, ghSrv.URL
	if !l.opts.NoRedelivery {
		app, err := githubapi.NewApp(githubapi.Config{BaseURL: ghSrv.URL, Auth: githubapi.Auth{AppID: 1, PrivateKey: keyPEM}})
		if err != nil {
			return err
		}
		l.recoverer = redeliver.New(app, clock.RealClock{}, 0, l.opts.Log)
	}
	store := reservation.New(l.opts.DB, l.opts.Table, clock.RealClock{})
	l.status = poolstate.NewStore(l.opts.DB, l.opts.Table)
	if err := l.UpdatePools(l.opts.Pools); err != nil {
		return err
	}
	hopts := []webhook.Option{webhook.WithLogger(l.opts.Log),
		webhook.WithQueueWaits(queuewait.New(l.opts.DB, l.opts.Table, clock.RealClock{})),
		webhook.WithFailures(rerun.NewStore(l.opts.DB, l.opts.Table)),
		webhook.WithRoster(roster.NewStore(l.opts.DB, l.opts.Table)),
		webhook.WithGroupAccess(groupaccess.NewStore(l.opts.DB, l.opts.Table))}
	if l.opts.WebhookMetrics != nil {
		metrics, err := emf.NewWriter(l.opts.WebhookMetrics, "")
		if err != nil {
			return err
		}
		hopts = append(hopts, webhook.WithMetrics(metrics))
	}
	if !l.opts.NoFastPath {
		hopts = append(hopts, webhook.WithNudger(nudge.EventFunc(func(_ context.Context, ev sweeper.Event) error {
			l.nudgesSent.Add(1)
			l.wg.Go(func() {
				defer l.nudgesDone.Add(1)
				l.invoke(ctx, ev)
			})
			return nil
		})))
	}
	mux := http.NewServeMux()
	mux.Handle("POST /webhook", l.usage.webhook(webhook.New(l.secret, l.opts.Pools, store, hopts...).HTTPHandler()))
	wh := httptest.NewUnstartedServer(mux)
	if l.opts.WebhookAddr != "" {
		ln, err := net.Listen("tcp", l.opts.WebhookAddr)
		if err != nil {
			return fmt.Errorf("webhook listener: %w", err)
		}
		wh.Listener.Close()
		wh.Listener = ln
	}
	wh.Start()
	l.servers = append(l.servers, wh)
	l.WebhookURL = wh.URL + "/webhook"
	l.Sim.OnDelivery(l.post)
	return nil
}

func (l *Loop) serve(h http.Handler) *httptest.Server {
	s := httptest.NewServer(h)
	l.servers = append(l.servers, s)
	return s
}

// post signs a delivery and sends it to the webhook, as GitHub does, and returns
// the status (0 when the request failed), which the App's delivery log records.
func (l *Loop) post(event, delivery string, payload []byte) int {
	c := l.opts.Chaos
	if c.Delay > 0 {
		l.fault(func(f *Faults) { f.Delayed++ })
		time.Sleep(time.Duration(mrand.Int64N(int64(c.Delay))))
	}
	if mrand.Float64() < c.Drop {
		l.fault(func(f *Faults) { f.Dropped++ })
		return 0 // lost on the way: GitHub logs a failed attempt
	}
	if mrand.Float64() < c.Duplicate {
		l.fault(func(f *Faults) { f.Duplicated++ })
		l.send(event, delivery, payload)
	}
	return l.send(event, delivery, payload)
}

func (l *Loop) fault(f func(*Faults)) {
	l.faultMu.Lock()
	defer l.faultMu.Unlock()
	f(&l.faults)
}

// Faults returns the faults injected so far.
func (l *Loop) Faults() Faults {
	l.faultMu.Lock()
	defer l.faultMu.Unlock()
	return l.faults
}

func (l *Loop) send(event, delivery string, payload []byte) int {
	mac := hmac.New(sha256.New, l.secret)
	mac.Write(payload)
	req, _ := http.NewRequest(http.MethodPost, l.WebhookURL, bytes.NewReader(payload))
	req.Header.Set("X-GitHub-Event", event)
	req.Header.Set("X-GitHub-Delivery", delivery)
	req.Header.Set("X-Hub-Signature-256", "sha256="+hex.EncodeToString(mac.Sum(nil)))
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		l.opts.Log.Warn("delivery failed", "delivery", delivery, "error", err)
		return 0
	}
	resp.Body.Close()
	if resp.StatusCode >= 300 {
		l.opts.Log.Warn("delivery rejected", "delivery", delivery, "status", resp.StatusCode)
	}
	return resp.StatusCode
}

func (l *Loop) schedule(ctx context.Context) {
	t := time.NewTicker(l.opts.SweepEvery)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
			l.invoke(ctx, sweeper.Event{Source: "aws.events", DetailType: "Scheduled Event"})
		}
	}
}

// invoke runs one sweeper invocation, killed at a random point when chaos says
// so, and none while the sweeper is paused.
func (l *Loop) invoke(ctx context.Context, ev sweeper.Event) {
	if time.Now().UnixNano() < l.pausedUntil.Load() {
		l.fault(func(f *Faults) { f.ThrottledSweeps++ })
		return
	}
	if mrand.Float64() < l.opts.Chaos.KillSweeps {
		l.fault(func(f *Faults) { f.KilledSweeps++ })
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, time.Duration(mrand.Int64N(int64(150*time.Millisecond))))
		defer cancel()
	}
	start := time.Now()
	defer l.usage.sweep(ev, start)
	r, _ := l.sweeper.Load().Handle(ctx, ev)
	l.swept.record(start, r)
}

// Sweep runs one scheduled sweep now.
func (l *Loop) Sweep(ctx context.Context) error {
	ev := sweeper.Event{Source: "aws.events", DetailType: "Scheduled Event"}
	start := time.Now()
	defer l.usage.sweep(ev, start)
	r, err := l.sweeper.Load().Handle(ctx, ev)
	l.swept.record(start, r)
	return err
}

// UpdatePools deploys a new pools file to the sweeper (as a new Lambda version
// would: the next invocations use it). The webhook keeps routing with the pools it
// started with, so change templates and sizes, not names or labels.
func (l *Loop) UpdatePools(cfg *pool.Config) error {
	clk := clock.RealClock{}
	kube := l.opts.SweeperKube
	if kube == nil {
		kube = l.opts.Kube
	}
	store := reservation.New(l.opts.DB, l.opts.Table, clk)
	rec, err := reconcile.New(cfg, kube, l.gh, clk, l.opts.Log, reconcile.Options{GitHubURL: l.ghURL,
		RegistrationTimeout: l.opts.RegistrationTimeout, Metrics: l.emf, JobLinks: store, Queued: store, IdleConfirmation: l.opts.IdleConfirmation,
		RunnerListMaxAge: ScaledRunnerListMaxAge(l.opts.SweepEvery), Reruns: rerun.NewStore(l.opts.DB, l.opts.Table),
		Roster: roster.NewStore(l.opts.DB, l.opts.Table)})
	if err != nil {
		return err
	}
	// The runner versions as the deployment checks them (sweeper/wiring).
	sopts := sweeper.Options{Versions: runnerversion.New(runnerversion.NewStore(l.opts.DB, l.opts.Table), l.gh, clk, l.opts.Log, l.emf),
		GroupAccess: groupaccess.NewRefresher(groupaccess.NewStore(l.opts.DB, l.opts.Table),
			l.gh, clk, l.opts.Log),
		HeldJobs: l.gh, HeldGrace: ScaledHeldGrace(l.opts.SweepEvery)}
	if l.recoverer != nil {
		sopts.Recoverer = l.recoverer
		sopts.DeliveryLog = redeliver.NewStore(l.opts.DB, l.opts.Table)
	}
	leases, err := lease.New(l.opts.DB, l.opts.Table, clk, l.opts.Lease)
	if err != nil {
		return err
	}
	s, err := sweeper.New(cfg, store, l.status, leases, rec, clk, l.opts.Log, sopts)
	if err != nil {
		return err
	}
	l.sweeper.Store(s)
	l.pools.Store(cfg)
	return nil
}

// Pools is the pools file in force.
func (l *Loop) Pools() *pool.Config { return l.pools.Load() }

// Stop ends the loop's goroutines and servers.
func (l *Loop) Stop() {
	l.cancel()
	l.wg.Wait()
	for _, f := range l.informers {
		f.Shutdown()
	}
	l.closeServers()
}

func (l *Loop) closeServers() {
	for _, s := range l.servers {
		// Runners still running hold long-polls open: cut them rather than wait.
		s.CloseClientConnections()
		s.Close()
	}
}

// LostJobs counts the jobs failed because their runner lost communication.
func (l *Loop) LostJobs() int { return int(l.lost.Load()) }

// Nudges counts the webhook's nudges of the sweeper so far (sent), and those
// whose sweeper invocation has returned (done). A nudge is sent before the
// webhook answers the delivery that caused it.
func (l *Loop) Nudges() (sent, done int) {
	done = int(l.nudgesDone.Load()) // first: done never exceeds sent
	return int(l.nudgesSent.Load()), done
}

// Rerun returns the sweeper's re-run decision about job, a job that failed on a
// runner of pool (package rerun), once the webhook recorded the failure.
func (l *Loop) Rerun(ctx context.Context, pool string, job int64) (rerun.Candidate, bool, error) {
	return rerun.NewStore(l.opts.DB, l.opts.Table).Get(ctx, pool, job)
}
