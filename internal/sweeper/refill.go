package sweeper

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"k8s.io/apimachinery/pkg/util/validation"

	"github.com/runnerscaler/runnerscaler/internal/pool"
	"github.com/runnerscaler/runnerscaler/internal/reservation"
)

// awaitRefill is the refill fast path, and reports whether the nudge should
// sweep. The webhook nudges when a job completed on one of the pool's runners;
// an ephemeral runner exits a moment after its job and only then counts as
// finished, so a sweep at once would still find it running and leave its slot
// empty until the next scheduled sweep (a minute in AWS); and a runner being
// stopped (deleted, evicted, scaled down) whose job has just ended must be
// unregistered before GitHub hands it another job. So, while jobs wait for the
// pool or a named runner is being stopped, awaitRefill gives the named runners'
// containers up to RefillWait to exit, looking every RefillPoll — one pod list
// each, before the lease is taken: nothing is written and GitHub is not asked —
// and then the nudge sweeps, which replaces or unregisters them by the usual
// rules. If they have not exited by then, or looking fails, it sweeps anyway:
// nothing is lost, the runners wait for the next sweep as before. When no job
// waits and no named runner is being stopped, there is nothing to do at once: it
// reports false and the next scheduled sweep replaces the runners.
func (s *Sweeper) awaitRefill(ctx context.Context, p *pool.Pool, runners []string) bool {
	log := s.log.With("pool", p.Name, "finished", runners)
	watcher, ok := s.reconciler.(RunnerWatcher)
	if !ok {
		return true
	}
	waiting, err := s.waitingJobs(ctx, p)
	if err != nil {
		log.WarnContext(ctx, "refill: cannot read the pool's reservations; sweeping anyway", "error", err)
		return true
	}
	if waiting == 0 {
		stopping, err := watcher.Stopping(ctx, p, runners)
		switch {
		case err != nil:
			log.WarnContext(ctx, "refill: cannot look at the runners; sweeping anyway", "error", err)
			return true
		case !stopping:
			log.InfoContext(ctx, "refill: no job waits for the pool; the next scheduled sweep replaces its finished runners")
			return false
		}
		log.InfoContext(ctx, "refill: a runner being stopped finished its job: unregistering it at once")
	}
	start := s.clock.Now()
	for {
		running, err := watcher.StillRunning(ctx, p, runners)
		switch {
		case err != nil:
			log.WarnContext(ctx, "refill: cannot look at the runners; sweeping anyway", "error", err)
			return true
		case len(running) == 0:
			log.InfoContext(ctx, "refill: finished runners exited", "waited", s.clock.Since(start), "waitingJobs", waiting)
			return true
		case s.clock.Since(start) >= s.opts.RefillWait:
			log.InfoContext(ctx, "refill: runners still running after the wait; sweeping anyway", "running", running,
				"waited", s.clock.Since(start))
			return true
		}
		select {
		case <-ctx.Done():
			return true // the sweep reports the cancellation
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
