package githubapi

import (
	"errors"
	"fmt"
	"net/http"
	"regexp"
	"strings"
	"time"

	"github.com/bradleyfalzon/ghinstallation/v2"
	"github.com/google/go-github/v88/github"
)

// Sentinel errors for GitHub's answers. A failed call wraps an *APIError, which
// errors.Is matches to the sentinel its operation and status mean (sentinelFor),
// or a *RateLimitError, which matches ErrRateLimited.
var (
	// ErrNotFound (404): the runner, scope, group or installation does not exist
	// (for removal: already gone).
	ErrNotFound = errors.New("github: not found")
	// ErrRunnerNotFound (404 on runner removal): the runner is already gone. It
	// also matches ErrNotFound.
	ErrRunnerNotFound = errors.New("github: runner not found")
	// ErrRunnerBusy (422 on runner removal only): the runner is running a job and
	// cannot be removed now.
	ErrRunnerBusy = errors.New("github: runner is busy")
	// ErrForbidden (403, not a rate limit): the App or token lacks a permission.
	ErrForbidden = errors.New("github: forbidden")
	// ErrUnauthorized (401): the credentials were rejected.
	ErrUnauthorized = errors.New("github: unauthorized")
	// ErrServer (5xx): GitHub failed; retry later.
	ErrServer = errors.New("github: server error")
	// ErrRateLimited matches every *RateLimitError.
	ErrRateLimited = errors.New("github: rate limited")
	// ErrDeferred matches every *DeferredError.
	ErrDeferred = errors.New("github: deferred near the rate limit")
)

// DeferredError: a call that can wait was not sent, the identity being near
// its primary limit (ReservePercent).
type DeferredError struct {
	Op               Op
	Remaining, Limit int
}

func (e *DeferredError) Error() string {
	return fmt.Sprintf("%s deferred: %d of %d GitHub requests left this hour, kept for JIT configs and runner removals",
		e.Op, e.Remaining, e.Limit)
}

// Is makes errors.Is(err, ErrDeferred) match.
func (e *DeferredError) Is(target error) bool { return target == ErrDeferred }

// Op names a GitHub operation in an *APIError.
type Op string

// The operations of this package's clients.
const (
	OpRegistrationToken  Op = "create registration token"
	OpJITConfig          Op = "generate JIT config"
	OpListRunners        Op = "list runners"
	OpGetRunner          Op = "get runner"
	OpRemoveRunner       Op = "remove runner"
	OpRemoveRunnerLabels Op = "remove runner labels"
	OpListRunnerGroups   Op = "list runner groups"
	OpInstallationToken  Op = "create installation token"
	OpFindInstallation   Op = "find installation"
	OpListHookDeliveries Op = "list webhook deliveries"
	OpRedeliver          Op = "redeliver webhook delivery"
	OpRerunJob           Op = "re-run job"
	OpListRunJobs        Op = "list workflow run jobs"
	OpGetJob             Op = "get workflow job"
)

// APIError is GitHub's refusal of one operation.
type APIError struct {
	Op     Op
	Status int
	// Message is GitHub's message, with anything shaped like a credential
	// (and the request's own) replaced by [REDACTED].
	Message string
	cause   error
}

func (e *APIError) Error() string {
	msg := e.Message
	if msg == "" {
		msg = http.StatusText(e.Status)
	}
	return fmt.Sprintf("github: %s: %d %s", e.Op, e.Status, msg)
}

// Is matches the sentinel error that the operation and status mean.
func (e *APIError) Is(target error) bool {
	s := sentinelFor(e.Op, e.Status)
	return s != nil && (s == target || (s == ErrRunnerNotFound && target == ErrNotFound))
}

// Unwrap returns go-github's (or ghinstallation's) error.
func (e *APIError) Unwrap() error { return e.cause }

// sentinelFor is the one mapping from an operation's HTTP status to a sentinel
// error (nil: none). A 422 means busy only when removing a runner.
func sentinelFor(op Op, status int) error {
	switch {
	case status == http.StatusNotFound && op == OpRemoveRunner:
		return ErrRunnerNotFound
	case status == http.StatusNotFound:
		return ErrNotFound
	case status == http.StatusUnprocessableEntity && op == OpRemoveRunner:
		return ErrRunnerBusy
	case status == http.StatusForbidden:
		return ErrForbidden
	case status == http.StatusUnauthorized:
		return ErrUnauthorized
	case status >= 500:
		return ErrServer
	}
	return nil
}

// RateLimitError says the identity is rate limited until Reset: its client
// makes no call before then.
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

// classify maps the error of a failed call of op: a rate limit becomes a
// *RateLimitError and closes the gate until its reset; any other answer from
// GitHub becomes an *APIError; an error without an answer (a transport failure)
// is returned as it is. When the installation token could not be made, the
// answer to that request is the one classified.
func (m *meter) classify(op Op, resp *github.Response, err error) error {
	answer, status, req := err, 0, (*http.Request)(nil)
	if resp != nil && resp.Response != nil {
		status, req = resp.StatusCode, resp.Request
	}
	var tokenErr *ghinstallation.HTTPError
	if errors.As(err, &tokenErr) && tokenErr.Response != nil {
		op, status, req = OpInstallationToken, tokenErr.Response.StatusCode, tokenErr.Response.Request
		answer = tokenAnswer(tokenErr.Response)
	}
	var primary *github.RateLimitError
	var secondary *github.AbuseRateLimitError
	switch {
	case errors.As(answer, &primary):
		return m.block(&RateLimitError{Reset: primary.Rate.Reset.Time})
	case errors.As(answer, &secondary):
		wait := secondaryDefault
		if secondary.RetryAfter != nil {
			wait = *secondary.RetryAfter
		}
		return m.block(&RateLimitError{Reset: m.clock.Now().Add(wait), Secondary: true})
	case status == 0:
		return err
	}
	var ghErr *github.ErrorResponse
	msg := ""
	if errors.As(answer, &ghErr) {
		msg = ghErr.Message
	}
	return &APIError{Op: op, Status: status, Message: redact(msg, req), cause: err}
}

// tokenAnswer reads GitHub's answer to a failed installation-token request as
// go-github reads any answer, and closes its body (ghinstallation leaves it open).
func tokenAnswer(r *http.Response) error {
	if r.Body != nil {
		defer r.Body.Close()
	}
	return github.CheckResponse(r)
}

// credentialShape matches GitHub tokens (ghp_, gho_, ghu_, ghs_, ghr_,
// github_pat_) and JWTs.
var credentialShape = regexp.MustCompile(`(?:gh[pousr]_|github_pat_)[A-Za-z0-9_]+|eyJ[A-Za-z0-9_-]*\.[A-Za-z0-9_-]*\.[A-Za-z0-9_-]*`)

// redact removes from GitHub's message the credential the request carried and
// anything shaped like one.
func redact(msg string, req *http.Request) string {
	if req != nil {
		if _, cred, ok := strings.Cut(req.Header.Get("Authorization"), " "); ok && cred != "" {
			msg = strings.ReplaceAll(msg, cred, "[REDACTED]")
		}
	}
	return credentialShape.ReplaceAllString(msg, "[REDACTED]")
}
