package loop

import (
	"github.com/runnerscaler/runnerscaler/internal/pool"
)

// admits is the runner group check as GitHub applies it (the simulator's
// truth): the monitor and the stats attribute a job to the pool whose runners
// can take it, as the webhook routes it once the group's access is read.
func (l *Loop) admits(p *pool.Pool, j pool.Job) (bool, string) {
	if p.Group == "" || l.Sim.GroupAdmits(p.Scope(), p.Group, j.Repository) {
		return true, ""
	}
	return false, "group " + p.Group + " of pool " + p.Name + " does not admit repository " + j.Repository
}
