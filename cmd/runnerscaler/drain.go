package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	awslambda "github.com/aws/aws-sdk-go-v2/service/lambda"
	"k8s.io/utils/clock"

	"github.com/runnerscaler/runnerscaler/internal/githubapi"
	"github.com/runnerscaler/runnerscaler/internal/pool"
	"github.com/runnerscaler/runnerscaler/internal/teardown"
)

const drainHelp = `usage: runnerscaler drain --function NAME [flags]

Stops every runner gracefully (busy ones after their job), unregisters them from
GitHub and deletes them, through the deployed sweeper, until nothing is left;
then run 'sam delete'. From the first round on, the pools stay at zero until
--cancel. It invokes the sweeper's drain alias (<function>:drain): it needs
lambda:InvokeFunction on that alias's ARN. With GITHUB_TOKEN set (a token that
can list the self-hosted runners of every pool's organization, repository or
enterprise), it then asks GitHub for runners named like the pools' (--pools) and
fails naming any; without it, it says GitHub was not checked.`

// drainFlags are the drain command's settings.
type drainFlags struct {
	function, region  string
	entry             string // the drain alias of function
	timeout, interval time.Duration
	cancel            bool
	gh                *gitHubFlags
}

func parseDrain(args []string) (drainFlags, error) {
	var f drainFlags
	fs := newFlagSet("drain", drainHelp)
	fs.StringVar(&f.function, "function", "", "the sweeper function (stack output SweeperFunctionName or SweeperDrainAliasArn)")
	fs.DurationVar(&f.timeout, "timeout", 30*time.Minute, "give up after this long (busy runners finish their jobs first)")
	fs.DurationVar(&f.interval, "interval", 15*time.Second, "time between two drain sweeps")
	fs.BoolVar(&f.cancel, "cancel", false, "end a drain: the pools scale as configured again")
	fs.StringVar(&f.region, "region", "", "AWS region of the stack (default: AWS_REGION, then your AWS profile's)")
	f.gh = addGitHubFlags(fs.FlagSet)
	positional, err := fs.Parse(args)
	switch {
	case err != nil:
		return f, err
	case f.function == "":
		return f, usagef("--function is required (the stack output SweeperFunctionName)")
	case len(positional) > 0:
		return f, usagef("no arguments, got %q", positional)
	}
	if f.entry, err = teardown.DrainEntry(f.function); err != nil {
		return f, usagef("--function: %w", err)
	}
	return f, nil
}

// drain is `runnerscaler drain`.
func drain(ctx context.Context, args []string, e env) error {
	f, err := parseDrain(args)
	if err != nil {
		return err
	}
	var leftovers teardown.Leftovers
	if !f.cancel {
		if leftovers, err = f.gh.leftovers(e.getenv); err != nil {
			return err
		}
	}
	cfg, err := loadAWS(ctx, f.region)
	if err != nil {
		return err
	}
	d := teardown.New(lambdaInvoker{api: awslambda.NewFromConfig(cfg), function: f.entry}, clock.RealClock{}, e.stdout)
	d.Interval = f.interval
	if f.cancel {
		return d.Cancel(ctx)
	}
	d.GitHub = leftovers
	ctx, stop := context.WithTimeout(ctx, f.timeout)
	defer stop()
	return d.Drain(ctx)
}

// gitHubFlags say where drain looks for the deployment's runners on GitHub.
type gitHubFlags struct{ pools, url string }

// addGitHubFlags registers -pools and -github-url on fs.
func addGitHubFlags(fs *flag.FlagSet) *gitHubFlags {
	f := &gitHubFlags{}
	fs.StringVar(&f.pools, "pools", "", "the pools file the stack was deployed with, whose runners to look for on GitHub "+
		"(default: RUNNERSCALER_POOLS, ./pools.yaml, ./infra/pools.yaml)")
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
	path, err := poolsFile(f.pools, getenv, "--pools")
	if err != nil {
		return nil, err
	}
	pools, err := pool.Load(path)
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
