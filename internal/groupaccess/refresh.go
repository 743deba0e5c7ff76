package groupaccess

import (
	"context"
	"errors"
	"log/slog"
	"strings"
	"time"

	"k8s.io/utils/clock"

	"github.com/runnerscaler/runnerscaler/internal/pool"
	"github.com/runnerscaler/runnerscaler/internal/scope"
)

// RefreshEvery is how old a stored access may get before a scheduled sweep
// reads the group again. The read is conditional (If-None-Match), so an
// unchanged group costs no rate limit; a change on GitHub reaches routing
// within RefreshEvery, plus the sweeper's schedule, plus the webhook's cache.
const RefreshEvery = 5 * time.Minute

// GitHub reads who may use a runner group (githubapi's Router). prev is the last answer stored (zero: none), whose ETags make the
// requests conditional; the answer's Scope, Group and ReadAt are the caller's.
type GitHub interface {
	RunnerGroupAccess(ctx context.Context, s scope.Scope, group string, prev Access) (Access, error)
}

// Records keeps what was read (Store).
type Records interface {
	Get(ctx context.Context, s scope.Scope, group string) (Access, bool, error)
	Put(ctx context.Context, a Access) error
	// List names every group stored; Delete deletes one's item.
	List(ctx context.Context) ([]Stored, error)
	Delete(ctx context.Context, g Stored) error
}

// Checked reports whether routing checks p's group: a group other than
// Default, of an organization pool. A repository pool's runners are in its
// repository's default group; an enterprise group's access is by
// organization, which this package does not read.
func Checked(p *pool.Pool) bool {
	return p.Organization != "" && p.Group != "" && !strings.EqualFold(p.Group, "default")
}

// Refresher reads the groups of the pools again when what is stored is old.
// Build it with NewRefresher.
type Refresher struct {
	records Records
	gh      GitHub
	clock   clock.PassiveClock
	log     *slog.Logger
}

// NewRefresher returns a refresher; log may be nil.
func NewRefresher(records Records, gh GitHub, clk clock.PassiveClock, log *slog.Logger) *Refresher {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	return &Refresher{records: records, gh: gh, clock: clk, log: log}
}

// Refresh reads again, once each, every group the pools name that routing
// checks (Checked) and whose stored access is missing or RefreshEvery old,
// and stores the answer; then it deletes what is stored of groups none of the
// pools names (a pool removed from the file, or given another group), which
// nothing would read or refresh again. pools must be every pool of the file.
// A failure (GitHub's, deferred near the rate limit, or the table's) is logged
// and leaves what was stored: the next scheduled sweep tries again.
func (r *Refresher) Refresh(ctx context.Context, pools []*pool.Pool) {
	named := map[string]bool{}
	for _, p := range pools {
		key := storedKey(p.Scope().String(), p.Group)
		if !Checked(p) || named[key] {
			continue
		}
		named[key] = true
		if err := r.refresh(ctx, p.Scope(), p.Group); err != nil {
			r.log.WarnContext(ctx, "runner group access not refreshed; routing keeps what was read before",
				"scope", p.Scope().String(), "group", p.Group, "error", err)
		}
	}
	if err := r.forget(ctx, named); err != nil {
		r.log.WarnContext(ctx, "access of runner groups no pool names not deleted", "error", err)
	}
}

// storedKey identifies a group of a scope (scope.Scope.String()) as the store does.
func storedKey(s, group string) string { return s + "#" + strings.ToLower(group) }

// forget deletes the stored groups that named does not have.
func (r *Refresher) forget(ctx context.Context, named map[string]bool) error {
	stored, err := r.records.List(ctx)
	if err != nil {
		return err
	}
	var errs []error
	for _, g := range stored {
		if named[storedKey(g.Scope, g.Group)] {
			continue
		}
		if err := r.records.Delete(ctx, g); err != nil {
			errs = append(errs, err)
			continue
		}
		r.log.InfoContext(ctx, "runner group access deleted: no pool names the group", "scope", g.Scope, "group", g.Group)
	}
	return errors.Join(errs...)
}

func (r *Refresher) refresh(ctx context.Context, s scope.Scope, group string) error {
	prev, found, err := r.records.Get(ctx, s, group)
	if err != nil {
		return err
	}
	if found && r.clock.Since(prev.ReadAt) < RefreshEvery {
		return nil
	}
	a, err := r.gh.RunnerGroupAccess(ctx, s, group, prev)
	if err != nil {
		return err
	}
	a.Scope, a.Group, a.ReadAt = s, group, r.clock.Now()
	if err := r.records.Put(ctx, a); err != nil {
		return err
	}
	r.log.InfoContext(ctx, "runner group access read", "scope", s.String(), "group", group,
		"visibility", a.Visibility, "repositories", len(a.Repositories()), "unchanged", found && sameAnswer(prev, a))
	return nil
}

// sameAnswer: GitHub's ETags say nothing changed.
func sameAnswer(a, b Access) bool {
	if a.ETag != b.ETag || len(a.Pages) != len(b.Pages) {
		return false
	}
	for i := range a.Pages {
		if a.Pages[i].ETag != b.Pages[i].ETag {
			return false
		}
	}
	return true
}
