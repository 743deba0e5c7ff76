package reservation

import (
	"fmt"
	"slices"
	"testing"
	"time"
)

var lifeT0 = time.Date(2026, 12, 3, 10, 0, 0, 0, time.UTC)

// step is one delivery of a job's life: its name, state and delivery id.
func step(name string, awaits bool) Delivery {
	state := map[string]State{"q1": Queued, "q2": Queued, "w": Waiting, "ip": InProgress, "c": Completed}[name]
	return Delivery{Pool: "p", JobID: 1, RunID: 7, Repository: "o/r", DeliveryID: "d-" + name, State: state, Amount: 1,
		Duration: 10 * time.Minute, AwaitsApproval: awaits && name == "q1"}
}

// holdsRunner: the job asks its pool for a runner.
func holdsRunner(r Reservation) bool { return r.State < Completed && !r.Held() }

// wantAfter is the job after the deliveries in got, in any order: its state,
// its hold, and whether it asks for a runner (hinted: the first queued says
// the job waits, as the waiting does).
func wantAfter(got map[string]bool, hinted bool) (State, bool, bool) {
	waiting := got["w"] || hinted && got["q1"]
	switch {
	case got["c"]:
		return Completed, false, false
	case got["ip"]:
		return InProgress, false, true
	case waiting && !(got["q1"] && got["q2"]):
		return Queued, true, false
	}
	return Queued, false, true
}

func orders(xs []string) [][]string {
	if len(xs) <= 1 {
		return [][]string{slices.Clone(xs)}
	}
	var out [][]string
	for i, x := range xs {
		rest := append(slices.Clone(xs[:i]), xs[i+1:]...)
		for _, o := range orders(rest) {
			out = append(out, append([]string{x}, o...))
		}
	}
	return out
}

// TestTransitionInEveryOrder drives transition alone through the five
// deliveries of a job held for an approval in each of their 120 orders, each
// redelivered at once and all again at the end, with and without a first
// `queued` that says the job waits: after each delivery the job's state, hold
// and demand are those of the deliveries received so far, and a redelivery
// changes nothing (Stale, the item unchanged).
func TestTransitionInEveryOrder(t *testing.T) {
	t.Parallel()
	for _, hinted := range []bool{false, true} {
		for _, order := range orders([]string{"q1", "w", "q2", "ip", "c"}) {
			l := lifecycle{now: lifeT0, retention: DefaultRetention}
			var r Reservation
			exists := false
			got := map[string]bool{}
			apply := func(name string) Outcome {
				l.now = l.now.Add(time.Second)
				next, out := l.transition(r, exists, step(name, hinted))
				if out == Stale || out == TooOld {
					if !equalItems(next, r) {
						t.Fatalf("hinted=%v %v: %s was %s but changed the item", hinted, order, name, out)
					}
					return out
				}
				r, exists = next, true
				return out
			}
			for _, name := range order {
				apply(name)
				got[name] = true
				state, held, demand := wantAfter(got, hinted)
				if r.State != state || r.Held() != held || holdsRunner(r) != demand {
					t.Fatalf("hinted=%v %v after %s: %s held=%v demand=%v, want %s held=%v demand=%v",
						hinted, order, name, r.State, r.Held(), holdsRunner(r), state, held, demand)
				}
				if out := apply(name); out != Stale {
					t.Fatalf("hinted=%v %v: %s redelivered = %s, want stale", hinted, order, name, out)
				}
			}
			for _, name := range order {
				if out := apply(name); out != Stale {
					t.Fatalf("hinted=%v %v: %s redelivered at the end = %s, want stale", hinted, order, name, out)
				}
			}
		}
	}
}

func equalItems(a, b Reservation) bool { return fmt.Sprintf("%+v", a) == fmt.Sprintf("%+v", b) }

// TestTransitionOutcomes: each rule of the life cycle, one delivery at a time.
func TestTransitionOutcomes(t *testing.T) {
	t.Parallel()
	l := lifecycle{now: lifeT0, retention: DefaultRetention}
	queued, _ := l.transition(Reservation{}, false, step("q1", false))
	held, _ := l.transition(queued, true, step("w", false))
	completed, _ := l.transition(queued, true, step("c", false))
	spilled := queued
	spilled.CountedIn, spilled.MovedBy = "big", MovedBySpill
	old := step("q1", false)
	old.Created = lifeT0.Add(-2 * DefaultRetention)
	for _, tc := range []struct {
		name   string
		item   Reservation
		exists bool
		d      Delivery
		want   Outcome
		check  func(Reservation) bool
	}{
		{"queued creates the job", Reservation{}, false, step("q1", false), Applied,
			func(r Reservation) bool {
				return r.State == Queued && holdsRunner(r) && r.EffectiveMillis == lifeT0.UnixMilli()
			}},
		{"a queued that says it waits creates it held", Reservation{}, false, step("q1", true), Held, Reservation.Held},
		{"a queued of a job created over the retention ago creates nothing", Reservation{}, false, old, TooOld, nil},
		{"waiting holds a queued job", queued, true, step("w", false), Held, Reservation.Held},
		{"waiting brings a spilled job's count home", spilled, true, step("w", false), Held,
			func(r Reservation) bool { return !r.Moved() }},
		{"waiting creates a job held", Reservation{}, false, step("w", false), Held, Reservation.Held},
		{"the approval's queued releases a held job", held, true, step("q2", false), Released,
			func(r Reservation) bool { return holdsRunner(r) && r.SeenApproved != nil }},
		{"a late queued of a completed job is stale", completed, true, step("q2", false), Stale, nil},
		{"in_progress ends a hold", held, true, step("ip", false), Applied,
			func(r Reservation) bool { return r.State == InProgress && holdsRunner(r) }},
		{"a late in_progress of a completed job is stale", completed, true, step("ip", false), Stale, nil},
		{"completed frees the runner, and the TTL runs from now", queued, true, step("c", false), Applied,
			func(r Reservation) bool { return !holdsRunner(r) && r.TTL == lifeT0.Add(DefaultRetention).Unix() }},
	} {
		got, out := l.transition(tc.item, tc.exists, tc.d)
		if out != tc.want || tc.check != nil && !tc.check(got) {
			t.Errorf("%s: %s, %+v; want %s", tc.name, out, got, tc.want)
		}
	}
}

// TestCheckedSettlesAHeldJobByGitHub: GitHub's answer about a held job,
// applied by checked: waiting keeps it held and records the check; queued
// releases it; in progress and completed move it forward; gone completes it;
// a job not held is left alone.
func TestCheckedSettlesAHeldJobByGitHub(t *testing.T) {
	t.Parallel()
	l := lifecycle{now: lifeT0, retention: DefaultRetention}
	// The approval's queued alone after the waiting: the first queued lost.
	held, _ := l.transition(Reservation{}, false, step("w", false))
	held, _ = l.transition(held, true, step("q2", false))
	if !held.Held() {
		t.Fatal("a waiting and one queued: want the job held")
	}
	queued, _ := l.transition(Reservation{}, false, step("q1", false))
	d := Delivery{Duration: 10 * time.Minute}
	for _, tc := range []struct {
		status string
		item   Reservation
		want   Outcome
		check  func(Reservation) bool
	}{
		{GitHubWaiting, held, Held, func(r Reservation) bool { return r.Held() && r.HeldCheckedMillis == lifeT0.UnixMilli() }},
		{GitHubQueued, held, Released, func(r Reservation) bool { return holdsRunner(r) && r.SeenApproved != nil }},
		{GitHubInProgress, held, Applied, func(r Reservation) bool { return r.State == InProgress && holdsRunner(r) }},
		{GitHubCompleted, held, Applied, func(r Reservation) bool { return r.State == Completed }},
		{GitHubGone, held, Applied, func(r Reservation) bool { return r.State == Completed }},
		{GitHubCompleted, queued, Stale, func(r Reservation) bool { return r.State == Queued }},
	} {
		got, out := l.checked(tc.item, tc.status, d)
		if out != tc.want || !tc.check(got) {
			t.Errorf("%s on %s held=%v: %s, %+v; want %s", tc.status, tc.item.State, tc.item.Held(), out, got, tc.want)
		}
	}
}
