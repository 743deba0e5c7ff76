package wiring

import (
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"

	"github.com/runnerscaler/runnerscaler/internal/githubapi"
	"github.com/runnerscaler/runnerscaler/internal/groupaccess"
	"github.com/runnerscaler/runnerscaler/internal/inventory"
	"github.com/runnerscaler/runnerscaler/internal/poolstate"
	"github.com/runnerscaler/runnerscaler/internal/reconcile"
	"github.com/runnerscaler/runnerscaler/internal/redeliver"
	"github.com/runnerscaler/runnerscaler/internal/rerun"
	"github.com/runnerscaler/runnerscaler/internal/reservation"
	"github.com/runnerscaler/runnerscaler/internal/sweeper"
	"github.com/runnerscaler/runnerscaler/internal/teardown"
)

// What FromEnv plugs into what. The sweeper finds the optional RunnerWatcher
// (the refill fast path) by a type assertion on its Reconciler: these lines make
// a signature drift on either side a build error rather than a fast path
// silently turned off.
var (
	_ sweeper.Reservations  = (*reservation.Store)(nil)
	_ sweeper.StatusStore   = (*poolstate.Store)(nil)
	_ sweeper.Reconciler    = (*reconcile.Reconciler)(nil)
	_ sweeper.RunnerWatcher = (*reconcile.Reconciler)(nil)
	_ sweeper.Retrier       = (*reconcile.Reconciler)(nil)
	_ sweeper.RemovedPools  = (*inventory.Finder)(nil)
	_ sweeper.DrainMark     = (*teardown.Mark)(nil)
	_ sweeper.Recoverer     = (*redeliver.Recoverer)(nil)
	_ sweeper.DeliveryLog   = (*redeliver.Store)(nil)
	_ groupaccess.GitHub    = (*githubapi.Router)(nil)
	_ groupaccess.Records   = (*groupaccess.Store)(nil)
	_ reconcile.GitHub      = (*githubapi.Router)(nil)
	_ reconcile.JobLinks    = (*reservation.Store)(nil)
	_ reconcile.Reruns      = (*rerun.Store)(nil)
	_ reconcile.Rerunner    = (*githubapi.Router)(nil)
	_ reconcile.Rerunner    = (*githubapi.Client)(nil)
	_ redeliver.App         = (*githubapi.AppClient)(nil)
	_ DynamoDB              = (*dynamodb.Client)(nil)
)
