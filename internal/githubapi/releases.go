package githubapi

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"time"

	"github.com/google/go-github/v88/github"

	"github.com/runnerscaler/runnerscaler/internal/scope"
)

// OpLatestRelease is the operation of LatestRelease in an *APIError.
const OpLatestRelease Op = "get latest release"

// Release is a repository's published release.
type Release struct {
	Tag         string
	PublishedAt time.Time
}

// LatestRelease is GitHub's answer to a conditional request for a repository's
// latest release: the release and its ETag, or NotModified (a 304 to the ETag
// the caller gave: the release it has is still the latest).
type LatestRelease struct {
	Release     Release
	ETag        string
	NotModified bool
}

// LatestRelease returns the latest published release of owner/repo (neither a
// draft nor a prerelease). With etag set it asks with If-None-Match, and a 304,
// which costs no rate limit, answers NotModified. The caller keeps the ETag:
// it outlives the client (a Lambda restart).
//
// GET /repos/{owner}/{repo}/releases/latest.
func (c *Client) LatestRelease(ctx context.Context, owner, repo, etag string) (LatestRelease, error) {
	u := fmt.Sprintf("repos/%s/%s/releases/latest", url.PathEscape(owner), url.PathEscape(repo))
	var rel github.RepositoryRelease
	var resp *github.Response
	err := c.meter.call(ctx, OpLatestRelease, "getting the latest release of "+owner+"/"+repo, func(ctx context.Context) (*github.Response, error) {
		req, err := c.gh.NewRequest(ctx, http.MethodGet, u, nil)
		if err != nil {
			return nil, err
		}
		if etag != "" {
			req.Header.Set("If-None-Match", etag)
		}
		resp, err = c.gh.Do(req, &rel)
		if resp != nil && resp.StatusCode == http.StatusNotModified {
			return resp, nil
		}
		return resp, err
	})
	if err != nil {
		return LatestRelease{}, err
	}
	if resp.StatusCode == http.StatusNotModified {
		if etag == "" {
			return LatestRelease{}, fmt.Errorf("getting the latest release of %s/%s: 304 to an unconditional request: %w", owner, repo, errors.ErrUnsupported)
		}
		c.meter.notModified()
		return LatestRelease{ETag: etag, NotModified: true}, nil
	}
	if rel.GetTagName() == "" || rel.PublishedAt == nil {
		return LatestRelease{}, fmt.Errorf("getting the latest release of %s/%s: the answer has no tag_name or published_at", owner, repo)
	}
	return LatestRelease{Release: Release{Tag: rel.GetTagName(), PublishedAt: rel.GetPublishedAt().UTC()},
		ETag: resp.Header.Get("ETag")}, nil
}

// LatestRelease is Client.LatestRelease through the credentials that serve s
// (any scope's can read a public repository).
func (r *Router) LatestRelease(ctx context.Context, s scope.Scope, owner, repo, etag string) (LatestRelease, error) {
	c, err := r.client(ctx, s)
	if err != nil {
		return LatestRelease{}, err
	}
	rel, err := c.LatestRelease(ctx, owner, repo, etag)
	return rel, r.settle(s, err)
}
