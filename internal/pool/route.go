package pool

import (
	"fmt"
	"slices"
	"strings"
)

// Job is what routing needs to know of a workflow job.
type Job struct {
	// Repository is the job's repository full name (owner/name).
	Repository string
	// Organization is the owning organization's login ("" for a user's repository).
	Organization string
	// Enterprise is the enterprise slug ("" when the delivery names none).
	Enterprise string
	// Labels are the job's `runs-on` labels.
	Labels []string
	// Public: the delivery says the repository is public (repository.private
	// false). A delivery that does not say leaves it false.
	Public bool
}

// Admission says whether a pool's runners can take a job of its repository
// (GitHub hands a job only to runners whose group admits the repository), and
// if not, why. Route asks it only about pools whose scope and labels fit.
type Admission func(p *Pool, job Job) (admitted bool, why string)

// Route returns the pool that should run job: among the pools whose scope covers
// the job — repository first, then organization, then enterprise, each in file order —
// the first whose labels (plus the implied ones) include every job label, compared
// case-insensitively, and that admit admits (nil admits every pool). With no
// match it returns nil and a reason for the log. With a match after pools admit
// refused, the reason says why each was skipped; otherwise it is "".
func (c *Config) Route(job Job, admit Admission) (*Pool, string) {
	var candidates []*Pool
	candidates = append(candidates, c.byRepo[strings.ToLower(job.Repository)]...)
	candidates = append(candidates, c.byOrg[strings.ToLower(job.Organization)]...)
	candidates = append(candidates, c.byEnterprise[strings.ToLower(job.Enterprise)]...)
	if len(candidates) == 0 {
		return nil, fmt.Sprintf("no pool's scope covers repository %q (organization %q, enterprise %q)",
			job.Repository, job.Organization, job.Enterprise)
	}
	var refused []string
	for _, p := range candidates {
		if !p.Accepts(job.Labels) {
			continue
		}
		if admit != nil {
			if ok, why := admit(p, job); !ok {
				refused = append(refused, why)
				continue
			}
		}
		return p, strings.Join(refused, "; ")
	}
	if len(refused) > 0 {
		return nil, strings.Join(refused, "; ")
	}
	names := make([]string, len(candidates))
	for i, p := range candidates {
		names[i] = p.Name
	}
	return nil, fmt.Sprintf("pools %v cover the scope but none has every label of %v", names, job.Labels)
}

// Accepts reports whether every one of labels is among the pool's labels or its
// implied ones (self-hosted, linux and its arch), case-insensitively.
func (p *Pool) Accepts(labels []string) bool {
	have := p.AllLabels()
	for _, l := range labels {
		if !slices.ContainsFunc(have, func(h string) bool { return strings.EqualFold(h, l) }) {
			return false
		}
	}
	return true
}

// AllLabels is the pool's labels followed by the implied ones.
func (p *Pool) AllLabels() []string {
	return append(slices.Clone(p.Labels), "self-hosted", "linux", p.Arch)
}

func (c *Config) index() {
	c.byRepo, c.byOrg, c.byEnterprise = map[string][]*Pool{}, map[string][]*Pool{}, map[string][]*Pool{}
	for i := range c.Pools {
		p := &c.Pools[i]
		switch {
		case p.Repository != "":
			c.byRepo[strings.ToLower(p.Repository)] = append(c.byRepo[strings.ToLower(p.Repository)], p)
		case p.Organization != "":
			c.byOrg[strings.ToLower(p.Organization)] = append(c.byOrg[strings.ToLower(p.Organization)], p)
		default:
			c.byEnterprise[strings.ToLower(p.Enterprise)] = append(c.byEnterprise[strings.ToLower(p.Enterprise)], p)
		}
	}
}
