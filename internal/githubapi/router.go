package githubapi

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"net/http"
	"sync"

	"github.com/bradleyfalzon/ghinstallation/v2"
	"github.com/google/go-github/v88/github"

	"github.com/runnerscaler/runnerscaler/internal/scope"
)

// Router is the sweeper's GitHub when pools span several accounts: it sends each
// scope's calls to the credentials that can serve it and keeps one Client (one
// installation token, one rate-limit gate, one runner cache) per installation.
//
//   - Organization and repository scopes, with a GitHub App: the App's
//     installation on the scope's account, found with the App JWT and cached for
//     the Router's life (Config.Auth.InstallationID, when set, serves every such
//     scope instead, without a lookup). A call whose installation token cannot be
//     made any more (the App was uninstalled or reinstalled) forgets the cached
//     installation, so the next call looks it up again.
//   - Enterprise scopes: the classic personal access token (Config.Auth.Token).
//     GitHub Apps cannot manage enterprise runners.
//   - Every scope, when there is a token and no App.
//
// It is safe for concurrent use.
type Router struct {
	cfg   Config
	app   *github.Client // App JWT; nil without an App
	pat   *Client        // nil without a token
	fixed int64          // Config.Auth.InstallationID

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
		r.app = app.gh
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
// else the cached or looked-up one.
//
// GET /orgs/{org}/installation or GET /repos/{owner}/{repo}/installation (App JWT).
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
	var inst *github.Installation
	var resp *github.Response
	var err error
	if s.Kind() == scope.Organization {
		inst, resp, err = r.app.Apps.GetOrganizationInstallation(ctx, s.Organization)
	} else {
		inst, resp, err = r.app.Apps.GetRepositoryInstallation(ctx, s.Owner(), s.Repo())
	}
	if err != nil {
		return 0, fmt.Errorf("finding the GitHub App's installation on %s: %w", s, lookupError(resp, err))
	}
	r.mu.Lock()
	r.installs[key] = inst.GetID()
	r.mu.Unlock()
	return inst.GetID(), nil
}

// lookupError maps an installation lookup's failure to the package's sentinels.
func lookupError(resp *github.Response, err error) error {
	if resp == nil || resp.Response == nil {
		return err
	}
	switch code := resp.StatusCode; {
	case code == http.StatusNotFound:
		return fmt.Errorf("%w (is the App installed there?): %w", ErrNotFound, err)
	case code == http.StatusUnauthorized:
		return fmt.Errorf("%w: %w", ErrUnauthorized, err)
	case code == http.StatusForbidden:
		return fmt.Errorf("%w: %w", ErrForbidden, err)
	case code >= 500:
		return fmt.Errorf("%w: %w", ErrServer, err)
	}
	return err
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

// RemoveRunner is Client.RemoveRunner through the scope's credentials.
func (r *Router) RemoveRunner(ctx context.Context, s scope.Scope, id int64) error {
	c, err := r.client(ctx, s)
	if err != nil {
		return err
	}
	return r.settle(s, c.RemoveRunner(ctx, s, id))
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

// Stats sums the calls of every client (installation lookups are not counted).
func (r *Router) Stats() Stats {
	r.mu.Lock()
	clients := make([]*Client, 0, len(r.clients)+1)
	for _, c := range r.clients {
		clients = append(clients, c)
	}
	r.mu.Unlock()
	if r.pat != nil {
		clients = append(clients, r.pat)
	}
	var sum Stats
	for _, c := range clients {
		st := c.Stats()
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
