package sweeper

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"

	"k8s.io/apimachinery/pkg/util/validation"

	"github.com/runnerscaler/runnerscaler/internal/pool"
	"github.com/runnerscaler/runnerscaler/internal/reservation"
)

// refill serves a refill nudge: the webhook nudges when a job completed on
// one of the pool's runners (ev.Finished names them). An ephemeral runner runs
// one job: once GitHub reports it completed, the runner takes no other, but
// its container exits a moment later, and only then is it stopped,
// unregistered and deleted. While jobs wait for the pool, the nudge sweeps at
// once with the finished runners named: the reconciler counts out those whose
// every linked job is completed (scaling.Decision.Finished), so their
// replacements are created without waiting for the exit. Then, while jobs
// wait or a named runner is being stopped (deleted, evicted, scaled down) —
// its unregistration must come before GitHub hands it another job —
// awaitExit gives the named runners' containers up to RefillWait to exit and
// the nudge sweeps again, which stops them by the usual rules. When no job
// waits and no named runner is being stopped, there is nothing to do at once:
// the next scheduled sweep replaces the finished runners.
func (s *Sweeper) refill(ctx context.Context, pools []*pool.Pool, ev Event, holder string) Report {
	p := pools[0]
	log := s.log.With("pool", p.Name, "finished", ev.Finished)
	watcher, ok := s.reconciler.(RunnerWatcher)
	if !ok {
		return s.sweepAll(ctx, pools, holder, true, ev.Jobs, ev.Finished)
	}
	waiting, err := s.waitingJobs(ctx, p)
	if err != nil {
		log.WarnContext(ctx, "refill: cannot read the pool's reservations; sweeping anyway", "error", err)
		return s.sweepAll(ctx, pools, holder, true, ev.Jobs, ev.Finished)
	}
	if waiting > 0 {
		first := s.sweepAll(ctx, pools, holder, true, ev.Jobs, ev.Finished)
		if len(first.Failed) > 0 {
			log.WarnContext(ctx, "refill: the sweep at the completion failed; sweeping again once the runners exited")
		}
	} else {
		stopping, err := watcher.Stopping(ctx, p, ev.Finished)
		switch {
		case err != nil:
			log.WarnContext(ctx, "refill: cannot look at the runners; sweeping anyway", "error", err)
			return s.sweepAll(ctx, pools, holder, true, ev.Jobs, ev.Finished)
		case !stopping:
			log.InfoContext(ctx, "refill: no job waits for the pool; the next scheduled sweep replaces its finished runners")
			return Report{Skipped: []string{p.Name}}
		}
		log.InfoContext(ctx, "refill: a runner being stopped finished its job: unregistering it at once")
	}
	s.awaitExit(ctx, watcher, p, ev.Finished, log)
	return s.sweepAll(ctx, pools, holder, true, nil, ev.Finished)
}

// awaitExit gives the runners' containers up to RefillWait to exit, looking
// every RefillPoll — one pod list each, outside the lease: nothing is written
// and GitHub is not asked. If they have not exited by then, or looking fails,
// it returns all the same: the sweep that follows leaves them to a later one.
func (s *Sweeper) awaitExit(ctx context.Context, watcher RunnerWatcher, p *pool.Pool, runners []string, log *slog.Logger) {
	start := s.clock.Now()
	for {
		running, err := watcher.StillRunning(ctx, p, runners)
		switch {
		case err != nil:
			log.WarnContext(ctx, "refill: cannot look at the runners; sweeping anyway", "error", err)
			return
		case len(running) == 0:
			log.InfoContext(ctx, "refill: finished runners exited", "waited", s.clock.Since(start))
			return
		case s.clock.Since(start) >= s.opts.RefillWait:
			log.InfoContext(ctx, "refill: runners still running after the wait; sweeping anyway", "running", running,
				"waited", s.clock.Since(start))
			return
		}
		select {
		case <-ctx.Done():
			return // the sweep reports the cancellation
		case <-s.clock.After(s.opts.RefillPoll):
		}
	}
}

// waitingJobs counts the pool's queued reservations (the index read: one a
// moment old may be missing, and then the next completion or tick refills).
func (s *Sweeper) waitingJobs(ctx context.Context, p *pool.Pool) (int, error) {
	rs, err := s.reservations.Active(ctx, p.Name)
	if err != nil {
		return 0, err
	}
	n := 0
	for _, r := range rs {
		if r.State == reservation.Queued {
			n++
		}
	}
	return n, nil
}

// validRunners checks a nudge's finished runners: pod names, at most maxFinished.
func validRunners(names []string) error {
	if len(names) > maxFinished {
		return fmt.Errorf("%d finished runners named, at most %d", len(names), maxFinished)
	}
	for _, n := range names {
		if msgs := validation.IsDNS1123Subdomain(n); len(msgs) > 0 {
			return errors.New("finished runner " + quote(n) + " is not a pod name: " + strings.Join(msgs, "; "))
		}
	}
	return nil
}

// quote quotes a name from an event, cut short so that a huge one does not flood the log.
func quote(s string) string {
	const limit = 80
	if len(s) > limit {
		return fmt.Sprintf("%q...", s[:limit])
	}
	return fmt.Sprintf("%q", s)
}
