package webhook

import (
	"context"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"time"

	"github.com/runnerscaler/runnerscaler/internal/emf"
	"github.com/runnerscaler/runnerscaler/internal/groupaccess"
	"github.com/runnerscaler/runnerscaler/internal/pool"
	"github.com/runnerscaler/runnerscaler/internal/reservation"
	"github.com/runnerscaler/runnerscaler/internal/scope"
)

// GroupAccess reads what the sweeper stored of who may use a runner group
// (groupaccess.Store); false when nothing is stored yet.
type GroupAccess interface {
	Get(ctx context.Context, s scope.Scope, group string) (groupaccess.Access, bool, error)
}

// GroupAccessTTL is how long the handler keeps what it read of a group,
// found or not, before it reads the table again: a delivery costs at most one
// read per checked pool that fits the job, and most cost none.
const GroupAccessTTL = 60 * time.Second

// WithGroupAccess makes routing skip a pool whose runner group, as the
// sweeper last read it, does not admit the job's repository (package
// groupaccess). Without it, or before anything is stored of a group, every
// pool admits every repository.
func WithGroupAccess(g GroupAccess) Option {
	return func(h *Handler) { h.access = &accessCache{src: g, entries: map[string]cachedAccess{}} }
}

// accessCache keeps the groups' access for GroupAccessTTL, in the warm
// function's memory.
type accessCache struct {
	src     GroupAccess
	mu      sync.Mutex
	entries map[string]cachedAccess
}

type cachedAccess struct {
	access groupaccess.Access
	found  bool
	at     time.Time
}

func (c *accessCache) get(ctx context.Context, s scope.Scope, group string, now time.Time) (groupaccess.Access, bool, error) {
	key := s.String() + "#" + strings.ToLower(group)
	c.mu.Lock()
	e, ok := c.entries[key]
	c.mu.Unlock()
	if ok && now.Sub(e.at) < GroupAccessTTL {
		return e.access, e.found, nil
	}
	a, found, err := c.src.Get(ctx, s, group)
	if err != nil {
		return groupaccess.Access{}, false, err
	}
	c.mu.Lock()
	c.entries[key] = cachedAccess{access: a, found: found, at: now}
	c.mu.Unlock()
	return a, found, nil
}

// GroupRefusalsMetric counts, per pool (dimension Pool), the `queued`
// deliveries whose job routing did not give the pool because its runner
// group does not admit the job's repository.
const GroupRefusalsMetric = "JobsRefusedByGroup"

// refusals gathers what routing's group check did for one delivery: notes for
// its log line, and the pools it refused.
type refusals struct {
	notes []slog.Attr
	pools []string
}

// admission is routing's check of the pools' runner groups for one delivery;
// nil (every pool admits) without WithGroupAccess. A group whose access cannot
// be read is not checked, and r's notes say so.
func (h *Handler) admission(ctx context.Context, r *refusals) pool.Admission {
	if h.access == nil {
		return nil
	}
	return func(p *pool.Pool, j pool.Job) (bool, string) {
		if !groupaccess.Checked(p) {
			return true, ""
		}
		a, found, err := h.access.get(ctx, p.Scope(), p.Group, h.clock.Now())
		if err != nil {
			r.notes = append(r.notes, slog.String("groupAccess", fmt.Sprintf("pool %s not checked: %v", p.Name, err)))
			return true, ""
		}
		if !found {
			return true, ""
		}
		if ok, detail := a.Admits(j.Repository, j.Public); !ok {
			r.pools = append(r.pools, p.Name)
			return false, fmt.Sprintf("group %s of pool %s does not admit repository %s (%s)", p.Group, p.Name, j.Repository, detail)
		}
		return true, ""
	}
}

// countRefusals writes GroupRefusalsMetric (1) for each pool a `queued`
// delivery's routing refused; deliveries in other states write nothing.
func (h *Handler) countRefusals(ctx context.Context, state reservation.State, r refusals) {
	if state != reservation.Queued {
		return
	}
	for _, p := range r.pools {
		err := h.metrics.Write(emf.Record{Time: h.clock.Now(), Dimensions: map[string]string{"Pool": p},
			Metrics: []emf.Metric{{Name: GroupRefusalsMetric, Unit: emf.Count, Value: 1}}})
		if err != nil {
			h.log.WarnContext(ctx, "cannot write the group refusal's metric", "error", err)
		}
	}
}

// homeBefore is, for a delivery after the job's first `queued` (waiting,
// in_progress, completed), the first pool routing refused for its group that
// already has the job's item: the group changed, or became known, after the
// job was queued there, and the job's later deliveries belong on that item,
// or it would count on, as a job still queued, after it ran. nil when the
// delivery is a `queued` (routed by the groups as they are now) or no refused
// pool has the job. Errors are DynamoDB failures: the delivery fails, for
// GitHub to redeliver.
func (h *Handler) homeBefore(ctx context.Context, state reservation.State, r refusals, jobID int64) (*pool.Pool, error) {
	if state == reservation.Queued {
		return nil, nil
	}
	for _, name := range r.pools {
		_, ok, err := h.store.Job(ctx, name, jobID)
		if err != nil {
			return nil, err
		}
		if ok {
			return h.pools.Pool(name), nil
		}
	}
	return nil, nil
}

// queuedElsewhere is, for a delivery after the job's first `queued` that
// routing now gives p, a pool whose runner group is checked, the pool that
// holds the job's item when p does not: the group admitted the job's
// repository after the job was queued elsewhere, and its later deliveries
// belong on that item, or it would count on there, as a job still queued,
// after it ran. It looks through the other pools that take the job, in
// routing order. nil when there is nothing to look for or no item elsewhere.
// Errors are DynamoDB failures.
func (h *Handler) queuedElsewhere(ctx context.Context, state reservation.State, p *pool.Pool, j job) (*pool.Pool, error) {
	if state == reservation.Queued || p == nil || h.access == nil || !groupaccess.Checked(p) {
		return nil, nil
	}
	if _, ok, err := h.store.Job(ctx, p.Name, j.id); err != nil || ok {
		return nil, err
	}
	tried := map[string]bool{p.Name: true}
	notTried := func(q *pool.Pool, _ pool.Job) (bool, string) { return !tried[q.Name], "tried" }
	for next, _ := h.pools.Route(j.route, notTried); next != nil; next, _ = h.pools.Route(j.route, notTried) {
		_, ok, err := h.store.Job(ctx, next.Name, j.id)
		switch {
		case err != nil:
			return nil, err
		case ok:
			return next, nil
		}
		tried[next.Name] = true
	}
	return nil, nil
}
