package githubapi

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strings"

	"github.com/google/go-github/v88/github"

	"github.com/runnerscaler/runnerscaler/internal/scope"
)

// The operations of RunnerGroupAccess in an *APIError; both are Deferrable.
const (
	OpGetRunnerGroup        Op = "get runner group"
	OpListGroupRepositories Op = "list runner group repositories"
)

// The visibilities of an organization's runner group, as GitHub names them.
const (
	// VisibilityAll: every repository of the organization may use the group.
	VisibilityAll = "all"
	// VisibilitySelected: only the repositories listed for the group.
	VisibilitySelected = "selected"
	// VisibilityPrivate: only the organization's private repositories.
	VisibilityPrivate = "private"
)

// GroupAccess is who may use one runner group of an organization, as GitHub
// last answered, with the ETags that make the next read conditional.
type GroupAccess struct {
	// ID is the group's id.
	ID int64
	// Visibility is GitHub's: VisibilityAll, VisibilitySelected or VisibilityPrivate.
	Visibility string
	// ETag is the answer's about the group itself.
	ETag string
	// Pages are the group's repositories, page by page as GitHub listed them
	// (VisibilitySelected only; empty otherwise).
	Pages []RepositoryPage
}

// RepositoryPage is one page of a runner group's repositories and its ETag.
type RepositoryPage struct {
	ETag string
	// Repositories are full names (owner/name).
	Repositories []string
}

// Repositories is every page's repositories, in GitHub's order.
func (a GroupAccess) Repositories() []string {
	var all []string
	for _, p := range a.Pages {
		all = append(all, p.Repositories...)
	}
	return all
}

// RunnerGroupAccess reads who may use the runner group named name in
// organization s: the group (its id is RunnerGroupID's, cached) and, for a
// group of VisibilitySelected, every page of its repositories. Each request
// carries If-None-Match with prev's ETag for it (prev is the caller's last
// answer, zero for none); a 304, which costs no rate limit, keeps prev's part.
// An unchanged group of N selected repositories costs 1 + ⌈N/100⌉ requests and
// no rate limit. Both operations are Deferrable: near the rate limit they fail
// with a *DeferredError. ErrNotFound: no such group (the id cached for the
// name is then forgotten, so a group made again under the name is found).
// Only organization groups have repository access here: other scopes fail with
// errors.ErrUnsupported, without a request.
//
// GET /orgs/{org}/actions/runner-groups/{runner_group_id} and
// GET /orgs/{org}/actions/runner-groups/{runner_group_id}/repositories (per_page=100, page=N).
func (c *Client) RunnerGroupAccess(ctx context.Context, s scope.Scope, name string, prev GroupAccess) (GroupAccess, error) {
	if s.Kind() != scope.Organization {
		return GroupAccess{}, fmt.Errorf("reading the access of runner group %q of %s: only organization groups: %w", name, s, errors.ErrUnsupported)
	}
	// Rate limited or near the limit, not even the group's id is looked up
	// for this read (JIT configs look it up regardless).
	if err := c.meter.admit(OpGetRunnerGroup); err != nil {
		return GroupAccess{}, fmt.Errorf("reading runner group %q of %s: %w", name, s, err)
	}
	id, err := c.RunnerGroupID(ctx, s, name)
	if err != nil {
		return GroupAccess{}, err
	}
	if prev.ID != id {
		prev = GroupAccess{}
	}
	es, err := escaped(s)
	if err != nil {
		return GroupAccess{}, fmt.Errorf("reading runner group %q: %w", name, err)
	}
	base := fmt.Sprintf("%s/actions/runner-groups/%d", path(es), id)
	var g github.RunnerGroup
	what := fmt.Sprintf("reading runner group %q of %s", name, s)
	got, etag, err := c.conditional(ctx, OpGetRunnerGroup, what, base, prev.ETag, &g)
	if errors.Is(err, ErrNotFound) {
		c.forgetGroup(s, name)
	}
	if err != nil {
		return GroupAccess{}, err
	}
	out := GroupAccess{ID: id, Visibility: prev.Visibility, ETag: prev.ETag}
	if got {
		out.Visibility, out.ETag = g.GetVisibility(), etag
	}
	if out.Visibility != VisibilitySelected {
		return out, nil
	}
	if out.Pages, err = c.groupRepositories(ctx, s, name, base, prev.Pages); err != nil {
		return GroupAccess{}, err
	}
	return out, nil
}

// groupRepositories lists every page of a group's repositories, each asked
// with the ETag of prev's page of that number.
func (c *Client) groupRepositories(ctx context.Context, s scope.Scope, name, base string, prev []RepositoryPage) ([]RepositoryPage, error) {
	var pages []RepositoryPage
	for page := 1; page != 0; {
		var cached RepositoryPage
		if page <= len(prev) {
			cached = prev[page-1]
		}
		var list struct {
			Repositories []*github.Repository `json:"repositories"`
		}
		url := fmt.Sprintf("%s/repositories?per_page=%d&page=%d", base, PerPage, page)
		what := fmt.Sprintf("listing the repositories of runner group %q of %s (page %d)", name, s, page)
		got, etag, next, err := c.conditionalPage(ctx, OpListGroupRepositories, what, url, cached.ETag, &list)
		if err != nil {
			return nil, err
		}
		p := cached
		if !got {
			// The page is unchanged, and so is where the list went on from it
			// (a 304 need not carry the Link header).
			next = 0
			if page < len(prev) {
				next = page + 1
			}
		}
		if got {
			p = RepositoryPage{ETag: etag, Repositories: make([]string, 0, len(list.Repositories))}
			for _, r := range list.Repositories {
				p.Repositories = append(p.Repositories, r.GetFullName())
			}
		}
		pages = append(pages, p)
		page = next
	}
	return pages, nil
}

// conditional is conditionalPage for a resource that is not paginated.
func (c *Client) conditional(ctx context.Context, op Op, what, url, etag string, into any) (bool, string, error) {
	got, newTag, _, err := c.conditionalPage(ctx, op, what, url, etag, into)
	return got, newTag, err
}

// conditionalPage GETs url into into, with If-None-Match etag when it is set.
// got is false for a 304 (counted in Stats.NotModified; into is untouched);
// otherwise etag is the answer's and next the next page's number (0: last).
func (c *Client) conditionalPage(ctx context.Context, op Op, what, url, etag string, into any) (got bool, newTag string, next int, err error) {
	var resp *github.Response
	err = c.meter.call(ctx, op, what, func(ctx context.Context) (*github.Response, error) {
		req, err := c.gh.NewRequest(ctx, http.MethodGet, url, nil)
		if err != nil {
			return nil, err
		}
		if etag != "" {
			req.Header.Set("If-None-Match", etag)
		}
		resp, err = c.gh.Do(req, into)
		if resp != nil && resp.StatusCode == http.StatusNotModified {
			return resp, nil
		}
		return resp, err
	})
	if err != nil {
		return false, "", 0, err
	}
	if resp.StatusCode == http.StatusNotModified {
		if etag == "" {
			return false, "", 0, fmt.Errorf("%s: 304 to an unconditional request: %w", what, errors.ErrUnsupported)
		}
		c.meter.notModified()
		return false, etag, resp.NextPage, nil
	}
	return true, resp.Header.Get("ETag"), resp.NextPage, nil
}

// forgetGroup drops the id cached for a group's name.
func (c *Client) forgetGroup(s scope.Scope, name string) {
	c.mu.Lock()
	delete(c.groups, s.String()+"/"+strings.ToLower(name))
	c.mu.Unlock()
}

// RunnerGroupAccess is Client.RunnerGroupAccess through the scope's credentials.
func (r *Router) RunnerGroupAccess(ctx context.Context, s scope.Scope, name string, prev GroupAccess) (GroupAccess, error) {
	c, err := r.client(ctx, s)
	if err != nil {
		return GroupAccess{}, err
	}
	a, err := c.RunnerGroupAccess(ctx, s, name, prev)
	return a, r.settle(s, err)
}
