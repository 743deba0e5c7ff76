// Package redeliver recovers lost webhook deliveries. GitHub records every
// delivery attempt of the App's webhook; a `workflow_job` delivery that no attempt
// got through (the webhook was down, timed out, or answered 5xx) would leave its
// job without a reservation — and, for a `queued`, waiting forever for a runner.
// On each scheduled sweep the sweeper asks GitHub to redeliver such deliveries.
//
// Redelivery ends: only failures a retry can cure are redelivered (no response,
// 5xx, 408, 429 — not a 4xx such as a 401 from a rotated secret or a 400 for a
// payload the webhook rejects), at most MaxRedeliveries times per delivery, and
// only within the window after the delivery's original attempt, however recent
// its last redelivery.
//
// Recover also says what it saw (Undelivered): every workflow_job delivery in
// the window that did not get through, redeliverable or not, so that a webhook
// GitHub cannot reach at all (a 401 from a wrong secret, a 404 from a wrong URL)
// shows up in `runnerscaler status`.
package redeliver

import (
	"context"
	"fmt"
	"log/slog"
	"net/http"
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

// DefaultWindow is how long after its original attempt a delivery may be
// redelivered (GitHub keeps three days of log).
const DefaultWindow = 30 * time.Minute

// MaxRedeliveries caps the redeliveries of one delivery (its GUID), counted in
// GitHub's delivery log: a webhook failing that often is not failing by chance.
const MaxRedeliveries = 5

// settle: a redelivery requested this recently may still be under way.
const settle = 10 * time.Second

// New returns a recoverer with the given window (DefaultWindow when zero).
func New(app App, clk clock.PassiveClock, window time.Duration, log *slog.Logger) *Recoverer {
	if window <= 0 {
		window = DefaultWindow
	}
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	return &Recoverer{app: app, clock: clk, window: window, log: log}
}

// history is what the log says of one delivery (GUID): its attempts, newest first.
type history struct {
	guid         string
	original     *githubapi.HookDelivery // the first attempt; nil when older than the window
	latest       githubapi.HookDelivery
	ok           bool
	redeliveries int
}

// Undelivered is what one Recover saw in the delivery log: the workflow_job
// deliveries with an attempt within the window of which no attempt in the window
// got through (no 2xx). It is what GitHub could not deliver to the webhook,
// whatever the cause — a wrong secret or URL as well as a failing function.
type Undelivered struct {
	// CheckedAt is when the log was read; zero when reading it failed (then
	// nothing else is set).
	CheckedAt time.Time
	// Window is how far back the log was read.
	Window time.Duration
	// ByStatus counts those deliveries by the status code of their latest attempt
	// (0: no response — timed out or could not connect).
	ByStatus map[int]int
	// Latest is the delivery whose latest attempt is the newest; nil when none failed.
	Latest *FailedDelivery
	// Redelivered counts the redeliveries this Recover asked for.
	Redelivered int
}

// FailedDelivery is the latest attempt of a delivery that did not get through.
type FailedDelivery struct {
	At         time.Time
	StatusCode int
	// Action is the workflow_job action (queued, in_progress, completed, waiting).
	Action string
	GUID   string
}

// Count is how many deliveries did not get through.
func (u Undelivered) Count() int {
	n := 0
	for _, c := range u.ByStatus {
		n += c
	}
	return n
}

// Recover redelivers, oldest first, every workflow_job delivery that should be
// (see the package comment) and returns what it saw, with how many redeliveries
// it asked for. When listing the log fails, the result has a zero CheckedAt;
// when a redelivery fails, the result counts those asked for before it.
func (r *Recoverer) Recover(ctx context.Context) (Undelivered, error) {
	now := r.clock.Now()
	// A delivery whose original attempt is older than the window is not redelivered,
	// so its older attempts need not be read: their absence says enough.
	attempts, err := r.app.Deliveries(ctx, now.Add(-r.window))
	if err != nil {
		return Undelivered{}, err
	}
	hs := histories(attempts)
	u := undelivered(hs, now, r.window)
	for _, h := range hs {
		why := r.verdict(h, now)
		switch why {
		case "":
		case reasonDelivered, reasonUnderWay, reasonOutsideWindow:
			continue
		default:
			r.log.WarnContext(ctx, "not redelivering a failed webhook delivery", "guid", h.guid,
				"action", h.latest.Action, "status", h.latest.StatusCode, "redeliveries", h.redeliveries, "reason", why)
			continue
		}
		if err := r.app.Redeliver(ctx, h.latest.ID); err != nil {
			return u, err
		}
		u.Redelivered++
		r.log.InfoContext(ctx, "redelivered a failed webhook delivery", "guid", h.guid, "action", h.latest.Action,
			"status", h.latest.StatusCode, "redeliveries", h.redeliveries+1)
	}
	return u, nil
}

// undelivered summarises the histories none of whose attempts got through.
func undelivered(hs []*history, now time.Time, window time.Duration) Undelivered {
	u := Undelivered{CheckedAt: now, Window: window, ByStatus: map[int]int{}}
	for _, h := range hs {
		if h.ok {
			continue
		}
		u.ByStatus[h.latest.StatusCode]++
		if u.Latest == nil || h.latest.DeliveredAt.After(u.Latest.At) {
			u.Latest = &FailedDelivery{At: h.latest.DeliveredAt, StatusCode: h.latest.StatusCode,
				Action: h.latest.Action, GUID: h.guid}
		}
	}
	return u
}

// histories groups workflow_job attempts (newest first) by GUID, oldest delivery
// first: a job's queued is redelivered before its completed.
func histories(attempts []githubapi.HookDelivery) []*history {
	byGUID := map[string]*history{}
	var order []*history
	for _, a := range attempts {
		if a.Event != "workflow_job" {
			continue
		}
		h := byGUID[a.GUID]
		if h == nil {
			h = &history{guid: a.GUID, latest: a}
			byGUID[a.GUID] = h
			order = append(order, h)
		}
		h.ok = h.ok || a.OK()
		if a.Redelivery {
			h.redeliveries++
		} else {
			h.original = &a
		}
	}
	for i, j := 0, len(order)-1; i < j; i, j = i+1, j-1 {
		order[i], order[j] = order[j], order[i]
	}
	return order
}

const (
	reasonDelivered     = "delivered"
	reasonUnderWay      = "a redelivery may be under way"
	reasonOutsideWindow = "original delivery outside the window"
)

// verdict is "" when h should be redelivered, else why not.
func (r *Recoverer) verdict(h *history, now time.Time) string {
	switch {
	case h.ok:
		return reasonDelivered
	case h.original == nil || now.Sub(h.original.DeliveredAt) > r.window:
		return reasonOutsideWindow
	case !Retryable(h.latest.StatusCode):
		return fmt.Sprintf("the webhook answered %d, which a retry will not change", h.latest.StatusCode)
	case h.redeliveries >= MaxRedeliveries:
		return fmt.Sprintf("redelivered %d times already", h.redeliveries)
	case h.latest.Redelivery && now.Sub(h.latest.DeliveredAt) < settle:
		return reasonUnderWay
	}
	return ""
}

// Retryable reports whether an attempt that got status (0: no response — timed
// out or could not connect) may succeed when redelivered: 5xx, 408 and 429 may;
// any other 4xx says the request itself is refused (a 401 from a rotated secret,
// a 400 for a payload the webhook rejects, a 404 or 413 from the endpoint).
func Retryable(status int) bool {
	return status == 0 || status >= 500 || status == http.StatusRequestTimeout || status == http.StatusTooManyRequests
}
