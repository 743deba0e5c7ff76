package loop

import (
	"github.com/runnerscaler/runnerscaler/internal/groupaccess"
	"github.com/runnerscaler/runnerscaler/internal/pool"
)

// admits is the runner group check of the groups the webhook checks
// (groupaccess.Checked), by the simulator's truth: the monitor and the stats
// attribute a job to the pool the webhook routes it to once the group's access
// is read, and whose runners can take it.
func (l *Loop) admits(p *pool.Pool, j pool.Job) (bool, string) {
	if !groupaccess.Checked(p) || l.Sim.GroupAdmits(p.Scope(), p.Group, j.Repository) {
		return true, ""
	}
	return false, "group " + p.Group + " of pool " + p.Name + " does not admit repository " + j.Repository
}
