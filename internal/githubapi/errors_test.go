package githubapi_test

import (
	"context"
	"errors"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/runnerscaler/runnerscaler/internal/githubapi"
	"github.com/runnerscaler/runnerscaler/internal/groupaccess"
	"github.com/runnerscaler/runnerscaler/local/githubsim"
)

// call is one operation of one of the package's clients, made against f; the
// clients are made once, so that calling again meets the same rate-limit gate.
type call func(ctx context.Context) error

func installationCall(t *testing.T, f *front, do func(context.Context, *githubapi.Client) error) call {
	t.Helper()
	_, pemKey := key(t)
	c, err := githubapi.New(githubapi.Config{BaseURL: f.url, Clock: f.clock,
		Auth: githubapi.Auth{AppID: appID, InstallationID: installation, PrivateKey: pemKey}})
	if err != nil {
		t.Fatal(err)
	}
	return func(ctx context.Context) error { return do(ctx, c) }
}

func routerCall(t *testing.T, f *front, do func(context.Context, *githubapi.Router) error) call {
	t.Helper()
	r, err := githubapi.NewRouter(githubapi.Config{BaseURL: f.url, Clock: f.clock, Auth: appAuth(t)})
	if err != nil {
		t.Fatal(err)
	}
	return func(ctx context.Context) error { return do(ctx, r) }
}

func appCall(t *testing.T, f *front, do func(context.Context, *githubapi.AppClient) error) call {
	t.Helper()
	a, err := githubapi.NewApp(githubapi.Config{BaseURL: f.url, Clock: f.clock, Auth: appAuth(t)})
	if err != nil {
		t.Fatal(err)
	}
	return func(ctx context.Context) error { return do(ctx, a) }
}

// opCase is a call of op, with the route of its request (for the installation
// token: of the token request the call makes first).
type opCase struct {
	op    githubapi.Op
	route string
	call  func(*testing.T, *front) call
}

// operations has one opCase per operation of the package.
var operations = []opCase{
	{githubapi.OpRemoveRunner, `^DELETE /orgs/acme/actions/runners/5$`, func(t *testing.T, f *front) call {
		return installationCall(t, f, func(ctx context.Context, c *githubapi.Client) error { return c.RemoveRunner(ctx, org, 5) })
	}},
	{githubapi.OpRemoveRunnerLabels, `^DELETE /orgs/acme/actions/runners/5/labels$`, func(t *testing.T, f *front) call {
		return installationCall(t, f, func(ctx context.Context, c *githubapi.Client) error { return c.RemoveRunnerLabels(ctx, org, 5) })
	}},
	{githubapi.OpJITConfig, `^POST /orgs/acme/actions/runners/generate-jitconfig$`, func(t *testing.T, f *front) call {
		return installationCall(t, f, func(ctx context.Context, c *githubapi.Client) error {
			_, err := c.JITConfig(ctx, org, "r", []string{"x"}, githubapi.DefaultRunnerGroupID)
			return err
		})
	}},
	{githubapi.OpRegistrationToken, `^POST /orgs/acme/actions/runners/registration-token$`, func(t *testing.T, f *front) call {
		return installationCall(t, f, func(ctx context.Context, c *githubapi.Client) error {
			_, err := c.RegistrationToken(ctx, org)
			return err
		})
	}},
	{githubapi.OpListRunners, `^GET /orgs/acme/actions/runners$`, func(t *testing.T, f *front) call {
		return installationCall(t, f, func(ctx context.Context, c *githubapi.Client) error {
			_, err := c.Runners(ctx, org)
			return err
		})
	}},
	{githubapi.OpListRunnerGroups, `^GET /orgs/acme/actions/runner-groups$`, func(t *testing.T, f *front) call {
		return installationCall(t, f, func(ctx context.Context, c *githubapi.Client) error {
			_, err := c.RunnerGroupID(ctx, org, "big")
			return err
		})
	}},
	{githubapi.OpGetRunnerGroup, `^GET /orgs/acme/actions/runner-groups/\d+$`, func(t *testing.T, f *front) call {
		f.sim.AddGroup(org, "big", []string{"acme/app"})
		return installationCall(t, f, func(ctx context.Context, c *githubapi.Client) error {
			_, err := c.RunnerGroupAccess(ctx, org, "big", groupaccess.Access{})
			return err
		})
	}},
	{githubapi.OpListGroupRepositories, `^GET /orgs/acme/actions/runner-groups/\d+/repositories$`, func(t *testing.T, f *front) call {
		f.sim.AddGroup(org, "big", []string{"acme/app"})
		return installationCall(t, f, func(ctx context.Context, c *githubapi.Client) error {
			_, err := c.RunnerGroupAccess(ctx, org, "big", groupaccess.Access{})
			return err
		})
	}},
	{githubapi.OpInstallationToken, `^POST /app/installations/77/access_tokens$`, func(t *testing.T, f *front) call {
		return installationCall(t, f, func(ctx context.Context, c *githubapi.Client) error {
			_, err := c.Runners(ctx, org)
			return err
		})
	}},
	{githubapi.OpFindInstallation, `^GET /orgs/org-a/installation$`, func(t *testing.T, f *front) call {
		return routerCall(t, f, func(ctx context.Context, r *githubapi.Router) error {
			_, err := r.Runners(ctx, orgA)
			return err
		})
	}},
	{githubapi.OpListHookDeliveries, `^GET /app/hook/deliveries$`, func(t *testing.T, f *front) call {
		return appCall(t, f, func(ctx context.Context, a *githubapi.AppClient) error {
			_, err := a.Deliveries(ctx, time.Time{})
			return err
		})
	}},
	{githubapi.OpRedeliver, `^POST /app/hook/deliveries/9/attempts$`, func(t *testing.T, f *front) call {
		return appCall(t, f, func(ctx context.Context, a *githubapi.AppClient) error { return a.Redeliver(ctx, 9) })
	}},
}

// TestUnprocessableIsBusyOnlyOnRemoval: a 422 means "busy" when removing a runner;
// from any other operation it is an *APIError that keeps GitHub's message.
func TestUnprocessableIsBusyOnlyOnRemoval(t *testing.T) {
	t.Parallel()
	const msg = "Validation Failed: name is too long"
	for _, o := range operations {
		t.Run(string(o.op), func(t *testing.T) {
			t.Parallel()
			f := newFront(t)
			call := o.call(t, f)
			f.refuse(o.route, answer{status: 422, message: msg})
			err := call(t.Context())
			var apiErr *githubapi.APIError
			if !errors.As(err, &apiErr) {
				t.Fatalf("422: %v, want an *APIError", err)
			}
			if apiErr.Op != o.op || apiErr.Status != 422 || apiErr.Message != msg || !strings.Contains(err.Error(), msg) {
				t.Errorf("422: %+v (%v), want op %q, status 422 and GitHub's message", apiErr, err, o.op)
			}
			if busy := errors.Is(err, githubapi.ErrRunnerBusy); busy != (o.op == githubapi.OpRemoveRunner) {
				t.Errorf("422 from %q: errors.Is(ErrRunnerBusy) = %v", o.op, busy)
			}
			for _, other := range []error{githubapi.ErrNotFound, githubapi.ErrForbidden, githubapi.ErrServer, githubapi.ErrRateLimited} {
				if errors.Is(err, other) {
					t.Errorf("422 from %q matches %v", o.op, other)
				}
			}
		})
	}
}

// TestStatusesMapToSentinels: the simulator's own answers, through one mapping.
func TestStatusesMapToSentinels(t *testing.T) {
	t.Parallel()
	e := newEnv(t, githubsim.Options{})
	ctx := t.Context()
	addRunners(t, e, org, 1)
	rs, err := e.client.Runners(ctx, org)
	if err != nil || len(rs) != 1 {
		t.Fatalf("runners %v, %v", rs, err)
	}
	if err := e.sim.SetBusy(rs[0].ID, true); err != nil {
		t.Fatal(err)
	}
	err = e.client.RemoveRunner(ctx, org, rs[0].ID)
	var apiErr *githubapi.APIError
	if !errors.Is(err, githubapi.ErrRunnerBusy) || !errors.As(err, &apiErr) || apiErr.Op != githubapi.OpRemoveRunner ||
		!strings.Contains(apiErr.Message, "is still running a job") {
		t.Fatalf("busy removal: %v, want ErrRunnerBusy with GitHub's message", err)
	}
	err = e.client.RemoveRunner(ctx, org, rs[0].ID+1)
	if !errors.Is(err, githubapi.ErrRunnerNotFound) || !errors.Is(err, githubapi.ErrNotFound) || errors.Is(err, githubapi.ErrRunnerBusy) {
		t.Fatalf("removing an unknown runner: %v, want ErrRunnerNotFound and ErrNotFound", err)
	}
	_, err = e.client.JITConfig(ctx, org, "r", []string{"x"}, 99)
	if !errors.Is(err, githubapi.ErrNotFound) || errors.Is(err, githubapi.ErrRunnerNotFound) {
		t.Fatalf("JIT config in an unknown group: %v, want ErrNotFound and not ErrRunnerNotFound", err)
	}
	e.sim.InjectStatus(401, 1)
	if _, err := e.client.Runners(ctx, org); !errors.Is(err, githubapi.ErrUnauthorized) {
		t.Fatalf("401: %v, want ErrUnauthorized", err)
	}
}

// TestRateLimits: GitHub's primary (403 or 429 with X-RateLimit-Remaining: 0) and
// secondary limits, on every kind of call, are *RateLimitErrors, and the gate
// then refuses the next call without a request.
func TestRateLimits(t *testing.T) {
	t.Parallel()
	const secondaryDoc = "https://docs.github.com/rest/using-the-rest-api/rate-limits-for-the-rest-api#about-secondary-rate-limits"
	primary := func(status int, reset time.Time) answer {
		return answer{status: status, message: "API rate limit exceeded", header: map[string]string{
			"X-RateLimit-Limit": "5000", "X-RateLimit-Remaining": "0", "X-RateLimit-Reset": strconv.FormatInt(reset.Unix(), 10)}}
	}
	secondary := func(status int, retryAfter time.Duration) answer {
		return answer{status: status, message: "You have exceeded a secondary rate limit.", doc: secondaryDoc,
			header: map[string]string{"Retry-After": strconv.Itoa(int(retryAfter.Seconds()))}}
	}
	for _, tc := range []struct {
		name      string
		op        githubapi.Op
		secondary bool
		status    int
	}{
		{"primary 429 listing runners", githubapi.OpListRunners, false, 429},
		{"primary 403 removing a runner", githubapi.OpRemoveRunner, false, 403},
		{"primary 403 creating the installation token", githubapi.OpInstallationToken, false, 403},
		{"primary 429 finding the installation", githubapi.OpFindInstallation, false, 429},
		{"primary 403 listing webhook deliveries", githubapi.OpListHookDeliveries, false, 403},
		{"secondary 429 generating a JIT config", githubapi.OpJITConfig, true, 429},
		{"secondary 403 creating the installation token", githubapi.OpInstallationToken, true, 403},
		{"secondary 403 finding the installation", githubapi.OpFindInstallation, true, 403},
		{"secondary 429 redelivering", githubapi.OpRedeliver, true, 429},
		{"primary 403 reading a runner group", githubapi.OpGetRunnerGroup, false, 403},
		{"secondary 429 listing a runner group's repositories", githubapi.OpListGroupRepositories, true, 429},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			f := newFront(t)
			call := operation(t, tc.op).call(t, f)
			reset := f.clock.Now().Add(30 * time.Minute).Truncate(time.Second)
			a := primary(tc.status, reset)
			if tc.secondary {
				a = secondary(tc.status, 2*time.Minute)
				reset = f.clock.Now().Add(2 * time.Minute)
			}
			f.refuse(operation(t, tc.op).route, a)
			err := call(t.Context())
			var rl *githubapi.RateLimitError
			var apiErr *githubapi.APIError
			if !errors.Is(err, githubapi.ErrRateLimited) || !errors.As(err, &rl) || errors.As(err, &apiErr) {
				t.Fatalf("%v, want a *RateLimitError and no *APIError", err)
			}
			if rl.Local || rl.Secondary != tc.secondary || !rl.Reset.Equal(reset) {
				t.Fatalf("%+v, want secondary %v from GitHub until %v", rl, tc.secondary, reset)
			}
			before := f.Requests()
			err = call(t.Context())
			if !errors.As(err, &rl) || !rl.Local || !rl.Reset.Equal(reset) {
				t.Fatalf("next call: %v, want a local *RateLimitError until %v", err, reset)
			}
			if n := f.Requests() - before; n != 0 {
				t.Fatalf("the next call sent %d requests while rate limited, want 0", n)
			}
		})
	}
}

func operation(t *testing.T, op githubapi.Op) opCase {
	t.Helper()
	for _, o := range operations {
		if o.op == op {
			return o
		}
	}
	t.Fatalf("no operation %q", op)
	panic("unreachable")
}

// TestErrorsCarryNoCredentials: GitHub's message is kept, but a credential in
// it (even the one the request carried) is not.
func TestErrorsCarryNoCredentials(t *testing.T) {
	t.Parallel()
	const classicPAT = "0123456789abcdef0123456789abcdef01234567" // the shape of classic tokens before ghp_
	for _, tc := range []struct {
		name   string
		route  string
		status int
		call   func(*testing.T, *front) call
	}{
		{"installation token", `^GET /orgs/acme/actions/runners$`, 422, operation(t, githubapi.OpListRunners).call},
		{"App JWT creating the installation token", `access_tokens$`, 401, operation(t, githubapi.OpInstallationToken).call},
		{"App JWT finding the installation", `^GET /orgs/org-a/installation$`, 404, operation(t, githubapi.OpFindInstallation).call},
		{"App JWT listing deliveries", `^GET /app/hook/deliveries$`, 500, operation(t, githubapi.OpListHookDeliveries).call},
		{"classic PAT", `^DELETE /orgs/acme/actions/runners/5$`, 403, func(t *testing.T, f *front) call {
			c, err := githubapi.New(githubapi.Config{BaseURL: f.url, Clock: f.clock, Auth: githubapi.Auth{Token: classicPAT}})
			if err != nil {
				t.Fatal(err)
			}
			return func(ctx context.Context) error { return c.RemoveRunner(ctx, org, 5) }
		}},
		{"fine-grained PAT", `^DELETE /orgs/acme/actions/runners/5$`, 403, func(t *testing.T, f *front) call {
			c, err := githubapi.New(githubapi.Config{BaseURL: f.url, Clock: f.clock, Auth: githubapi.Auth{Token: "github_pat_11AAAA_bbbb"}})
			if err != nil {
				t.Fatal(err)
			}
			return func(ctx context.Context) error { return c.RemoveRunner(ctx, org, 5) }
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			f := newFront(t, classicPAT, "github_pat_11AAAA_bbbb")
			call := tc.call(t, f)
			f.refuse(tc.route, answer{status: tc.status, message: "Echoing", echoAuth: true})
			err := call(t.Context())
			var apiErr *githubapi.APIError
			if !errors.As(err, &apiErr) || apiErr.Status != tc.status || !strings.HasPrefix(apiErr.Message, "Echoing") {
				t.Fatalf("%v, want an *APIError %d with GitHub's message", err, tc.status)
			}
			sent := f.echoed()
			_, cred, _ := strings.Cut(sent, " ")
			if len(cred) < 20 {
				t.Fatalf("the request carried %q, want a credential", sent)
			}
			if strings.Contains(err.Error(), cred) || !strings.Contains(apiErr.Message, "[REDACTED]") {
				t.Fatalf("the error carries the credential: %v", err)
			}
		})
	}
}
