// Command sweeper is the sweeper Lambda: on a schedule (all pools) or a nudge (one
// pool) it decides each pool's desired runners and keeps one StatefulSet per runner
// in line with it, unregistering runners from GitHub before anything is deleted
// (packages sweeper and reconcile). Wiring only.
package main

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"strings"

	"github.com/aws/aws-lambda-go/lambda"
	"github.com/aws/aws-lambda-go/lambdacontext"
	awssdk "github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/eks"
	"github.com/aws/aws-sdk-go-v2/service/secretsmanager"
	"github.com/aws/aws-sdk-go-v2/service/sts"
	"k8s.io/client-go/rest"
	"k8s.io/utils/clock"

	"github.com/runnerscaler/runnerscaler/internal/awsconf"
	"github.com/runnerscaler/runnerscaler/internal/deliverylog"
	"github.com/runnerscaler/runnerscaler/internal/drain"
	"github.com/runnerscaler/runnerscaler/internal/emf"
	"github.com/runnerscaler/runnerscaler/internal/githubapi"
	"github.com/runnerscaler/runnerscaler/internal/kube"
	"github.com/runnerscaler/runnerscaler/internal/lease"
	"github.com/runnerscaler/runnerscaler/internal/pool"
	"github.com/runnerscaler/runnerscaler/internal/poolstate"
	"github.com/runnerscaler/runnerscaler/internal/reconcile"
	"github.com/runnerscaler/runnerscaler/internal/redeliver"
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
	key, token, err := secrets(ctx, cfg, secretsmanager.NewFromConfig(aws, patientInit))
	if err != nil {
		return nil, err
	}
	clk := clock.RealClock{}
	gh, err := githubapi.NewRouter(githubapi.Config{BaseURL: cfg.GitHubURL, Clock: clk,
		Auth: githubapi.Auth{AppID: cfg.AppID, InstallationID: cfg.InstallationID, PrivateKey: key, Token: token}})
	if err != nil {
		return nil, err
	}
	for i := range pools.Pools {
		if err := gh.Serves(pools.Pools[i].Scope()); err != nil {
			return nil, fmt.Errorf("pool %s: %w", pools.Pools[i].Name, err)
		}
	}
	restCfg, err := restConfig(ctx, cfg, aws, clk)
	if err != nil {
		return nil, err
	}
	kc, err := kube.NewClient(restCfg)
	if err != nil {
		return nil, err
	}
	// Metric lines carry the function's log level, so Lambda's filter keeps them.
	metrics, err := emf.NewWriter(os.Stdout, os.Getenv("AWS_LAMBDA_LOG_LEVEL"))
	if err != nil {
		return nil, err
	}
	db := awsconf.DynamoDB(aws, cfg.DynamoDBEndpoint)
	store := reservation.New(db, cfg.TableName, clk)
	rec, err := reconcile.New(pools, kc, gh, clk, log, reconcile.Options{GitHubURL: cfg.RunnerGitHubURL, Metrics: metrics,
		Deployment: cfg.TableName, JobLinks: store, IdleConfirmation: cfg.IdleConfirmation})
	if err != nil {
		return nil, err
	}
	opts := sweeper.Options{Parallelism: cfg.Parallelism, Metrics: metrics, Removed: rec, Drain: drain.NewMark(db, cfg.TableName)}
	if cfg.AppID != 0 { // with a GitHub App, lost webhook deliveries are redelivered
		app, err := githubapi.NewApp(githubapi.Config{BaseURL: cfg.GitHubURL, Auth: githubapi.Auth{AppID: cfg.AppID, PrivateKey: key}})
		if err != nil {
			return nil, err
		}
		opts.Recoverer = redeliver.New(app, clk, 0, log)
		opts.DeliveryLog = deliverylog.NewStore(db, cfg.TableName)
	}
	leases, err := lease.New(db, cfg.TableName, clk, cfg.Lease)
	if err != nil {
		return nil, err
	}
	log.Info("sweeper ready", "pools", len(pools.Pools), "table", cfg.TableName, "lease", cfg.Lease, "github", cfg.GitHubURL)
	return sweeper.New(pools, store, poolstate.NewStore(db, cfg.TableName), leases, rec, clk, log, opts), nil
}

// secrets returns the App's private key and the PAT, from Secrets Manager when
// their ARNs are set (the local stack passes them in plain text).
func secrets(ctx context.Context, cfg sweeper.Config, sm awsconf.SecretsAPI) (key []byte, token string, err error) {
	key = []byte(cfg.PrivateKey)
	if cfg.PrivateKeyARN != "" {
		if key, err = awsconf.Secret(ctx, sm, cfg.PrivateKeyARN); err != nil {
			return nil, "", err
		}
	}
	token = cfg.Token
	if cfg.TokenARN != "" {
		raw, err := awsconf.Secret(ctx, sm, cfg.TokenARN)
		if err != nil {
			return nil, "", err
		}
		token = strings.TrimSpace(string(raw))
	}
	return key, token, nil
}

// Cold starts read Secrets Manager and EKS; many at once (nudges) can be
// throttled, and a failed init loses its nudge. These calls retry longer, with
// client-side rate limiting (adaptive mode), than the SDK's default 3 attempts.
func patientInit(o *secretsmanager.Options) {
	o.RetryMaxAttempts, o.RetryMode = 8, awssdk.RetryModeAdaptive
}

func patientEKS(o *eks.Options) { o.RetryMaxAttempts, o.RetryMode = 8, awssdk.RetryModeAdaptive }

// restConfig connects to EKS with an aws-iam-authenticator token (or, on the local
// stack, through a kubeconfig).
func restConfig(ctx context.Context, cfg sweeper.Config, aws awssdk.Config, clk clock.PassiveClock) (*rest.Config, error) {
	if cfg.Kubeconfig != "" {
		return kube.FromKubeconfig(cfg.Kubeconfig)
	}
	cluster := kube.Cluster{Name: cfg.EKSCluster, Endpoint: cfg.EKSEndpoint, CA: cfg.EKSCA}
	if cluster.Endpoint == "" {
		var err error
		if cluster, err = kube.Describe(ctx, eks.NewFromConfig(aws, patientEKS), cfg.EKSCluster); err != nil {
			return nil, err
		}
	}
	return kube.ForEKS(cluster, sts.NewFromConfig(aws), clk)
}
