package scaling

import (
	"time"

	"github.com/runnerscaler/runnerscaler/internal/pool"
)

// Headroom is how many placeholder pods the pool wants at now: the replicas of
// the first headroom override active at now, else headroom.replicas; 0 for a
// pool without headroom (a draining pool has none: pool.Draining). The
// overrides' windows are evaluated as the scheduled overrides' are.
func Headroom(p *pool.Pool, now time.Time) int {
	h := p.Headroom
	if h == nil || p.IsDraining() {
		return 0
	}
	windows := make([]pool.ScheduledOverride, len(h.ScheduledOverrides))
	for i, o := range h.ScheduledOverrides {
		windows[i] = o.Window()
	}
	if i, _, active := activeOverride(windows, now); active {
		return *windows[i].MinReplicas
	}
	return h.Replicas
}
