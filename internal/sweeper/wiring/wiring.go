// Package wiring builds the sweeper function from its environment: its settings
// from the variables sweeper.ConfigFromEnv names, the GitHub App's key and the
// token from Secrets Manager, the cluster from EKS (or a kubeconfig on the local
// stack), and the sweeper, its reconciler and its stores on the AWS clients it
// is given, so that tests build the same function on fakes.
package wiring

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"strings"

	awssdk "github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/eks"
	"github.com/aws/aws-sdk-go-v2/service/secretsmanager"
	"github.com/aws/aws-sdk-go-v2/service/sts"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/utils/clock"

	"github.com/runnerscaler/runnerscaler/internal/awsconf"
	"github.com/runnerscaler/runnerscaler/internal/emf"
	"github.com/runnerscaler/runnerscaler/internal/githubapi"
	"github.com/runnerscaler/runnerscaler/internal/groupaccess"
	"github.com/runnerscaler/runnerscaler/internal/inventory"
	"github.com/runnerscaler/runnerscaler/internal/kube"
	"github.com/runnerscaler/runnerscaler/internal/lease"
	"github.com/runnerscaler/runnerscaler/internal/pool"
	"github.com/runnerscaler/runnerscaler/internal/poolstate"
	"github.com/runnerscaler/runnerscaler/internal/reconcile"
	"github.com/runnerscaler/runnerscaler/internal/redeliver"
	"github.com/runnerscaler/runnerscaler/internal/rerun"
	"github.com/runnerscaler/runnerscaler/internal/reservation"
	"github.com/runnerscaler/runnerscaler/internal/roster"
	"github.com/runnerscaler/runnerscaler/internal/runnerversion"
	"github.com/runnerscaler/runnerscaler/internal/sweeper"
	"github.com/runnerscaler/runnerscaler/internal/table"
	"github.com/runnerscaler/runnerscaler/internal/teardown"
)

// DynamoDB is the part of the DynamoDB client the sweeper's stores use.
type DynamoDB interface {
	reservation.API
	table.API
}

// Clients are the AWS APIs the sweeper function calls.
type Clients struct {
	// Secrets reads the App's private key and the token
	// (GITHUB_APP_PRIVATE_KEY_ARN, GITHUB_TOKEN_ARN).
	Secrets awsconf.SecretsAPI
	// EKS finds the cluster's endpoint and CA (EKS_CLUSTER_NAME) unless
	// EKS_ENDPOINT and EKS_CA give them.
	EKS kube.ClusterAPI
	// STS signs the cluster's bearer tokens.
	STS *sts.Client
	// DynamoDB holds reservations, pool status, leases and the drain mark (TABLE_NAME).
	DynamoDB DynamoDB
}

// Connect returns the clients for a validated configuration; it is called
// once, after the settings and the pools file have been read.
type Connect func(ctx context.Context, cfg sweeper.Config) (Clients, error)

// AWS connects with the environment's AWS configuration (in Lambda: the
// function's role and region), to the DynamoDB endpoint cfg names, if any.
// Cold starts read Secrets Manager and EKS; many at once (nudges) can be
// throttled, and a failed start loses its nudge, so those two clients retry
// longer than the SDK's default 3 attempts, with client-side rate limiting
// (adaptive mode).
func AWS(ctx context.Context, cfg sweeper.Config) (Clients, error) {
	aws, err := awsconf.Load(ctx)
	if err != nil {
		return Clients{}, err
	}
	return Clients{
		Secrets: secretsmanager.NewFromConfig(aws, func(o *secretsmanager.Options) {
			o.RetryMaxAttempts, o.RetryMode = patientAttempts, awssdk.RetryModeAdaptive
		}),
		EKS: eks.NewFromConfig(aws, func(o *eks.Options) {
			o.RetryMaxAttempts, o.RetryMode = patientAttempts, awssdk.RetryModeAdaptive
		}),
		STS:      sts.NewFromConfig(aws),
		DynamoDB: awsconf.DynamoDB(aws, cfg.DynamoDBEndpoint),
	}, nil
}

// patientAttempts bounds the start's Secrets Manager and EKS calls (see AWS).
const patientAttempts = 8

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
	// Clock is the sweeper's clock (default: the real one).
	Clock clock.Clock
}

// FromEnv returns the sweeper. It fails, naming the variable, secret, file,
// cluster or pool, when a setting is missing or invalid, the pools file does
// not load, a secret cannot be read or is empty, the cluster cannot be found,
// or a pool has no credentials that can serve it. It calls env.Connect only
// once the settings and the pools file are known good.
func FromEnv(ctx context.Context, env Env) (*sweeper.Sweeper, error) {
	env = env.withDefaults()
	cfg, err := sweeper.ConfigFromEnv(env.Getenv)
	if err != nil {
		return nil, err
	}
	pools, err := pool.Load(cfg.PoolsConfig)
	if err != nil {
		return nil, err
	}
	// Metric lines carry the function's log level, so Lambda's filter keeps them.
	metrics, err := emf.NewWriter(env.Metrics, env.Getenv("AWS_LAMBDA_LOG_LEVEL"))
	if err != nil {
		return nil, err
	}
	c, err := env.Connect(ctx, cfg)
	if err != nil {
		return nil, err
	}
	key, token, err := secrets(ctx, cfg, c.Secrets)
	if err != nil {
		return nil, err
	}
	gh, err := gitHub(cfg, pools, key, token, env.Clock)
	if err != nil {
		return nil, err
	}
	kc, err := cluster(ctx, cfg, c, env.Clock)
	if err != nil {
		return nil, err
	}
	store := reservation.New(c.DynamoDB, cfg.TableName, env.Clock, reservation.WithPools(func(name string) bool { return pools.Pool(name) != nil }))
	rec, err := reconcile.New(pools, kc, gh, env.Clock, env.Log, reconcile.Options{GitHubURL: cfg.RunnerGitHubURL,
		Metrics: metrics, Deployment: cfg.TableName, JobLinks: store, Queued: store, IdleConfirmation: cfg.IdleConfirmation,
		RunnerListMaxAge: cfg.RunnerListMaxAge, Reruns: rerun.NewStore(c.DynamoDB, cfg.TableName),
		Roster: roster.NewStore(c.DynamoDB, cfg.TableName)})
	if err != nil {
		return nil, err
	}
	opts, err := options(cfg, key, c.DynamoDB, metrics, inventory.New(kc, cfg.TableName).WithRoster(roster.NewStore(c.DynamoDB, cfg.TableName)), env)
	if err != nil {
		return nil, err
	}
	// The first pool's credentials read actions/runner's releases (any can).
	opts.Versions = runnerversion.New(runnerversion.NewStore(c.DynamoDB, cfg.TableName),
		runnerversion.RouterReleases{Router: gh, Scope: pools.Pools[0].Scope()}, env.Clock, env.Log, metrics)
	opts.GroupAccess = groupaccess.NewRefresher(groupaccess.NewStore(c.DynamoDB, cfg.TableName),
		gh, env.Clock, env.Log)
	opts.HeldJobs = gh
	leases, err := lease.New(c.DynamoDB, cfg.TableName, env.Clock, cfg.Lease)
	if err != nil {
		return nil, err
	}
	env.Log.Info("sweeper ready", "pools", len(pools.Pools), "table", cfg.TableName, "lease", cfg.Lease, "github", cfg.GitHubURL)
	return sweeper.New(pools, store, poolstate.NewStore(c.DynamoDB, cfg.TableName), leases, rec, env.Clock, env.Log, opts)
}

func (env Env) withDefaults() Env {
	if env.Log == nil {
		env.Log = slog.New(slog.DiscardHandler)
	}
	if env.Metrics == nil {
		env.Metrics = io.Discard
	}
	if env.Clock == nil {
		env.Clock = clock.RealClock{}
	}
	return env
}

// secrets returns the App's private key and the token, from Secrets Manager when
// their ARNs are set (the local stack passes them in plain text).
func secrets(ctx context.Context, cfg sweeper.Config, sm awsconf.SecretsAPI) (key []byte, token string, err error) {
	key = []byte(cfg.PrivateKey.Reveal())
	if cfg.PrivateKeyARN != "" {
		if key, err = awsconf.Secret(ctx, sm, cfg.PrivateKeyARN); err != nil {
			return nil, "", err
		}
	}
	token = cfg.Token.Reveal()
	if cfg.TokenARN != "" {
		raw, err := awsconf.Secret(ctx, sm, cfg.TokenARN)
		if err != nil {
			return nil, "", err
		}
		token = strings.TrimSpace(string(raw))
	}
	return key, token, nil
}

// gitHub returns the router over the App and the token, after checking that it
// can serve every pool.
func gitHub(cfg sweeper.Config, pools *pool.Config, key []byte, token string, clk clock.Clock) (*githubapi.Router, error) {
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
	return gh, nil
}

// cluster returns the Kubernetes client of the runners' cluster.
func cluster(ctx context.Context, cfg sweeper.Config, c Clients, clk clock.PassiveClock) (kubernetes.Interface, error) {
	restCfg, err := restConfig(ctx, cfg, c, clk)
	if err != nil {
		return nil, err
	}
	return kube.NewClient(restCfg)
}

// restConfig connects to EKS with an aws-iam-authenticator token (or, on the
// local stack, through a kubeconfig), asking EKS for the cluster's endpoint and
// CA unless the configuration gives them.
func restConfig(ctx context.Context, cfg sweeper.Config, c Clients, clk clock.PassiveClock) (*rest.Config, error) {
	if cfg.Kubeconfig != "" {
		return kube.FromKubeconfig(cfg.Kubeconfig)
	}
	cl := kube.Cluster{Name: cfg.EKSCluster, Endpoint: cfg.EKSEndpoint, CA: cfg.EKSCA}
	if cl.Endpoint == "" {
		var err error
		if cl, err = kube.Describe(ctx, c.EKS, cfg.EKSCluster); err != nil {
			return nil, err
		}
	}
	return kube.ForEKS(cl, c.STS, clk)
}

// options are the sweeper's: its parallelism and metrics, the removed-pool
// finder, the teardown's drain mark and, with a GitHub App, the
// recovery of lost webhook deliveries and its record.
func options(cfg sweeper.Config, key []byte, db DynamoDB, metrics *emf.Writer, removed *inventory.Finder, env Env) (sweeper.Options, error) {
	opts := sweeper.Options{Parallelism: cfg.Parallelism, Metrics: metrics, Removed: removed,
		Drain: teardown.NewMark(db, cfg.TableName)}
	if cfg.AppID == 0 {
		return opts, nil
	}
	app, err := githubapi.NewApp(githubapi.Config{BaseURL: cfg.GitHubURL, Auth: githubapi.Auth{AppID: cfg.AppID, PrivateKey: key}})
	if err != nil {
		return opts, err
	}
	opts.Recoverer = redeliver.New(app, env.Clock, 0, env.Log)
	opts.DeliveryLog = redeliver.NewStore(db, cfg.TableName)
	return opts, nil
}
