// Package githubsim is a stateful GitHub simulator for the runner APIs, an HTTP
// server that go-github and ghinstallation talk to unchanged. It runs in-process
// in tests (httptest) and as a process for the local stack.
//
// What it simulates, like GitHub does:
//   - App installations on several organizations (installations.go): finding
//     an organization's or repository's installation with the App JWT, and
//     installation tokens that act on their own organization only;
//   - App authentication: POST /app/installations/{id}/access_tokens checks the
//     App JWT (RS256 with the App's public key, iss, iat/exp window) and issues
//     expiring installation tokens; every other endpoint needs a valid, unexpired
//     installation token or a configured PAT (401 otherwise);
//   - registration tokens and just-in-time configs for repository, organization and
//     enterprise scopes, which expire;
//   - runner lists with per_page/page, Link headers and ETags (a matching
//     If-None-Match gets 304 and costs no rate limit);
//   - runner removal: 204, 404 when unknown, 422 while the runner is busy, and
//     GitHub's lying busy flag when asked (BusyLie: busy: false for a while after
//     a job's assignment and at moments mid-job, a removal then failing the job);
//   - primary rate limits per installation with X-RateLimit-* headers, 403 when
//     exhausted; knobs to exhaust them, to answer with a secondary limit
//     (Retry-After) and to inject 5xx; and, opt-in, GitHub's whole budget
//     (budget.go): concurrent requests, points per endpoint a minute and
//     runner registrations an hour;
//   - runner state that tests and the closed loop drive through the Go API:
//     register with a token or JIT config, busy/idle, online/offline, and ephemeral
//     runners that disappear after their job;
//   - runner agents over HTTP (simulator-only paths under /_runner/, see
//     runnerapi.go): config.sh registration, sessions that make a runner online,
//     long-polled jobs and their results, for the fake runner of local/fakerunner;
//   - runner groups and the repositories allowed to use them;
//   - workflow runs of one or more jobs and their re-runs (rerun.go), with
//     GitHub's rules for them;
//   - actions/runner's latest release, and GitHub's refusal of runners too old
//     to register or to receive jobs (releases.go);
//   - counters of calls by endpoint.
package githubsim

import (
	"crypto/rand"
	"crypto/rsa"
	"encoding/hex"
	"maps"
	"net/http"
	"sync"
	"time"

	"k8s.io/utils/clock"

	"github.com/runnerscaler/runnerscaler/internal/scope"
)

// Options configure a Server.
type Options struct {
	// AppID and AppKey identify the GitHub App whose JWTs are accepted.
	AppID  int64
	AppKey *rsa.PublicKey
	// Installations are the installation ids of the App (default: 1).
	Installations []int64
	// Accounts maps an installation id to the organization it is installed on;
	// its tokens then act on that organization only (see installations.go).
	Accounts map[int64]string
	// PATs are personal access tokens accepted as they are.
	PATs []string
	// Clock drives token expiry and rate-limit windows (default: real time).
	Clock clock.PassiveClock
	// RateLimit is the primary limit per installation per hour (default 5000).
	RateLimit int
	// TokenLifetime of installation tokens (default 1h, as GitHub).
	TokenLifetime time.Duration
	// RegistrationTokenLifetime of registration tokens and JIT configs (default 1h, as GitHub).
	RegistrationTokenLifetime time.Duration
	// SessionTimeout is how long a runner agent's session stays open without a
	// poll before its runner goes offline (default 30s).
	SessionTimeout time.Duration
	// RunnerURL is the simulator's base URL as runner agents reach it, written into
	// JIT configs (default: http:// and the Host of the generate-jitconfig request).
	RunnerURL string
	// BusyLie, when set, makes the REST API's busy flag lie as GitHub's does (see
	// BusyLie; SetBusyLie changes it later). New panics when it is invalid.
	BusyLie *BusyLie
	// ActionsReadOnly gives the App's installations the `actions: read`
	// permission instead of `actions: write`: re-running a job is then refused
	// (403 "Resource not accessible by integration"), as for an App not granted it.
	ActionsReadOnly bool
	// Budget, when set, enforces GitHub's secondary and registration limits
	// besides the primary one, which its Core replaces RateLimit with (see
	// Budget, GitHubBudget). New panics when it is invalid.
	Budget *Budget
	// RunnerReleases are the actions/runner releases published from the start
	// (releases.go; SetRunnerReleases changes them).
	RunnerReleases []RunnerRelease
}

// Runner is a runner's state in the simulator.
type Runner struct {
	ID         int64
	Name       string
	Scope      scope.Scope
	Labels     []string
	GroupID    int64
	Online     bool
	Busy       bool
	Ephemeral  bool
	Registered bool // an agent has connected with its credentials
}

// Server is the simulator. Use New, then serve Handler().
type Server struct {
	opts Options
	mux  *http.ServeMux

	mu sync.Mutex
	// dropped and sent: the workflow_job deliveries LoseDelivery loses, and
	// how many of each a job has had (approvals.go).
	dropped, sent map[lostKey]int
	tokens        map[string]installationToken
	rate          map[string]*rateWindow
	regTokens     map[string]credential
	jitConfigs    map[string]credential
	runners       map[int64]*Runner
	nextID        int64
	groups        map[string][]Group
	lastGroupID   int64
	calls         map[string]int
	inject        []injected
	// tokenCalls counts the calls that reached authenticate with a valid
	// installation token or PAT: the calls an injected answer can hit.
	tokenCalls     int
	exhaustedUntil time.Time
	jobs           map[int64]*Job
	nextJob        int64
	nextDelivery   int64
	deliver        Deliverer
	hooks          []hookDelivery
	agents         agentState // runner agents over HTTP (runnerapi.go)
	recorder       recorder   // exchanges and deliveries, for conformance checks (conformance.go)
	// The REST view of busy (busylie.go): the lie, overrides, when each busy
	// runner became busy, the jobs lost to a removal under them, and how often
	// REST said idle while the truth was busy.
	lie      *BusyLie
	restBusy map[int64]bool
	assigned map[int64]assignment
	lost     []int64
	liesTold int
	budget   *budget         // nil: no limits but the primary one (budget.go)
	releases []RunnerRelease // actions/runner's (releases.go)
	// public: repositories made public (lower-cased full names; groups.go).
	public map[string]bool
	// labelHolds: runner id → the hold on its next label removal (labels.go).
	labelHolds map[int64]*LabelRemovalHold
}

type installationToken struct {
	installation int64
	expires      time.Time
}

type credential struct {
	scope    scope.Scope
	runnerID int64 // JIT configs only
	expires  time.Time
	used     bool // JIT configs only: a runner started with it (they are single use)
}

// Group is a runner group and who may use it (groups.go): Visibility
// "selected" admits the Repositories, "private" the private repositories,
// "all" every one.
type Group struct {
	ID           int64    `json:"id"`
	Name         string   `json:"name"`
	Visibility   string   `json:"visibility"`
	Repositories []string `json:"-"`
}

// New returns a simulator.
func New(opts Options) *Server {
	if opts.Clock == nil {
		opts.Clock = clock.RealClock{}
	}
	if opts.RateLimit == 0 {
		opts.RateLimit = 5000
	}
	if opts.TokenLifetime == 0 {
		opts.TokenLifetime = time.Hour
	}
	if opts.RegistrationTokenLifetime == 0 {
		opts.RegistrationTokenLifetime = time.Hour
	}
	if opts.SessionTimeout == 0 {
		opts.SessionTimeout = 30 * time.Second
	}
	if len(opts.Installations) == 0 {
		opts.Installations = []int64{1}
	}
	s := &Server{opts: opts, tokens: map[string]installationToken{}, rate: map[string]*rateWindow{},
		regTokens: map[string]credential{}, jitConfigs: map[string]credential{}, runners: map[int64]*Runner{},
		nextID: 1000, groups: map[string][]Group{}, calls: map[string]int{}, agents: newAgentState(),
		restBusy: map[int64]bool{}, assigned: map[int64]assignment{}}
	if err := s.SetBusyLie(opts.BusyLie); err != nil {
		panic("githubsim: Options." + err.Error())
	}
	if opts.Budget != nil {
		if err := opts.Budget.Validate(); err != nil {
			panic("githubsim: Options." + err.Error())
		}
		s.opts.RateLimit, s.budget = opts.Budget.Core, newBudget(*opts.Budget)
	}
	s.SetRunnerReleases(opts.RunnerReleases...)
	s.routes()
	return s
}

// Handler serves the simulated REST API.
func (s *Server) Handler() http.Handler { return s.recorded(s.mux) }

// Calls returns how many requests each endpoint pattern received, e.g.
// "GET /orgs/{org}/actions/runners" (304s and rejected calls included).
func (s *Server) Calls() map[string]int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return maps.Clone(s.calls)
}

// TokenCalls counts the API calls made with an installation token or a PAT
// (every call but the App's own, made with its JWT, and the runner agents'):
// the calls InjectStatus and InjectSecondaryLimit answer.
func (s *Server) TokenCalls() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.tokenCalls
}

// Runners returns a copy of every runner, in no particular order.
func (s *Server) Runners() []Runner {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.expireSessionsLocked()
	out := make([]Runner, 0, len(s.runners))
	for _, r := range s.runners {
		out = append(out, *r)
	}
	return out
}

// Runner returns a copy of runner id.
func (s *Server) Runner(id int64) (Runner, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.expireSessionsLocked()
	r, ok := s.runners[id]
	if !ok {
		return Runner{}, false
	}
	return *r, true
}

// AddGroup adds a runner group to an organization or enterprise scope; repos
// limits which repositories may use it (nil: all; see SetGroupAccess). It
// returns the group id.
func (s *Server) AddGroup(sc scope.Scope, name string, repos []string) int64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	key := sc.String()
	id := s.nextGroupIDLocked()
	vis := "all"
	if repos != nil {
		vis = "selected"
	}
	s.groups[key] = append(s.groups[key], Group{ID: id, Name: name, Visibility: vis, Repositories: repos})
	return id
}

func randomToken(prefix string) string {
	b := make([]byte, 16)
	_, _ = rand.Read(b)
	return prefix + hex.EncodeToString(b)
}
