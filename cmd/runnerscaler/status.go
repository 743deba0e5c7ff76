package main

import (
	"context"
	"fmt"
	"io"
	"strconv"

	"k8s.io/client-go/kubernetes"
	"k8s.io/utils/clock"

	"github.com/runnerscaler/runnerscaler/internal/awsconf"
	"github.com/runnerscaler/runnerscaler/internal/poolstate"
	"github.com/runnerscaler/runnerscaler/internal/queuewait"
	"github.com/runnerscaler/runnerscaler/internal/redeliver"
	"github.com/runnerscaler/runnerscaler/internal/rerun"
	"github.com/runnerscaler/runnerscaler/internal/reservation"
	"github.com/runnerscaler/runnerscaler/internal/runnerversion"
	"github.com/runnerscaler/runnerscaler/internal/status"
	"github.com/runnerscaler/runnerscaler/internal/status/gather"
)

// statusFlags are the status command's settings.
type statusFlags struct {
	table, pools, dynamoEndpoint, kubeconfig, kubeContext, region string
	output                                                        *outputFormat
	job                                                           int64
	pool                                                          string
}

const statusHelp = `usage: runnerscaler status [POOL] [--job ID] [-o table|json|yaml] [flags]

Shows what the deployment is doing and why jobs wait: every pool's runners and
waiting jobs, one pool's runners (POOL), or one workflow job's trace (--job).
It reads the stack's DynamoDB table and the cluster with your own AWS and
Kubernetes credentials.`

func parseStatus(args []string, getenv func(string) string) (statusFlags, error) {
	var f statusFlags
	fs := newFlagSet("status", statusHelp)
	fs.StringVar(&f.table, "table", getenv("RUNNERSCALER_TABLE"), "DynamoDB table (the stack output TableName; env RUNNERSCALER_TABLE)")
	fs.StringVar(&f.pools, "pools", "", "the pools file the stack was deployed with (default: RUNNERSCALER_POOLS, ./pools.yaml, ./infra/pools.yaml)")
	fs.StringVar(&f.dynamoEndpoint, "dynamodb-endpoint", getenv("DYNAMODB_ENDPOINT"), "DynamoDB endpoint (the local stack's; env DYNAMODB_ENDPOINT)")
	fs.StringVar(&f.kubeconfig, "kubeconfig", "", "kubeconfig (default: KUBECONFIG, then ~/.kube/config)")
	fs.StringVar(&f.kubeContext, "context", "", "kubeconfig context (default: the current one)")
	fs.StringVar(&f.region, "region", "", "AWS region of the stack (default: AWS_REGION, then your AWS profile's)")
	f.output = fs.Output("table", "json", "yaml")
	job := fs.String("job", "", "trace one workflow job by its id")
	positional, err := fs.Parse(args)
	if err != nil {
		return f, err
	}
	if err := f.complete(positional, *job); err != nil {
		return f, err
	}
	return f, nil
}

// complete checks the flags and takes the positional POOL and --job value.
func (f *statusFlags) complete(positional []string, job string) error {
	switch {
	case f.table == "":
		return usagef("--table is required (the stack output TableName, or RUNNERSCALER_TABLE)")
	case len(positional) > 1:
		return usagef("one POOL at most, got %q", positional)
	case len(positional) == 1:
		f.pool = positional[0]
	}
	if job != "" {
		id, err := strconv.ParseInt(job, 10, 64)
		if err != nil || id <= 0 {
			return usagef("--job %q: want a workflow job id (a positive number)", job)
		}
		f.job = id
		if f.pool != "" {
			return usagef("give either POOL or --job, not both")
		}
	}
	return nil
}

// statusReport is status -o json|yaml of every pool: the report, and the
// version of the runnerscaler that wrote it.
type statusReport struct {
	Version string `json:"version"`
	*status.Report
}

// runStatus is `runnerscaler status`: it reads the table and the cluster and
// prints the report, one pool, or one job's trace.
func runStatus(ctx context.Context, args []string, stdout, _ io.Writer, getenv func(string) string) error {
	f, err := parseStatus(args, getenv)
	if err != nil {
		return err
	}
	if f.pools, err = poolsFile(f.pools, getenv, "--pools FILE"); err != nil {
		return err
	}
	g, err := newGatherer(ctx, f)
	if err != nil {
		return err
	}
	now := clock.RealClock{}.Now()
	switch {
	case f.job != 0:
		tr, err := g.Trace(ctx, f.job)
		if err != nil {
			return err
		}
		return f.output.Write(stdout, tr, func() error { return status.RenderTrace(stdout, now, tr) })
	case f.pool != "":
		r, err := g.Report(ctx, f.pool)
		if err != nil {
			return err
		}
		return f.output.Write(stdout, r.Pools[0], func() error {
			if err := status.RenderWebhook(stdout, r.Webhook); err != nil {
				return err
			}
			return status.RenderPool(stdout, r.At, r.Pools[0])
		})
	}
	r, err := g.Report(ctx, "")
	if err != nil {
		return err
	}
	return f.output.Write(stdout, statusReport{Version: buildVersion().Version, Report: &r}, func() error { return status.RenderReport(stdout, r) })
}

// newGatherer connects to the table and the cluster with the operator's credentials.
func newGatherer(ctx context.Context, f statusFlags) (*gather.Gatherer, error) {
	pools, err := loadPools(f.pools)
	if err != nil {
		return nil, err
	}
	aws, err := loadAWS(ctx, f.region)
	if err != nil {
		return nil, err
	}
	restCfg, err := loadKube(f.kubeconfig, f.kubeContext)
	if err != nil {
		return nil, err
	}
	kc, err := kubernetes.NewForConfig(restCfg)
	if err != nil {
		return nil, fmt.Errorf("kubernetes client: %w", err)
	}
	db := awsconf.DynamoDB(aws, f.dynamoEndpoint)
	clk := clock.RealClock{}
	return gather.New(pools, reservation.New(db, f.table, clk), poolstate.NewStore(db, f.table),
		redeliver.NewStore(db, f.table), kc, clk, gather.WithQueueWaits(queuewait.New(db, f.table, clk)), gather.WithReruns(rerun.NewStore(db, f.table)),
		gather.WithRunnerReleases(runnerversion.NewStore(db, f.table))), nil
}
