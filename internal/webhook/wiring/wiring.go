// Package wiring builds the webhook function from its environment: its settings
// from the variables webhook.ConfigFromEnv names, its secret from Secrets
// Manager, and its reservation and queue-wait stores and sweeper nudger on the
// AWS clients it is given, so that tests build the same function on fakes. It
// links no Kubernetes package: the webhook binary stays small.
package wiring

import (
	"context"
	"io"
	"log/slog"

	awslambda "github.com/aws/aws-sdk-go-v2/service/lambda"
	"github.com/aws/aws-sdk-go-v2/service/secretsmanager"
	"k8s.io/utils/clock"

	"github.com/runnerscaler/runnerscaler/internal/awsconf"
	"github.com/runnerscaler/runnerscaler/internal/emf"
	"github.com/runnerscaler/runnerscaler/internal/groupaccess"
	"github.com/runnerscaler/runnerscaler/internal/nudge"
	"github.com/runnerscaler/runnerscaler/internal/pool"
	"github.com/runnerscaler/runnerscaler/internal/queuewait"
	"github.com/runnerscaler/runnerscaler/internal/rerun"
	"github.com/runnerscaler/runnerscaler/internal/reservation"
	"github.com/runnerscaler/runnerscaler/internal/roster"
	"github.com/runnerscaler/runnerscaler/internal/webhook"
)

// Clients are the AWS APIs the webhook function calls.
type Clients struct {
	// Secrets reads the webhook secret (WEBHOOK_SECRET_ARN).
	Secrets awsconf.SecretsAPI
	// DynamoDB holds the reservations (TABLE_NAME).
	DynamoDB reservation.API
	// Lambda invokes the sweeper for nudges (SWEEPER_FUNCTION_NAME).
	Lambda nudge.InvokeAPI
}

// Connect returns the clients for a validated configuration; it is called
// once, after the settings and the pools file have been read.
type Connect func(ctx context.Context, cfg webhook.Config) (Clients, error)

// AWS connects with the environment's AWS configuration (in Lambda: the
// function's role and region), to the DynamoDB endpoint cfg names, if any.
func AWS(ctx context.Context, cfg webhook.Config) (Clients, error) {
	aws, err := awsconf.Load(ctx)
	if err != nil {
		return Clients{}, err
	}
	return Clients{Secrets: secretsmanager.NewFromConfig(aws), DynamoDB: awsconf.DynamoDB(aws, cfg.DynamoDBEndpoint),
		Lambda: awslambda.NewFromConfig(aws)}, nil
}

// Env is what the function is built from.
type Env struct {
	// Getenv reads the function's environment variables (os.Getenv).
	Getenv func(string) string
	// Connect returns the AWS clients (AWS).
	Connect Connect
	// Log is the function's logger (default: discard).
	Log *slog.Logger
	// Metrics receives the metric lines (the function's stdout; default: discard).
	Metrics io.Writer
	// Clock is the reservation store's clock (default: the real one).
	Clock clock.PassiveClock
}

// FromEnv returns the webhook's handler. It fails, naming the variable, secret
// or file, when a setting is missing or invalid, the pools file does not load,
// or the webhook secret cannot be read or is empty. It calls env.Connect only
// once the settings and the pools file are known good.
func FromEnv(ctx context.Context, env Env) (*webhook.Handler, error) {
	log, metricsOut := env.Log, env.Metrics
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	if metricsOut == nil {
		metricsOut = io.Discard
	}
	clk := env.Clock
	if clk == nil {
		clk = clock.RealClock{}
	}
	cfg, err := webhook.ConfigFromEnv(env.Getenv)
	if err != nil {
		return nil, err
	}
	pools, err := pool.Load(cfg.PoolsConfig)
	if err != nil {
		return nil, err
	}
	// Metric lines carry the function's log level, so Lambda's filter keeps them.
	metrics, err := emf.NewWriter(metricsOut, env.Getenv("AWS_LAMBDA_LOG_LEVEL"))
	if err != nil {
		return nil, err
	}
	c, err := env.Connect(ctx, cfg)
	if err != nil {
		return nil, err
	}
	secret, err := webhookSecret(ctx, cfg, c.Secrets)
	if err != nil {
		return nil, err
	}
	opts := []webhook.Option{webhook.WithLogger(log), webhook.WithMetrics(metrics),
		webhook.WithFailures(rerun.NewStore(c.DynamoDB, cfg.TableName)),
		webhook.WithRoster(roster.NewStore(c.DynamoDB, cfg.TableName))}
	if cfg.SweeperFunctionName != "" {
		opts = append(opts, webhook.WithNudger(nudge.NewLambda(c.Lambda, cfg.SweeperFunctionName)))
	}
	store := reservation.New(c.DynamoDB, cfg.TableName, clk)
	opts = append(opts, webhook.WithQueueWaits(queuewait.New(c.DynamoDB, cfg.TableName, clk)))
	opts = append(opts, webhook.WithGroupAccess(groupaccess.NewStore(c.DynamoDB, cfg.TableName)))
	log.Info("webhook ready", "config", cfg, "pools", len(pools.Pools))
	return webhook.New(secret, pools, store, opts...), nil
}

// webhookSecret is WEBHOOK_SECRET_ARN's value from Secrets Manager, or
// WEBHOOK_SECRET's (the local stack passes it in plain text).
func webhookSecret(ctx context.Context, cfg webhook.Config, sm awsconf.SecretsAPI) ([]byte, error) {
	if cfg.WebhookSecretARN == "" {
		return []byte(cfg.WebhookSecret.Reveal()), nil
	}
	return awsconf.Secret(ctx, sm, cfg.WebhookSecretARN)
}
