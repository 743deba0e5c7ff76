package redeliver_test

import (
	"context"
	"errors"
	"maps"
	"testing"
	"time"

	clocktesting "k8s.io/utils/clock/testing"

	"github.com/runnerscaler/runnerscaler/internal/githubapi"
	"github.com/runnerscaler/runnerscaler/internal/redeliver"
)

// logApp serves a fixed delivery log (newest first) and records redeliveries.
type logApp struct {
	log         []githubapi.HookDelivery
	listErr     error
	redeliverOK int // redeliveries that succeed before the next fails (-1: all succeed)
	redelivered []int64
}

func (a *logApp) Deliveries(_ context.Context, since time.Time) ([]githubapi.HookDelivery, error) {
	if a.listErr != nil {
		return nil, a.listErr
	}
	var out []githubapi.HookDelivery
	for _, d := range a.log {
		if !d.DeliveredAt.Before(since) {
			out = append(out, d)
		}
	}
	return out, nil
}

func (a *logApp) Redeliver(_ context.Context, id int64) error {
	if a.redeliverOK >= 0 && len(a.redelivered) >= a.redeliverOK {
		return errors.New("redelivering: 502 from GitHub")
	}
	a.redelivered = append(a.redelivered, id)
	return nil
}

// attempt is one entry of the log, at now minus ago.
func attempt(now time.Time, id int64, guid, action string, status int, ago time.Duration, redelivery bool) githubapi.HookDelivery {
	return githubapi.HookDelivery{ID: id, GUID: guid, Event: "workflow_job", Action: action, StatusCode: status,
		DeliveredAt: now.Add(-ago), Redelivery: redelivery}
}

// TestRecoverSummarisesWhatDidNotGetThrough: three deliveries refused with 401
// and one answered 502 are counted by their latest attempt's status, the newest
// is named, and only the 502 is redelivered. Deliveries a later attempt got
// through, other events and attempts older than the window are not counted.
func TestRecoverSummarisesWhatDidNotGetThrough(t *testing.T) {
	t.Parallel()
	now := time.Date(2026, 11, 30, 2, 15, 0, 0, time.UTC)
	app := &logApp{redeliverOK: -1, log: []githubapi.HookDelivery{ // newest first
		attempt(now, 9, "g-ok", "completed", 200, time.Minute, true), // a 503 cured by a redelivery
		attempt(now, 8, "g4", "queued", 401, 1*time.Minute+55*time.Second, false),
		attempt(now, 7, "g3", "in_progress", 502, 3*time.Minute, false),
		{ID: 6, GUID: "g-push", Event: "push", StatusCode: 401, DeliveredAt: now.Add(-4 * time.Minute)},
		attempt(now, 5, "g-ok", "completed", 503, 5*time.Minute, false),
		attempt(now, 4, "g2", "queued", 401, 6*time.Minute, false),
		attempt(now, 3, "g1", "queued", 401, 7*time.Minute, false),
		attempt(now, 2, "g-old", "queued", 401, 31*time.Minute, false), // outside the window
	}}
	u, err := redeliver.New(app, clocktesting.NewFakeClock(now), 0, nil).Recover(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	if want := map[int]int{401: 3, 502: 1}; !maps.Equal(u.ByStatus, want) || u.Count() != 4 {
		t.Errorf("ByStatus %v (count %d), want %v", u.ByStatus, u.Count(), want)
	}
	want := redeliver.FailedDelivery{At: now.Add(-1*time.Minute - 55*time.Second), StatusCode: 401, Action: "queued", GUID: "g4"}
	if u.Latest == nil || *u.Latest != want {
		t.Errorf("Latest %+v, want %+v", u.Latest, want)
	}
	if u.Redelivered != 1 || len(app.redelivered) != 1 || app.redelivered[0] != 7 {
		t.Errorf("Redelivered %d (ids %v), want only the 502 (id 7)", u.Redelivered, app.redelivered)
	}
	if !u.CheckedAt.Equal(now) || u.Window != redeliver.DefaultWindow {
		t.Errorf("checked at %v over %v, want %v over %v", u.CheckedAt, u.Window, now, redeliver.DefaultWindow)
	}
}

// TestRecoverCountsTheLatestAttempt: a delivery whose 502 was redelivered and
// then got no answer counts under 0 (no response), not 502.
func TestRecoverCountsTheLatestAttempt(t *testing.T) {
	t.Parallel()
	now := time.Date(2026, 11, 30, 2, 15, 0, 0, time.UTC)
	app := &logApp{redeliverOK: -1, log: []githubapi.HookDelivery{
		attempt(now, 2, "g1", "queued", 0, time.Minute, true),
		attempt(now, 1, "g1", "queued", 502, 2*time.Minute, false),
	}}
	u, err := redeliver.New(app, clocktesting.NewFakeClock(now), 0, nil).Recover(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	if want := map[int]int{0: 1}; !maps.Equal(u.ByStatus, want) || u.Latest == nil || u.Latest.StatusCode != 0 ||
		!u.Latest.At.Equal(now.Add(-time.Minute)) {
		t.Fatalf("ByStatus %v, Latest %+v; want {0:1}, the redelivery's attempt", u.ByStatus, u.Latest)
	}
}

// TestRecoverWithNothingFailed says when it looked and that nothing failed.
func TestRecoverWithNothingFailed(t *testing.T) {
	t.Parallel()
	now := time.Date(2026, 11, 30, 2, 15, 0, 0, time.UTC)
	app := &logApp{redeliverOK: -1, log: []githubapi.HookDelivery{attempt(now, 1, "g1", "queued", 200, time.Minute, false)}}
	u, err := redeliver.New(app, clocktesting.NewFakeClock(now), 10*time.Minute, nil).Recover(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	if u.Count() != 0 || u.Latest != nil || u.Redelivered != 0 || !u.CheckedAt.Equal(now) || u.Window != 10*time.Minute {
		t.Fatalf("summary %+v, want checked at %v over 10m with nothing failed", u, now)
	}
}

// TestRecoverFailures: when the log cannot be read the summary is unchecked
// (zero CheckedAt); when a redelivery fails, the summary of the log read stands
// and counts the redeliveries asked for before it.
func TestRecoverFailures(t *testing.T) {
	t.Parallel()
	now := time.Date(2026, 11, 30, 2, 15, 0, 0, time.UTC)
	clk := clocktesting.NewFakeClock(now)
	u, err := redeliver.New(&logApp{listErr: errors.New("listing: 500")}, clk, 0, nil).Recover(t.Context())
	if err == nil || !u.CheckedAt.IsZero() || u.Latest != nil {
		t.Fatalf("after a failed listing: %+v, %v; want an error and an unchecked summary", u, err)
	}
	app := &logApp{redeliverOK: 1, log: []githubapi.HookDelivery{
		attempt(now, 2, "g2", "queued", 503, time.Minute, false),
		attempt(now, 1, "g1", "queued", 503, 2*time.Minute, false),
	}}
	u, err = redeliver.New(app, clk, 0, nil).Recover(t.Context())
	if err == nil || !u.CheckedAt.Equal(now) || u.ByStatus[503] != 2 || u.Redelivered != 1 {
		t.Fatalf("after a failed redelivery: %+v, %v; want an error, 2 counted, 1 redelivered", u, err)
	}
}

// TestRecoverReportsARefusingWebhook: against the GitHub simulator, a webhook
// that answers every delivery 401 (a secret mismatch) shows as such, and
// nothing is redelivered.
func TestRecoverReportsARefusingWebhook(t *testing.T) {
	t.Parallel()
	clk := clocktesting.NewFakeClock(time.Now())
	f := newFailing(t, clk, 401)
	for range 3 {
		f.queue()
		clk.Step(time.Second)
	}
	f.waitAttempts(t, 3)
	u, err := redeliver.New(f.app, clk, 0, nil).Recover(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	if !maps.Equal(u.ByStatus, map[int]int{401: 3}) || u.Redelivered != 0 || u.Latest == nil ||
		u.Latest.StatusCode != 401 || u.Latest.Action != "queued" || u.Latest.GUID == "" {
		t.Fatalf("summary %+v (latest %+v), want 3 × 401, the latest a queued, none redelivered", u, u.Latest)
	}
}
