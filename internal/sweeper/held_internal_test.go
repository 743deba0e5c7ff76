package sweeper

import (
	"testing"
	"time"

	"github.com/runnerscaler/runnerscaler/internal/reservation"
)

// TestHeldCheckDueEveryQuarterOfTheWait: a held job is asked about again after
// a quarter of its wait so far, never sooner than 5 minutes nor later than an
// hour after the last time; one never asked about is due at once.
func TestHeldCheckDueEveryQuarterOfTheWait(t *testing.T) {
	t.Parallel()
	now := time.Date(2026, 12, 3, 12, 0, 0, 0, time.UTC)
	for _, tc := range []struct {
		name            string
		waited, checked time.Duration // how long ago the job began to wait, and was last asked about
		want            bool
	}{
		{"never asked", 6 * time.Minute, 0, true},
		{"the floor: 12 min waited, asked 4 min ago", 12 * time.Minute, 4 * time.Minute, false},
		{"the floor: 12 min waited, asked 5 min ago", 12 * time.Minute, 5 * time.Minute, true},
		{"a quarter: 40 min waited, asked 9 min ago", 40 * time.Minute, 9 * time.Minute, false},
		{"a quarter: 40 min waited, asked 10 min ago", 40 * time.Minute, 10 * time.Minute, true},
		{"the cap: 8 h waited, asked 59 min ago", 8 * time.Hour, 59 * time.Minute, false},
		{"the cap: 8 h waited, asked 60 min ago", 8 * time.Hour, time.Hour, true},
	} {
		r := reservation.Reservation{SeenWaiting: &reservation.Seen{AtMillis: now.Add(-tc.waited).UnixMilli()}}
		if tc.checked != 0 {
			r.HeldCheckedMillis = now.Add(-tc.checked).UnixMilli()
		}
		if got := heldCheckDue(r, now); got != tc.want {
			t.Errorf("%s: due %v, want %v", tc.name, got, tc.want)
		}
	}
}

// TestHeldJobWaitingADayCostsAFewDozenCalls: a job GitHub holds for a day,
// looked at by a scheduled sweep every minute, is asked about at most 40
// times: past the grace, every 5 minutes at first, then a quarter of its wait,
// then hourly.
func TestHeldJobWaitingADayCostsAFewDozenCalls(t *testing.T) {
	t.Parallel()
	start := time.Date(2026, 12, 3, 0, 0, 0, 0, time.UTC)
	r := reservation.Reservation{SeenWaiting: &reservation.Seen{AtMillis: start.UnixMilli()}}
	calls := 0
	for now := start.Add(DefaultHeldGrace); now.Before(start.Add(24 * time.Hour)); now = now.Add(time.Minute) {
		if heldCheckDue(r, now) {
			calls++
			r.HeldCheckedMillis = now.UnixMilli()
		}
	}
	if calls > 40 || calls < 24 {
		t.Fatalf("%d calls in a day of waiting, want from 24 (hourly) to 40", calls)
	}
}
