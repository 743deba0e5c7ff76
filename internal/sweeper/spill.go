package sweeper

import (
	"cmp"
	"context"
	"log/slog"
	"slices"
	"time"

	"github.com/runnerscaler/runnerscaler/internal/emf"
	"github.com/runnerscaler/runnerscaler/internal/pool"
	"github.com/runnerscaler/runnerscaler/internal/reservation"
	"github.com/runnerscaler/runnerscaler/internal/scaling"
)

// Spill-over (pool.Pool.OverflowTo). While a pool's decision is saturated, its
// newest queued jobs that its overflow pool takes, enough to cover the excess,
// are moved there (reservation.Store.Spill): the overflow pool counts them and
// creates their runners, and the saturated pool no longer does, now or when it
// frees up. The overflow pool is swept right after, in the same invocation, and
// spills on to its own overflow pool when it is saturated in turn.

// spillTargets are the pools one sweepPool spilled jobs to, in order.
type spillTargets []*pool.Pool

func (t *spillTargets) add(p *pool.Pool) {
	if !slices.Contains(*t, p) {
		*t = append(*t, p)
	}
}

// spill moves what p's saturated decision d cannot serve to p's overflow pool,
// and returns the reservations p still counts and the decision on them, with
// the pool it spilled to (nil when it moved nothing).
func (s *Sweeper) spill(ctx context.Context, p *pool.Pool, rs []reservation.Reservation, d scaling.Decision,
	prev scaling.Previous, now time.Time, log *slog.Logger) ([]reservation.Reservation, scaling.Decision, *pool.Pool, error) {
	to := s.pools.Overflow(p)
	if !d.Saturated || to == nil || p.IsDraining() {
		return rs, d, nil, nil
	}
	moved, err := s.spillJobs(ctx, p, to, spillable(rs, to), d.MinReplicas+d.Reserved-p.Max())
	if err != nil || len(moved) == 0 {
		return rs, d, nil, err
	}
	rs = slices.DeleteFunc(slices.Clone(rs), func(r reservation.Reservation) bool { return slices.Contains(moved, r.JobID) })
	s.countSpilled(ctx, p.Name, len(moved))
	log.InfoContext(ctx, "spilled jobs to the overflow pool", "to", to.Name, "jobs", moved)
	return rs, scaling.Decide(p, rs, prev, now), to, nil
}

// spillable are the jobs of rs that may go to to: queued, and taken by to
// (scope and labels; a job without labels is taken by no pool), newest first.
func spillable(rs []reservation.Reservation, to *pool.Pool) []reservation.Reservation {
	var out []reservation.Reservation
	for _, r := range rs {
		if r.State == reservation.Queued && to.Takes(r.Job()) {
			out = append(out, r)
		}
	}
	slices.SortFunc(out, func(a, b reservation.Reservation) int {
		return cmp.Or(b.EffectiveTime.Compare(a.EffectiveTime), cmp.Compare(b.JobID, a.JobID))
	})
	return out
}

// spillJobs moves candidates to to, in order, until the amounts moved cover
// excess; it returns the jobs it moved. A job another sweeper moved first, or
// that started meanwhile, is skipped.
func (s *Sweeper) spillJobs(ctx context.Context, p, to *pool.Pool, candidates []reservation.Reservation, excess int) ([]int64, error) {
	var moved []int64
	covered := 0
	for _, r := range candidates {
		if covered >= excess {
			break
		}
		ok, err := s.reservations.Spill(ctx, r, p.Name, to.Name)
		if err != nil {
			return moved, err
		}
		if ok {
			moved = append(moved, r.JobID)
			covered += r.Amount
		}
	}
	return moved, nil
}

// countSpilled writes JobsSpilled (n) under the pool that spilled them.
func (s *Sweeper) countSpilled(ctx context.Context, pool string, n int) {
	err := s.opts.Metrics.Write(emf.Record{Time: s.clock.Now(), Dimensions: map[string]string{"Pool": pool},
		Metrics: []emf.Metric{{Name: "JobsSpilled", Unit: emf.Count, Value: float64(n)}}})
	if err != nil {
		s.log.WarnContext(ctx, "cannot write the spill metric", "error", err)
	}
}
