// Package redeliver recovers lost webhook deliveries. GitHub records every
// delivery attempt of the App's webhook; a `workflow_job` delivery that no attempt
// got through (the webhook was down, timed out, or answered 5xx) would leave its
// job without a reservation — and, for a `queued`, waiting forever for a runner.
// On each scheduled sweep the sweeper asks GitHub to redeliver such deliveries.
package redeliver

import (
	"context"
	"log/slog"
	"time"

	"k8s.io/utils/clock"

	"github.com/runnerscaler/runnerscaler/internal/githubapi"
)

// App is the App's delivery log (githubapi.AppClient).
type App interface {
	Deliveries(ctx context.Context, since time.Time) ([]githubapi.HookDelivery, error)
	Redeliver(ctx context.Context, id int64) error
}

// Recoverer redelivers failed workflow_job deliveries.
type Recoverer struct {
	app    App
	clock  clock.PassiveClock
	window time.Duration
	log    *slog.Logger
}

// DefaultWindow is how far back each run looks (GitHub keeps three days).
const DefaultWindow = 30 * time.Minute

// settle: a redelivery requested this recently may still be under way.
const settle = 10 * time.Second

// New returns a recoverer looking back window (DefaultWindow when zero).
func New(app App, clk clock.PassiveClock, window time.Duration, log *slog.Logger) *Recoverer {
	if window <= 0 {
		window = DefaultWindow
	}
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	return &Recoverer{app: app, clock: clk, window: window, log: log}
}

// Recover redelivers every workflow_job delivery of the window that no attempt
// got through, unless it was redelivered moments ago. It returns how many it
// asked for.
func (r *Recoverer) Recover(ctx context.Context) (int, error) {
	now := r.clock.Now()
	attempts, err := r.app.Deliveries(ctx, now.Add(-r.window))
	if err != nil {
		return 0, err
	}
	type guid struct {
		ok     bool
		latest githubapi.HookDelivery
	}
	byGUID := map[string]*guid{}
	var order []string
	for _, a := range attempts { // newest first
		if a.Event != "workflow_job" {
			continue
		}
		g := byGUID[a.GUID]
		if g == nil {
			g = &guid{latest: a}
			byGUID[a.GUID] = g
			order = append(order, a.GUID)
		}
		g.ok = g.ok || a.OK()
	}
	n := 0
	for i := len(order) - 1; i >= 0; i-- { // oldest first: a job's queued before its completed
		g := byGUID[order[i]]
		if g.ok || g.latest.Redelivery && now.Sub(g.latest.DeliveredAt) < settle {
			continue
		}
		if err := r.app.Redeliver(ctx, g.latest.ID); err != nil {
			return n, err
		}
		n++
		r.log.InfoContext(ctx, "redelivered a failed webhook delivery", "guid", order[i], "action", g.latest.Action,
			"status", g.latest.StatusCode)
	}
	return n, nil
}
