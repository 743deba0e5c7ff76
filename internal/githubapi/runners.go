package githubapi

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"sync"

	"github.com/google/go-github/v88/github"

	"github.com/runnerscaler/runnerscaler/internal/scope"
)

// Runner is a self-hosted runner as GitHub lists it.
type Runner struct {
	ID     int64
	Name   string
	Status string // online | offline
	Busy   bool
	Labels []string
}

// CachedPage is one page of a runners list and the ETag GitHub gave it.
type CachedPage struct {
	ETag     string
	Runners  []Runner
	NextPage int
}

// RunnerCache keeps listed pages and their ETags in memory between sweeps
// (and warm invocations). It is safe for concurrent use.
type RunnerCache struct {
	mu    sync.Mutex
	pages map[string]map[int]CachedPage
}

// NewRunnerCache returns an empty cache.
func NewRunnerCache() *RunnerCache { return &RunnerCache{pages: map[string]map[int]CachedPage{}} }

// Page returns the stored page of a scope's list.
func (m *RunnerCache) Page(scope string, page int) (CachedPage, bool) {
	m.mu.Lock()
	defer m.mu.Unlock()
	p, ok := m.pages[scope][page]
	return p, ok
}

// StorePage stores a page.
func (m *RunnerCache) StorePage(scope string, page int, p CachedPage) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.pages[scope] == nil {
		m.pages[scope] = map[int]CachedPage{}
	}
	m.pages[scope][page] = p
}

// Invalidate forgets a scope's pages (after this client changed the list).
func (m *RunnerCache) Invalidate(scope string) {
	m.mu.Lock()
	defer m.mu.Unlock()
	delete(m.pages, scope)
}

// PerPage is the page size of runner lists (GitHub's maximum).
const PerPage = 100

// Runners lists every runner of the scope, all pages. Each page is requested with
// If-None-Match when a cached copy exists; a 304 reuses the copy and costs no
// rate limit, so an unchanged list of N runners costs ⌈N/100⌉ calls and zero units.
//
// GET /repos/{owner}/{repo}/actions/runners, GET /orgs/{org}/actions/runners or
// GET /enterprises/{enterprise}/actions/runners (per_page=100, page=N).
func (c *Client) Runners(ctx context.Context, s scope.Scope) ([]Runner, error) {
	var all []Runner
	for page := 1; page != 0; {
		p, err := c.runnersPage(ctx, s, page)
		if err != nil {
			return nil, err
		}
		all = append(all, p.Runners...)
		page = p.NextPage
	}
	return all, nil
}

func (c *Client) runnersPage(ctx context.Context, s scope.Scope, page int) (CachedPage, error) {
	es, err := escaped(s)
	if err != nil {
		return CachedPage{}, fmt.Errorf("listing runners: %w", err)
	}
	key := s.String()
	cached, haveCached := c.cache.Page(key, page)
	url := fmt.Sprintf("%s/actions/runners?per_page=%d&page=%d", path(es), PerPage, page)
	var list github.Runners
	var resp *github.Response
	err = c.meter.call(ctx, OpListRunners, fmt.Sprintf("listing runners of %s (page %d)", s, page), func(ctx context.Context) (*github.Response, error) {
		req, err := c.gh.NewRequest(ctx, http.MethodGet, url, nil)
		if err != nil {
			return nil, err
		}
		if haveCached {
			req.Header.Set("If-None-Match", cached.ETag)
		}
		resp, err = c.gh.Do(req, &list)
		if resp != nil && resp.StatusCode == http.StatusNotModified {
			return resp, nil
		}
		return resp, err
	})
	if err != nil {
		return CachedPage{}, err
	}
	if resp.StatusCode == http.StatusNotModified && haveCached {
		c.meter.notModified()
		return cached, nil
	}
	if resp.StatusCode == http.StatusNotModified {
		return CachedPage{}, fmt.Errorf("listing runners of %s: 304 without a cached page: %w", s, errors.ErrUnsupported)
	}
	p := CachedPage{ETag: resp.Header.Get("ETag"), NextPage: resp.NextPage}
	for _, r := range list.Runners {
		p.Runners = append(p.Runners, fromGitHub(r))
	}
	if p.ETag != "" {
		c.cache.StorePage(key, page, p)
	}
	return p, nil
}

// Runner is one runner of the scope, read alone: one request whatever the
// size of the scope's list (Runners reads every page), so that a sweep near
// the rate limit, whose lists are deferred, can still check a runner before
// removing it. ErrNotFound when the scope has no runner with the id.
//
// GET /repos/{owner}/{repo}/actions/runners/{runner_id},
// GET /orgs/{org}/actions/runners/{runner_id} or
// GET /enterprises/{enterprise}/actions/runners/{runner_id}.
func (c *Client) Runner(ctx context.Context, s scope.Scope, id int64) (Runner, error) {
	es, err := escaped(s)
	if err != nil {
		return Runner{}, fmt.Errorf("reading runner %d: %w", id, err)
	}
	var r *github.Runner
	err = c.meter.call(ctx, OpGetRunner, fmt.Sprintf("reading runner %d of %s", id, s), func(ctx context.Context) (resp *github.Response, err error) {
		switch es.Kind() {
		case scope.Enterprise:
			r, resp, err = c.gh.Enterprise.GetRunner(ctx, es.Enterprise, id)
		case scope.Organization:
			r, resp, err = c.gh.Actions.GetOrganizationRunner(ctx, es.Organization, id)
		default:
			r, resp, err = c.gh.Actions.GetRunner(ctx, es.Owner(), es.Repo(), id)
		}
		return resp, err
	})
	if err != nil {
		return Runner{}, err
	}
	return fromGitHub(r), nil
}

func fromGitHub(r *github.Runner) Runner {
	labels := make([]string, len(r.Labels))
	for i, l := range r.Labels {
		labels[i] = l.GetName()
	}
	return Runner{ID: r.GetID(), Name: r.GetName(), Status: r.GetStatus(), Busy: r.GetBusy(), Labels: labels}
}
