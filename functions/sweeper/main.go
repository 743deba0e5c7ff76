// Command sweeper is the sweeper Lambda: on a schedule (all pools) or a nudge (one
// pool) it decides each pool's desired runners and records the decision
// (package sweeper). Wiring only.
package main

import (
	"context"
	"log/slog"
	"os"

	"github.com/aws/aws-lambda-go/lambda"
	"github.com/aws/aws-lambda-go/lambdacontext"
	"k8s.io/utils/clock"

	"github.com/runnerscaler/runnerscaler/internal/awsconf"
	"github.com/runnerscaler/runnerscaler/internal/pool"
	"github.com/runnerscaler/runnerscaler/internal/poolstate"
	"github.com/runnerscaler/runnerscaler/internal/reservation"
	"github.com/runnerscaler/runnerscaler/internal/sweeper"
)

func main() {
	log := slog.New(lambdacontext.NewLogHandler())
	s, err := build(context.Background(), log)
	if err != nil {
		log.Error("sweeper init failed", "error", err)
		os.Exit(1)
	}
	lambda.Start(s.Handle)
}

func build(ctx context.Context, log *slog.Logger) (*sweeper.Sweeper, error) {
	cfg, err := sweeper.ConfigFromEnv(os.Getenv)
	if err != nil {
		return nil, err
	}
	pools, err := pool.Load(cfg.PoolsConfig)
	if err != nil {
		return nil, err
	}
	aws, err := awsconf.Load(ctx)
	if err != nil {
		return nil, err
	}
	db := awsconf.DynamoDB(aws, cfg.DynamoDBEndpoint)
	clk := clock.RealClock{}
	log.Info("sweeper ready", "pools", len(pools.Pools), "table", cfg.TableName, "lease", cfg.Lease)
	return sweeper.New(pools, reservation.New(db, cfg.TableName, clk), poolstate.NewStore(db, cfg.TableName),
		poolstate.NewLeases(db, cfg.TableName, clk, cfg.Lease), nil, clk, log,
		sweeper.Options{Parallelism: cfg.Parallelism}), nil
}
