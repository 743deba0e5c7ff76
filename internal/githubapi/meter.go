package githubapi

import (
	"context"
	"fmt"
	"net/http"
	"sync"
	"sync/atomic"
	"time"

	"github.com/google/go-github/v88/github"
	"k8s.io/utils/clock"
)

// meter is the rate-limit gate and the call counter of one GitHub identity (an
// installation, a token, or the App itself). Every call to GitHub passes its gate
// (call), and every HTTP request, installation-token creation included, passes
// its counter (transport).
type meter struct {
	clock clock.PassiveClock

	mu           sync.Mutex
	blockedUntil time.Time
	blockedBy2nd bool // the block comes from a secondary limit
	stats        Stats
}

func newMeter(clk clock.PassiveClock) *meter {
	if clk == nil {
		clk = clock.RealClock{}
	}
	return &meter{clock: clk}
}

// Stats counts an identity's calls to GitHub.
type Stats struct {
	// Calls counts the HTTP requests sent to GitHub: every API call and page
	// (304s included), installation-token creations and installation lookups.
	Calls int
	// NotModified counts 304 answers, which cost no rate limit.
	NotModified int
	// RateLimited counts calls answered with a rate-limit error, and calls refused
	// locally because the identity was still rate limited.
	RateLimited int
	// RateRemaining is the primary rate limit left as the latest answer that
	// carried X-RateLimit-* headers said; RateKnown is false until one did.
	RateRemaining int
	RateKnown     bool
	// RateLimit is the primary limit of the window RateRemaining is of, and
	// RateReset when that window ends.
	RateLimit int
	RateReset time.Time
	// Deferred counts calls not sent because the identity was near its
	// primary limit and the call can wait (see ErrDeferred).
	Deferred int
}

func (m *meter) snapshot() Stats {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.stats
}

// call makes one API call of operation op through the gate and maps its error;
// what says which call it was, for the error's text.
func (m *meter) call(ctx context.Context, op Op, what string, do func(context.Context) (*github.Response, error)) error {
	if err := m.admit(op); err != nil {
		return fmt.Errorf("%s: %w", what, err)
	}
	resp, err := do(ctx)
	if resp != nil && resp.Rate.Limit > 0 {
		m.mu.Lock()
		m.stats.RateRemaining, m.stats.RateKnown, m.stats.RateLimit = resp.Rate.Remaining, true, resp.Rate.Limit
		m.stats.RateReset = resp.Rate.Reset.Time
		m.mu.Unlock()
	}
	if err != nil {
		return fmt.Errorf("%s: %w", what, m.classify(op, resp, err))
	}
	return nil
}

// admit is what call checks before a request of op: the rate-limit gate,
// then the deferral near the limit.
func (m *meter) admit(op Op) error {
	if err := m.gate(); err != nil {
		return err
	}
	return m.deferral(op)
}

// ReservePercent: below this share of its primary limit left, an identity
// sends only the calls that move jobs — JIT configs, registration tokens,
// runner removals and reads of one runner, re-runs — and defers those that can
// wait (Deferrable).
const ReservePercent = 10

// Deferrable reports whether calls of op wait while the identity is near its
// primary limit: full runner lists (registrations are recorded, and orphans
// cleaned up, a sweep later; a runner about to be removed is read alone,
// Client.Runner), webhook delivery logs (the schedule looks for lost
// deliveries again), the runner release check and the reads of runner groups'
// repository access (routing keeps the access last read). The lookup of a
// group's id, which JIT configs need, is not deferred.
func Deferrable(op Op) bool {
	switch op {
	case OpListRunners, OpListHookDeliveries, OpLatestRelease, OpGetRunnerGroup, OpListGroupRepositories:
		return true
	}
	return false
}

// deferral refuses a deferrable call while the identity is near its limit, in
// the window the latest answer described.
func (m *meter) deferral(op Op) error {
	if !Deferrable(op) {
		return nil
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	st := m.stats
	if !st.RateKnown || st.RateLimit <= 0 || st.RateRemaining*100 >= st.RateLimit*ReservePercent ||
		!m.clock.Now().Before(st.RateReset) {
		return nil // a window that has ended says nothing of the next
	}
	m.stats.Deferred++
	return &DeferredError{Op: op, Remaining: st.RateRemaining, Limit: st.RateLimit}
}

// gate refuses to call while the identity is rate limited.
func (m *meter) gate() error {
	m.mu.Lock()
	defer m.mu.Unlock()
	if until := m.blockedUntil; m.clock.Now().Before(until) {
		m.stats.RateLimited++
		return &RateLimitError{Reset: until, Local: true, Secondary: m.blockedBy2nd}
	}
	return nil
}

// block closes the gate until e.Reset (or keeps a later block) and returns e.
func (m *meter) block(e *RateLimitError) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.stats.RateLimited++
	if e.Reset.After(m.blockedUntil) {
		m.blockedUntil, m.blockedBy2nd = e.Reset, e.Secondary
	}
	return e
}

func (m *meter) notModified() {
	m.mu.Lock()
	m.stats.NotModified++
	m.mu.Unlock()
}

// transport returns next with every request it sends counted in Calls.
func (m *meter) transport(next http.RoundTripper) http.RoundTripper {
	return counted{next: next, m: m}
}

type counted struct {
	next http.RoundTripper
	m    *meter
}

func (c counted) RoundTrip(req *http.Request) (*http.Response, error) {
	c.m.mu.Lock()
	c.m.stats.Calls++
	c.m.mu.Unlock()
	if n, ok := req.Context().Value(callCounterKey{}).(*atomic.Int64); ok {
		n.Add(1)
	}
	return c.next.RoundTrip(req)
}

type callCounterKey struct{}

// WithCallCounter returns ctx carrying n: every HTTP request sent to GitHub
// for a call made with it — each page, 304s, installation lookups and
// installation-token creations included — adds one to n, as to Stats.Calls.
// One counter per unit of work (a pool's sweep) counts that work alone, while
// Stats counts everything the identity sent.
func WithCallCounter(ctx context.Context, n *atomic.Int64) context.Context {
	return context.WithValue(ctx, callCounterKey{}, n)
}
