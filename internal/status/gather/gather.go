// Package gather reads what package status reports on: the pools file, the
// table (reservations, pool status items, recent queue waits and the last
// webhook delivery check) and the cluster (each pool's StatefulSets, pods and,
// for runners without a pod, their controller's events), with whatever
// credentials its clients carry — the operator's own for `runnerscaler
// status`. It only reads.
package gather

import (
	"context"
	"errors"
	"fmt"
	"time"

	"k8s.io/client-go/kubernetes"
	"k8s.io/utils/clock"

	"github.com/runnerscaler/runnerscaler/internal/pool"
	"github.com/runnerscaler/runnerscaler/internal/poolstate"
	"github.com/runnerscaler/runnerscaler/internal/queuewait"
	"github.com/runnerscaler/runnerscaler/internal/redeliver"
	"github.com/runnerscaler/runnerscaler/internal/reservation"
	"github.com/runnerscaler/runnerscaler/internal/status"
)

// ErrUnknownPool: the pools file has no pool of that name.
var ErrUnknownPool = errors.New("no such pool in the pools file")

// ErrJobNotFound: no pool has an item for the job (never delivered here, routed
// nowhere, or removed by TTL a day after it stopped mattering).
var ErrJobNotFound = errors.New("job not found")

// Reservations is what gather reads of the reservation store (reservation.Store).
type Reservations interface {
	Unfinished(ctx context.Context, pool string) ([]reservation.Reservation, error)
	MovedIn(ctx context.Context, pool string) ([]reservation.Reservation, error)
	Job(ctx context.Context, pool string, job int64) (reservation.Reservation, bool, error)
	UnroutedQueued(ctx context.Context) ([]reservation.Unrouted, error)
}

// Statuses reads pool status items (poolstate.Store).
type Statuses interface {
	Get(ctx context.Context, pool string) (poolstate.Status, error)
}

// DeliveryChecks reads what the last scheduled sweep recorded of GitHub's
// webhook delivery log (redeliver.Store); false when none has yet.
type DeliveryChecks interface {
	Get(ctx context.Context) (redeliver.Undelivered, bool, error)
}

// QueueWaits reads each pool's recent queue waits (queuewait.Store).
type QueueWaits interface {
	Recent(ctx context.Context, pool string) ([]time.Duration, error)
}

// Gatherer reads one deployment's state. Build it with New.
type Gatherer struct {
	pools        *pool.Config
	reservations Reservations
	statuses     Statuses
	deliveries   DeliveryChecks
	waits        QueueWaits
	kube         kubernetes.Interface
	clock        clock.PassiveClock
	reruns       Reruns         // nil: Trace shows no re-runs (WithReruns)
	releases     RunnerReleases // nil: no runner versions (WithRunnerReleases)
}

// Option configures a Gatherer.
type Option func(*Gatherer)

// WithQueueWaits sets where each pool's recent queue waits are read (default:
// nowhere, and the report shows none).
func WithQueueWaits(w QueueWaits) Option { return func(g *Gatherer) { g.waits = w } }

// New returns a gatherer over the pools of cfg.
func New(cfg *pool.Config, rs Reservations, st Statuses, dc DeliveryChecks, kube kubernetes.Interface, clk clock.PassiveClock,
	opts ...Option) *Gatherer {
	g := &Gatherer{pools: cfg, reservations: rs, statuses: st, deliveries: dc, kube: kube, clock: clk}
	for _, o := range opts {
		o(g)
	}
	return g
}

// Report reads the last delivery check and every pool, or only the one named
// (ErrUnknownPool if none is).
func (g *Gatherer) Report(ctx context.Context, only string) (status.Report, error) {
	var pools []*pool.Pool
	for i := range g.pools.Pools {
		if p := &g.pools.Pools[i]; only == "" || p.Name == only {
			pools = append(pools, p)
		}
	}
	if len(pools) == 0 {
		return status.Report{}, fmt.Errorf("pool %q: %w", only, ErrUnknownPool)
	}
	inputs := make([]status.Input, 0, len(pools))
	for _, p := range pools {
		in, err := g.input(ctx, p)
		if err != nil {
			return status.Report{}, err
		}
		inputs = append(inputs, in)
	}
	var unrouted []status.Job
	if only == "" {
		us, err := g.reservations.UnroutedQueued(ctx)
		if err != nil {
			return status.Report{}, err
		}
		for _, u := range us {
			unrouted = append(unrouted, unroutedJob(u))
		}
	}
	check, err := g.deliveryCheck(ctx)
	if err != nil {
		return status.Report{}, err
	}
	now := g.clock.Now()
	r := status.Build(now, inputs, unrouted)
	r.Webhook = status.NewWebhook(now, check)
	if err := g.runnerVersions(ctx, &r); err != nil {
		return status.Report{}, err
	}
	return r, nil
}

// deliveryCheck is nil when no scheduled sweep has recorded one.
func (g *Gatherer) deliveryCheck(ctx context.Context) (*status.DeliveryCheck, error) {
	u, ok, err := g.deliveries.Get(ctx)
	if err != nil || !ok {
		return nil, err
	}
	c := &status.DeliveryCheck{At: u.CheckedAt, Window: u.Window, ByStatus: u.ByStatus, Redelivered: u.Redelivered,
		Redeliverable: make(map[int]bool, len(u.ByStatus))}
	for code := range u.ByStatus {
		c.Redeliverable[code] = redeliver.Retryable(code)
	}
	if l := u.Latest; l != nil {
		c.Latest = &status.FailedDelivery{At: l.At, StatusCode: l.StatusCode, Action: l.Action, GUID: l.GUID}
	}
	return c, nil
}

func unroutedJob(u reservation.Unrouted) status.Job {
	return status.Job{ID: u.JobID, Repository: u.Repository, State: u.State.String(), FirstSeen: u.FirstSeen,
		Waiting:    fmt.Sprintf("no matching pool for labels %v: %s", u.Labels, u.Reason),
		Deliveries: []status.Delivery{{State: u.State.String(), ID: u.DeliveryID}}}
}

func (g *Gatherer) input(ctx context.Context, p *pool.Pool) (status.Input, error) {
	in := status.Input{Pool: p.Name, MinReplicas: p.MinReplicas, MaxReplicas: *p.MaxReplicas}
	rs, err := g.reservations.Unfinished(ctx, p.Name)
	if err != nil {
		return in, fmt.Errorf("pool %s: %w", p.Name, err)
	}
	for _, r := range rs {
		in.Jobs = append(in.Jobs, toJob(r))
	}
	moved, err := g.reservations.MovedIn(ctx, p.Name)
	if err != nil {
		return in, fmt.Errorf("pool %s: %w", p.Name, err)
	}
	for _, r := range moved {
		in.MovedIn = append(in.MovedIn, toJob(r))
	}
	st, err := g.statuses.Get(ctx, p.Name)
	if err != nil {
		return in, err
	}
	in.Sweep = toSweep(st)
	stuck := map[string]string{}
	if in.Sweep != nil {
		stuck = in.Sweep.Stuck
	}
	if in.Runners, err = g.runners(ctx, p, stuck); err != nil {
		return in, err
	}
	if g.waits != nil {
		if in.Waits, err = g.waits.Recent(ctx, p.Name); err != nil {
			return in, err
		}
		in.WaitWindow = queuewait.Window
	}
	return in, nil
}

// Trace finds the job in the pools (one strongly consistent read per pool until
// found) and follows it to its runner.
func (g *Gatherer) Trace(ctx context.Context, jobID int64) (status.Trace, error) {
	for i := range g.pools.Pools {
		p := &g.pools.Pools[i]
		r, ok, err := g.reservations.Job(ctx, p.Name, jobID)
		if err != nil {
			return status.Trace{}, err
		}
		if !ok {
			continue
		}
		in, err := g.input(ctx, p)
		if err != nil {
			return status.Trace{}, err
		}
		job := toJob(r)
		// Why it waits, as the pool report says it.
		for _, q := range status.Build(g.clock.Now(), []status.Input{in}, nil).Pools[0].Queued {
			if q.ID == jobID {
				job.Waiting = q.Waiting
			}
		}
		tr := status.NewTrace(g.clock.Now(), job, in.Runners)
		if tr.Rerun, err = g.rerunOf(ctx, job.RunnerName, jobID); err != nil {
			return status.Trace{}, err
		}
		return tr, nil
	}
	us, err := g.reservations.UnroutedQueued(ctx)
	if err != nil {
		return status.Trace{}, err
	}
	for _, u := range us {
		if u.JobID == jobID {
			return status.NewTrace(g.clock.Now(), unroutedJob(u), nil), nil
		}
	}
	return status.Trace{}, fmt.Errorf("job %d in pools %s: %w", jobID, g.names(), ErrJobNotFound)
}

func (g *Gatherer) names() []string {
	var out []string
	for _, p := range g.pools.Pools {
		out = append(out, p.Name)
	}
	return out
}

func toJob(r reservation.Reservation) status.Job {
	j := status.Job{ID: r.JobID, RunID: r.RunID, Pool: r.Pool, Repository: r.Repository, State: r.State.String(),
		Amount: r.Amount, FirstSeen: r.EffectiveTime, Expires: r.ExpirationTime, RunnerID: r.RunnerID,
		RunnerName: r.RunnerName, Extensions: r.Extensions, CountedIn: r.CountedIn, MovedBy: string(r.MovedBy)}
	if r.Held() {
		j.HeldSince = r.SeenWaiting.At()
	}
	for _, s := range r.Trail() {
		j.Deliveries = append(j.Deliveries, status.Delivery{State: s.State.String(), ID: s.DeliveryID, At: s.At()})
	}
	return j
}

// toSweep is nil for a pool never swept (status version 0).
func toSweep(st poolstate.Status) *status.Sweep {
	if st.Version == 0 {
		return nil
	}
	s := &status.Sweep{At: st.DecidedAt, Failed: st.Failed, Desired: st.Desired, Reason: st.Reason,
		Extended: st.Extended, Stuck: st.Stuck, Deferred: st.Deferred, Foreign: st.Foreign}
	for _, e := range st.Errors {
		s.Errors = append(s.Errors, status.SweepError{At: e.At.UTC().Truncate(time.Millisecond), Error: e.Error})
	}
	return s
}
