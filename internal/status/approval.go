package status

import (
	"fmt"
	"time"
)

// held is j, a job held for its environment's approval, as the report shows it:
// its age counts from the hold, and it waits for a person, not a runner.
func held(now time.Time, j Job) Job {
	j.AgeSeconds = age(now, j.HeldSince)
	j.Waiting = "waiting for its environment's approval: holds no runner until it is approved"
	return j
}

// approvalCell is the pools table's count of jobs waiting for an approval, with
// how long the longest held has waited ("-": none).
func approvalCell(held []Job) string {
	if len(held) == 0 {
		return "-"
	}
	return fmt.Sprintf("%d (oldest %s)", len(held), secs(held[0].AgeSeconds))
}

// approvalRows lists the pools' jobs waiting for an approval, a row each.
func approvalRows(pools []Pool) [][]string {
	var rows [][]string
	for _, p := range pools {
		for _, j := range p.WaitingForApproval {
			rows = append(rows, []string{p.Name, i64(j.ID), j.Repository, secs(j.AgeSeconds)})
		}
	}
	return rows
}
