package sweeper

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/aws/aws-lambda-go/lambdacontext"

	"github.com/runnerscaler/runnerscaler/internal/pool"
	"github.com/runnerscaler/runnerscaler/internal/sweepevent"
)

// ErrNotDrainEntry: a drain command reached the sweeper in Lambda through another
// entry than its drain alias (sweepevent.DrainAlias). Nothing was changed.
var ErrNotDrainEntry = errors.New("a drain command is served only through the sweeper's " +
	sweepevent.DrainAlias + " alias")

// drainEntry accepts a drain command only when Lambda invoked the sweeper through
// its drain alias, which the webhook's role may not invoke: a compromised
// webhook cannot start (or cancel) a teardown. In Lambda every invocation's
// context carries the ARN it was invoked by; a context without one is an
// in-process call (tests, the local loop), which has no entry to check.
func drainEntry(ctx context.Context) error {
	lc, ok := lambdacontext.FromContext(ctx)
	if !ok {
		return nil
	}
	if qualifier(lc.InvokedFunctionArn) != sweepevent.DrainAlias {
		return fmt.Errorf("%w; invoked as %q", ErrNotDrainEntry, lc.InvokedFunctionArn)
	}
	return nil
}

// qualifier is the alias or version of a function ARN
// (arn:PARTITION:lambda:REGION:ACCOUNT:function:NAME:QUALIFIER), "" when it has none.
func qualifier(arn string) string {
	parts := strings.Split(arn, ":")
	if len(parts) != 8 || parts[5] != "function" {
		return ""
	}
	return parts[7]
}

// RemovedPools finds runners that no configured pool owns (inventory.Finder).
type RemovedPools interface {
	// Removed returns the pools that have runners in namespaces but that known
	// does not name, in their draining form, each in the scope its runners record
	// (the sweeper drains only those it serves: served). With an error it still
	// returns the pools it could rebuild.
	Removed(ctx context.Context, namespaces []string, known func(string) bool) ([]*pool.Pool, error)
	// Remaining counts this deployment's runner objects (StatefulSets, pods,
	// Secrets) left in namespaces, by pool, of the pools known names and of its
	// removed pools; pools with none are absent.
	Remaining(ctx context.Context, namespaces []string, known func(string) bool) (map[string]int, error)
}

// DrainMark is the deployment's teardown switch (teardown.Mark).
type DrainMark interface {
	Draining(ctx context.Context) (bool, error)
	SetDraining(ctx context.Context, on bool, now time.Time) error
}

// drain serves a drain event (sweepevent.DrainStart, sweepevent.DrainCancel):
// a drain sweeps every pool, configured or removed, down to zero runners.
func (s *Sweeper) drain(ctx context.Context, action, holder string) (Report, error) {
	if s.opts.Drain == nil {
		return Report{}, fmt.Errorf("drain %q: this sweeper has no drain mark configured", action)
	}
	switch action {
	case sweepevent.DrainCancel:
		if err := s.opts.Drain.SetDraining(ctx, false, s.clock.Now()); err != nil {
			return Report{}, err
		}
		s.log.InfoContext(ctx, "teardown cancelled: pools scale as configured again")
		return Report{}, nil
	case sweepevent.DrainStart:
	default:
		return Report{}, fmt.Errorf("drain %q: want %q or %q", action, sweepevent.DrainStart, sweepevent.DrainCancel)
	}
	if err := s.opts.Drain.SetDraining(ctx, true, s.clock.Now()); err != nil {
		return Report{}, err
	}
	pools, err := s.forSchedule(ctx)
	if err != nil {
		return Report{}, err
	}
	r := s.sweepAll(ctx, pools, holder, false, nil, nil)
	r.Draining = true
	if s.opts.Removed != nil {
		if r.Remaining, err = s.opts.Removed.Remaining(ctx, namespaces(s.configured(), pools), s.known); err != nil {
			return r, fmt.Errorf("counting what is left: %w", err)
		}
	}
	s.log.InfoContext(ctx, "teardown sweep", "swept", r.Swept, "skipped", r.Skipped, "failed", r.Failed, "remaining", r.Remaining)
	return r, nil // failed pools are in the report: the caller sweeps again
}

// configured is every pool of the file.
func (s *Sweeper) configured() []*pool.Pool {
	all := make([]*pool.Pool, len(s.pools.Pools))
	for i := range s.pools.Pools {
		all[i] = &s.pools.Pools[i]
	}
	return all
}

// forSchedule is what a scheduled sweep sweeps: the configured pools (drained
// during a teardown) and the pools removed from the file that still have runners
// in the configured pools' namespaces (always drained) in a scope this
// deployment serves (served). A removed pool whose runners cannot be placed, or
// whose scope it does not serve, is logged and left alone.
func (s *Sweeper) forSchedule(ctx context.Context) ([]*pool.Pool, error) {
	all, err := s.forNudge(ctx, s.configured())
	if err != nil || s.opts.Removed == nil {
		return all, err
	}
	removed, err := s.opts.Removed.Removed(ctx, namespaces(s.configured(), nil), s.known)
	removed, serr := s.served(ctx, removed)
	if err = errors.Join(err, serr); err != nil {
		s.log.ErrorContext(ctx, "runners of removed pools left alone", "error", err)
	}
	for _, p := range removed {
		s.log.InfoContext(ctx, "draining the runners of a pool removed from the pools file", "pool", p.Name, "namespace", p.Kubernetes.Namespace)
	}
	return append(all, removed...), nil
}

// forNudge returns pools as they are, or drained during a teardown.
func (s *Sweeper) forNudge(ctx context.Context, pools []*pool.Pool) ([]*pool.Pool, error) {
	if s.opts.Drain == nil {
		return pools, nil
	}
	draining, err := s.opts.Drain.Draining(ctx)
	if err != nil || !draining {
		return pools, err
	}
	out := make([]*pool.Pool, len(pools))
	for i, p := range pools {
		out[i] = p.Draining()
	}
	return out, nil
}

// known: the pools file has a pool of that name.
func (s *Sweeper) known(name string) bool { return s.pools.Pool(name) != nil }

// namespaces of the pools, each once, sorted.
func namespaces(a, b []*pool.Pool) []string {
	var out []string
	for _, p := range append(slices.Clone(a), b...) {
		if !slices.Contains(out, p.Kubernetes.Namespace) {
			out = append(out, p.Kubernetes.Namespace)
		}
	}
	slices.Sort(out)
	return out
}
