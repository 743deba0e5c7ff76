// Command webhook is the webhook Lambda: it verifies GitHub `workflow_job`
// deliveries and records capacity reservations (package webhook). Wiring only:
// package webhook/wiring builds it from the environment.
package main

import (
	"context"
	"log/slog"
	"os"

	"github.com/aws/aws-lambda-go/lambda"
	"github.com/aws/aws-lambda-go/lambdacontext"

	"github.com/runnerscaler/runnerscaler/internal/webhook/wiring"
)

func main() {
	log := slog.New(lambdacontext.NewLogHandler())
	h, err := wiring.FromEnv(context.Background(), wiring.Env{Getenv: os.Getenv, Connect: wiring.AWS, Log: log, Metrics: os.Stdout})
	if err != nil {
		log.Error("webhook init failed", "error", err)
		os.Exit(1)
	}
	lambda.Start(h.Handle)
}
