package fakerunner

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/runnerscaler/runnerscaler/local/runnerfiles"
)

// client talks to the simulator's /_runner/ endpoints (see local/githubsim's
// runnerapi.go for the protocol).
type client struct {
	base string
	http *http.Client
}

func newClient(base string) *client {
	return &client{base: strings.TrimSuffix(base, "/"), http: &http.Client{}}
}

// apiError is a non-2xx answer.
type apiError struct {
	op         string
	status     int
	message    string
	retryAfter time.Duration
}

func (e *apiError) Error() string {
	return fmt.Sprintf("%s: HTTP %d: %s", e.op, e.status, e.message)
}

// statusOf is err's HTTP status, 0 when the simulator did not answer.
func statusOf(err error) int {
	var ae *apiError
	if errors.As(err, &ae) {
		return ae.status
	}
	return 0
}

// registration is what config.sh sends.
type registration struct {
	URL         string   `json:"url"`
	Name        string   `json:"name"`
	Labels      []string `json:"labels,omitempty"`
	RunnerGroup string   `json:"runner_group,omitempty"`
	Ephemeral   bool     `json:"ephemeral"`
	Replace     bool     `json:"replace"`
	Version     string   `json:"version"`
}

type registered struct {
	Runner      runnerfiles.Settings    `json:"runner"`
	Credentials runnerfiles.Credentials `json:"credentials"`
}

type session struct {
	ID        string `json:"session_id"`
	RunnerID  int64  `json:"runner_id"`
	Name      string `json:"runner_name"`
	Ephemeral bool   `json:"ephemeral"`
}

// job is a job message; Token authenticates its result.
type job struct {
	ID         int64    `json:"id"`
	RunID      int64    `json:"run_id"`
	Repository string   `json:"repository"`
	Labels     []string `json:"labels"`
	Duration   string   `json:"duration"`
	Script     string   `json:"script,omitempty"`
	// Container and Services are the job's `container:` and `services:` (nil: none).
	Container *jobContainer  `json:"container,omitempty"`
	Services  []jobContainer `json:"services,omitempty"`
	Token     string         `json:"token"`
}

// jobContainer is a job or service container of a job.
type jobContainer struct {
	Image    string `json:"image"`
	Username string `json:"username,omitempty"`
	Password string `json:"password,omitempty"`
}

// result is what a job's end reports: its conclusion and, for a job with a
// script, the script's output and exit code.
type result struct {
	Conclusion string `json:"conclusion"`
	Output     string `json:"output,omitempty"`
	ExitCode   int    `json:"exit_code,omitempty"`
	// ScriptStartedAt: when the job's script (its first step) started; zero
	// when it never did.
	ScriptStartedAt *time.Time `json:"script_started_at,omitempty"`
}

// register: POST /_runner/registrations.
func (c *client) register(ctx context.Context, token string, reg registration) (registered, error) {
	var out registered
	err := c.do(ctx, http.MethodPost, "/_runner/registrations", "", "RemoteAuth "+token, reg, &out)
	return out, err
}

// openSession: POST /_runner/sessions, with the runner's version (and the JIT
// config on a runner's first start from one).
func (c *client) openSession(ctx context.Context, cred, jit, version string) (session, error) {
	var out session
	body := map[string]string{"runner_version": version}
	if jit != "" {
		body["jit_config"] = jit
	}
	err := c.do(ctx, http.MethodPost, "/_runner/sessions", "", "Bearer "+cred, body, &out)
	return out, err
}

// closeSession: DELETE /_runner/sessions/{id}.
func (c *client) closeSession(ctx context.Context, cred, id string) error {
	return c.do(ctx, http.MethodDelete, "/_runner/sessions/"+id, "/_runner/sessions/{session}", "Bearer "+cred, nil, nil)
}

// pollJob: GET /_runner/sessions/{id}/job?wait=...; false when no job came.
func (c *client) pollJob(ctx context.Context, cred, id string, wait time.Duration) (job, bool, error) {
	var out job
	err := c.do(ctx, http.MethodGet, "/_runner/sessions/"+id+"/job?wait="+wait.String(), "/_runner/sessions/{session}/job", "Bearer "+cred, nil, &out)
	return out, err == nil && out.ID != 0, err
}

// reportResult: POST /_runner/jobs/{id}/result.
func (c *client) reportResult(ctx context.Context, j job, res result) error {
	return c.do(ctx, http.MethodPost, "/_runner/jobs/"+strconv.FormatInt(j.ID, 10)+"/result", "", "Bearer "+j.Token, res, nil)
}

// do sends a request; errors name it by route (path when empty), so that they
// never show a session id.
func (c *client) do(ctx context.Context, method, path, route, auth string, body, out any) error {
	if route == "" {
		route = path
	}
	op := method + " " + c.base + route
	var rd io.Reader
	if body != nil {
		raw, err := json.Marshal(body)
		if err != nil {
			return err
		}
		rd = bytes.NewReader(raw)
	}
	req, err := http.NewRequestWithContext(ctx, method, c.base+path, rd)
	if err != nil {
		return fmt.Errorf("%s: %w", op, err)
	}
	req.Header.Set("Authorization", auth)
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	resp, err := c.http.Do(req)
	if err != nil {
		if ue := (*url.Error)(nil); errors.As(err, &ue) {
			err = ue.Err // without the URL, which has the session id
		}
		return fmt.Errorf("%s: %w", op, err)
	}
	defer resp.Body.Close()
	raw, err := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	if err != nil {
		return fmt.Errorf("%s: %w", op, err)
	}
	if resp.StatusCode >= 300 {
		ae := &apiError{op: op, status: resp.StatusCode, message: strings.TrimSpace(string(raw))}
		var msg struct {
			Message string `json:"message"`
		}
		if json.Unmarshal(raw, &msg) == nil && msg.Message != "" {
			ae.message = msg.Message
		}
		if s, err := strconv.Atoi(resp.Header.Get("Retry-After")); err == nil {
			ae.retryAfter = time.Duration(s) * time.Second
		}
		return ae
	}
	if out != nil && resp.StatusCode != http.StatusNoContent && len(raw) > 0 {
		if err := json.Unmarshal(raw, out); err != nil {
			return fmt.Errorf("%s: reading the answer: %w", op, err)
		}
	}
	return nil
}
