package sweeper

import (
	"context"

	"github.com/runnerscaler/runnerscaler/internal/pool"
)

// GroupAccessRefresh reads the pools' runner groups again when what the table
// has of them is old, for the webhook's routing, and deletes what it has of
// groups no pool names (groupaccess.Refresher): it is given every pool of the
// file. It handles its own failures: the next scheduled sweep tries again.
type GroupAccessRefresh interface {
	Refresh(ctx context.Context, pools []*pool.Pool)
}
