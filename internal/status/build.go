package status

import (
	"fmt"
	"math"
	"slices"
	"sort"
	"strings"
	"time"
)

// Build makes the report at now: per pool, runner counts, busy runners (a job
// in progress names them), queued jobs oldest first with why each waits.
// unrouted are the jobs no pool matched.
func Build(now time.Time, pools []Input, unrouted []Job) Report {
	r := Report{At: now, Pools: make([]Pool, 0, len(pools))}
	for _, in := range pools {
		r.Pools = append(r.Pools, buildPool(now, in))
	}
	for _, j := range unrouted {
		j.AgeSeconds = age(now, j.FirstSeen)
		r.Unrouted = append(r.Unrouted, j)
	}
	return r
}

func buildPool(now time.Time, in Input) Pool {
	p := Pool{Name: in.Pool, MinReplicas: in.MinReplicas, MaxReplicas: in.MaxReplicas, LastSweep: in.Sweep,
		Runners: markBusy(in.Runners, slices.Concat(in.Jobs, in.MovedIn)), Queued: []Job{}, InProgress: []Job{}, WaitingForApproval: []Job{}}
	if in.Sweep != nil {
		p.Desired = in.Sweep.Desired
	}
	p.QueueWait = newQueueWait(in.WaitWindow, in.Waits)
	for _, rn := range p.Runners {
		switch rn.Phase {
		case PhaseRunning:
			p.Running++
		case PhasePending:
			p.Pending++
		case PhaseStopping, PhaseTerminating:
			p.Stopping++
		}
	}
	reserved := 0
	for _, j := range slices.Concat(in.Jobs, in.MovedIn) {
		if j.Expires.After(now) && j.HeldSince.IsZero() && countsHere(in.Pool, j) {
			reserved += j.Amount
		}
	}
	p.Saturated = reserved > in.MaxReplicas
	p.Moves = moves(in.Pool, in.Jobs, in.MovedIn)
	for _, j := range in.Jobs {
		j.AgeSeconds = age(now, j.FirstSeen)
		if !j.HeldSince.IsZero() {
			p.WaitingForApproval = append(p.WaitingForApproval, held(now, j))
		} else if j.State == "queued" && !countsHere(in.Pool, j) {
			j.Waiting = fmt.Sprintf("spilled to pool %s, which counts it", j.CountedIn)
			p.Queued = append(p.Queued, j)
		} else if j.State == "queued" {
			j.Waiting = whyWaiting(now, p, reserved, j)
			p.Queued = append(p.Queued, j)
		} else {
			p.InProgress = append(p.InProgress, j)
		}
	}
	sort.SliceStable(p.Queued, func(a, b int) bool { return p.Queued[a].FirstSeen.Before(p.Queued[b].FirstSeen) })
	sort.SliceStable(p.WaitingForApproval, func(a, b int) bool {
		return p.WaitingForApproval[a].HeldSince.Before(p.WaitingForApproval[b].HeldSince)
	})
	return p
}

// newQueueWait sums up waits, of jobs started within window.
func newQueueWait(window time.Duration, waits []time.Duration) QueueWait {
	q := QueueWait{WindowSeconds: window.Seconds(), Jobs: len(waits)}
	if len(waits) == 0 {
		return q
	}
	sorted := slices.Clone(waits)
	slices.Sort(sorted)
	q.P50Seconds = Percentile(sorted, 50).Seconds()
	q.P95Seconds = Percentile(sorted, 95).Seconds()
	return q
}

// Percentile is the nearest-rank p-th percentile (0 < p <= 100) of sorted, an
// ascending list: its smallest value that at least p % of the values do not
// exceed. It is 0 for an empty list.
func Percentile(sorted []time.Duration, p float64) time.Duration {
	if len(sorted) == 0 {
		return 0
	}
	rank := int(math.Ceil(p / 100 * float64(len(sorted))))
	return sorted[min(max(rank, 1), len(sorted))-1]
}

// markBusy marks the runners a job in progress names (by runner name).
func markBusy(runners []Runner, jobs []Job) []Runner {
	out := make([]Runner, len(runners))
	copy(out, runners)
	byName := map[string]int64{}
	for _, j := range jobs {
		if j.State == "in_progress" && j.RunnerName != "" {
			byName[j.RunnerName] = j.ID
		}
	}
	for i := range out {
		if id, ok := byName[out[i].Name]; ok {
			out[i].Busy, out[i].Job = true, id
		}
	}
	return out
}

// whyWaiting explains a queued job, most decisive reason first.
func whyWaiting(now time.Time, p Pool, reserved int, j Job) string {
	switch {
	case !j.Expires.After(now):
		return fmt.Sprintf("reservation expired %s ago: no longer counted (its delivery may be lost; a redelivery revives it)",
			short(now.Sub(j.Expires)))
	case p.LastSweep == nil:
		return "pool never swept yet"
	case p.LastSweep.At.Before(j.FirstSeen):
		return fmt.Sprintf("not swept since it was queued (last sweep %s ago)", short(now.Sub(p.LastSweep.At)))
	case p.Saturated:
		return fmt.Sprintf("pool at maxReplicas (%d): %d jobs reserve capacity", p.MaxReplicas, reserved)
	}
	if why := pendingRunners(now, p.Runners); why != "" {
		return why
	}
	live := p.Running + p.Pending
	switch {
	case live < p.Desired && p.Stopping > 0:
		return fmt.Sprintf("creation held: %d runners still stopping count against maxReplicas (%d)", p.Stopping, p.MaxReplicas)
	case live < p.Desired:
		return fmt.Sprintf("creation held: the last sweep wanted %d runners, %d exist%s", p.Desired, live, failedNote(p.LastSweep))
	case idle(p.Runners) > 0:
		return fmt.Sprintf("%d idle runners have not taken it: check the job's labels and whether the runner group admits its repository", idle(p.Runners))
	}
	return "waiting for the next sweep to add a runner" + failedNote(p.LastSweep)
}

// pendingRunners describes the runners still starting: those with a known reason
// first (an image that cannot be pulled, a missing service account, ...).
func pendingRunners(now time.Time, runners []Runner) string {
	var stuck, starting []Runner
	for _, rn := range runners {
		switch {
		case rn.Phase != PhasePending:
		case rn.Reason != "":
			stuck = append(stuck, rn)
		default:
			starting = append(starting, rn)
		}
	}
	switch {
	case len(stuck) > 0:
		return fmt.Sprintf("runner %s pending: %s%s", stuck[0].Name, stuck[0].Reason, more(len(stuck)-1))
	case len(starting) > 0:
		return fmt.Sprintf("runner %s starting (created %s ago)%s", starting[0].Name, short(now.Sub(starting[0].Created)), more(len(starting)-1))
	}
	return ""
}

func idle(runners []Runner) int {
	n := 0
	for _, rn := range runners {
		if rn.Phase == PhaseRunning && !rn.Busy {
			n++
		}
	}
	return n
}

func failedNote(s *Sweep) string {
	if s != nil && s.Failed {
		return "; the last sweep failed (see recent errors)"
	}
	return ""
}

func more(n int) string {
	if n <= 0 {
		return ""
	}
	return fmt.Sprintf(" (and %d more)", n)
}

func age(now, t time.Time) float64 {
	if t.IsZero() {
		return 0
	}
	return now.Sub(t).Round(time.Millisecond).Seconds()
}

// short prints a duration to the second (to the minute past an hour).
func short(d time.Duration) string {
	if d < 0 {
		d = 0
	}
	if d >= time.Hour {
		d = d.Round(time.Minute)
	} else {
		d = d.Round(time.Second)
	}
	s := d.String()
	if strings.HasSuffix(s, "m0s") {
		s = strings.TrimSuffix(s, "0s")
	}
	return s
}

// NewTrace follows job to its runner among runners (the pool's, now): Runner is
// set when the runner that took it still exists, RunnerGone when it took the
// job but is gone.
func NewTrace(now time.Time, job Job, runners []Runner) Trace {
	job.AgeSeconds = age(now, job.FirstSeen)
	t := Trace{Job: job, Active: job.State != "completed" && job.Expires.After(now) && job.HeldSince.IsZero()}
	if job.RunnerName == "" {
		return t
	}
	for _, rn := range runners {
		if rn.Name == job.RunnerName {
			rn.Busy, rn.Job = job.State == "in_progress", job.ID
			t.Runner = &rn
			return t
		}
	}
	t.RunnerGone = true
	return t
}
