package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"net"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	awslambda "github.com/aws/aws-sdk-go-v2/service/lambda"
	lambdatypes "github.com/aws/aws-sdk-go-v2/service/lambda/types"
	"github.com/aws/smithy-go"
	"k8s.io/utils/clock"

	"github.com/runnerscaler/runnerscaler/internal/githubapi"
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
fails naming any; without it, it says GitHub was not checked.

A round that fails for a reason that may pass (throttling, a Lambda error) is
retried until --timeout; one that retrying cannot fix (no AWS credentials,
AccessDenied, no such function, a name that does not resolve) stops it at once,
naming the reason.`

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
	if err := hasCredentials(ctx, cfg); err != nil {
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
	path, err := poolsFile(f.pools, getenv, "--pools FILE")
	if err != nil {
		return nil, err
	}
	pools, err := loadPools(path)
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

// Invoke marks with teardown.ErrCannotInvoke, and explains, an error that
// retrying cannot fix (see cannotInvoke).
func (l lambdaInvoker) Invoke(ctx context.Context, event []byte) ([]byte, error) {
	out, err := l.api.Invoke(ctx, &awslambda.InvokeInput{FunctionName: aws.String(l.function), Payload: event})
	if why := cannotInvoke(err); why != "" {
		return nil, fmt.Errorf("%w: %s: %s: %w", teardown.ErrCannotInvoke, l.function, why, err)
	}
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

// hasCredentials fails, naming what to do, when the AWS configuration finds no
// credentials: every invocation would fail the same way.
func hasCredentials(ctx context.Context, cfg aws.Config) error {
	const how = "set AWS_PROFILE, run 'aws sso login' or 'aws configure', or set AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY"
	if cfg.Credentials == nil {
		return fmt.Errorf("%w: no AWS credentials (%s)", teardown.ErrCannotInvoke, how)
	}
	if _, err := cfg.Credentials.Retrieve(ctx); err != nil {
		return fmt.Errorf("%w: no AWS credentials (%s): %w", teardown.ErrCannotInvoke, how, err)
	}
	return nil
}

// cannotInvoke says why err, from lambda:Invoke, will come back on every
// retry, or "" when a later round may pass (throttling, a 5xx, a timeout, the
// sweeper's own error).
func cannotInvoke(err error) string {
	var (
		notFound *lambdatypes.ResourceNotFoundException
		dns      *net.DNSError
		api      smithy.APIError
	)
	switch {
	case err == nil:
		return ""
	case errors.As(err, &notFound):
		return "no such function or alias: --function is the stack output SweeperFunctionName, and --region the stack's region"
	case errors.As(err, &dns) && dns.IsNotFound:
		return fmt.Sprintf("the Lambda endpoint %s does not resolve: check --region and your network", dns.Name)
	case errors.As(err, &api):
		switch api.ErrorCode() {
		case "AccessDeniedException", "AccessDenied":
			return "your credentials may not invoke it: they need lambda:InvokeFunction on the sweeper's drain alias"
		case "UnrecognizedClientException", "InvalidSignatureException", "ExpiredTokenException", "ExpiredToken", "InvalidClientTokenId":
			return "AWS does not accept your credentials (wrong or expired)"
		case "InvalidParameterValueException", "ValidationException":
			return "AWS refused the request as malformed"
		}
	}
	return ""
}
