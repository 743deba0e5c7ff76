// Package githubapi is the sweeper's GitHub: GitHub App (or PAT) authentication,
// runner registration tokens and just-in-time runner configs, the runners list
// with conditional requests, runner removal with typed outcomes, and rate-limit
// discipline — on top of go-github and ghinstallation.
//
// One Client serves one installation (or one PAT). It keeps, across the warm
// invocations of a Lambda container: registration tokens (until 5 minutes before
// they expire), the runners list with its ETags (a 304 costs no rate limit), and
// the time until which the installation is rate limited — no call is made before
// then. Every call that fails maps to a sentinel error (ErrNotFound, ErrRunnerBusy,
// ErrForbidden, ErrUnauthorized, ErrServer) or a *RateLimitError, tested with
// errors.Is / errors.As.
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
	Cache RunnerCache
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
	cache RunnerCache

	mu           sync.Mutex
	regTokens    map[string]RegistrationToken
	groups       map[string]int64
	blockedUntil time.Time
	blockedBy2nd bool // the block comes from a secondary limit
	stats        Stats
}

// New returns a client. It does not call GitHub.
func New(cfg Config) (*Client, error) {
	if err := cfg.Auth.Validate(); err != nil {
		return nil, fmt.Errorf("github auth: %w", err)
	}
	base, tr := cfg.endpoint()
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
	c := &Client{gh: gh, clock: cfg.Clock, cache: cfg.Cache, regTokens: map[string]RegistrationToken{}, groups: map[string]int64{}}
	if c.clock == nil {
		c.clock = clock.RealClock{}
	}
	if c.cache == nil {
		c.cache = NewMemoryCache()
	}
	return c, nil
}

// Stats counts the client's calls to GitHub.
type Stats struct {
	// Calls made (including 304s).
	Calls int
	// NotModified counts 304 answers, which cost no rate limit.
	NotModified int
	// RateLimited counts calls answered with a rate-limit error, and calls refused
	// locally because the installation was still rate limited.
	RateLimited int
	// RateRemaining is the primary rate limit left as the latest answer that
	// carried X-RateLimit-* headers said; RateKnown is false until one did.
	RateRemaining int
	RateKnown     bool
}

// Stats returns the counts since the client was made.
func (c *Client) Stats() Stats {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.stats
}

// RegistrationToken is a runner registration token.
type RegistrationToken struct {
	Token     string
	ExpiresAt time.Time
}

// tokenMargin: a cached registration token is renewed this long before it expires,
// so a runner pod has time to start and register with it.
const tokenMargin = 5 * time.Minute

// RegistrationToken returns a registration token for the scope, cached until 5
// minutes before it expires.
//
// POST /repos/{owner}/{repo}/actions/runners/registration-token,
// POST /orgs/{org}/actions/runners/registration-token or
// POST /enterprises/{enterprise}/actions/runners/registration-token.
func (c *Client) RegistrationToken(ctx context.Context, s scope.Scope) (RegistrationToken, error) {
	c.mu.Lock()
	cached, ok := c.regTokens[s.String()]
	c.mu.Unlock()
	if ok && c.clock.Now().Add(tokenMargin).Before(cached.ExpiresAt) {
		return cached, nil
	}
	var tok *github.RegistrationToken
	err := c.call(ctx, "creating registration token for "+s.String(), func(ctx context.Context) (resp *github.Response, err error) {
		switch s.Kind() {
		case scope.Enterprise:
			tok, resp, err = c.gh.Enterprise.CreateRegistrationToken(ctx, s.Enterprise)
		case scope.Organization:
			tok, resp, err = c.gh.Actions.CreateOrganizationRegistrationToken(ctx, s.Organization)
		default:
			tok, resp, err = c.gh.Actions.CreateRegistrationToken(ctx, s.Owner(), s.Repo())
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
	req := &github.GenerateJITConfigRequest{Name: name, RunnerGroupID: groupID, Labels: labels}
	var jit *github.JITRunnerConfig
	err := c.call(ctx, "generating JIT config for runner "+name+" in "+s.String(), func(ctx context.Context) (resp *github.Response, err error) {
		switch s.Kind() {
		case scope.Enterprise:
			jit, resp, err = c.gh.Enterprise.GenerateEnterpriseJITConfig(ctx, s.Enterprise, req)
		case scope.Organization:
			jit, resp, err = c.gh.Actions.GenerateOrgJITConfig(ctx, s.Organization, req)
		default:
			jit, resp, err = c.gh.Actions.GenerateRepoJITConfig(ctx, s.Owner(), s.Repo(), req)
		}
		return resp, err
	})
	if err != nil {
		return JITConfig{}, err
	}
	return JITConfig{RunnerID: jit.GetRunner().GetID(), EncodedConfig: jit.GetEncodedJITConfig()}, nil
}

// RemoveRunner unregisters a runner. nil means removed (204); ErrNotFound (404):
// already gone; ErrRunnerBusy (422): it is running a job — wait; ErrForbidden (403):
// the App lacks permission; a *RateLimitError: try after its Reset.
//
// DELETE /repos/{owner}/{repo}/actions/runners/{runner_id},
// DELETE /orgs/{org}/actions/runners/{runner_id} or
// DELETE /enterprises/{enterprise}/actions/runners/{runner_id}.
func (c *Client) RemoveRunner(ctx context.Context, s scope.Scope, id int64) error {
	err := c.call(ctx, fmt.Sprintf("removing runner %d from %s", id, s), func(ctx context.Context) (*github.Response, error) {
		switch s.Kind() {
		case scope.Enterprise:
			return c.gh.Enterprise.RemoveRunner(ctx, s.Enterprise, id)
		case scope.Organization:
			return c.gh.Actions.RemoveOrganizationRunner(ctx, s.Organization, id)
		default:
			return c.gh.Actions.RemoveRunner(ctx, s.Owner(), s.Repo(), id)
		}
	})
	if err == nil {
		c.cache.Invalidate(s.String())
	}
	return err
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
	opts := &github.ListOrgRunnerGroupOptions{ListOptions: github.ListOptions{PerPage: 100}}
	for {
		var groups *github.RunnerGroups
		err := c.call(ctx, "listing runner groups of "+s.String(), func(ctx context.Context) (resp *github.Response, err error) {
			if s.Kind() == scope.Enterprise {
				var eg *github.EnterpriseRunnerGroups
				eg, resp, err = c.gh.Enterprise.ListRunnerGroups(ctx, s.Enterprise, &github.ListEnterpriseRunnerGroupOptions{ListOptions: opts.ListOptions})
				if eg != nil {
					groups = &github.RunnerGroups{TotalCount: eg.GetTotalCount()}
					for _, g := range eg.RunnerGroups {
						groups.RunnerGroups = append(groups.RunnerGroups, &github.RunnerGroup{ID: g.ID, Name: g.Name})
					}
				}
				return resp, err
			}
			groups, resp, err = c.gh.Actions.ListOrganizationRunnerGroups(ctx, s.Organization, opts)
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

// call makes one API call through the rate-limit gate and maps its error.
func (c *Client) call(ctx context.Context, what string, do func(context.Context) (*github.Response, error)) error {
	if err := c.gate(); err != nil {
		return fmt.Errorf("%s: %w", what, err)
	}
	c.mu.Lock()
	c.stats.Calls++
	c.mu.Unlock()
	resp, err := do(ctx)
	if resp != nil && resp.Rate.Limit > 0 {
		c.mu.Lock()
		c.stats.RateRemaining, c.stats.RateKnown = resp.Rate.Remaining, true
		c.mu.Unlock()
	}
	if err != nil {
		return fmt.Errorf("%s: %w", what, c.classify(resp, err))
	}
	return nil
}

// gate refuses to call while the installation is rate limited.
func (c *Client) gate() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if until := c.blockedUntil; c.clock.Now().Before(until) {
		c.stats.RateLimited++
		return &RateLimitError{Reset: until, Local: true, Secondary: c.blockedBy2nd}
	}
	return nil
}
