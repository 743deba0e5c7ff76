package reconcile

import (
	"context"
	"strings"
	"sync"

	"github.com/runnerscaler/runnerscaler/internal/pool"
	"github.com/runnerscaler/runnerscaler/internal/reservation"
)

// QueuedJobs reads a pool's active reservations (reservation.Store): the stop
// of an idle runner asks whether a job of another pool, which GitHub could hand
// to it, waits (jobMayReach).
type QueuedJobs interface {
	Active(ctx context.Context, pool string, nudged ...int64) ([]reservation.Reservation, error)
}

// reachers are the other pools of the file whose jobs GitHub could hand to a
// runner of p: at p's scope or within it (a repository of p's organization), and
// whose labels p's runners carry (a job routed to such a pool asks for no label
// p lacks). Draining pools count too: their waiting jobs still wait.
func reachers(pools []pool.Pool, p *pool.Pool) []*pool.Pool {
	var out []*pool.Pool
	for i := range pools {
		x := &pools[i]
		if x.Name != p.Name && within(x, p) && p.Accepts(x.Labels) {
			out = append(out, x)
		}
	}
	return out
}

// within: x's jobs come from p's scope: the same scope, or a repository of the
// organization p serves.
func within(x, p *pool.Pool) bool {
	if x.Scope() == p.Scope() {
		return true
	}
	owner, _, ok := strings.Cut(x.Repository, "/")
	return p.Organization != "" && ok && strings.EqualFold(owner, p.Organization)
}

// waiting is what one pool sweep read of other pools' waiting jobs: each
// pool's active reservations at most once per sweep, and only when a runner's
// stop asks (an idle runner about to lose its labels).
type waiting struct {
	mu     sync.Mutex
	byPool map[string][]reservation.Reservation
}

// otherJobWaits: a job of another pool waits that GitHub could hand to a
// runner of the sweep's pool (its labels are the runner's). A read that fails
// counts as a job waiting: busy wins.
func (s *stop) otherJobWaits(ctx context.Context) bool {
	if s.r.opts.Queued == nil {
		return false
	}
	for _, x := range reachers(s.r.pools, s.p) {
		rs, err := s.sw.waiting.of(ctx, s.r.opts.Queued, x.Name)
		if err != nil {
			s.log.Warn("cannot read whether another pool's job waits for a runner: this idle runner stops next sweep", "other", x.Name, "error", err)
			return true
		}
		for _, r := range rs {
			if r.State == reservation.Queued && s.p.Accepts(r.Labels) {
				s.log.Info("a job of another pool that this runner's labels match waits for a runner", "other", x.Name, "job", r.JobID)
				return true
			}
		}
	}
	return false
}

func (w *waiting) of(ctx context.Context, q QueuedJobs, name string) ([]reservation.Reservation, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if rs, ok := w.byPool[name]; ok {
		return rs, nil
	}
	rs, err := q.Active(ctx, name)
	if err != nil {
		return nil, err
	}
	if w.byPool == nil {
		w.byPool = map[string][]reservation.Reservation{}
	}
	w.byPool[name] = rs
	return rs, nil
}
