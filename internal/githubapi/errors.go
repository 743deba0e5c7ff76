package githubapi

import (
	"errors"
	"fmt"
	"net/http"
	"time"

	"github.com/bradleyfalzon/ghinstallation/v2"
	"github.com/google/go-github/v88/github"
)

// Sentinel errors for GitHub's answers; every failed call wraps one of them or a
// *RateLimitError.
var (
	// ErrNotFound (404): the runner, scope or group does not exist (for removal: already gone).
	ErrNotFound = errors.New("github: not found")
	// ErrRunnerBusy (422 on removal): the runner is running a job and cannot be removed now.
	ErrRunnerBusy = errors.New("github: runner is busy")
	// ErrForbidden (403, not a rate limit): the App or token lacks a permission.
	ErrForbidden = errors.New("github: forbidden")
	// ErrUnauthorized (401): the credentials were rejected.
	ErrUnauthorized = errors.New("github: unauthorized")
	// ErrServer (5xx): GitHub failed; retry later.
	ErrServer = errors.New("github: server error")
	// ErrRateLimited matches every *RateLimitError.
	ErrRateLimited = errors.New("github: rate limited")
)

// RateLimitError says the installation is rate limited until Reset: the client
// makes no call for it before then.
type RateLimitError struct {
	Reset time.Time
	// Secondary is true for GitHub's secondary (abuse) limits, announced with Retry-After.
	Secondary bool
	// Local is true when the client refused the call itself, without asking GitHub.
	Local bool
}

func (e *RateLimitError) Error() string {
	kind := "primary"
	if e.Secondary {
		kind = "secondary"
	}
	return fmt.Sprintf("github: %s rate limit until %s", kind, e.Reset.UTC().Format(time.RFC3339))
}

// Is makes errors.Is(err, ErrRateLimited) match.
func (e *RateLimitError) Is(target error) bool { return target == ErrRateLimited }

// secondaryDefault is how long to back off from a secondary limit without Retry-After
// (GitHub documents "at least one minute").
const secondaryDefault = time.Minute

// classify maps go-github's error for a response to ours, and blocks the
// installation on rate limits.
func (c *Client) classify(resp *github.Response, err error) error {
	var primary *github.RateLimitError
	var secondary *github.AbuseRateLimitError
	switch {
	case errors.As(err, &primary):
		return c.block(&RateLimitError{Reset: primary.Rate.Reset.Time})
	case errors.As(err, &secondary):
		wait := secondaryDefault
		if secondary.RetryAfter != nil {
			wait = *secondary.RetryAfter
		}
		return c.block(&RateLimitError{Reset: c.clock.Now().Add(wait), Secondary: true})
	}
	code := 0
	var tokenErr *ghinstallation.HTTPError
	switch {
	case resp != nil && resp.Response != nil:
		code = resp.StatusCode
	case errors.As(err, &tokenErr) && tokenErr.Response != nil:
		code = tokenErr.Response.StatusCode // the installation token request failed
	default:
		return err // transport error: no status to classify
	}
	switch {
	case code == http.StatusNotFound:
		return fmt.Errorf("%w: %w", ErrNotFound, err)
	case code == http.StatusUnprocessableEntity:
		return fmt.Errorf("%w: %w", ErrRunnerBusy, err)
	case code == http.StatusForbidden:
		return fmt.Errorf("%w: %w", ErrForbidden, err)
	case code == http.StatusUnauthorized:
		return fmt.Errorf("%w: %w", ErrUnauthorized, err)
	case code >= 500:
		return fmt.Errorf("%w: %w", ErrServer, err)
	}
	return err
}

func (c *Client) block(e *RateLimitError) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.stats.RateLimited++
	if e.Reset.After(c.blockedUntil) {
		c.blockedUntil, c.blockedBy2nd = e.Reset, e.Secondary
	}
	return e
}
