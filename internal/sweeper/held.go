package sweeper

import (
	"context"
	"errors"
	"time"

	"github.com/runnerscaler/runnerscaler/internal/githubapi"
	"github.com/runnerscaler/runnerscaler/internal/pool"
	"github.com/runnerscaler/runnerscaler/internal/reservation"
	"github.com/runnerscaler/runnerscaler/internal/scope"
)

// Jobs held for an approval (package reservation, approval.go) are released
// by the approval's `queued`. When the deliveries leave a job held that GitHub
// no longer holds — the first `queued` lost for good, so the approval's is
// the only one; an environment without reviewers whose second `queued` was
// lost — the job would hold no runner for as long as it waits. So each
// scheduled sweep asks GitHub about the jobs held longer than Options.HeldGrace, and
// releases, moves forward or drops each by GitHub's answer; one GitHub still
// holds is asked again after a quarter of its wait so far (5 minutes to an
// hour), and at most maxHeldChecks jobs of a pool are asked per sweep, so a
// day of waiting for a reviewer costs a few dozen calls.

// DefaultHeldGrace is how long a job is held before the sweeper asks GitHub
// about it (Options.HeldGrace).
const DefaultHeldGrace = 5 * time.Minute

// maxHeldChecks bounds the held jobs of one pool asked about per scheduled sweep.
const maxHeldChecks = 5

// HeldJobs reads a job from GitHub (githubapi.Router).
type HeldJobs interface {
	Job(ctx context.Context, s scope.Scope, repo string, jobID int64) (githubapi.Job, error)
}

// HeldReservations is what the check needs of the reservations
// (reservation.Store): the held jobs, and a way to apply GitHub's answer.
type HeldReservations interface {
	HeldSince(ctx context.Context, pool string, cutoff time.Time) ([]reservation.Reservation, error)
	Checked(ctx context.Context, pool string, job int64, status string, duration time.Duration) (reservation.Outcome, error)
}

// checkHeld asks GitHub about each pool's jobs held for too long; it needs
// Options.HeldJobs and reservations that are HeldReservations. Failures are
// logged: the next scheduled sweep asks again.
func (s *Sweeper) checkHeld(ctx context.Context, pools []*pool.Pool) {
	held, ok := s.reservations.(HeldReservations)
	if !ok || s.opts.HeldJobs == nil {
		return
	}
	now := s.clock.Now()
	for _, p := range pools {
		rs, err := held.HeldSince(ctx, p.Name, now.Add(-s.opts.HeldGrace))
		if err != nil {
			s.log.WarnContext(ctx, "reading the held jobs", "pool", p.Name, "error", err)
			continue
		}
		asked := 0
		for _, r := range rs {
			if asked == maxHeldChecks || !heldCheckDue(r, now) {
				continue
			}
			asked++
			s.checkOne(ctx, held, p, r)
		}
	}
}

// heldCheckDue: GitHub was not asked about r since a quarter of its wait so
// far (at least 5 minutes, at most an hour).
func heldCheckDue(r reservation.Reservation, now time.Time) bool {
	if r.HeldCheckedMillis == 0 {
		return true
	}
	every := min(max(now.Sub(r.SeenWaiting.At())/4, 5*time.Minute), time.Hour)
	return now.Sub(time.UnixMilli(r.HeldCheckedMillis)) >= every
}

// checkOne asks GitHub about held job r of p and applies the answer.
func (s *Sweeper) checkOne(ctx context.Context, held HeldReservations, p *pool.Pool, r reservation.Reservation) {
	log := s.log.With("pool", p.Name, "job", r.JobID, "repository", r.Repository)
	j, err := s.opts.HeldJobs.Job(ctx, p.Scope(), r.Repository, r.JobID)
	status := j.Status
	switch {
	case errors.Is(err, githubapi.ErrNotFound):
		status = reservation.GitHubGone
	case err != nil:
		log.WarnContext(ctx, "asking GitHub about a held job", "error", err)
		return
	case status == "requested" || status == "pending":
		status = reservation.GitHubWaiting
	}
	_, duration := p.Trigger()
	out, err := held.Checked(ctx, r.Pool, r.JobID, status, duration)
	if err != nil {
		log.WarnContext(ctx, "recording GitHub's answer about a held job", "status", status, "error", err)
		return
	}
	if out != reservation.Held {
		log.InfoContext(ctx, "held job settled by GitHub's answer", "status", status, "outcome", out.String(),
			"heldFor", s.clock.Since(r.SeenWaiting.At()).Round(time.Second))
	}
}
