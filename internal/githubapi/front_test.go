package githubapi_test

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"regexp"
	"sync"
	"testing"
	"time"

	clocktesting "k8s.io/utils/clock/testing"

	"github.com/runnerscaler/runnerscaler/local/apispec"
	"github.com/runnerscaler/runnerscaler/local/githubsim"
)

// front stands before a simulator: it answers the requests a rule matches itself,
// as GitHub answers a refusal, passes the others on, and counts every request.
type front struct {
	sim   *githubsim.Server
	clock *clocktesting.FakeClock
	url   string

	mu       sync.Mutex
	rules    []answer
	requests int
	echo     string // the Authorization header of the latest echoing answer
}

// answer is one refusal: for the next request whose "METHOD /path" matches
// route, the status, headers and GitHub's error body (message and documentation
// URL); echoAuth appends the request's Authorization header to the message.
type answer struct {
	route    *regexp.Regexp
	status   int
	header   map[string]string
	message  string
	doc      string
	echoAuth bool
}

// newFront starts a simulator (the App of key, installation 77 on every scope,
// org-a and org-b installed as 11 and 22, PATs pats) behind a front.
func newFront(t *testing.T, pats ...string) *front {
	t.Helper()
	k, _ := key(t)
	clk := clocktesting.NewFakeClock(time.Now())
	sim := githubsim.New(githubsim.Options{AppID: appID, AppKey: &k.PublicKey, Clock: clk, TokenLifetime: 24 * time.Hour,
		Installations: []int64{installation}, Accounts: map[int64]string{11: "org-a", 22: "org-b"}, PATs: pats})
	apispec.Verify(t, sim)
	f := &front{sim: sim, clock: clk}
	srv := httptest.NewServer(f.handler(sim.Handler()))
	t.Cleanup(srv.Close)
	f.url = srv.URL + "/"
	return f
}

// refuse answers the next request that matches route with a.
func (f *front) refuse(route string, a answer) {
	a.route = regexp.MustCompile(route)
	f.mu.Lock()
	defer f.mu.Unlock()
	f.rules = append(f.rules, a)
}

// Requests is how many requests reached the front (answered by it or not).
func (f *front) Requests() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.requests
}

// echoed is the Authorization header the latest echoing answer echoed.
func (f *front) echoed() string {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.echo
}

func (f *front) handler(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		a, ok := f.match(r)
		if !ok {
			next.ServeHTTP(w, r)
			return
		}
		for k, v := range a.header {
			w.Header().Set(k, v)
		}
		msg := a.message
		if a.echoAuth {
			auth := r.Header.Get("Authorization")
			f.mu.Lock()
			f.echo = auth
			f.mu.Unlock()
			msg += " (sent: " + auth + ")"
		}
		w.Header().Set("Content-Type", "application/json; charset=utf-8")
		w.WriteHeader(a.status)
		_ = json.NewEncoder(w).Encode(map[string]string{"message": msg, "documentation_url": a.doc})
	})
}

func (f *front) match(r *http.Request) (answer, bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.requests++
	for i, a := range f.rules {
		if a.route.MatchString(r.Method + " " + r.URL.Path) {
			f.rules = append(f.rules[:i], f.rules[i+1:]...)
			return a, true
		}
	}
	return answer{}, false
}
