package githubapi

import (
	"context"
	"fmt"
	"net/http"

	"github.com/google/go-github/v88/github"

	"github.com/runnerscaler/runnerscaler/internal/scope"
)

// RemoveRunnerLabels removes every custom label of a runner: from then on
// GitHub hands it only jobs that ask for nothing but its read-only labels
// (self-hosted, its OS and architecture). ErrNotFound when the scope has no
// runner with the id. The runner and its registration are left as they are.
//
// DELETE /repos/{owner}/{repo}/actions/runners/{runner_id}/labels,
// DELETE /orgs/{org}/actions/runners/{runner_id}/labels or
// DELETE /enterprises/{enterprise}/actions/runners/{runner_id}/labels.
func (c *Client) RemoveRunnerLabels(ctx context.Context, s scope.Scope, id int64) error {
	es, err := escaped(s)
	if err != nil {
		return fmt.Errorf("removing the labels of runner %d: %w", id, err)
	}
	url := fmt.Sprintf("%s/actions/runners/%d/labels", path(es), id)
	err = c.meter.call(ctx, OpRemoveRunnerLabels, fmt.Sprintf("removing the labels of runner %d of %s", id, s), func(ctx context.Context) (*github.Response, error) {
		req, err := c.gh.NewRequest(ctx, http.MethodDelete, url, nil)
		if err != nil {
			return nil, err
		}
		return c.gh.Do(req, nil)
	})
	if err == nil {
		c.cache.Invalidate(s.String())
	}
	return err
}
