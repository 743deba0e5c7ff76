package sweeper

import (
	"context"

	"github.com/runnerscaler/runnerscaler/internal/githubapi"
	"github.com/runnerscaler/runnerscaler/internal/groupaccess"
	"github.com/runnerscaler/runnerscaler/internal/pool"
	"github.com/runnerscaler/runnerscaler/internal/scope"
)

// GroupAccessRefresh reads the pools' runner groups again when what the table
// has of them is old, for the webhook's routing, and deletes what it has of
// groups no pool names (groupaccess.Refresher): it is given every pool of the
// file. It handles its own failures: the next scheduled sweep tries again.
type GroupAccessRefresh interface {
	Refresh(ctx context.Context, pools []*pool.Pool)
}

// GroupAccessGitHub reads runner groups' access from GitHub for
// groupaccess.Refresher, through githubapi's Router (or one Client).
type GroupAccessGitHub struct {
	GitHub interface {
		RunnerGroupAccess(ctx context.Context, s scope.Scope, name string, prev githubapi.GroupAccess) (githubapi.GroupAccess, error)
	}
}

// ReadGroupAccess implements groupaccess.GitHub.
func (g GroupAccessGitHub) ReadGroupAccess(ctx context.Context, s scope.Scope, group string, prev groupaccess.Access) (groupaccess.Access, error) {
	p := githubapi.GroupAccess{ID: prev.GroupID, Visibility: string(prev.Visibility), ETag: prev.ETag}
	for _, pg := range prev.Pages {
		p.Pages = append(p.Pages, githubapi.RepositoryPage{ETag: pg.ETag, Repositories: pg.Repositories})
	}
	a, err := g.GitHub.RunnerGroupAccess(ctx, s, group, p)
	if err != nil {
		return groupaccess.Access{}, err
	}
	out := groupaccess.Access{GroupID: a.ID, Visibility: groupaccess.Visibility(a.Visibility), ETag: a.ETag}
	for _, pg := range a.Pages {
		out.Pages = append(out.Pages, groupaccess.Page{ETag: pg.ETag, Repositories: pg.Repositories})
	}
	return out, nil
}
