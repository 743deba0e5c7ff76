// Package webhook turns signed GitHub `workflow_job` deliveries into capacity
// reservations. It serves API Gateway HTTP API (payload 2.0) and Lambda Function URL
// events — both use the same 2.0 shape — and, through HTTPHandler, plain HTTP for
// the local stack.
//
// Responses (README "Webhook"): 401 for a missing or wrong signature (only an
// HMAC-SHA256 `sha256=` signature in X-Hub-Signature-256 counts), 400 for a body
// that is too large, not JSON, or a job without id or labels or with a created_at
// that is not a time, 200 for ping, 202 for events and jobs that reserve nothing
// (other events, no matching pool), 200 once a reservation write is durable
// (a `waiting` holds its job for an approval: see package reservation), 200 "stale" with nothing written for a `queued` of a job created more
// than reservation.DefaultRetention ago that does not deploy to an environment (a
// late redelivery or a replay: see package reservation), and 503 when DynamoDB fails
// after the SDK's retries, so that GitHub records a failed delivery the user can
// redeliver. Nothing is written before the signature is verified. The secret is
// never logged, nor the payload whole: a delivery's log line carries its
// delivery id and event and, of a workflow_job, the action, job id, repository,
// labels, runner name and id, pool and outcome.
//
// The `in_progress` that moves a job forward also gives the job's wait for a
// runner, from its created_at to its started_at (package queuewait): a
// QueueWaitSeconds metric of its pool, kept for `runnerscaler status` when the
// handler has somewhere to keep it (WithQueueWaits).
package webhook

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"strings"
	"time"

	"github.com/aws/aws-lambda-go/events"
	"github.com/google/go-github/v88/github"
	"k8s.io/utils/clock"

	"github.com/runnerscaler/runnerscaler/internal/emf"
	"github.com/runnerscaler/runnerscaler/internal/pool"
	"github.com/runnerscaler/runnerscaler/internal/rerun"
	"github.com/runnerscaler/runnerscaler/internal/reservation"
	"github.com/runnerscaler/runnerscaler/internal/roster"
	"github.com/runnerscaler/runnerscaler/internal/runnername"
	"github.com/runnerscaler/runnerscaler/internal/sweepevent"
)

// DefaultMaxBody caps the request body. workflow_job payloads are tens of KB (GitHub
// itself caps deliveries at 25 MB; API Gateway at 10 MB); 1 MiB leaves ample room.
const DefaultMaxBody = 1 << 20

// Recorder stores a delivery's effect (reservation.Store): the job's reservation in
// its pool, the link from the runner that took the job to the job, and the move
// of the job's count to that runner's pool (followRunner).
type Recorder interface {
	Record(ctx context.Context, d reservation.Delivery) (reservation.Outcome, error)
	RecordRunner(ctx context.Context, d reservation.Delivery) (reservation.Outcome, error)
	FollowRunner(ctx context.Context, home string, job int64, runnerPool string) (from string, moved bool, err error)
	Job(ctx context.Context, pool string, job int64) (r reservation.Reservation, ok bool, err error)
}

// Nudger asks the sweeper to reconcile one pool now, for the jobs named in the
// event (package nudge). An error is logged; it never fails the delivery, since
// the sweeper's schedule is the backstop.
type Nudger interface {
	Nudge(ctx context.Context, ev sweepevent.Event) error
}

// Handler handles webhook deliveries. Build it with New.
type Handler struct {
	secret  []byte
	pools   *pool.Config
	store   Recorder
	nudger  Nudger
	clock   clock.PassiveClock
	log     *slog.Logger
	maxBody int
	metrics *emf.Writer
	// failures records jobs that failed on one of our runners, for the sweeper
	// to re-run those whose runner died under them (nil: none recorded).
	failures Failures
	waits    QueueWaits
	// access is the runner groups' access routing checks (nil: none).
	access *accessCache
	// roster is the deployment's record of the runners it created: only a
	// runner on it is this deployment's (nil: none is).
	roster Roster
}

// Roster is the deployment's record of the runners it created (roster.Store).
type Roster interface {
	Lookup(ctx context.Context, pool, runner string) (roster.Runner, bool, error)
}

// WithRoster sets the deployment's record of its runners. Without it no runner
// is this deployment's: no delivery links, moves, nudges or records a failure
// for a runner.
func WithRoster(r Roster) Option { return func(h *Handler) { h.roster = r } }

// Failures records a job that failed or was cancelled on one of the
// deployment's runners (rerun.Store).
type Failures interface {
	Record(ctx context.Context, c rerun.Candidate, now time.Time) (bool, error)
}

// WithFailures sets where failed jobs of our runners are recorded for re-runs.
func WithFailures(f Failures) Option { return func(h *Handler) { h.failures = f } }

// Option configures a Handler.
type Option func(*Handler)

// WithNudger sets who is nudged after a queued job, or a job completed on one of
// an ephemeral pool's runners, is recorded (default: nobody).
func WithNudger(n Nudger) Option { return func(h *Handler) { h.nudger = n } }

// WithLogger sets the logger (default: discard).
func WithLogger(l *slog.Logger) Option { return func(h *Handler) { h.log = l } }

// WithClock sets the clock used to measure handling time (default: real).
func WithClock(c clock.PassiveClock) Option { return func(h *Handler) { h.clock = c } }

// WithMaxBody sets the body size cap in bytes (default DefaultMaxBody).
func WithMaxBody(n int) Option { return func(h *Handler) { h.maxBody = n } }

// New returns a handler that verifies deliveries with secret, routes them with
// pools and records them in store.
func New(secret []byte, pools *pool.Config, store Recorder, opts ...Option) *Handler {
	h := &Handler{secret: secret, pools: pools, store: store, clock: clock.RealClock{},
		log: slog.New(slog.DiscardHandler), maxBody: DefaultMaxBody}
	for _, o := range opts {
		o(h)
	}
	return h
}

// Response is the handler's answer: an HTTP status and a one-line reason.
type Response struct {
	Status int
	Reason string
}

// Handle serves an API Gateway HTTP API or Function URL event (payload format 2.0).
func (h *Handler) Handle(ctx context.Context, req events.APIGatewayV2HTTPRequest) (events.APIGatewayV2HTTPResponse, error) {
	body := []byte(req.Body)
	var resp Response
	if req.IsBase64Encoded {
		decoded, err := base64.StdEncoding.DecodeString(req.Body)
		if err != nil {
			resp = Response{http.StatusBadRequest, "body is flagged base64 but is not valid base64"}
			h.log.WarnContext(ctx, "webhook delivery", "status", resp.Status, "reason", resp.Reason)
			h.count(ctx, resp, tally{})
		}
		body = decoded
	}
	if resp.Status == 0 {
		resp = h.Serve(ctx, req.Headers, body)
	}
	return events.APIGatewayV2HTTPResponse{
		StatusCode: resp.Status,
		Headers:    map[string]string{"Content-Type": "text/plain; charset=utf-8"},
		Body:       resp.Reason + "\n",
	}, nil
}

// header looks name up case-insensitively (API Gateway lower-cases header names;
// other callers may not).
func header(hs map[string]string, name string) string {
	if v, ok := hs[name]; ok {
		return v
	}
	for k, v := range hs {
		if strings.EqualFold(k, name) {
			return v
		}
	}
	return ""
}

// Serve handles one delivery given its headers and raw body.
func (h *Handler) Serve(ctx context.Context, hdr map[string]string, body []byte) Response {
	start := h.clock.Now()
	event, delivery := header(hdr, "X-GitHub-Event"), header(hdr, "X-GitHub-Delivery")
	log := h.log.With("delivery", delivery, "event", event)
	resp, attrs, t := h.serve(ctx, event, delivery, header(hdr, "X-Hub-Signature-256"), body)
	level := slog.LevelInfo
	if resp.Status >= 500 {
		level = slog.LevelError
	} else if resp.Status >= 400 {
		level = slog.LevelWarn
	}
	attrs = append(attrs, slog.Int("status", resp.Status), slog.String("reason", resp.Reason),
		slog.Duration("took", h.clock.Since(start)))
	log.LogAttrs(ctx, level, "webhook delivery", attrs...)
	h.count(ctx, resp, t)
	return resp
}

func (h *Handler) serve(ctx context.Context, event, delivery, signature string, body []byte) (Response, []slog.Attr, tally) {
	if resp, ok := h.verify(body, signature); !ok {
		return resp, nil, tally{}
	}
	switch event {
	case "":
		return Response{http.StatusBadRequest, "missing X-GitHub-Event"}, nil, tally{}
	case "ping":
		if !json.Valid(body) {
			return Response{http.StatusBadRequest, "body is not valid JSON"}, nil, tally{}
		}
		return Response{http.StatusOK, "pong"}, nil, tally{}
	case "workflow_job":
		return h.workflowJob(ctx, delivery, body)
	default:
		return Response{http.StatusAccepted, "ignored: event " + event + " is not workflow_job"}, nil, tally{}
	}
}

// verify checks the body's size and its signature: ok is false, with the
// answer, when either is wrong.
func (h *Handler) verify(body []byte, signature string) (Response, bool) {
	switch {
	case len(body) > h.maxBody:
		return Response{http.StatusBadRequest, fmt.Sprintf("body is %d bytes, over the %d-byte limit", len(body), h.maxBody)}, false
	case signature == "":
		return Response{http.StatusUnauthorized, "missing X-Hub-Signature-256"}, false
	case !strings.HasPrefix(signature, "sha256="):
		// go-github picks the hash from the prefix: without this check a valid
		// sha1= signature would pass.
		return Response{http.StatusUnauthorized, "X-Hub-Signature-256 is not a sha256= signature"}, false
	case github.ValidateSignature(signature, body, h.secret) != nil:
		return Response{http.StatusUnauthorized, "X-Hub-Signature-256 does not match the body"}, false
	}
	return Response{}, true
}

// workflowJob handles a workflow_job delivery: its facts read, its plan
// decided, the plan applied (plan.go).
func (h *Handler) workflowJob(ctx context.Context, delivery string, body []byte) (Response, []slog.Attr, tally) {
	job, err := parseJob(body)
	if err != nil {
		return Response{http.StatusBadRequest, err.Error()}, nil, tally{}
	}
	attrs := []slog.Attr{slog.String("action", job.action), slog.Int64("job", job.id),
		slog.String("repository", job.route.Repository), slog.Any("labels", job.route.Labels)}
	if job.runnerName != "" {
		attrs = append(attrs, slog.String("runner", job.runnerName), slog.Int64("runnerId", job.runnerID))
	}
	state, ok := reservation.ParseState(job.action)
	if !ok {
		return Response{http.StatusAccepted, "ignored: action " + job.action + " reserves nothing"}, attrs, tally{}
	}
	f, notes, resp := h.facts(ctx, delivery, state, job)
	attrs = append(attrs, notes...)
	if resp != nil {
		return *resp, attrs, tally{}
	}
	return h.apply(ctx, plan(f), attrs)
}

// facts reads what deciding the delivery needs: its pool by routing (and the
// pool a group refusal would take it from after its first `queued`), and the
// pool of the deployment's runner that took it. A failed read answers 503.
func (h *Handler) facts(ctx context.Context, delivery string, state reservation.State, j job) (facts, []slog.Attr, *Response) {
	var refused refusals
	p, why := h.pools.Route(j.route, h.admission(ctx, &refused))
	attrs := refused.notes
	h.countRefusals(ctx, state, refused)
	home, err := h.homeBefore(ctx, state, refused, j.id)
	if err != nil {
		attrs = append(attrs, slog.String("error", err.Error()))
		return facts{}, attrs, &Response{http.StatusServiceUnavailable, "reading where the job was queued failed; redeliver later"}
	}
	if home != nil {
		p, why = home, ""
		attrs = append(attrs, slog.String("homeBeforeGroupRefusal", home.Name))
	} else if home, err = h.queuedElsewhere(ctx, state, p, j); err != nil {
		attrs = append(attrs, slog.String("error", err.Error()))
		return facts{}, attrs, &Response{http.StatusServiceUnavailable, "reading where the job was queued failed; redeliver later"}
	} else if home != nil {
		p, why = home, ""
		attrs = append(attrs, slog.String("homeBeforeGroupAdmission", home.Name))
	}
	if p != nil && why != "" {
		attrs = append(attrs, slog.String("skipped", why))
	}
	var runnerPool *pool.Pool
	if state >= reservation.InProgress && j.runnerName != "" {
		if runnerPool, err = h.runnerPool(ctx, j); err != nil {
			attrs = append(attrs, slog.String("error", err.Error()))
			return facts{}, attrs, &Response{http.StatusServiceUnavailable, "reading the deployment's runners failed; redeliver later"}
		}
	}
	return facts{job: j, delivery: delivery, state: state, pool: p, why: why, runnerPool: runnerPool}, attrs, nil
}

// runnerPool is the pool of the runner that took j, when it is one of the
// deployment's: a runner on the roster of the pool whose runner pods are named
// like it (package runnername), of the scope the pool registers in, whose
// GitHub id is the one the roster recorded (once it recorded one). Names are
// unique only within a scope and appear in public logs: a runner of another
// organization, repository or installation that has one of our names is not
// ours, and nil is returned for it as for any other runner.
func (h *Handler) runnerPool(ctx context.Context, j job) (*pool.Pool, error) {
	if h.roster == nil {
		return nil, nil
	}
	for i := range h.pools.Pools {
		p := &h.pools.Pools[i]
		if !runnername.IsPodOf(p.Name, j.runnerName) {
			continue
		}
		e, found, err := h.roster.Lookup(ctx, p.Name, j.runnerName)
		if err != nil {
			return nil, err
		}
		if found && sameRunner(p, e, j) {
			return p, nil
		}
	}
	return nil, nil
}

// sameRunner: the runner that took j is e, the deployment's runner of pool p
// of that name: p's scope covers j (as routing matches it), the scope e was
// created in is p's, and e's GitHub id, once recorded, is the delivery's.
func sameRunner(p *pool.Pool, e roster.Runner, j job) bool {
	if e.Scope != "" && e.Scope != p.Scope().String() {
		return false
	}
	if e.GitHubID != 0 && j.runnerID != 0 && e.GitHubID != j.runnerID {
		return false
	}
	return p.Covers(j.route)
}

// nudge asks the sweeper for a reconcile; its failure only shows in the log line.
// A failed nudge is counted in t (NudgeFailures).
func (h *Handler) nudge(ctx context.Context, ev sweepevent.Event, t *tally) slog.Attr {
	if h.nudger == nil {
		return slog.String("nudge", "off")
	}
	if err := h.nudger.Nudge(ctx, ev); err != nil {
		t.nudgeFailed = true
		return slog.String("nudge", "failed: "+err.Error())
	}
	return slog.String("nudge", "sent")
}

type job struct {
	id, runID int64
	action    string
	// status is workflow_job.status: "waiting" in a `queued` of a job held
	// for its environment's approval.
	status string
	route  pool.Job
	// runnerID and runnerName: the runner that took the job (in_progress,
	// completed; "" and 0 while queued).
	runnerID   int64
	runnerName string
	// created is when GitHub created the job, in UTC; zero when the payload
	// does not say, or when the job deploys to an environment (see parseJob).
	created time.Time
	// runAttempt, conclusion, started and completed: as the payload says
	// (zero when it does not, or cannot be parsed: they only inform re-runs).
	runAttempt         int
	conclusion         string
	started, completed time.Time
}

// payload is the part of a workflow_job delivery the handler reads. go-github's
// WorkflowJobEvent lacks the enterprise, and decoding only these fields is cheaper.
type payload struct {
	Action      string `json:"action"`
	WorkflowJob *struct {
		ID         int64    `json:"id"`
		RunID      int64    `json:"run_id"`
		Status     string   `json:"status"`
		Labels     []string `json:"labels"`
		RunnerID   int64    `json:"runner_id"`
		RunnerName string   `json:"runner_name"`
		CreatedAt  string   `json:"created_at"`
		// For re-runs (package rerun).
		RunAttempt  int    `json:"run_attempt"`
		Conclusion  string `json:"conclusion"`
		StartedAt   string `json:"started_at"`
		CompletedAt string `json:"completed_at"`
	} `json:"workflow_job"`
	// Deployment is present for a job that deploys to an environment.
	Deployment json.RawMessage `json:"deployment"`
	Repository struct {
		FullName string `json:"full_name"`
		// Private: absent reads as private, so that no pool refuses the job for being public.
		Private *bool `json:"private"`
		Owner   struct {
			Login string `json:"login"`
			Type  string `json:"type"`
		} `json:"owner"`
	} `json:"repository"`
	Organization struct {
		Login string `json:"login"`
	} `json:"organization"`
	Enterprise struct {
		Slug string `json:"slug"`
	} `json:"enterprise"`
}

func parseJob(body []byte) (job, error) {
	var p payload
	if err := json.Unmarshal(body, &p); err != nil {
		return job{}, fmt.Errorf("body is not a workflow_job payload: %s", jsonProblem(err))
	}
	wj := p.WorkflowJob
	switch {
	case p.Action == "":
		return job{}, errors.New("workflow_job payload has no action")
	case wj == nil || wj.ID == 0:
		return job{}, errors.New("workflow_job payload has no workflow_job.id")
	case len(wj.Labels) == 0:
		return job{}, fmt.Errorf("workflow_job %d has no labels", wj.ID)
	case p.Repository.FullName == "":
		return job{}, fmt.Errorf("workflow_job %d payload has no repository.full_name", wj.ID)
	}
	created, err := createdAt(wj.CreatedAt, p.Deployment)
	if err != nil {
		return job{}, fmt.Errorf("workflow_job %d: %w", wj.ID, err)
	}
	org := p.Organization.Login
	if org == "" && p.Repository.Owner.Type == "Organization" {
		org = p.Repository.Owner.Login
	}
	return job{
		id: wj.ID, runID: wj.RunID, action: p.Action, status: wj.Status, runnerID: wj.RunnerID, runnerName: wj.RunnerName, created: created,
		runAttempt: wj.RunAttempt, conclusion: wj.Conclusion, started: optionalTime(wj.StartedAt), completed: optionalTime(wj.CompletedAt),
		route: pool.Job{Repository: p.Repository.FullName, Organization: org,
			Enterprise: p.Enterprise.Slug, Labels: wj.Labels, Public: p.Repository.Private != nil && !*p.Repository.Private},
	}, nil
}

// createdAt parses workflow_job.created_at (RFC 3339; empty: zero). A job that
// deploys to an environment gets zero too: its environment's protection rules
// can hold it for days before it is queued, so its creation time says nothing
// about whether a `queued` is late.
func createdAt(raw string, deployment json.RawMessage) (time.Time, error) {
	if raw == "" {
		return time.Time{}, nil
	}
	t, err := time.Parse(time.RFC3339, raw)
	if err != nil {
		return time.Time{}, errors.New("created_at is not an RFC 3339 time")
	}
	if len(deployment) > 0 && string(deployment) != "null" {
		return time.Time{}, nil
	}
	return t.UTC(), nil
}

// optionalTime parses an RFC 3339 time (workflow_job.started_at and
// completed_at); zero when it is empty or not a time. These only feed the job's
// queue wait and re-run decisions, which a delivery can go without: unlike a bad
// created_at, a bad one rejects nothing.
func optionalTime(raw string) time.Time {
	t, err := time.Parse(time.RFC3339, raw)
	if err != nil {
		return time.Time{}
	}
	return t.UTC()
}

// hours renders a whole number of hours as "24h".
func hours(d time.Duration) string { return strings.TrimSuffix(d.String(), "0m0s") }

// jsonProblem describes a decoding error in one line without echoing the payload.
func jsonProblem(err error) string {
	var syntax *json.SyntaxError
	var typ *json.UnmarshalTypeError
	switch {
	case errors.As(err, &syntax):
		return fmt.Sprintf("invalid JSON at byte %d", syntax.Offset)
	case errors.As(err, &typ):
		return fmt.Sprintf("field %s has the wrong type (%s, want %s)", typ.Field, typ.Value, typ.Type)
	}
	return "invalid JSON"
}
