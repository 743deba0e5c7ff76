package pool

import "github.com/runnerscaler/runnerscaler/internal/scope"

// Draining returns a copy of p that wants no runners: maxReplicas 0, no
// minReplicas, no scheduled override, no scale-down delay, no headroom. The sweeper sweeps a
// pool removed from the file, and every pool during a teardown, in this form, so
// its runners go through the same graceful stop as a scale-down. Configured pools
// have maxReplicas >= 1, so Max() == 0 means draining.
func (p *Pool) Draining() *Pool {
	d := *p
	zero := 0
	d.MinReplicas, d.MaxReplicas, d.ScaleDownDelaySecondsAfterScaleOut = 0, &zero, &zero
	d.ScheduledOverrides, d.Headroom = nil, nil
	return &d
}

// IsDraining reports whether the pool wants no runners at all (see Draining).
func (p *Pool) IsDraining() bool { return p.MaxReplicas != nil && *p.MaxReplicas == 0 }

// Removed is a pool that is no longer in the file but still has runners in
// namespace, as recorded on them (their scope and whether they are ephemeral):
// enough to unregister and delete them, in the Draining form.
func Removed(name, namespace string, s scope.Scope, ephemeral bool) *Pool {
	p := &Pool{Name: name, Enterprise: s.Enterprise, Organization: s.Organization, Repository: s.Repository,
		Ephemeral: &ephemeral, Kubernetes: Kubernetes{Namespace: namespace}}
	return p.Draining()
}
