package githubapi

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"sync"

	"github.com/bradleyfalzon/ghinstallation/v2"

	"github.com/runnerscaler/runnerscaler/internal/scope"
)

// Router is the sweeper's GitHub when pools span several accounts: it sends each
// scope's calls to the credentials that can serve it and keeps one Client (one
// installation token, one rate-limit gate, one runner cache) per installation.
//
//   - Organization and repository scopes, with a GitHub App: the App's
//     installation on the scope's account, found with the App JWT (GET
//     /orgs/{org}/installation or GET /repos/{owner}/{repo}/installation, through
//     the App's own rate-limit gate and counter) and cached for the Router's
//     life (Config.Auth.InstallationID, when set, serves every such scope
//     instead, without a lookup). A call whose installation token cannot be made
//     any more (the App was uninstalled or reinstalled) forgets the cached
//     installation, so the next call looks it up again.
//   - Enterprise scopes: the classic personal access token (Config.Auth.Token).
//     GitHub Apps cannot manage enterprise runners.
//   - Every scope, when there is a token and no App.
//
// It is safe for concurrent use.
type Router struct {
	cfg   Config
	app   *AppClient // App JWT; nil without an App
	pat   *Client    // nil without a token
	fixed int64      // Config.Auth.InstallationID

	mu       sync.Mutex
	installs map[string]int64 // scope → installation id
	clients  map[int64]*Client
}

// NewRouter returns a router for cfg.Auth: an App (AppID and PrivateKey; the
// InstallationID is optional), a token, or both (the token then serves enterprise
// scopes only). It does not call GitHub.
func NewRouter(cfg Config) (*Router, error) {
	a := cfg.Auth
	hasApp := a.AppID != 0 || len(a.PrivateKey) > 0
	switch {
	case hasApp && (a.AppID == 0 || len(a.PrivateKey) == 0):
		return nil, errors.New("github auth: a GitHub App needs both an app id and a private key")
	case !hasApp && a.InstallationID != 0:
		return nil, errors.New("github auth: an installation id needs a GitHub App (app id and private key)")
	case !hasApp && a.Token == "":
		return nil, errors.New("github auth: configure a GitHub App (app id, private key), a token, or both")
	}
	r := &Router{cfg: cfg, fixed: a.InstallationID, installs: map[string]int64{}, clients: map[int64]*Client{}}
	if a.Token != "" {
		pc := cfg
		pc.Auth = Auth{Token: a.Token}
		pat, err := New(pc)
		if err != nil {
			return nil, err
		}
		r.pat = pat
	}
	if hasApp {
		app, err := NewApp(cfg)
		if err != nil {
			return nil, err
		}
		r.app = app
	}
	return r, nil
}

// ErrNoCredentials: nothing configured can serve the scope.
var ErrNoCredentials = errors.New("github: no credentials for this scope")

// Serves reports, without calling GitHub, whether the configured credentials can
// serve scope s: an enterprise scope needs the token.
func (r *Router) Serves(s scope.Scope) error {
	if s.Kind() == scope.Enterprise && r.pat == nil {
		return fmt.Errorf("%s: GitHub Apps cannot manage enterprise runners; configure a classic personal access token "+
			"with the manage_runners:enterprise scope: %w", s, ErrNoCredentials)
	}
	return nil
}

// client returns the Client for the scope, looking its installation up when needed.
func (r *Router) client(ctx context.Context, s scope.Scope) (*Client, error) {
	if err := r.Serves(s); err != nil {
		return nil, err
	}
	if r.app == nil || s.Kind() == scope.Enterprise {
		return r.pat, nil
	}
	id, err := r.installation(ctx, s)
	if err != nil {
		return nil, err
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if c, ok := r.clients[id]; ok {
		return c, nil
	}
	ic := r.cfg
	ic.Auth = Auth{AppID: r.cfg.Auth.AppID, InstallationID: id, PrivateKey: r.cfg.Auth.PrivateKey}
	ic.Cache = nil // one cache per installation (Config.Cache is for a single client)
	c, err := New(ic)
	if err != nil {
		return nil, err
	}
	r.clients[id] = c
	return c, nil
}

// installation is the App's installation serving the scope: the configured one,
// else the cached one, else the one the App finds (AppClient.installationID:
// GET /orgs/{org}/installation or GET /repos/{owner}/{repo}/installation, App JWT).
func (r *Router) installation(ctx context.Context, s scope.Scope) (int64, error) {
	if r.fixed != 0 {
		return r.fixed, nil
	}
	key := s.String()
	r.mu.Lock()
	id, ok := r.installs[key]
	r.mu.Unlock()
	if ok {
		return id, nil
	}
	id, err := r.app.installationID(ctx, s)
	if err != nil {
		return 0, err
	}
	r.mu.Lock()
	r.installs[key] = id
	r.mu.Unlock()
	return id, nil
}

// settle forgets the scope's installation when its token could not be made or
// was rejected: an uninstalled or reinstalled App has a new installation id, or none.
func (r *Router) settle(s scope.Scope, err error) error {
	var tokenErr *ghinstallation.HTTPError
	if err != nil && r.fixed == 0 && (errors.As(err, &tokenErr) || errors.Is(err, ErrUnauthorized)) {
		r.mu.Lock()
		delete(r.installs, s.String())
		r.mu.Unlock()
	}
	return err
}

// Runners is Client.Runners through the scope's credentials.
func (r *Router) Runners(ctx context.Context, s scope.Scope) ([]Runner, error) {
	c, err := r.client(ctx, s)
	if err != nil {
		return nil, err
	}
	list, err := c.Runners(ctx, s)
	return list, r.settle(s, err)
}

// Runner is Client.Runner through the scope's credentials.
func (r *Router) Runner(ctx context.Context, s scope.Scope, id int64) (Runner, error) {
	c, err := r.client(ctx, s)
	if err != nil {
		return Runner{}, err
	}
	gr, err := c.Runner(ctx, s, id)
	return gr, r.settle(s, err)
}

// RemoveRunnerLabels is Client.RemoveRunnerLabels through the scope's credentials.
func (r *Router) RemoveRunnerLabels(ctx context.Context, s scope.Scope, id int64) error {
	c, err := r.client(ctx, s)
	if err != nil {
		return err
	}
	return r.settle(s, c.RemoveRunnerLabels(ctx, s, id))
}

// RemoveRunner is Client.RemoveRunner through the scope's credentials.
func (r *Router) RemoveRunner(ctx context.Context, s scope.Scope, id int64) error {
	c, err := r.client(ctx, s)
	if err != nil {
		return err
	}
	return r.settle(s, c.RemoveRunner(ctx, s, id))
}

// RerunJob is Client.RerunJob through the credentials that serve s, the scope of
// the pool whose runner ran the job (repo must be one s covers: the caller checks).
func (r *Router) RerunJob(ctx context.Context, s scope.Scope, repo string, jobID int64) error {
	c, err := r.client(ctx, s)
	if err != nil {
		return err
	}
	return r.settle(s, c.RerunJob(ctx, s, repo, jobID))
}

// LatestJobs is Client.LatestJobs through the credentials that serve s.
func (r *Router) LatestJobs(ctx context.Context, s scope.Scope, repo string, runID int64) ([]Job, error) {
	c, err := r.client(ctx, s)
	if err != nil {
		return nil, err
	}
	jobs, err := c.LatestJobs(ctx, s, repo, runID)
	return jobs, r.settle(s, err)
}

// Job is Client.Job through the credentials that serve s.
func (r *Router) Job(ctx context.Context, s scope.Scope, repo string, jobID int64) (Job, error) {
	c, err := r.client(ctx, s)
	if err != nil {
		return Job{}, err
	}
	j, err := c.Job(ctx, s, repo, jobID)
	return j, r.settle(s, err)
}

// JITConfig is Client.JITConfig through the scope's credentials.
func (r *Router) JITConfig(ctx context.Context, s scope.Scope, name string, labels []string, groupID int64) (JITConfig, error) {
	c, err := r.client(ctx, s)
	if err != nil {
		return JITConfig{}, err
	}
	jit, err := c.JITConfig(ctx, s, name, labels, groupID)
	return jit, r.settle(s, err)
}

// RegistrationToken is Client.RegistrationToken through the scope's credentials.
func (r *Router) RegistrationToken(ctx context.Context, s scope.Scope) (RegistrationToken, error) {
	c, err := r.client(ctx, s)
	if err != nil {
		return RegistrationToken{}, err
	}
	tok, err := c.RegistrationToken(ctx, s)
	return tok, r.settle(s, err)
}

// RunnerGroupID is Client.RunnerGroupID through the scope's credentials.
func (r *Router) RunnerGroupID(ctx context.Context, s scope.Scope, name string) (int64, error) {
	c, err := r.client(ctx, s)
	if err != nil {
		return 0, err
	}
	id, err := c.RunnerGroupID(ctx, s, name)
	return id, r.settle(s, err)
}

// Stats sums the calls of every client: each installation's, the token's, and
// the App's own (installation lookups). Its RateKnown is false: each identity
// has its own rate limit.
func (r *Router) Stats() Stats {
	r.mu.Lock()
	all := make([]Stats, 0, len(r.clients)+2)
	for _, c := range r.clients {
		all = append(all, c.Stats())
	}
	r.mu.Unlock()
	if r.pat != nil {
		all = append(all, r.pat.Stats())
	}
	if r.app != nil {
		all = append(all, r.app.Stats())
	}
	var sum Stats
	for _, st := range all {
		sum.Calls += st.Calls
		sum.NotModified += st.NotModified
		sum.RateLimited += st.RateLimited
	}
	return sum
}

// Installations returns the installation id cached for each scope looked up so
// far, keyed by scope.String() (for logs and tests).
func (r *Router) Installations() map[string]int64 {
	r.mu.Lock()
	defer r.mu.Unlock()
	return maps.Clone(r.installs)
}
