package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"os"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	awslambda "github.com/aws/aws-sdk-go-v2/service/lambda"
	"k8s.io/utils/clock"

	"github.com/runnerscaler/runnerscaler/internal/awsconf"
	"github.com/runnerscaler/runnerscaler/internal/githubapi"
	"github.com/runnerscaler/runnerscaler/internal/pool"
	"github.com/runnerscaler/runnerscaler/internal/teardown"
)

// drain: runnerscaler drain -function NAME [-timeout 30m] [-interval 15s] [-cancel].
func drain(ctx context.Context, args []string) error {
	fs := flag.NewFlagSet("drain", flag.ContinueOnError)
	fs.Usage = func() {
		fmt.Fprintln(fs.Output(), "usage: runnerscaler drain -function <sweeper function name or ARN> [flags]\n\n"+
			"Stops every runner gracefully (busy ones after their job), unregisters them from GitHub and\n"+
			"deletes them, through the deployed sweeper, until nothing is left; then run `sam delete`.\n"+
			"From the first round on, the pools stay at zero until `-cancel`. It invokes the sweeper's\n"+
			"drain alias (<function>:drain): it needs lambda:InvokeFunction on that alias's ARN.\n"+
			"With GITHUB_TOKEN set (a token that can list the self-hosted runners of every pool's\n"+
			"organization, repository or enterprise), it then asks GitHub for runners named like the\n"+
			"pools' (-pools) and fails naming any; without it, it says GitHub was not checked.")
		fs.PrintDefaults()
	}
	function := fs.String("function", "", "the sweeper function (stack output SweeperFunctionName or SweeperDrainAliasArn)")
	timeout := fs.Duration("timeout", 30*time.Minute, "give up after this long (busy runners finish their jobs first)")
	interval := fs.Duration("interval", 15*time.Second, "time between two drain sweeps")
	cancel := fs.Bool("cancel", false, "end a drain: the pools scale as configured again")
	gh := addGitHubFlags(fs)
	if err := fs.Parse(args); errors.Is(err, flag.ErrHelp) {
		return nil
	} else if err != nil {
		return err
	}
	if *function == "" || fs.NArg() > 0 {
		fs.Usage()
		return errors.New("-function is required, and no arguments")
	}
	entry, err := teardown.DrainEntry(*function)
	if err != nil {
		return err
	}
	cfg, err := awsconf.Load(ctx)
	if err != nil {
		return err
	}
	d := teardown.New(lambdaInvoker{api: awslambda.NewFromConfig(cfg), function: entry}, clock.RealClock{}, os.Stdout)
	d.Interval = *interval
	if *cancel {
		return d.Cancel(ctx)
	}
	if d.GitHub, err = gh.leftovers(os.Getenv); err != nil {
		return err
	}
	ctx, stop := context.WithTimeout(ctx, *timeout)
	defer stop()
	return d.Drain(ctx)
}

// gitHubFlags say where drain looks for the deployment's runners on GitHub.
type gitHubFlags struct{ pools, url string }

// addGitHubFlags registers -pools and -github-url on fs.
func addGitHubFlags(fs *flag.FlagSet) *gitHubFlags {
	f := &gitHubFlags{}
	fs.StringVar(&f.pools, "pools", "infra/pools.yaml", "the pools file the stack was deployed with (whose runners to look for on GitHub)")
	fs.StringVar(&f.url, "github-url", "https://api.github.com/", "GitHub's REST API root (GitHub Enterprise Server: https://HOST/api/v3/)")
	return f
}

// leftovers looks for the pools' runners on GitHub with the token in
// GITHUB_TOKEN; nil, and GitHub is not checked, without one.
func (f *gitHubFlags) leftovers(getenv func(string) string) (teardown.Leftovers, error) {
	token := getenv("GITHUB_TOKEN")
	if token == "" {
		return nil, nil
	}
	pools, err := pool.Load(f.pools)
	if err != nil {
		return nil, err
	}
	gh, err := githubapi.New(githubapi.Config{BaseURL: f.url, Auth: githubapi.Auth{Token: token}})
	if err != nil {
		return nil, err
	}
	return teardown.NewRegistrations(gh, pools), nil
}

// lambdaInvoker invokes the sweeper synchronously (function: its drain alias).
type lambdaInvoker struct {
	api      *awslambda.Client
	function string
}

func (l lambdaInvoker) Invoke(ctx context.Context, event []byte) ([]byte, error) {
	out, err := l.api.Invoke(ctx, &awslambda.InvokeInput{FunctionName: aws.String(l.function), Payload: event})
	if err != nil {
		return nil, err
	}
	if out.FunctionError != nil {
		var fe struct {
			Message string `json:"errorMessage"`
		}
		_ = json.Unmarshal(out.Payload, &fe)
		return nil, fmt.Errorf("%s: %s", aws.ToString(out.FunctionError), fe.Message)
	}
	return out.Payload, nil
}
