// Command sweeper is the sweeper Lambda: on a schedule (all pools) or a nudge (one
// pool) it decides each pool's desired runners and keeps one StatefulSet per runner
// in line with it, unregistering runners from GitHub before anything is deleted
// (packages sweeper and reconcile). Wiring only.
package main

import (
	"context"
	"log/slog"
	"os"

	"github.com/aws/aws-lambda-go/lambda"
	"github.com/aws/aws-lambda-go/lambdacontext"
	awssdk "github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/eks"
	"github.com/aws/aws-sdk-go-v2/service/secretsmanager"
	"github.com/aws/aws-sdk-go-v2/service/sts"
	"k8s.io/client-go/rest"
	"k8s.io/utils/clock"

	"github.com/runnerscaler/runnerscaler/internal/awsconf"
	"github.com/runnerscaler/runnerscaler/internal/emf"
	"github.com/runnerscaler/runnerscaler/internal/githubapi"
	"github.com/runnerscaler/runnerscaler/internal/kube"
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
	key := []byte(cfg.PrivateKey)
	if cfg.PrivateKeyARN != "" {
		if key, err = awsconf.Secret(ctx, secretsmanager.NewFromConfig(aws), cfg.PrivateKeyARN); err != nil {
			return nil, err
		}
	}
	clk := clock.RealClock{}
	gh, err := githubapi.New(githubapi.Config{BaseURL: cfg.GitHubURL, Clock: clk,
		Auth: githubapi.Auth{AppID: cfg.AppID, InstallationID: cfg.InstallationID, PrivateKey: key, Token: cfg.Token}})
	if err != nil {
		return nil, err
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
	rec, err := reconcile.New(pools, kc, gh, clk, log, reconcile.Options{GitHubURL: cfg.RunnerGitHubURL, Metrics: metrics})
	if err != nil {
		return nil, err
	}
	opts := sweeper.Options{Parallelism: cfg.Parallelism, Metrics: metrics}
	if cfg.Token == "" { // with a GitHub App, lost webhook deliveries are redelivered
		app, err := githubapi.NewApp(githubapi.Config{BaseURL: cfg.GitHubURL, Auth: githubapi.Auth{AppID: cfg.AppID, PrivateKey: key}})
		if err != nil {
			return nil, err
		}
		opts.Recoverer = redeliver.New(app, clk, 0, log)
	}
	db := awsconf.DynamoDB(aws, cfg.DynamoDBEndpoint)
	log.Info("sweeper ready", "pools", len(pools.Pools), "table", cfg.TableName, "lease", cfg.Lease, "github", cfg.GitHubURL)
	return sweeper.New(pools, reservation.New(db, cfg.TableName, clk), poolstate.NewStore(db, cfg.TableName),
		poolstate.NewLeases(db, cfg.TableName, clk, cfg.Lease), rec, clk, log, opts), nil
}

// restConfig connects to EKS with an aws-iam-authenticator token (or, on the local
// stack, through a kubeconfig).
func restConfig(ctx context.Context, cfg sweeper.Config, aws awssdk.Config, clk clock.PassiveClock) (*rest.Config, error) {
	if cfg.Kubeconfig != "" {
		return kube.FromKubeconfig(cfg.Kubeconfig)
	}
	cluster := kube.Cluster{Name: cfg.EKSCluster, Endpoint: cfg.EKSEndpoint, CA: cfg.EKSCA}
	if cluster.Endpoint == "" {
		var err error
		if cluster, err = kube.Describe(ctx, eks.NewFromConfig(aws), cfg.EKSCluster); err != nil {
			return nil, err
		}
	}
	return kube.ForEKS(cluster, sts.NewFromConfig(aws), clk)
}
