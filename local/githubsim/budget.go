package githubsim

import (
	"errors"
	"fmt"
	"maps"
	"math"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"time"
)

// Budget is GitHub's rate budget for one identity (an installation or a PAT),
// enforced when Options.Budget is set. The numbers of GitHubBudget are GitHub's
// documented ones ("Rate limits for the REST API" and "Limits in GitHub
// Actions"):
//   - primary: 5,000 requests an hour per App installation (15,000 on GitHub
//     Enterprise Cloud); a 304 to a conditional request does not count;
//   - secondary: no more than 100 concurrent requests, and no more than 900
//     points a minute to a single REST endpoint, a GET, HEAD or OPTIONS costing 1
//     point and a POST, PATCH, PUT or DELETE 5;
//   - runner registrations: 10,000 an hour.
//
// A request past the primary limit is answered 403 with x-ratelimit-remaining 0
// and x-ratelimit-reset (auth.go); one past a secondary limit or the
// registration limit with Status (GitHub answers 403 or 429), a retry-after
// header of the seconds until the budget allows it again, the x-ratelimit-*
// headers of the primary window, and a message whose documentation_url names
// the secondary limits, as GitHub answers them.
//
// "A single endpoint" is taken as one operation (the route, e.g.
// POST /orgs/{org}/actions/runners/generate-jitconfig, whatever the
// organization), the stricter reading. Registrations count the just-in-time
// runner configurations the REST API generates, and, apart (keyed by scope, as
// they come from the runner agents, not the installation), the runners
// registered with a registration token (Register).
type Budget struct {
	// Core is the primary limit: requests an hour.
	Core int
	// RegistrationsPerHour bounds the JIT runner configurations generated an hour.
	RegistrationsPerHour int
	// Concurrent bounds the requests in flight at once.
	Concurrent int
	// PointsPerMinute bounds the points spent on one endpoint in a minute.
	PointsPerMinute int
	// Status answers a secondary limit: http.StatusForbidden or
	// http.StatusTooManyRequests (0: 429).
	Status int
}

// GitHubBudget is GitHub's documented budget for an App installation on
// github.com (see Budget); set Core to 15,000 for GitHub Enterprise Cloud.
func GitHubBudget() Budget {
	return Budget{Core: 5000, RegistrationsPerHour: 10000, Concurrent: 100, PointsPerMinute: 900,
		Status: http.StatusTooManyRequests}
}

// Validate reports a budget the simulator cannot enforce.
func (b Budget) Validate() error {
	var errs []error
	for name, n := range map[string]int{"Core": b.Core, "RegistrationsPerHour": b.RegistrationsPerHour,
		"Concurrent": b.Concurrent, "PointsPerMinute": b.PointsPerMinute} {
		if n <= 0 {
			errs = append(errs, fmt.Errorf("Budget.%s is %d: want a positive number", name, n))
		}
	}
	if b.Status != 0 && b.Status != http.StatusForbidden && b.Status != http.StatusTooManyRequests {
		errs = append(errs, fmt.Errorf("Budget.Status is %d: want 403 or 429 (GitHub's answers to a secondary limit)", b.Status))
	}
	return errors.Join(errs...)
}

// The limits a Refusals count names.
const (
	LimitCore          = "core"
	LimitConcurrent    = "concurrent"
	LimitPoints        = "points-per-minute"
	LimitRegistrations = "registrations-per-hour"
)

// secondaryDoc is the documentation_url of a secondary limit's answer; go-github
// (and GitHub's own clients) recognise the answer by its suffix.
const secondaryDoc = "https://docs.github.com/rest/using-the-rest-api/rate-limits-for-the-rest-api#about-secondary-rate-limits"

// spent is what one window has used, and when it resets.
type spent struct {
	used  int
	reset time.Time
}

// budget is a Budget's state. Its own mutex keeps it off the Server's.
type budget struct {
	b        Budget
	mu       sync.Mutex
	inFlight map[string]int    // identity → requests being served
	points   map[string]*spent // identity + " " + route → this minute's points
	regs     map[string]*spent // identity → this hour's registrations
	refused  map[string]int    // limit → refusals
}

func newBudget(b Budget) *budget {
	if b.Status == 0 {
		b.Status = http.StatusTooManyRequests
	}
	return &budget{b: b, inFlight: map[string]int{}, points: map[string]*spent{}, regs: map[string]*spent{}, refused: map[string]int{}}
}

// points a request costs against the per-endpoint secondary limit.
func points(method string) int {
	switch method {
	case http.MethodGet, http.MethodHead, http.MethodOptions:
		return 1
	}
	return 5
}

// admit takes the request of identity to route (the simulator's pattern,
// "METHOD /path/{param}") into the budget at now. When it fits, it returns
// the release to call once the request is served; when it does not, it returns
// the limit it exceeds and how long until it would fit.
func (b *budget) admit(identity, route string, now time.Time) (release func(), limit string, wait time.Duration) {
	b.mu.Lock()
	defer b.mu.Unlock()
	method, _, _ := strings.Cut(route, " ")
	if b.inFlight[identity] >= b.b.Concurrent {
		// GitHub gives no time for this one; a client waits at least a minute.
		return nil, b.refuse(LimitConcurrent), time.Minute
	}
	pts := window(b.points, identity+" "+route, now, time.Minute)
	if pts.used+points(method) > b.b.PointsPerMinute {
		return nil, b.refuse(LimitPoints), pts.reset.Sub(now)
	}
	if strings.HasSuffix(route, "/generate-jitconfig") {
		regs := window(b.regs, identity, now, time.Hour)
		if regs.used >= b.b.RegistrationsPerHour {
			return nil, b.refuse(LimitRegistrations), regs.reset.Sub(now)
		}
		regs.used++
	}
	pts.used += points(method)
	b.inFlight[identity]++
	return func() {
		b.mu.Lock()
		defer b.mu.Unlock()
		b.inFlight[identity]--
	}, "", 0
}

// ErrRegistrationLimit: a runner agent's registration is past the scope's
// registrations for the hour.
var ErrRegistrationLimit = errors.New("githubsim: too many runner registrations this hour")

// agentRegistration takes one token registration in scope into the hour's
// registrations of the scope.
func (b *budget) agentRegistration(scope string, now time.Time) error {
	b.mu.Lock()
	defer b.mu.Unlock()
	regs := window(b.regs, "agents "+scope, now, time.Hour)
	if regs.used >= b.b.RegistrationsPerHour {
		b.refuse(LimitRegistrations)
		return fmt.Errorf("scope %s: %w (%d)", scope, ErrRegistrationLimit, b.b.RegistrationsPerHour)
	}
	regs.used++
	return nil
}

func (b *budget) refuse(limit string) string {
	b.refused[limit]++
	return limit
}

// window is key's current window of length d at now, a new one when the last
// has reset.
func window(m map[string]*spent, key string, now time.Time, d time.Duration) *spent {
	w := m[key]
	if w == nil || !now.Before(w.reset) {
		w = &spent{reset: now.Add(d)}
		m[key] = w
	}
	return w
}

// secondaryAnswer writes GitHub's answer to a request past a secondary limit:
// retry-after in whole seconds (at least 1), the primary window's headers.
func (s *Server) secondaryAnswer(w http.ResponseWriter, identity, limit string, wait time.Duration) {
	w.Header().Set("Retry-After", strconv.Itoa(max(1, int(math.Ceil(wait.Seconds())))))
	s.mu.Lock()
	s.rateHeaders(w, s.windowLocked(identity))
	s.mu.Unlock()
	writeErrorDoc(w, s.budget.b.Status, "You have exceeded a secondary rate limit ("+limit+
		"). Please wait a few minutes before you try again.", secondaryDoc)
}

// budgeted wraps an API endpoint in the budget, when there is one: requests
// without a valid token (the App's JWT, bad credentials) are left to the
// endpoint, and the simulator-only paths (/_runner/) are not GitHub's API.
func (s *Server) budgeted(route string, h http.HandlerFunc) http.HandlerFunc {
	if s.budget == nil || strings.Contains(route, " /_") {
		return h
	}
	return func(w http.ResponseWriter, r *http.Request) {
		identity, _, ok := s.identity(r)
		if !ok {
			h(w, r)
			return
		}
		release, limit, wait := s.budget.admit(identity, route, s.opts.Clock.Now())
		if release == nil {
			s.secondaryAnswer(w, identity, limit, wait)
			return
		}
		defer release()
		h(w, r)
	}
}

// Refusals counts, by limit (LimitCore, LimitConcurrent, LimitPoints,
// LimitRegistrations), the requests the budget refused; nil without a budget.
func (s *Server) Refusals() map[string]int {
	if s.budget == nil {
		return nil
	}
	s.budget.mu.Lock()
	defer s.budget.mu.Unlock()
	return maps.Clone(s.budget.refused)
}

// refusedCore counts a request refused by the primary limit.
func (s *Server) refusedCore() {
	if s.budget != nil {
		s.budget.mu.Lock()
		s.budget.refuse(LimitCore)
		s.budget.mu.Unlock()
	}
}

// RateReset is when the primary window of an installation resets (the zero
// time when it has not called yet or its window ended).
func (s *Server) RateReset(installation int64) time.Time {
	s.mu.Lock()
	defer s.mu.Unlock()
	w := s.rate[fmt.Sprintf("installation/%d", installation)]
	if w == nil || !s.opts.Clock.Now().Before(w.reset) {
		return time.Time{}
	}
	return w.reset
}
