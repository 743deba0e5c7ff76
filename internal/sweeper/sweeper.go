// Package sweeper is the sweeper Lambda's logic: for every pool (a scheduled event)
// or one pool (a nudge from the webhook), under that pool's lease, it reads the
// active reservations and the last status, decides the desired runner count
// (package scaling), lets the reconciler bring the pool's runners in line, and
// writes the new status. It holds no state between invocations: everything it
// needs is in DynamoDB (and, for the reconciler, in Kubernetes annotations).
package sweeper

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/aws/aws-lambda-go/lambdacontext"
	"k8s.io/utils/clock"

	"github.com/runnerscaler/runnerscaler/internal/emf"
	"github.com/runnerscaler/runnerscaler/internal/lease"
	"github.com/runnerscaler/runnerscaler/internal/pool"
	"github.com/runnerscaler/runnerscaler/internal/poolstate"
	"github.com/runnerscaler/runnerscaler/internal/redeliver"
	"github.com/runnerscaler/runnerscaler/internal/reservation"
	"github.com/runnerscaler/runnerscaler/internal/scaling"
	"github.com/runnerscaler/runnerscaler/internal/sweepevent"
)

// Reservations is what the sweeper needs of the reservation store. Active may
// miss a reservation written a moment before, except those of the nudged jobs.
type Reservations interface {
	Active(ctx context.Context, pool string, nudged ...int64) ([]reservation.Reservation, error)
	Extend(ctx context.Context, pool string, jobID int64, until time.Time) (bool, error)
	Spill(ctx context.Context, r reservation.Reservation, from, to string) (bool, error)
}

// StatusStore reads and writes pool status items (poolstate.Store).
type StatusStore interface {
	Get(ctx context.Context, pool string) (poolstate.Status, error)
	Put(ctx context.Context, st poolstate.Status) (poolstate.Status, error)
}

// Reconciler brings a pool's runners in line with a decision, and records what it
// observed and did in st (Phases, LastSync). An error leaves the pool for the next
// sweep; every step must be safe to repeat.
type Reconciler interface {
	Reconcile(ctx context.Context, p *pool.Pool, d scaling.Decision, st *poolstate.Status) error
}

// RunnerWatcher tells which of a pool's runner pods have not finished yet, and
// whether any is being stopped (reconcile.Reconciler). A Reconciler that
// implements it gets the refill fast path (see refill); one that does not
// sweeps refill nudges at once.
type RunnerWatcher interface {
	StillRunning(ctx context.Context, p *pool.Pool, pods []string) ([]string, error)
	Stopping(ctx context.Context, p *pool.Pool, pods []string) (bool, error)
}

// Retrier tells which of its errors a Reconciler expects the very next sweep
// to get past (reconcile.Reconciler: a runner another writer changed since the
// sweep read it). A sweep that fails with one is run again at once, under the
// same lease (sweepLeased): left to the next nudge or tick, the runner's stop
// would wait for an unrelated event — the schedule is a minute away, and a
// pool driven by nudges alone may get none.
type Retrier interface {
	Retryable(err error) bool
}

// Recoverer redelivers webhook deliveries that never got through and says what
// it saw of them (redeliver.Recoverer). A result with a zero CheckedAt means the
// delivery log could not be read.
type Recoverer interface {
	Recover(ctx context.Context) (redeliver.Undelivered, error)
}

// DeliveryLog keeps what the last scheduled sweep saw of the webhook's failed
// deliveries, for `runnerscaler status` (redeliver.Store).
type DeliveryLog interface {
	Put(ctx context.Context, u redeliver.Undelivered) error
}

// VersionCheck judges the pools' actions/runner versions against GitHub's
// releases and writes what it finds (runnerversion.Checker). It handles its
// own failures: the next scheduled sweep checks again.
type VersionCheck interface {
	Check(ctx context.Context, pools []*pool.Pool)
}

// Options tune a Sweeper; zero values take the defaults.
type Options struct {
	// Parallelism bounds how many pools a scheduled sweep reconciles at once (default 4).
	Parallelism int
	// ExtendWithin: reservations of queued jobs in a saturated pool that expire within
	// this window are extended by the trigger's duration (default 5m).
	ExtendWithin time.Duration
	// MaxWait: a queued job older than this is no longer extended (default 24h); its
	// `completed` delivery was probably lost.
	MaxWait time.Duration
	// Recoverer, when set, redelivers lost webhook deliveries on each scheduled sweep.
	Recoverer Recoverer
	// DeliveryLog, when set with Recoverer, records what each scheduled sweep saw
	// of the deliveries that did not get through, whenever it read the log.
	DeliveryLog DeliveryLog
	// Versions, when set, checks the pools' runner versions on each scheduled sweep.
	Versions VersionCheck
	// GroupAccess, when set, reads the pools' runner groups again on each
	// scheduled sweep when what the table has of them is old (groupaccess.go).
	GroupAccess GroupAccessRefresh
	// Metrics, when set, receives the count of redelivered deliveries (Redeliveries).
	Metrics *emf.Writer
	// MaxRounds bounds how often one invocation sweeps a pool again because nudges
	// arrived while it held the lease (default 100); then it lets the lease go
	// regardless, so the next nudge or tick takes over.
	MaxRounds int
	// Removed, when set, finds the runners of pools removed from the pools file:
	// scheduled sweeps drain them (drain.go).
	Removed RemovedPools
	// Drain, when set, is the teardown switch: while it is on, every sweep drains
	// every pool (drain.go).
	Drain DrainMark
	// HeldJobs, when set, reads jobs from GitHub: each scheduled sweep asks it
	// about the jobs held for an approval longer than HeldGrace (default
	// DefaultHeldGrace; held.go).
	HeldJobs  HeldJobs
	HeldGrace time.Duration
	// RefillWait bounds how long a refill nudge (Event.Finished) waits for the
	// containers of the runners it names to exit before it sweeps to stop them
	// (default 10s);
	// RefillPoll is how often it looks meanwhile (default 250ms).
	RefillWait, RefillPoll time.Duration
	// FollowUpEvery and FollowUpFor bound a nudge's follow-up sweeps (followup.go):
	// while its sweep leaves jobs waiting and runners being stopped, it sweeps the
	// pool again every FollowUpEvery (default 1s) for up to FollowUpFor (default 20s).
	FollowUpEvery, FollowUpFor time.Duration
}

// maxFinished bounds the runners one nudge may name.
const maxFinished = 100

// Sweeper sweeps pools. Build it with New.
type Sweeper struct {
	pools        *pool.Config
	reservations Reservations
	status       StatusStore
	leases       *lease.Leases
	reconciler   Reconciler
	clock        clock.Clock
	log          *slog.Logger
	opts         Options
}

// New returns a sweeper, or an error naming each missing dependency and each
// option Options.Validate rejects. reconciler may be nil: the sweeper then
// decides and records desired counts without touching Kubernetes.
func New(pools *pool.Config, rs Reservations, status StatusStore, leases *lease.Leases, reconciler Reconciler,
	clk clock.Clock, log *slog.Logger, opts Options) (*Sweeper, error) {
	if err := required(pools, rs, status, leases, clk, &opts); err != nil {
		return nil, err
	}
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	return &Sweeper{pools: pools, reservations: rs, status: status, leases: leases, reconciler: reconciler,
		clock: clk, log: log, opts: opts}, nil
}

// Event is what the sweeper accepts (package sweepevent): a scheduled event (all
// pools), a nudge (one pool) or a drain command. A nudge's jobs are counted even
// if the reservation index has not caught up with their deliveries yet; a
// scheduled sweep counts a reservation written a moment before it one sweep
// later. A nudge that names finished runners is a refill (see refill).
type Event = sweepevent.Event

// Report summarises one invocation (package sweepevent).
type Report = sweepevent.Report

// Handle serves one invocation. It returns an error when the event is not one it
// knows, when a drain command did not come through the drain alias
// (ErrNotDrainEntry), or when a pool could not be swept (the next sweep retries
// it).
func (s *Sweeper) Handle(ctx context.Context, ev Event) (Report, error) {
	holder := holderID(ctx)
	switch {
	case ev.Drain != "":
		if err := drainEntry(ctx); err != nil {
			return Report{}, fmt.Errorf("drain %q: %w", ev.Drain, err)
		}
		return s.drain(ctx, ev.Drain, holder)
	case ev.Pool != "":
		p := s.pools.Pool(ev.Pool)
		if p == nil {
			return Report{}, fmt.Errorf("nudge for unknown pool %q", ev.Pool)
		}
		if err := validRunners(ev.Finished); err != nil {
			return Report{}, fmt.Errorf("nudge for pool %s: %w", p.Name, err)
		}
		pools, err := s.forNudge(ctx, []*pool.Pool{p})
		if err != nil {
			return Report{}, err
		}
		if len(ev.Finished) > 0 {
			return s.report(s.refill(ctx, pools, ev, holder))
		}
		return s.report(s.sweepAll(ctx, pools, holder, true, ev.Jobs, nil))
	case ev.Source == "aws.events" && ev.DetailType == "Scheduled Event":
		s.recover(ctx)
		if s.opts.Versions != nil {
			s.opts.Versions.Check(ctx, s.configured())
		}
		if s.opts.GroupAccess != nil {
			s.opts.GroupAccess.Refresh(ctx, s.configured())
		}
		s.checkHeld(ctx, s.configured())
		all, err := s.forSchedule(ctx)
		if err != nil {
			return Report{}, err
		}
		return s.report(s.sweepAll(ctx, all, holder, false, nil, nil))
	}
	raw, _ := json.Marshal(ev)
	return Report{}, fmt.Errorf("unrecognised event %s: want a scheduled event or {\"pool\":\"<name>\"}", raw)
}

// recover asks GitHub to redeliver lost deliveries; they come back through the
// webhook, which nudges the sweeper. It records what it saw of the failed
// deliveries whenever it read the log. A failure is logged: the next tick retries.
func (s *Sweeper) recover(ctx context.Context) {
	if s.opts.Recoverer == nil {
		return
	}
	u, err := s.opts.Recoverer.Recover(ctx)
	n := u.Redelivered
	if merr := s.opts.Metrics.Write(emf.Record{Time: s.clock.Now(), Dimensions: map[string]string{},
		Metrics: []emf.Metric{{Name: "Redeliveries", Unit: emf.Count, Value: float64(n)}}}); merr != nil {
		s.log.WarnContext(ctx, "cannot write the redelivery metric", "error", merr)
	}
	if err != nil {
		s.log.WarnContext(ctx, "recovering lost webhook deliveries", "error", err, "redelivered", n)
	} else if n > 0 {
		s.log.InfoContext(ctx, "redelivered lost webhook deliveries", "count", n)
	}
	if s.opts.DeliveryLog == nil || u.CheckedAt.IsZero() {
		return
	}
	if perr := s.opts.DeliveryLog.Put(ctx, u); perr != nil {
		s.log.WarnContext(ctx, "recording the failed webhook deliveries", "error", perr)
	}
}

func (s *Sweeper) report(r Report) (Report, error) {
	if len(r.Failed) > 0 {
		return r, fmt.Errorf("sweeping pools %s failed (see log); the next sweep retries", strings.Join(r.Failed, ", "))
	}
	return r, nil
}

type outcome int

const (
	swept outcome = iota
	skipped
	failed
)

// sweepAll sweeps pools, Parallelism at a time. Each invocation starts at
// another pool (the minute of the sweeper's clock picks it), and a pool whose
// turn comes when less than 20 s of the invocation are left is skipped: the
// next invocation sweeps it, and starts further on, so an invocation that
// cannot sweep every pool within its time still leaves none behind for long.
func (s *Sweeper) sweepAll(ctx context.Context, pools []*pool.Pool, holder string, nudged bool, jobs []int64, finished []string) Report {
	outcomes := make([]outcome, len(pools))
	sem := make(chan struct{}, s.opts.Parallelism)
	var wg sync.WaitGroup
	first := 0
	if len(pools) > 0 {
		first = int(s.clock.Now().Unix()/60) % len(pools)
	}
	for k := range pools {
		i := (first + k) % len(pools)
		sem <- struct{}{}
		if nearDeadline(ctx) {
			<-sem
			outcomes[i] = skipped
			continue
		}
		p := pools[i]
		wg.Go(func() {
			defer func() { <-sem }()
			outcomes[i] = s.sweepPool(ctx, p, holder, nudged, jobs, finished)
		})
	}
	wg.Wait()
	var r Report
	for i, o := range outcomes {
		switch o {
		case swept:
			r.Swept = append(r.Swept, pools[i].Name)
		case skipped:
			r.Skipped = append(r.Skipped, pools[i].Name)
		default:
			r.Failed = append(r.Failed, pools[i].Name)
		}
	}
	return r
}

// sweepPool sweeps p (sweepLeased) — a nudge follows its sweep up while it
// left jobs waiting behind runners being stopped (followUp) — then, as nudged,
// each pool it spilled jobs to (spill.go); their outcomes are their own,
// logged by them.
func (s *Sweeper) sweepPool(ctx context.Context, p *pool.Pool, holder string, nudged bool, jobs []int64, finished []string) outcome {
	var spilled spillTargets
	o, left := s.sweepLeased(ctx, p, holder, nudged, jobs, finished, &spilled)
	if nudged && o == swept && left {
		o = s.followUp(ctx, p, holder, &spilled)
	}
	for _, to := range spilled {
		s.sweepPool(ctx, to, holder, true, nil, nil)
	}
	return o
}

// sweepLeased takes the lease and sweeps until no nudge arrived meanwhile. A nudge
// that finds the lease held marks the pool dirty, with its jobs, so the holder
// sweeps again and counts them. left: the last sweep left jobs waiting behind
// runners being stopped (leftWaiting).
func (s *Sweeper) sweepLeased(ctx context.Context, p *pool.Pool, holder string, nudged bool, jobs []int64, finished []string,
	spilled *spillTargets) (o outcome, left bool) {
	log := s.log.With("pool", p.Name, "holder", holder)
	held, err := s.acquire(ctx, p.Name, holder, nudged, jobs, finished)
	switch {
	case errors.Is(err, errHandedOver):
		log.InfoContext(ctx, "pool busy: marked dirty for its lease holder to sweep again")
		return skipped, false
	case errors.Is(err, lease.ErrHeld):
		log.InfoContext(ctx, "pool skipped: another sweeper holds its lease", "error", err)
		return skipped, false
	case err != nil:
		log.ErrorContext(ctx, "pool sweep failed", "error", err)
		return failed, false
	}
	pending := nudges{}
	pending.add(jobs)
	pending.add(held.Nudged)
	done := finishedRunners{}
	done.add(finished)
	done.add(held.Finished)
	retries := 0
	for round := 1; ; round++ {
		rlog := log.With("round", round)
		if err := held.Hold(ctx, rlog, func(ctx context.Context) error {
			var err error
			left, err = s.sweepOnce(ctx, p, pending, done.names(), spilled, rlog)
			return err
		}); err != nil && s.retryable(ctx, err) && retries < maxStaleRetries {
			retries++
			rlog.InfoContext(ctx, "pool sweep met a change another writer made since it read the pool: sweeping again", "error", err)
			continue
		} else if err != nil {
			log.ErrorContext(ctx, "pool sweep failed", "error", err)
			// Let go even if nudges are pending: holding on would leave them to
			// nobody until the lease expires; the next nudge or tick sweeps again.
			if rerr := held.ForceRelease(ctx); rerr != nil && !errors.Is(rerr, lease.ErrLost) {
				log.WarnContext(ctx, "releasing lease", "error", rerr)
			}
			return failed, false
		}
		again, err := held.Release(ctx)
		if err != nil {
			log.ErrorContext(ctx, "releasing lease", "error", err)
			return failed, false
		}
		if !again {
			return swept, left
		}
		pending.add(held.Nudged)
		done.add(held.Finished)
		if round >= s.opts.MaxRounds || nearDeadline(ctx) {
			log.WarnContext(ctx, "still nudged after many rounds; letting the lease go", "rounds", round)
			if err := held.ForceRelease(ctx); err != nil {
				log.WarnContext(ctx, "releasing lease", "error", err)
			}
			return swept, left
		}
	}
}

// maxStaleRetries bounds the sweeps run again at once for retryable errors in
// one hold of a pool's lease: a change that keeps coming waits for the next
// nudge or tick, rather than costing a sweep's GitHub calls again and again.
const maxStaleRetries = 2

// retryable: err is one the reconciler expects the next sweep to get past
// (Retrier), the lease is still ours and there is time left.
func (s *Sweeper) retryable(ctx context.Context, err error) bool {
	r, ok := s.reconciler.(Retrier)
	return ok && r.Retryable(err) && !errors.Is(err, lease.ErrLost) && ctx.Err() == nil && !nearDeadline(ctx)
}

var errHandedOver = errors.New("handed over to the lease holder")

// acquire takes the lease. For a nudge that finds it held, it marks the pool dirty
// instead (errHandedOver); if the lease was released in between, it tries again.
func (s *Sweeper) acquire(ctx context.Context, pool, holder string, nudged bool, jobs []int64, finished []string) (*lease.Lease, error) {
	for range 3 {
		held, err := s.leases.Acquire(ctx, pool, holder)
		if err == nil || !nudged || !errors.Is(err, lease.ErrHeld) {
			return held, err
		}
		marked, err := s.leases.MarkDirtyFor(ctx, pool, jobs, finished)
		if err != nil {
			return nil, err
		}
		if marked {
			return nil, errHandedOver
		}
	}
	return nil, fmt.Errorf("pool %s: lease changed hands 3 times: %w", pool, lease.ErrHeld)
}

// finishedRunners are the runners refill nudges named to a sweepPool: the
// reconciler looks at their job links (scaling.Decision.Finished).
type finishedRunners map[string]bool

func (f finishedRunners) add(names []string) {
	for _, n := range names {
		f[n] = true
	}
}

func (f finishedRunners) names() []string { return slices.Sorted(maps.Keys(f)) }

// nudges are the jobs nudges named to a sweepPool, and whether each still needs a
// strongly consistent look (true) or was found finished or expired (false).
type nudges map[int64]bool

func (n nudges) add(jobs []int64) {
	for _, j := range jobs {
		if _, ok := n[j]; !ok {
			n[j] = true
		}
	}
}

func (n nudges) pending() []int64 {
	var out []int64
	for j, p := range n {
		if p {
			out = append(out, j)
		}
	}
	return out
}

// settle drops the jobs Active did not return: it looked them up with strong
// consistency and they hold nothing (completed or expired). A later delivery that
// revives an expired one reaches the index like any other.
func (n nudges) settle(rs []reservation.Reservation) {
	held := make(map[int64]bool, len(rs))
	for _, r := range rs {
		held[r.JobID] = true
	}
	for j, p := range n {
		if p && !held[j] {
			n[j] = false
		}
	}
}

// sweepOnce is one decide → reconcile → record pass; run it under the lease
// (Lease.Hold). left: it left jobs waiting behind runners being stopped
// (leftWaiting).
func (s *Sweeper) sweepOnce(ctx context.Context, p *pool.Pool, nudged nudges, finished []string, spilled *spillTargets,
	log *slog.Logger) (left bool, err error) {
	start := s.clock.Now()
	var (
		st    poolstate.Status
		rs    []reservation.Reservation
		stErr error
		wg    sync.WaitGroup
	)
	wg.Go(func() { st, stErr = s.status.Get(ctx, p.Name) })
	rs, err = s.reservations.Active(ctx, p.Name, nudged.pending()...)
	wg.Wait()
	if stErr != nil {
		return false, stErr
	}
	if err != nil {
		return false, err
	}
	nudged.settle(rs)
	now := s.clock.Now()
	prev := st.Desired
	last := scaling.Previous{Desired: st.Desired, LastScaleOut: st.LastScaleOut}
	rs, d, to, err := s.spill(ctx, p, rs, scaling.Decide(p, rs, last, now), last, now, log)
	if err != nil {
		return false, err
	}
	if to != nil {
		spilled.add(to)
	}
	extended, err := s.extendWaiting(ctx, p, d, rs, st, now)
	if err != nil {
		return false, err
	}
	st.Extended = extended
	d.Finished = finished
	var recErr error
	if s.reconciler != nil {
		// What the reconcile did (runners created: the last sync time) is recorded
		// even when some of its steps failed.
		if recErr = s.reconciler.Reconcile(ctx, p, d, &st); recErr != nil {
			recErr = fmt.Errorf("reconciling: %w", recErr)
		}
	}
	st.Desired, st.LastScaleOut, st.DecidedAt, st.Reason, st.NextChange = d.Desired, d.LastScaleOut, now, d.Reason, d.NextChange
	st.RecordOutcome(now, recErr)
	if _, err := s.status.Put(ctx, st); err != nil {
		return false, errors.Join(recErr, err)
	}
	if recErr != nil {
		return false, recErr
	}
	log.InfoContext(ctx, "pool swept", "desired", d.Desired, "previous", prev, "minReplicas", d.MinReplicas,
		"reserved", d.Reserved, "reservations", d.Reservations, "held", d.Held, "saturated", d.Saturated,
		"extended", extended, "nextChange", d.NextChange, "phases", st.Phases, "reason", d.Reason,
		"took", s.clock.Since(start))
	return leftWaiting(d, st), nil
}

// extendWaiting keeps the reservations of queued jobs alive while they wait for
// capacity rather than for a lost delivery: while the pool is at maxReplicas,
// or while some of its runners are still starting (a node scaling up, a slow
// image pull) as the last sweep saw them. When every runner is up and idle
// and a job is still queued in the table, its delivery was lost, and expiry is the
// backstop.
func (s *Sweeper) extendWaiting(ctx context.Context, p *pool.Pool, d scaling.Decision, rs []reservation.Reservation, st poolstate.Status, now time.Time) (int, error) {
	if !d.Saturated && st.Phases["pending"] == 0 || p.IsDraining() {
		return 0, nil
	}
	_, duration := p.Trigger()
	n := 0
	for _, r := range rs {
		if r.State != reservation.Queued || r.ExpirationTime.Sub(now) > s.opts.ExtendWithin || now.Sub(r.EffectiveTime) > s.opts.MaxWait {
			continue
		}
		// The job's item is in its home pool's partition, wherever it is counted.
		ok, err := s.reservations.Extend(ctx, r.Pool, r.JobID, now.Add(duration))
		if err != nil {
			return n, err
		}
		if ok {
			n++
		}
	}
	return n, nil
}

// nearDeadline: less than 20 s of the invocation left — stop sweeping again.
func nearDeadline(ctx context.Context) bool {
	d, ok := ctx.Deadline()
	return ok && time.Until(d) < 20*time.Second
}

// holderID names this invocation: the Lambda request id (for the logs) and a
// random nonce, since Lambda may run a duplicated asynchronous event twice under
// one request id, and two invocations must never share a lease.
func holderID(ctx context.Context) string {
	b := make([]byte, 8)
	_, _ = rand.Read(b)
	nonce := hex.EncodeToString(b)
	if lc, ok := lambdacontext.FromContext(ctx); ok && lc.AwsRequestID != "" {
		return lc.AwsRequestID + "/" + nonce
	}
	return "local-" + nonce
}
