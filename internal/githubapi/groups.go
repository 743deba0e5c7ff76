package githubapi

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strings"

	"github.com/google/go-github/v88/github"

	"github.com/runnerscaler/runnerscaler/internal/groupaccess"
	"github.com/runnerscaler/runnerscaler/internal/scope"
)

// The operations of RunnerGroupAccess in an *APIError; both are Deferrable.
const (
	OpGetRunnerGroup        Op = "get runner group"
	OpListGroupRepositories Op = "list runner group repositories"
)

// RunnerGroupAccess reads who may use the runner group named name in
// organization s: the group (its id is RunnerGroupID's, cached) and, for a
// group of visibility groupaccess.Selected, every page of its repositories. Each request
// carries If-None-Match with prev's ETag for it (prev is the caller's last
// answer, zero for none); a 304, which costs no rate limit, keeps prev's part.
// The answer's Scope, Group and ReadAt are left zero: they are the caller's.
// An unchanged group of N selected repositories costs 1 + ⌈N/100⌉ requests and
// no rate limit. Both operations are Deferrable: near the rate limit they fail
// with a *DeferredError. ErrNotFound: no such group (the id cached for the
// name is then forgotten, so a group made again under the name is found).
// Only organization groups have repository access here: other scopes fail with
// errors.ErrUnsupported, without a request.
//
// GET /orgs/{org}/actions/runner-groups/{runner_group_id} and
// GET /orgs/{org}/actions/runner-groups/{runner_group_id}/repositories (per_page=100, page=N).
func (c *Client) RunnerGroupAccess(ctx context.Context, s scope.Scope, name string, prev groupaccess.Access) (groupaccess.Access, error) {
	if s.Kind() != scope.Organization {
		return groupaccess.Access{}, fmt.Errorf("reading the access of runner group %q of %s: only organization groups: %w", name, s, errors.ErrUnsupported)
	}
	// Rate limited or near the limit, not even the group's id is looked up
	// for this read (JIT configs look it up regardless).
	if err := c.meter.admit(OpGetRunnerGroup); err != nil {
		return groupaccess.Access{}, fmt.Errorf("reading runner group %q of %s: %w", name, s, err)
	}
	id, err := c.RunnerGroupID(ctx, s, name)
	if err != nil {
		return groupaccess.Access{}, err
	}
	if prev.GroupID != id {
		prev = groupaccess.Access{}
	}
	es, err := escaped(s)
	if err != nil {
		return groupaccess.Access{}, fmt.Errorf("reading runner group %q: %w", name, err)
	}
	base := fmt.Sprintf("%s/actions/runner-groups/%d", path(es), id)
	var g github.RunnerGroup
	what := fmt.Sprintf("reading runner group %q of %s", name, s)
	got, etag, err := c.conditional(ctx, OpGetRunnerGroup, what, base, prev.ETag, &g)
	if errors.Is(err, ErrNotFound) {
		c.forgetGroup(s, name)
	}
	if err != nil {
		return groupaccess.Access{}, err
	}
	out := groupaccess.Access{GroupID: id, Visibility: prev.Visibility, ETag: prev.ETag}
	if got {
		out.Visibility, out.ETag = groupaccess.Visibility(g.GetVisibility()), etag
	}
	if out.Visibility != groupaccess.Selected {
		return out, nil
	}
	if out.Pages, err = c.groupRepositories(ctx, s, name, base, prev.Pages); err != nil {
		return groupaccess.Access{}, err
	}
	return out, nil
}

// groupRepositories lists every page of a group's repositories, each asked
// with the ETag of prev's page of that number.
func (c *Client) groupRepositories(ctx context.Context, s scope.Scope, name, base string, prev []groupaccess.Page) ([]groupaccess.Page, error) {
	var pages []groupaccess.Page
	for page := 1; page != 0; {
		var cached groupaccess.Page
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
			p = groupaccess.Page{ETag: etag, Repositories: make([]string, 0, len(list.Repositories))}
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
func (r *Router) RunnerGroupAccess(ctx context.Context, s scope.Scope, name string, prev groupaccess.Access) (groupaccess.Access, error) {
	c, err := r.client(ctx, s)
	if err != nil {
		return groupaccess.Access{}, err
	}
	a, err := c.RunnerGroupAccess(ctx, s, name, prev)
	return a, r.settle(s, err)
}
