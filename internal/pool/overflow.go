package pool

import (
	"fmt"
	"strings"
)

// Spill-over. A pool with overflowTo names the pool that serves its queued jobs
// while it is saturated (its reservations ask for more than maxReplicas): the
// sweeper moves the newest of them, enough to cover the excess, to that pool,
// when it takes them (Takes). The target may name its own overflowTo; a chain
// may not come back to a pool it left.

// Overflow is the pool that p spills to, or nil when it spills nowhere.
func (c *Config) Overflow(p *Pool) *Pool {
	if p.OverflowTo == "" {
		return nil
	}
	return c.Pool(p.OverflowTo)
}

// Takes reports whether job may run on p: p's scope covers the job's
// repository, organization or enterprise, and p's labels include every one of
// the job's. A job without labels is taken by no pool.
func (p *Pool) Takes(job Job) bool {
	return len(job.Labels) > 0 && p.Covers(job) && p.Accepts(job.Labels)
}

// Covers reports whether p's scope covers job, as routing compares them
// (case-insensitively).
func (p *Pool) Covers(job Job) bool {
	switch {
	case p.Repository != "":
		return strings.EqualFold(p.Repository, job.Repository)
	case p.Organization != "":
		return strings.EqualFold(p.Organization, job.Organization)
	}
	return p.Enterprise != "" && strings.EqualFold(p.Enterprise, job.Enterprise)
}

// validateOverflow checks p's overflowTo: it names another pool of the file,
// and following overflowTo from p never comes back to it.
func (c *Config) validateOverflow(p *Pool) error {
	switch {
	case p.OverflowTo == "":
		return nil
	case p.OverflowTo == p.Name:
		return fmt.Errorf("overflowTo: %q is the pool itself", p.OverflowTo)
	case c.Pool(p.OverflowTo) == nil:
		return fmt.Errorf("overflowTo: no pool is named %q", p.OverflowTo)
	}
	if chain, ok := c.overflowCycle(p); ok {
		return fmt.Errorf("overflowTo: the overflow chain %s comes back to %s", strings.Join(chain, " -> "), p.Name)
	}
	return nil
}

// overflowCycle follows overflowTo from p; ok is true, with the chain, when it
// comes back to p.
func (c *Config) overflowCycle(p *Pool) (chain []string, ok bool) {
	chain = []string{p.Name}
	seen := map[string]bool{p.Name: true}
	for next := c.Pool(p.OverflowTo); next != nil; next = c.Pool(next.OverflowTo) {
		chain = append(chain, next.Name)
		if next.Name == p.Name {
			return chain, true
		}
		if seen[next.Name] {
			return nil, false // a cycle that p only leads into: reported from its own pools
		}
		seen[next.Name] = true
	}
	return nil, false
}
