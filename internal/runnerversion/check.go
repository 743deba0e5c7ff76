package runnerversion

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"k8s.io/utils/clock"

	"github.com/runnerscaler/runnerscaler/internal/emf"
	"github.com/runnerscaler/runnerscaler/internal/githubapi"
	"github.com/runnerscaler/runnerscaler/internal/pool"
	"github.com/runnerscaler/runnerscaler/internal/scope"
)

// Releases asks GitHub for a repository's latest release (githubapi.Client).
type Releases interface {
	LatestRelease(ctx context.Context, owner, repo, etag string) (githubapi.LatestRelease, error)
}

// Records keeps Known between invocations (Store).
type Records interface {
	Get(ctx context.Context) (Known, error)
	Put(ctx context.Context, k Known, prevAttempt time.Time) error
}

// DaysLeftMetric is the metric of each pool's days left (Assessment.DaysLeft).
const DaysLeftMetric = "RunnerVersionDaysLeft"

// CheckEvery is how often a deployment asks GitHub for the latest release.
const CheckEvery = 24 * time.Hour

// Checker runs the daily check and writes each pool's days left. Build it with New.
type Checker struct {
	records Records
	gh      Releases
	clock   clock.PassiveClock
	log     *slog.Logger
	metrics *emf.Writer
}

// New returns a checker. metrics may be nil (no metric lines); log may be nil.
func New(records Records, gh Releases, clk clock.PassiveClock, log *slog.Logger, metrics *emf.Writer) *Checker {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	return &Checker{records: records, gh: gh, clock: clk, log: log, metrics: metrics}
}

// Refresh returns what the deployment knows of the releases, after asking
// GitHub when the last attempt is CheckEvery old or more. An attempt is
// claimed in the table before the call, so that concurrent sweeps, and the
// sweeps of restarted functions, ask at most once per CheckEvery; a failed
// call waits as long (its error is kept in Known.Error). The error is about
// the table; a GitHub failure is not one.
func (c *Checker) Refresh(ctx context.Context) (Known, error) {
	k, err := c.records.Get(ctx)
	if err != nil {
		return Known{}, err
	}
	now := c.clock.Now()
	if !k.AttemptedAt.IsZero() && now.Sub(k.AttemptedAt) < CheckEvery {
		return k, nil
	}
	prev := k.AttemptedAt
	k.AttemptedAt = now
	if err := c.records.Put(ctx, k, prev); errors.Is(err, ErrChanged) {
		return c.records.Get(ctx) // another sweep claimed this attempt
	} else if err != nil {
		return Known{}, err
	}
	claimed := k.AttemptedAt
	c.ask(ctx, &k)
	if err := c.records.Put(ctx, k, claimed); err != nil {
		return k, err
	}
	return k, nil
}

// ask makes the call and records its answer, or its failure, in k.
func (c *Checker) ask(ctx context.Context, k *Known) {
	ans, err := c.gh.LatestRelease(ctx, "actions", "runner", k.ETag)
	if err == nil && !ans.NotModified {
		var v Version
		if v, err = Parse(ans.Release.Tag); err == nil {
			k.add(Release{Version: v, PublishedAt: ans.Release.PublishedAt})
		}
	}
	if err != nil {
		k.Error = err.Error()
		c.log.WarnContext(ctx, "cannot read the latest actions/runner release; the next attempt is in a day", "error", err)
		return
	}
	k.CheckedAt, k.ETag, k.Error = c.clock.Now(), ans.ETag, ""
	latest, _ := k.Latest()
	c.log.InfoContext(ctx, "checked the latest actions/runner release", "latest", latest.Version.String(),
		"published", latest.PublishedAt, "notModified", ans.NotModified)
}

// Check refreshes what is known and judges each pool's version: a metric per
// pool (RunnerVersionDaysLeft, none while the state is Unknown) and a warning
// for every pool within a week of its deadline or past it. Failures are
// logged; the next scheduled sweep tries again.
func (c *Checker) Check(ctx context.Context, pools []*pool.Pool) {
	k, err := c.Refresh(ctx)
	if err != nil {
		c.log.WarnContext(ctx, "checking the pools' runner versions", "error", err)
	}
	now := c.clock.Now()
	for _, p := range pools {
		v, err := PoolVersion(p.RunnerVersion)
		if err != nil {
			c.log.WarnContext(ctx, "pool's runner version", "pool", p.Name, "error", err)
			continue
		}
		a := Assess(v, k, now)
		switch {
		case a.State == Refused:
			c.log.ErrorContext(ctx, fmt.Sprintf("GitHub refuses actions/runner %s: upgrade the pool's image", a.Version),
				"pool", p.Name, "version", a.Version, "latest", a.Latest, "reason", a.Reason)
		case a.State == Behind && a.DaysLeft < 7:
			c.log.WarnContext(ctx, fmt.Sprintf("actions/runner %s is refused in %d days: upgrade the pool's image", a.Version, a.DaysLeft),
				"pool", p.Name, "version", a.Version, "latest", a.Latest, "deadline", a.Deadline, "reason", a.Reason)
		}
		if a.State == Unknown {
			continue
		}
		if err := c.metrics.Write(emf.Record{Time: now, Dimensions: map[string]string{"Pool": p.Name},
			Metrics: []emf.Metric{{Name: DaysLeftMetric, Unit: emf.Count, Value: float64(a.DaysLeft)}}}); err != nil {
			c.log.WarnContext(ctx, "cannot write the runner version metric", "pool", p.Name, "error", err)
		}
	}
}

// RouterReleases asks GitHub through the credentials that serve one scope
// (githubapi.Router): any installation can read the public actions/runner.
type RouterReleases struct {
	Router interface {
		LatestRelease(ctx context.Context, s scope.Scope, owner, repo, etag string) (githubapi.LatestRelease, error)
	}
	Scope scope.Scope
}

// LatestRelease implements Releases.
func (r RouterReleases) LatestRelease(ctx context.Context, owner, repo, etag string) (githubapi.LatestRelease, error) {
	return r.Router.LatestRelease(ctx, r.Scope, owner, repo, etag)
}
