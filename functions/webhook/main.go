// Command webhook is the webhook Lambda: it verifies GitHub `workflow_job`
// deliveries and records capacity reservations (package webhook). Wiring only.
package main

import (
	"context"
	"log/slog"
	"os"

	"github.com/aws/aws-lambda-go/lambda"
	"github.com/aws/aws-lambda-go/lambdacontext"
	awslambda "github.com/aws/aws-sdk-go-v2/service/lambda"
	"github.com/aws/aws-sdk-go-v2/service/secretsmanager"
	"k8s.io/utils/clock"

	"github.com/runnerscaler/runnerscaler/internal/awsconf"
	"github.com/runnerscaler/runnerscaler/internal/emf"
	"github.com/runnerscaler/runnerscaler/internal/nudge"
	"github.com/runnerscaler/runnerscaler/internal/pool"
	"github.com/runnerscaler/runnerscaler/internal/reservation"
	"github.com/runnerscaler/runnerscaler/internal/webhook"
)

func main() {
	log := slog.New(lambdacontext.NewLogHandler())
	h, err := build(context.Background(), log)
	if err != nil {
		log.Error("webhook init failed", "error", err)
		os.Exit(1)
	}
	lambda.Start(h.Handle)
}

func build(ctx context.Context, log *slog.Logger) (*webhook.Handler, error) {
	cfg, err := webhook.ConfigFromEnv(os.Getenv)
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
	secret := []byte(cfg.WebhookSecret)
	if cfg.WebhookSecretARN != "" {
		if secret, err = awsconf.Secret(ctx, secretsmanager.NewFromConfig(aws), cfg.WebhookSecretARN); err != nil {
			return nil, err
		}
	}
	store := reservation.New(awsconf.DynamoDB(aws, cfg.DynamoDBEndpoint), cfg.TableName, clock.RealClock{})
	// Metric lines carry the function's log level, so Lambda's filter keeps them.
	metrics, err := emf.NewWriter(os.Stdout, os.Getenv("AWS_LAMBDA_LOG_LEVEL"))
	if err != nil {
		return nil, err
	}
	opts := []webhook.Option{webhook.WithLogger(log), webhook.WithMetrics(metrics)}
	if cfg.SweeperFunctionName != "" {
		opts = append(opts, webhook.WithNudger(nudge.NewLambda(awslambda.NewFromConfig(aws), cfg.SweeperFunctionName)))
	}
	log.Info("webhook ready", "config", cfg, "pools", len(pools.Pools))
	return webhook.New(secret, pools, store, opts...), nil
}
