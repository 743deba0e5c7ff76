package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"strconv"

	"k8s.io/client-go/kubernetes"
	"k8s.io/utils/clock"

	"github.com/runnerscaler/runnerscaler/internal/awsconf"
	"github.com/runnerscaler/runnerscaler/internal/deliverylog"
	"github.com/runnerscaler/runnerscaler/internal/kube"
	"github.com/runnerscaler/runnerscaler/internal/pool"
	"github.com/runnerscaler/runnerscaler/internal/poolstate"
	"github.com/runnerscaler/runnerscaler/internal/queuewait"
	"github.com/runnerscaler/runnerscaler/internal/rerun"
	"github.com/runnerscaler/runnerscaler/internal/reservation"
	"github.com/runnerscaler/runnerscaler/internal/runnerversion"
	"github.com/runnerscaler/runnerscaler/internal/status"
	"github.com/runnerscaler/runnerscaler/internal/status/gather"
)

// statusFlags are the status command's settings.
type statusFlags struct {
	table, pools, dynamoEndpoint, kubeconfig, kubeContext, output string
	job                                                           int64
	pool                                                          string
}

func parseStatus(args []string, getenv func(string) string, stderr io.Writer) (statusFlags, error) {
	var f statusFlags
	fs := flag.NewFlagSet("status", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.StringVar(&f.table, "table", getenv("RUNNERSCALER_TABLE"), "DynamoDB table (the stack output TableName; env RUNNERSCALER_TABLE)")
	fs.StringVar(&f.pools, "pools", "infra/pools.yaml", "the pools file the stack was deployed with")
	fs.StringVar(&f.dynamoEndpoint, "dynamodb-endpoint", getenv("DYNAMODB_ENDPOINT"), "DynamoDB endpoint (the local stack's; env DYNAMODB_ENDPOINT)")
	fs.StringVar(&f.kubeconfig, "kubeconfig", "", "kubeconfig (default: KUBECONFIG, then ~/.kube/config)")
	fs.StringVar(&f.kubeContext, "context", "", "kubeconfig context (default: the current one)")
	fs.StringVar(&f.output, "o", "table", "output: table or json")
	job := fs.String("job", "", "trace one workflow job by its id")
	fs.Usage = func() {
		fmt.Fprintln(stderr, "usage: runnerscaler status [POOL] [--job ID] [-o table|json] [flags]")
		fs.PrintDefaults()
	}
	var positional []string
	for {
		if err := fs.Parse(args); err != nil {
			return f, err
		}
		if fs.NArg() == 0 {
			break
		}
		positional, args = append(positional, fs.Arg(0)), fs.Args()[1:]
	}
	return f, f.complete(positional, *job)
}

// complete checks the flags and takes the positional POOL and --job value.
func (f *statusFlags) complete(positional []string, job string) error {
	var errs []error
	if f.table == "" {
		errs = append(errs, errors.New("-table is required (the stack output TableName, or RUNNERSCALER_TABLE)"))
	}
	if f.output != "table" && f.output != "json" {
		errs = append(errs, fmt.Errorf("-o %q: want table or json", f.output))
	}
	if len(positional) > 1 {
		errs = append(errs, fmt.Errorf("one POOL at most, got %q", positional))
	} else if len(positional) == 1 {
		f.pool = positional[0]
	}
	if job != "" {
		id, err := strconv.ParseInt(job, 10, 64)
		if err != nil || id <= 0 {
			errs = append(errs, fmt.Errorf("--job %q: want a workflow job id (a positive number)", job))
		}
		f.job = id
		if f.pool != "" {
			errs = append(errs, errors.New("give either POOL or --job, not both"))
		}
	}
	return errors.Join(errs...)
}

// runStatus is `runnerscaler status`: it reads the table and the cluster and
// prints the report, one pool, or one job's trace.
func runStatus(ctx context.Context, args []string, stdout, stderr io.Writer, getenv func(string) string) error {
	f, err := parseStatus(args, getenv, stderr)
	if errors.Is(err, flag.ErrHelp) {
		return nil
	}
	if err != nil {
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
		return render(stdout, f.output, tr, func() error { return status.RenderTrace(stdout, now, tr) })
	case f.pool != "":
		r, err := g.Report(ctx, f.pool)
		if err != nil {
			return err
		}
		return render(stdout, f.output, r.Pools[0], func() error {
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
	return render(stdout, f.output, r, func() error { return status.RenderReport(stdout, r) })
}

func render(w io.Writer, output string, v any, table func() error) error {
	if output == "json" {
		return status.JSON(w, v)
	}
	return table()
}

// newGatherer connects to the table and the cluster with the operator's credentials.
func newGatherer(ctx context.Context, f statusFlags) (*gather.Gatherer, error) {
	pools, err := pool.Load(f.pools)
	if err != nil {
		return nil, err
	}
	aws, err := awsconf.Load(ctx)
	if err != nil {
		return nil, err
	}
	restCfg, err := kube.FromOperatorKubeconfig(f.kubeconfig, f.kubeContext)
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
		deliverylog.NewStore(db, f.table), kc, clk, gather.WithQueueWaits(queuewait.New(db, f.table, clk)), gather.WithReruns(rerun.NewStore(db, f.table)),
		gather.WithRunnerReleases(runnerversion.NewStore(db, f.table))), nil
}
