package githubsim

import (
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/golang-jwt/jwt/v4"
)

// rateWindow is one identity's primary rate limit for the current hour.
type rateWindow struct {
	used  int
	reset time.Time
}

type injected struct {
	status     int
	retryAfter time.Duration // secondary rate limit when status is 403 and this is set
}

// ExhaustRateLimit uses up the current hour's window of every identity, including
// those that have not called yet; the limit comes back when each window resets.
func (s *Server) ExhaustRateLimit() {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, w := range s.rate {
		w.used = s.opts.RateLimit
	}
	s.exhaustedUntil = s.opts.Clock.Now().Add(time.Hour).Truncate(time.Second)
}

// LeaveRateLimit spends the primary window of every identity that has made a
// request down to left requests (the next answers say so).
func (s *Server) LeaveRateLimit(left int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, w := range s.rate {
		w.used = max(0, s.opts.RateLimit-left)
	}
}

// InjectStatus makes the next n authenticated API calls fail with status (e.g. 502).
func (s *Server) InjectStatus(status, n int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for range n {
		s.inject = append(s.inject, injected{status: status})
	}
}

// InjectSecondaryLimit makes the next authenticated call answer 403 with a
// secondary rate limit and Retry-After.
func (s *Server) InjectSecondaryLimit(retryAfter time.Duration) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.inject = append(s.inject, injected{status: http.StatusForbidden, retryAfter: retryAfter})
}

// authenticate checks the request's token and rate limit, writes the rate-limit
// headers, and answers the request itself (returning false) when it must fail.
// A request that will be answered 304 does not count (countIt false).
func (s *Server) authenticate(w http.ResponseWriter, r *http.Request, countIt func() bool) bool {
	identity, installation, ok := s.identity(r)
	if !ok {
		writeError(w, http.StatusUnauthorized, "Bad credentials")
		return false
	}
	if !s.allowed(identity, installation, r) {
		writeError(w, http.StatusForbidden, "Resource not accessible by integration")
		return false
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.tokenCalls++
	if len(s.inject) > 0 {
		inj := s.inject[0]
		s.inject = s.inject[1:]
		if inj.retryAfter > 0 {
			w.Header().Set("Retry-After", strconv.Itoa(int(inj.retryAfter.Seconds())))
			writeErrorDoc(w, inj.status, "You have exceeded a secondary rate limit.",
				"https://docs.github.com/rest/using-the-rest-api/rate-limits-for-the-rest-api#about-secondary-rate-limits")
			return false
		}
		writeError(w, inj.status, http.StatusText(inj.status))
		return false
	}
	win := s.windowLocked(identity)
	if win.used >= s.opts.RateLimit {
		s.refusedCore()
		s.rateHeaders(w, win)
		writeErrorDoc(w, http.StatusForbidden, "API rate limit exceeded for "+identity+".",
			"https://docs.github.com/rest/overview/resources-in-the-rest-api#rate-limiting")
		return false
	}
	if countIt == nil || countIt() {
		win.used++
	}
	s.rateHeaders(w, win)
	return true
}

// windowLocked is identity's primary window now, a new one when the last has reset.
func (s *Server) windowLocked(identity string) *rateWindow {
	now := s.opts.Clock.Now()
	win := s.rate[identity]
	if win == nil || !now.Before(win.reset) {
		win = &rateWindow{reset: now.Add(time.Hour).Truncate(time.Second)}
		if now.Before(s.exhaustedUntil) {
			win.used, win.reset = s.opts.RateLimit, s.exhaustedUntil
		}
		s.rate[identity] = win
	}
	return win
}

func (s *Server) rateHeaders(w http.ResponseWriter, win *rateWindow) {
	h := w.Header()
	h.Set("X-RateLimit-Limit", strconv.Itoa(s.opts.RateLimit))
	h.Set("X-RateLimit-Remaining", strconv.Itoa(max(0, s.opts.RateLimit-win.used)))
	h.Set("X-RateLimit-Used", strconv.Itoa(win.used))
	h.Set("X-RateLimit-Reset", strconv.FormatInt(win.reset.Unix(), 10))
	h.Set("X-RateLimit-Resource", "core")
}

// identity is "installation/<id>" for a valid installation token, "pat/<n>" for a PAT.
func (s *Server) identity(r *http.Request) (string, int64, bool) {
	auth := r.Header.Get("Authorization")
	tok, ok := strings.CutPrefix(auth, "token ")
	if !ok {
		tok, ok = strings.CutPrefix(auth, "Bearer ")
	}
	if !ok || tok == "" {
		return "", 0, false
	}
	for i, pat := range s.opts.PATs {
		if tok == pat {
			return fmt.Sprintf("pat/%d", i), 0, true
		}
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	it, ok := s.tokens[tok]
	if !ok || !s.opts.Clock.Now().Before(it.expires) {
		return "", 0, false
	}
	return fmt.Sprintf("installation/%d", it.installation), it.installation, true
}

// createAccessToken: POST /app/installations/{installation_id}/access_tokens.
func (s *Server) createAccessToken(w http.ResponseWriter, r *http.Request) {
	id, err := strconv.ParseInt(r.PathValue("installation_id"), 10, 64)
	if err != nil {
		writeError(w, http.StatusNotFound, "Not Found")
		return
	}
	if err := s.verifyJWT(r.Header.Get("Authorization")); err != nil {
		writeError(w, http.StatusUnauthorized, "A JSON web token could not be decoded: "+err.Error())
		return
	}
	s.mu.Lock()
	_, known := s.opts.Accounts[id]
	s.mu.Unlock()
	for _, inst := range s.opts.Installations {
		known = known || inst == id
	}
	if !known {
		writeError(w, http.StatusNotFound, "Not Found")
		return
	}
	tok := randomToken("ghs_")
	expires := s.opts.Clock.Now().Add(s.opts.TokenLifetime).UTC().Truncate(time.Second)
	s.mu.Lock()
	s.tokens[tok] = installationToken{installation: id, expires: expires}
	s.mu.Unlock()
	writeJSON(w, http.StatusCreated, map[string]any{"token": tok, "expires_at": expires.Format(time.RFC3339)})
}

// verifyJWT checks an App JWT as GitHub does: RS256 by the App's key, iss = App id,
// issued no later than a minute from now, not expired, at most 10 minutes long.
func (s *Server) verifyJWT(auth string) error {
	raw, ok := strings.CutPrefix(auth, "Bearer ")
	if !ok || s.opts.AppKey == nil {
		return fmt.Errorf("missing bearer JWT")
	}
	var claims jwt.RegisteredClaims
	parser := jwt.NewParser(jwt.WithValidMethods([]string{"RS256"}), jwt.WithoutClaimsValidation())
	if _, err := parser.ParseWithClaims(raw, &claims, func(*jwt.Token) (any, error) { return s.opts.AppKey, nil }); err != nil {
		return fmt.Errorf("signature: %w", err)
	}
	now := s.opts.Clock.Now()
	switch {
	case claims.Issuer != strconv.FormatInt(s.opts.AppID, 10):
		return fmt.Errorf("iss %q is not the App id", claims.Issuer)
	case claims.IssuedAt == nil || claims.IssuedAt.After(now.Add(time.Minute)):
		return fmt.Errorf("iat is missing or in the future")
	case claims.ExpiresAt == nil || !now.Before(claims.ExpiresAt.Time):
		return fmt.Errorf("exp is missing or passed")
	case claims.ExpiresAt.Sub(claims.IssuedAt.Time) > 10*time.Minute+time.Second:
		return fmt.Errorf("exp is too far in the future")
	}
	return nil
}

// RateRemaining is the primary rate limit left in the current window of an
// installation (the full limit when it has not called yet or its window ended).
func (s *Server) RateRemaining(installation int64) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	w := s.rate[fmt.Sprintf("installation/%d", installation)]
	if w == nil || !s.opts.Clock.Now().Before(w.reset) {
		return s.opts.RateLimit
	}
	return max(0, s.opts.RateLimit-w.used)
}
