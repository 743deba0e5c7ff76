// Command sweeper is the sweeper Lambda: on a schedule (all pools) or a nudge (one
// pool) it decides each pool's desired runners and keeps one StatefulSet per runner
// in line with it, unregistering runners from GitHub before anything is deleted
// (packages sweeper and reconcile). Wiring only: package sweeper/wiring builds it
// from the environment.
package main

import (
	"context"
	"log/slog"
	"os"

	"github.com/aws/aws-lambda-go/lambda"
	"github.com/aws/aws-lambda-go/lambdacontext"

	"github.com/runnerscaler/runnerscaler/internal/sweeper/wiring"
)

func main() {
	log := slog.New(lambdacontext.NewLogHandler())
	s, err := wiring.FromEnv(context.Background(), wiring.Env{Getenv: os.Getenv, Connect: wiring.AWS, Log: log, Metrics: os.Stdout})
	if err != nil {
		log.Error("sweeper init failed", "error", err)
		os.Exit(1)
	}
	lambda.Start(s.Handle)
}
