// Package githubapi is the sweeper's GitHub: GitHub App (or PAT) authentication,
// runner registration tokens and just-in-time runner configs, the runners list
// with conditional requests, runner removal with typed outcomes, and rate-limit
// discipline — on top of go-github and ghinstallation.
//
// One Client serves one installation (or one PAT). It keeps, across the warm
// invocations of a Lambda container: registration tokens (until 5 minutes before
// they expire), the runners list with its ETags (a 304 costs no rate limit), and
// the time until which the installation is rate limited — no call is made before
// then. Every request to GitHub (API calls, installation-token creation,
// installation lookups, the App's own calls) passes one identity's rate-limit
// gate and call counter. Every call that GitHub refuses fails with an *APIError
// naming the operation, its status and GitHub's message, which errors.Is
// matches to a sentinel (ErrNotFound, ErrRunnerNotFound, ErrRunnerBusy,
// ErrForbidden, ErrUnauthorized, ErrServer), or with a *RateLimitError
// (ErrRateLimited).
package githubapi

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"time"

	"github.com/bradleyfalzon/ghinstallation/v2"
	"github.com/google/go-github/v88/github"
	"k8s.io/utils/clock"

	"github.com/runnerscaler/runnerscaler/internal/scope"
)

// Auth says how the client authenticates: a GitHub App installation (AppID,
// InstallationID, PrivateKey PEM) or a personal access token (Token).
type Auth struct {
	AppID          int64
	InstallationID int64
	PrivateKey     []byte
	Token          string
}

// Config configures a Client.
type Config struct {
	// BaseURL is the REST API root: https://api.github.com/ (default) or, for GitHub
	// Enterprise Server, https://HOST/api/v3/.
	BaseURL string
	Auth    Auth
	// Transport is the underlying HTTP transport (default http.DefaultTransport).
	Transport http.RoundTripper
	// Clock decides token freshness and rate-limit waits (default: real time).
	Clock clock.PassiveClock
	// Cache holds runner lists and their ETags (default: a new in-memory cache).
	Cache *RunnerCache
}

// endpoint is the API root (with a trailing slash) and the transport to reach it.
func (cfg Config) endpoint() (string, http.RoundTripper) {
	base := cfg.BaseURL
	if base == "" {
		base = "https://api.github.com/"
	}
	if !strings.HasSuffix(base, "/") {
		base += "/"
	}
	tr := cfg.Transport
	if tr == nil {
		tr = http.DefaultTransport
	}
	return base, tr
}

// Validate reports an auth configuration that is missing or mixed.
func (a Auth) Validate() error {
	app := a.AppID != 0 || a.InstallationID != 0 || len(a.PrivateKey) > 0
	switch {
	case app && a.Token != "":
		return errors.New("configure either a GitHub App (app id, installation id, private key) or a token, not both")
	case a.Token != "":
		return nil
	case a.AppID == 0 || a.InstallationID == 0 || len(a.PrivateKey) == 0:
		return errors.New("a GitHub App needs an app id, an installation id and a private key (or configure a token)")
	}
	return nil
}

// Client talks to GitHub for one installation. It is safe for concurrent use.
type Client struct {
	gh    *github.Client
	clock clock.PassiveClock
	cache *RunnerCache
	meter *meter

	mu        sync.Mutex
	regTokens map[string]RegistrationToken
	groups    map[string]int64
	// tokenLocks: a *sync.Mutex per scope, held while its registration token
	// is looked up or created, so sweeps of the scope's pools at once make one.
	tokenLocks sync.Map
}

// New returns a client. It does not call GitHub. With a GitHub App, the first
// call, and the first after the installation token nears its expiry, first
// creates an installation token (POST /app/installations/{installation_id}/access_tokens,
// with the App's JWT), within the call's gate and counted in Stats.
func New(cfg Config) (*Client, error) {
	if err := cfg.Auth.Validate(); err != nil {
		return nil, fmt.Errorf("github auth: %w", err)
	}
	base, tr := cfg.endpoint()
	m := newMeter(cfg.Clock)
	tr = m.transport(tr) // under ghinstallation: installation-token requests are counted too
	opts := []github.ClientOptionsFunc{github.WithURLs(&base, &base), github.WithDisableRateLimitCheck()}
	if cfg.Auth.Token != "" {
		opts = append(opts, github.WithTransport(tr), github.WithAuthToken(cfg.Auth.Token))
	} else {
		itr, err := ghinstallation.New(tr, cfg.Auth.AppID, cfg.Auth.InstallationID, cfg.Auth.PrivateKey)
		if err != nil {
			return nil, fmt.Errorf("github app key: %w", err) // ghinstallation's error does not include the key
		}
		itr.BaseURL = strings.TrimSuffix(base, "/")
		opts = append(opts, github.WithTransport(itr))
	}
	gh, err := github.NewClient(opts...)
	if err != nil {
		return nil, fmt.Errorf("github client: %w", err)
	}
	c := &Client{gh: gh, clock: m.clock, cache: cfg.Cache, meter: m, regTokens: map[string]RegistrationToken{}, groups: map[string]int64{}}
	if c.cache == nil {
		c.cache = NewRunnerCache()
	}
	return c, nil
}

// Stats returns the counts since the client was made.
func (c *Client) Stats() Stats { return c.meter.snapshot() }

// RegistrationToken is a runner registration token.
type RegistrationToken struct {
	Token     string
	ExpiresAt time.Time
}

// tokenMargin: a cached registration token is renewed this long before it expires,
// so a runner pod has time to start and register with it.
const tokenMargin = 5 * time.Minute

// RegistrationToken returns a registration token for the scope, cached until 5
// minutes before it expires. Concurrent calls for one scope make one request.
//
// POST /repos/{owner}/{repo}/actions/runners/registration-token,
// POST /orgs/{org}/actions/runners/registration-token or
// POST /enterprises/{enterprise}/actions/runners/registration-token.
func (c *Client) RegistrationToken(ctx context.Context, s scope.Scope) (RegistrationToken, error) {
	lock, _ := c.tokenLocks.LoadOrStore(s.String(), &sync.Mutex{})
	lock.(*sync.Mutex).Lock()
	defer lock.(*sync.Mutex).Unlock()
	c.mu.Lock()
	cached, ok := c.regTokens[s.String()]
	c.mu.Unlock()
	if ok && c.clock.Now().Add(tokenMargin).Before(cached.ExpiresAt) {
		return cached, nil
	}
	es, err := escaped(s)
	if err != nil {
		return RegistrationToken{}, fmt.Errorf("creating registration token: %w", err)
	}
	var tok *github.RegistrationToken
	err = c.meter.call(ctx, OpRegistrationToken, "creating registration token for "+s.String(), func(ctx context.Context) (resp *github.Response, err error) {
		switch es.Kind() {
		case scope.Enterprise:
			tok, resp, err = c.gh.Enterprise.CreateRegistrationToken(ctx, es.Enterprise)
		case scope.Organization:
			tok, resp, err = c.gh.Actions.CreateOrganizationRegistrationToken(ctx, es.Organization)
		default:
			tok, resp, err = c.gh.Actions.CreateRegistrationToken(ctx, es.Owner(), es.Repo())
		}
		return resp, err
	})
	if err != nil {
		return RegistrationToken{}, err
	}
	rt := RegistrationToken{Token: tok.GetToken(), ExpiresAt: tok.GetExpiresAt().Time}
	c.mu.Lock()
	c.regTokens[s.String()] = rt
	c.mu.Unlock()
	return rt, nil
}

// JITConfig is a just-in-time runner configuration: the runner exists on GitHub
// (offline) from now on, with RunnerID; EncodedConfig is what `run.sh --jitconfig` takes.
type JITConfig struct {
	RunnerID      int64
	EncodedConfig string
}

// JITConfig creates a runner named name with labels in the runner group groupID
// and returns its just-in-time configuration.
//
// POST /repos/{owner}/{repo}/actions/runners/generate-jitconfig,
// POST /orgs/{org}/actions/runners/generate-jitconfig or
// POST /enterprises/{enterprise}/actions/runners/generate-jitconfig.
func (c *Client) JITConfig(ctx context.Context, s scope.Scope, name string, labels []string, groupID int64) (JITConfig, error) {
	es, err := escaped(s)
	if err != nil {
		return JITConfig{}, fmt.Errorf("generating JIT config for runner %s: %w", name, err)
	}
	req := &github.GenerateJITConfigRequest{Name: name, RunnerGroupID: groupID, Labels: labels}
	var jit *github.JITRunnerConfig
	err = c.meter.call(ctx, OpJITConfig, "generating JIT config for runner "+name+" in "+s.String(), func(ctx context.Context) (resp *github.Response, err error) {
		switch es.Kind() {
		case scope.Enterprise:
			jit, resp, err = c.gh.Enterprise.GenerateEnterpriseJITConfig(ctx, es.Enterprise, req)
		case scope.Organization:
			jit, resp, err = c.gh.Actions.GenerateOrgJITConfig(ctx, es.Organization, req)
		default:
			jit, resp, err = c.gh.Actions.GenerateRepoJITConfig(ctx, es.Owner(), es.Repo(), req)
		}
		return resp, err
	})
	if err != nil {
		return JITConfig{}, err
	}
	return JITConfig{RunnerID: jit.GetRunner().GetID(), EncodedConfig: jit.GetEncodedJITConfig()}, nil
}

// RemoveRunner unregisters a runner. nil means removed (204); ErrRunnerNotFound
// (and ErrNotFound; 404): already gone; ErrRunnerBusy (422): it is running a job —
// wait; ErrForbidden (403): the App lacks permission; a *RateLimitError: try
// after its Reset.
//
// DELETE /repos/{owner}/{repo}/actions/runners/{runner_id},
// DELETE /orgs/{org}/actions/runners/{runner_id} or
// DELETE /enterprises/{enterprise}/actions/runners/{runner_id}.
func (c *Client) RemoveRunner(ctx context.Context, s scope.Scope, id int64) error {
	es, err := escaped(s)
	if err != nil {
		return fmt.Errorf("removing runner %d: %w", id, err)
	}
	err = c.meter.call(ctx, OpRemoveRunner, fmt.Sprintf("removing runner %d from %s", id, s), func(ctx context.Context) (*github.Response, error) {
		switch es.Kind() {
		case scope.Enterprise:
			return c.gh.Enterprise.RemoveRunner(ctx, es.Enterprise, id)
		case scope.Organization:
			return c.gh.Actions.RemoveOrganizationRunner(ctx, es.Organization, id)
		default:
			return c.gh.Actions.RemoveRunner(ctx, es.Owner(), es.Repo(), id)
		}
	})
	if err == nil {
		c.cache.Invalidate(s.String())
	}
	return err
}

// RerunJob asks GitHub to re-run a job of a workflow run (and the jobs that
// depend on it): a new attempt of the run, in which the job is queued again.
// repo is "owner/name", a repository of scope s (whose credentials these are;
// the caller checks that s covers repo). An *APIError with 403 (ErrForbidden) is GitHub's refusal:
// its Message says why (the App lacks `actions: write`, the run is still in
// progress, too old, or re-run too often); 404 (ErrNotFound): no such job there.
//
// POST /repos/{owner}/{repo}/actions/jobs/{job_id}/rerun.
func (c *Client) RerunJob(ctx context.Context, s scope.Scope, repo string, jobID int64) error {
	es, err := escaped(scope.Scope{Repository: repo})
	if err != nil {
		return fmt.Errorf("re-running job %d: %w", jobID, err)
	}
	return c.meter.call(ctx, OpRerunJob, fmt.Sprintf("re-running job %d of %s (%s)", jobID, repo, s), func(ctx context.Context) (*github.Response, error) {
		return c.gh.Actions.RerunJobByID(ctx, es.Owner(), es.Repo(), jobID)
	})
}

// LatestJobs returns the jobs of the latest attempt of a workflow run of repo
// (a run re-run has a new attempt), every page.
//
// GET /repos/{owner}/{repo}/actions/runs/{run_id}/jobs?filter=latest.
func (c *Client) LatestJobs(ctx context.Context, s scope.Scope, repo string, runID int64) ([]Job, error) {
	es, err := escaped(scope.Scope{Repository: repo})
	if err != nil {
		return nil, fmt.Errorf("reading run %d: %w", runID, err)
	}
	var out []Job
	opts := &github.ListWorkflowJobsOptions{Filter: "latest", ListOptions: github.ListOptions{PerPage: 100}}
	for {
		next := 0
		err = c.meter.call(ctx, OpListRunJobs, fmt.Sprintf("listing the jobs of run %d of %s (%s)", runID, repo, s), func(ctx context.Context) (*github.Response, error) {
			jobs, resp, err := c.gh.Actions.ListWorkflowJobs(ctx, es.Owner(), es.Repo(), runID, opts)
			for _, j := range jobs.GetJobs() {
				out = append(out, jobOf(j))
			}
			if resp != nil {
				next = resp.NextPage
			}
			return resp, err
		})
		if err != nil || next == 0 {
			return out, err
		}
		opts.Page = next
	}
}

// LatestAttempt is the run's latest attempt as its jobs show it (0: none).
func LatestAttempt(jobs []Job) int {
	n := 0
	for _, j := range jobs {
		n = max(n, j.RunAttempt)
	}
	return n
}

// Job is what GitHub says of a workflow job: where and when it ran, and how
// it ended.
type Job struct {
	ID, RunID  int64
	RunAttempt int
	// Name is the job's name in its workflow run.
	Name string
	// Status is queued, in_progress, completed, waiting, ...; Conclusion is
	// set once it completed (success, failure, cancelled, ...).
	Status, Conclusion string
	RunnerID           int64
	RunnerName         string
	Started, Completed time.Time
}

// Job reads a workflow job of repo ("owner/name", a repository of scope s).
// An *APIError with 404 (ErrNotFound): no such job in repo.
//
// GET /repos/{owner}/{repo}/actions/jobs/{job_id}.
func (c *Client) Job(ctx context.Context, s scope.Scope, repo string, jobID int64) (Job, error) {
	es, err := escaped(scope.Scope{Repository: repo})
	if err != nil {
		return Job{}, fmt.Errorf("reading job %d: %w", jobID, err)
	}
	var job Job
	err = c.meter.call(ctx, OpGetJob, fmt.Sprintf("reading job %d of %s (%s)", jobID, repo, s), func(ctx context.Context) (*github.Response, error) {
		j, resp, err := c.gh.Actions.GetWorkflowJobByID(ctx, es.Owner(), es.Repo(), jobID)
		if j != nil {
			job = jobOf(j)
		}
		return resp, err
	})
	return job, err
}

func jobOf(j *github.WorkflowJob) Job {
	return Job{ID: j.GetID(), RunID: j.GetRunID(), RunAttempt: int(j.GetRunAttempt()), Name: j.GetName(), Status: j.GetStatus(),
		Conclusion: j.GetConclusion(), RunnerID: j.GetRunnerID(), RunnerName: j.GetRunnerName(),
		Started: j.GetStartedAt().Time, Completed: j.GetCompletedAt().Time}
}

// DefaultRunnerGroupID is the id of every scope's "Default" runner group.
const DefaultRunnerGroupID = 1

// RunnerGroupID returns the id of the runner group named name in the scope,
// cached for the client's life. An empty name, and every repository scope, get
// the default group.
//
// GET /orgs/{org}/actions/runner-groups or GET /enterprises/{enterprise}/actions/runner-groups.
func (c *Client) RunnerGroupID(ctx context.Context, s scope.Scope, name string) (int64, error) {
	if name == "" || s.Kind() == scope.Repository || strings.EqualFold(name, "default") {
		return DefaultRunnerGroupID, nil
	}
	key := s.String() + "/" + strings.ToLower(name)
	c.mu.Lock()
	id, ok := c.groups[key]
	c.mu.Unlock()
	if ok {
		return id, nil
	}
	es, err := escaped(s)
	if err != nil {
		return 0, fmt.Errorf("listing runner groups: %w", err)
	}
	opts := &github.ListOrgRunnerGroupOptions{ListOptions: github.ListOptions{PerPage: 100}}
	for {
		var groups *github.RunnerGroups
		err := c.meter.call(ctx, OpListRunnerGroups, "listing runner groups of "+s.String(), func(ctx context.Context) (resp *github.Response, err error) {
			if s.Kind() == scope.Enterprise {
				var eg *github.EnterpriseRunnerGroups
				eg, resp, err = c.gh.Enterprise.ListRunnerGroups(ctx, es.Enterprise, &github.ListEnterpriseRunnerGroupOptions{ListOptions: opts.ListOptions})
				if eg != nil {
					groups = &github.RunnerGroups{TotalCount: eg.GetTotalCount()}
					for _, g := range eg.RunnerGroups {
						groups.RunnerGroups = append(groups.RunnerGroups, &github.RunnerGroup{ID: g.ID, Name: g.Name})
					}
				}
				return resp, err
			}
			groups, resp, err = c.gh.Actions.ListOrganizationRunnerGroups(ctx, es.Organization, opts)
			if resp != nil {
				opts.Page = resp.NextPage
			}
			return resp, err
		})
		if err != nil {
			return 0, err
		}
		for _, g := range groups.RunnerGroups {
			if strings.EqualFold(g.GetName(), name) {
				c.mu.Lock()
				c.groups[key] = g.GetID()
				c.mu.Unlock()
				return g.GetID(), nil
			}
		}
		if opts.Page == 0 || s.Kind() == scope.Enterprise {
			return 0, fmt.Errorf("runner group %q not found in %s: %w", name, s, ErrNotFound)
		}
	}
}
