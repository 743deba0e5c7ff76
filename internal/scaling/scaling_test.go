package scaling_test

import (
	"testing"
	"time"

	"github.com/runnerscaler/runnerscaler/internal/pool"
	"github.com/runnerscaler/runnerscaler/internal/reservation"
	"github.com/runnerscaler/runnerscaler/internal/scaling"
)

// Monday 2026-11-30 12:00 UTC.
var now = time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC)

func parsePool(t *testing.T, extra string) *pool.Pool {
	t.Helper()
	cfg, err := pool.Parse([]byte(`
pools:
  - name: p
    organization: o
    minReplicas: 1
    maxReplicas: 5
    kubernetes: {namespace: ns, image: r}
` + extra))
	if err != nil {
		t.Fatal(err)
	}
	return cfg.Pool("p")
}

func res(amount int, effective, expires time.Time, st reservation.State) reservation.Reservation {
	return reservation.Reservation{Amount: amount, EffectiveTime: effective, ExpirationTime: expires, State: st}
}

func TestDecide(t *testing.T) {
	t.Parallel()
	q, ip := reservation.Queued, reservation.InProgress
	later := now.Add(10 * time.Minute)
	cases := []struct {
		name      string
		extra     string
		rs        []reservation.Reservation
		prev      scaling.Previous
		at        time.Time
		want      int
		held      bool
		saturated bool
		next      time.Time
	}{
		{"min replicas with nothing reserved", "", nil, scaling.Previous{Desired: 1}, now, 1, false, false, time.Time{}},
		{"reservations summed on top of min", "", []reservation.Reservation{res(1, now, later, q), res(2, now, later.Add(time.Minute), ip)},
			scaling.Previous{Desired: 1}, now, 4, false, false, later},
		{"clamped at max", "", []reservation.Reservation{res(3, now, later, q), res(3, now, later, q)},
			scaling.Previous{Desired: 1}, now, 5, false, true, later},
		{"completed reservations ignored", "", []reservation.Reservation{res(1, now, later, reservation.Completed)},
			scaling.Previous{Desired: 1}, now, 1, false, false, time.Time{}},
		{"expired exactly at now is ignored", "", []reservation.Reservation{res(1, now.Add(-10*time.Minute), now, q)},
			scaling.Previous{Desired: 1}, now, 1, false, false, time.Time{}},
		{"one millisecond before expiry counts", "", []reservation.Reservation{res(1, now.Add(-10*time.Minute), now.Add(time.Millisecond), q)},
			scaling.Previous{Desired: 1}, now, 2, false, false, now.Add(time.Millisecond)},
		{"scale-down held within the delay", "", nil,
			scaling.Previous{Desired: 4, LastScaleOut: now.Add(-5 * time.Minute)}, now, 4, true, false, now.Add(5 * time.Minute)},
		{"scale-down released at the end of the delay", "", nil,
			scaling.Previous{Desired: 4, LastScaleOut: now.Add(-10 * time.Minute)}, now, 1, false, false, time.Time{}},
		{"hold never exceeds max", "", nil,
			scaling.Previous{Desired: 9, LastScaleOut: now.Add(-time.Minute)}, now, 5, true, false, now.Add(9 * time.Minute)},
		{"scale-up never delayed", "", []reservation.Reservation{res(1, now, later, q), res(1, now, later, q)},
			scaling.Previous{Desired: 2, LastScaleOut: now.Add(-time.Second)}, now, 3, false, false, later},
		{"zero delay scales in at once", "    scaleDownDelaySecondsAfterScaleOut: 0\n", nil,
			scaling.Previous{Desired: 3, LastScaleOut: now}, now, 1, false, false, time.Time{}},
		// Scheduled overrides.
		{"one-off override active", override("2026-11-30T11:00:00Z", "2026-11-30T13:00:00Z", "", "", 3), nil,
			scaling.Previous{Desired: 3}, now, 3, false, false, at("2026-11-30T13:00:00Z")},
		{"one-off override: start is inclusive", override("2026-11-30T12:00:00Z", "2026-11-30T13:00:00Z", "", "", 3), nil,
			scaling.Previous{Desired: 3}, now, 3, false, false, at("2026-11-30T13:00:00Z")},
		{"one-off override: end is exclusive", override("2026-11-30T10:00:00Z", "2026-11-30T12:00:00Z", "", "", 3), nil,
			scaling.Previous{Desired: 1}, now, 1, false, false, time.Time{}},
		{"one-off override in the future gives the next change", override("2026-11-30T14:00:00Z", "2026-11-30T15:00:00Z", "", "", 3), nil,
			scaling.Previous{Desired: 1}, now, 1, false, false, at("2026-11-30T14:00:00Z")},
		{"daily override recurs", override("2026-11-01T11:30:00Z", "2026-11-01T12:30:00Z", "Daily", "", 2), nil,
			scaling.Previous{Desired: 2}, now, 2, false, false, at("2026-11-30T12:30:00Z")},
		{"daily override outside its window", override("2026-11-01T13:00:00Z", "2026-11-01T14:00:00Z", "Daily", "", 2), nil,
			scaling.Previous{Desired: 1}, now, 1, false, false, at("2026-11-30T13:00:00Z")},
		// 2026-11-02 was a Monday, as is now.
		{"weekly override on the same weekday", override("2026-11-02T08:00:00Z", "2026-11-02T18:00:00Z", "Weekly", "2027-01-01T00:00:00Z", 4), nil,
			scaling.Previous{Desired: 4}, now, 4, false, false, at("2026-11-30T18:00:00Z")},
		{"weekly override on another weekday", override("2026-11-03T08:00:00Z", "2026-11-03T18:00:00Z", "Weekly", "", 4), nil,
			scaling.Previous{Desired: 1}, now, 1, false, false, at("2026-12-01T08:00:00Z")},
		{"weekly override past its untilTime", override("2026-11-02T08:00:00Z", "2026-11-02T18:00:00Z", "Weekly", "2026-11-20T00:00:00Z", 4), nil,
			scaling.Previous{Desired: 1}, now, 1, false, false, time.Time{}},
		{"overlapping overrides: the first wins",
			override("2026-11-30T11:00:00Z", "2026-11-30T13:00:00Z", "", "", 2) +
				"      - {startTime: \"2026-11-30T10:00:00Z\", endTime: \"2026-11-30T14:00:00Z\", minReplicas: 4}\n", nil,
			scaling.Previous{Desired: 2}, now, 2, false, false, at("2026-11-30T13:00:00Z")},
		{"override to zero with reservations", override("2026-11-30T11:00:00Z", "2026-11-30T13:00:00Z", "", "", 0),
			[]reservation.Reservation{res(1, now, later, q)}, scaling.Previous{Desired: 1}, now, 1, false, false, later},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			d := scaling.Decide(parsePool(t, tc.extra), tc.rs, tc.prev, tc.at)
			if d.Desired != tc.want || d.Held != tc.held || d.Saturated != tc.saturated || !d.NextChange.Equal(tc.next) {
				t.Fatalf("Decide = desired %d held %v saturated %v next %v (%s)\nwant desired %d held %v saturated %v next %v",
					d.Desired, d.Held, d.Saturated, d.NextChange, d.Reason, tc.want, tc.held, tc.saturated, tc.next)
			}
		})
	}
}

func TestLastScaleOutAndEffectiveTime(t *testing.T) {
	t.Parallel()
	p := parsePool(t, "")
	old, newer := now.Add(-3*time.Minute), now.Add(-time.Minute)
	rs := []reservation.Reservation{
		res(1, old, now.Add(time.Minute), reservation.Queued),
		res(1, newer, now.Add(time.Minute), reservation.InProgress),
		res(1, now, now, reservation.Queued), // expired: its effective time must not count
	}
	d := scaling.Decide(p, rs, scaling.Previous{Desired: 1, LastScaleOut: old}, now)
	if !d.LastScaleOut.Equal(now) || !d.EffectiveTime.Equal(newer) || d.Reservations != 2 {
		t.Fatalf("scale-out: lastScaleOut %v effectiveTime %v reservations %d", d.LastScaleOut, d.EffectiveTime, d.Reservations)
	}
	d = scaling.Decide(p, rs[:1], scaling.Previous{Desired: 2, LastScaleOut: old}, now)
	if !d.LastScaleOut.Equal(old) {
		t.Fatalf("steady: lastScaleOut moved to %v", d.LastScaleOut)
	}
}

func override(start, end, freq, until string, min int) string {
	s := "    scheduledOverrides:\n      - startTime: \"" + start + "\"\n        endTime: \"" + end + "\"\n"
	if freq != "" {
		s += "        recurrenceRule: {frequency: " + freq
		if until != "" {
			s += ", untilTime: \"" + until + "\""
		}
		s += "}\n"
	}
	return s + "        minReplicas: " + string(rune('0'+min)) + "\n"
}

func at(s string) time.Time {
	t, err := time.Parse(time.RFC3339, s)
	if err != nil {
		panic(err)
	}
	return t
}

// TestOldestQueued: the oldest waiting job among active reservations; in-progress,
// completed and expired ones do not count.
func TestOldestQueued(t *testing.T) {
	t.Parallel()
	p := parsePool(t, "")
	later := now.Add(10 * time.Minute)
	rs := []reservation.Reservation{
		res(1, now.Add(-3*time.Minute), later, reservation.InProgress),
		res(1, now.Add(-4*time.Minute), now, reservation.Queued), // expired
		res(1, now.Add(-2*time.Minute), later, reservation.Queued),
		res(1, now.Add(-time.Minute), later, reservation.Queued),
		res(1, now.Add(-5*time.Minute), later, reservation.Completed),
	}
	if d := scaling.Decide(p, rs, scaling.Previous{}, now); !d.OldestQueued.Equal(now.Add(-2 * time.Minute)) {
		t.Fatalf("OldestQueued = %s, want %s", d.OldestQueued, now.Add(-2*time.Minute))
	}
	if d := scaling.Decide(p, rs[:1], scaling.Previous{}, now); !d.OldestQueued.IsZero() {
		t.Fatalf("OldestQueued with no queued job = %s, want zero", d.OldestQueued)
	}
}
