package loop

import (
	"sync"
	"time"

	"github.com/runnerscaler/runnerscaler/internal/sweeper"
)

// cleanSweeps records, for each pool, when the last two sweeper invocations
// that swept it to the end began: those whose Report lists the pool as swept
// (not skipped for another holder, not failed, not killed: a killed or faulted
// sweep of the pool reports it failed). It is the barrier judgeWaits uses: a
// pool short of runners is the product's fault once two sweeps that began after
// the shortfall have finished without making up for it, however long those
// sweeps took on a loaded machine.
type cleanSweeps struct {
	mu sync.Mutex
	// began: pool → start times of its last two clean sweeps, in the order they ended.
	began map[string][2]time.Time
}

// record notes an invocation that began at start and reported r.
func (c *cleanSweeps) record(start time.Time, r sweeper.Report) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.began == nil {
		c.began = map[string][2]time.Time{}
	}
	for _, p := range r.Swept {
		last := c.began[p]
		c.began[p] = [2]time.Time{last[1], start}
	}
}

// after counts how many of the pool's last two clean sweeps began after t.
func (c *cleanSweeps) after(pool string, t time.Time) int {
	c.mu.Lock()
	defer c.mu.Unlock()
	n := 0
	for _, b := range c.began[pool] {
		if b.After(t) {
			n++
		}
	}
	return n
}
