package status

import "fmt"

// Why a job is counted outside the pool it was routed to (Job.MovedBy).
const (
	// MovedByRunner: a runner of the counting pool took it.
	MovedByRunner = "runner"
	// MovedBySpill: its pool was saturated and spilled it to its overflow pool.
	MovedBySpill = "spill"
)

// Directions of a Move, as the pool that lists it sees it.
const (
	// MovedHere: the pool counts a job routed to another pool.
	MovedHere = "counted-here"
	// MovedAway: a job routed to the pool is counted in another pool.
	MovedAway = "counted-elsewhere"
)

// Move is an unfinished job counted in another pool than the one it was
// routed to, as one of the two pools lists it.
type Move struct {
	Job int64 `json:"job"`
	// Home is the pool the job was routed to; CountedIn the one that counts it.
	Home      string `json:"home"`
	CountedIn string `json:"countedIn"`
	// Direction is MovedHere or MovedAway.
	Direction string `json:"direction"`
	// Reason is MovedByRunner or MovedBySpill.
	Reason string `json:"reason"`
	Runner string `json:"runner,omitempty"`
	// Text says it in one line.
	Text string `json:"text"`
}

// moves lists the pool's jobs counted elsewhere, then the jobs of other pools
// it counts (movedIn).
func moves(pool string, jobs, movedIn []Job) []Move {
	var out []Move
	for _, j := range jobs {
		if j.CountedIn != "" && j.CountedIn != pool {
			out = append(out, newMove(j, pool, MovedAway))
		}
	}
	for _, j := range movedIn {
		out = append(out, newMove(j, j.Pool, MovedHere))
	}
	return out
}

func newMove(j Job, home, direction string) Move {
	m := Move{Job: j.ID, Home: home, CountedIn: j.CountedIn, Direction: direction, Reason: j.MovedBy, Runner: j.RunnerName}
	switch {
	case m.Reason == MovedBySpill:
		m.Text = fmt.Sprintf("job %d spilled from %s to %s", j.ID, home, j.CountedIn)
	case m.Runner != "":
		m.Text = fmt.Sprintf("job %d of pool %s runs on runner %s", j.ID, home, j.RunnerName)
	default:
		m.Text = fmt.Sprintf("job %d of pool %s is counted in %s", j.ID, home, j.CountedIn)
	}
	return m
}

// countsHere reports whether the pool that lists j among its own jobs counts it.
func countsHere(pool string, j Job) bool { return j.CountedIn == "" || j.CountedIn == pool }

// moveRows lists every pool's moves, a row each.
func moveRows(pools []Pool) [][]string {
	var rows [][]string
	for _, p := range pools {
		for _, m := range p.Moves {
			rows = append(rows, []string{p.Name, m.Direction, i64(m.Job), m.Text})
		}
	}
	return rows
}
