// Package scaling decides how many runners a pool wants: a pure function of the
// pool's spec, its active reservations, the previous decision and the time, with
// ARC v0.22's HorizontalRunnerAutoscaler semantics:
//
//	minReplicas' = the first active scheduled override's minReplicas, else the pool's
//	desired      = clamp(minReplicas' + Σ amount of active reservations, minReplicas', maxReplicas)
//
// A decrease is held at the previous desired count until
// scaleDownDelaySecondsAfterScaleOut has passed since the last scale-out; an
// increase is never delayed and records its time as the last scale-out.
package scaling

import (
	"fmt"
	"time"

	"github.com/teambition/rrule-go"

	"github.com/runnerscaler/runnerscaler/internal/pool"
	"github.com/runnerscaler/runnerscaler/internal/reservation"
)

// Previous is what the last decision left behind (from the pool status item).
type Previous struct {
	Desired      int
	LastScaleOut time.Time
}

// Decision is the desired state of a pool at one instant, and why.
type Decision struct {
	// Desired is the number of runners the pool should have.
	Desired int
	// MinReplicas is the floor in force (after scheduled overrides).
	MinReplicas int
	// Override is the index of the scheduled override in force, or -1.
	Override int
	// Reserved sums the amounts of the active reservations.
	Reserved int
	// Reservations counts the active reservations.
	Reservations int
	// Queued sums the amounts of active reservations whose job still waits for a
	// runner (state queued).
	Queued int
	// OldestQueued is the effective time (first delivery seen) of the oldest active
	// reservation whose job still waits; zero when none waits.
	OldestQueued time.Time
	// Saturated is true when the reservations ask for more than maxReplicas allows.
	Saturated bool
	// Held is true when a decrease is being held back by the scale-down delay.
	Held bool
	// LastScaleOut is the last time desired increased (now, if it does now).
	LastScaleOut time.Time
	// EffectiveTime is the newest effective time among active reservations (zero if none).
	EffectiveTime time.Time
	// NextChange is the earliest time the decision could change with no new
	// delivery: an override boundary, a reservation expiry or the end of a hold.
	// Zero when nothing is scheduled to change.
	NextChange time.Time
	// Finished names the runners (GitHub names) a nudge reported their job
	// completed on; the reconciler checks each against the job↔runner link
	// before it counts the runner out (package reconcile, finishing.go). It
	// is not part of the decision itself: Decide leaves it empty.
	Finished []string
	// Reason says in one line how Desired came about.
	Reason string
}

// Decide computes the pool's desired runner count at now. Reservations that are not
// active at now (completed, or expired at or before now) are ignored, so the caller
// may pass a slightly stale list.
func Decide(p *pool.Pool, reservations []reservation.Reservation, prev Previous, now time.Time) Decision {
	d := Decision{Override: -1, MinReplicas: p.MinReplicas, LastScaleOut: prev.LastScaleOut}
	var next []time.Time
	if i, boundary, active := activeOverride(p.ScheduledOverrides, now); active {
		d.Override, d.MinReplicas = i, *p.ScheduledOverrides[i].MinReplicas
		next = append(next, boundary)
	} else if !boundary.IsZero() {
		next = append(next, boundary)
	}
	for _, r := range reservations {
		if r.State >= reservation.Completed || !r.ExpirationTime.After(now) {
			continue
		}
		d.Reserved += r.Amount
		d.Reservations++
		if r.State == reservation.Queued {
			d.Queued += r.Amount
			if d.OldestQueued.IsZero() || r.EffectiveTime.Before(d.OldestQueued) {
				d.OldestQueued = r.EffectiveTime
			}
		}
		next = append(next, r.ExpirationTime)
		if r.EffectiveTime.After(d.EffectiveTime) {
			d.EffectiveTime = r.EffectiveTime
		}
	}
	target := d.MinReplicas + d.Reserved
	if target > p.Max() {
		target, d.Saturated = p.Max(), true
	}
	d.Desired = target
	switch {
	case target > prev.Desired:
		d.LastScaleOut = now
		d.Reason = fmt.Sprintf("scale out %d -> %d", prev.Desired, target)
	case target < prev.Desired:
		release := prev.LastScaleOut.Add(p.ScaleDownDelay())
		if now.Before(release) {
			d.Desired, d.Held = min(prev.Desired, p.Max()), true
			next = append(next, release)
			d.Reason = fmt.Sprintf("scale in %d -> %d held until %s (scale-down delay)", prev.Desired, target, release.Format(time.RFC3339))
		} else {
			d.Reason = fmt.Sprintf("scale in %d -> %d", prev.Desired, target)
		}
	default:
		d.Reason = fmt.Sprintf("steady at %d", target)
	}
	d.Reason += fmt.Sprintf(" (min %d, reserved %d by %d jobs, max %d)", d.MinReplicas, d.Reserved, d.Reservations, p.Max())
	d.NextChange = earliest(next)
	return d
}

// activeOverride returns the first override active at now, with the end of its
// current window. When none is active it returns the earliest future window start
// of any override as boundary (zero if none).
func activeOverride(overrides []pool.ScheduledOverride, now time.Time) (index int, boundary time.Time, active bool) {
	var starts []time.Time
	for i, o := range overrides {
		start, end, ok := window(o, now)
		if ok && !now.Before(start) && now.Before(end) {
			return i, end, true
		}
		if ok && start.After(now) {
			starts = append(starts, start)
		}
	}
	return -1, earliest(starts), false
}

// window returns the override's window that contains now, or else its next window
// after now; ok is false when it has no window at or after now.
func window(o pool.ScheduledOverride, now time.Time) (start, end time.Time, ok bool) {
	length := o.EndTime.Sub(o.StartTime.Time)
	if o.RecurrenceRule == nil {
		return o.StartTime.Time, o.EndTime.Time, now.Before(o.EndTime.Time)
	}
	r, err := rrule.NewRRule(rrule.ROption{
		Freq: frequency(o.RecurrenceRule.Frequency), Dtstart: o.StartTime.Time, Until: o.RecurrenceRule.UntilTime.Time,
	})
	if err != nil { // the frequency was validated at load; an error here means no recurrence
		return o.StartTime.Time, o.EndTime.Time, now.Before(o.EndTime.Time)
	}
	if last := r.Before(now, true); !last.IsZero() && now.Before(last.Add(length)) {
		return last, last.Add(length), true
	}
	if nxt := r.After(now, false); !nxt.IsZero() {
		return nxt, nxt.Add(length), true
	}
	return time.Time{}, time.Time{}, false
}

func frequency(f string) rrule.Frequency {
	switch f {
	case "Daily":
		return rrule.DAILY
	case "Weekly":
		return rrule.WEEKLY
	case "Monthly":
		return rrule.MONTHLY
	default:
		return rrule.YEARLY
	}
}

func earliest(ts []time.Time) time.Time {
	var e time.Time
	for _, t := range ts {
		if !t.IsZero() && (e.IsZero() || t.Before(e)) {
			e = t
		}
	}
	return e
}
