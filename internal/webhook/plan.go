package webhook

import (
	"context"
	"fmt"
	"log/slog"
	"net/http"
	"slices"
	"strings"
	"time"

	"github.com/runnerscaler/runnerscaler/internal/pool"
	"github.com/runnerscaler/runnerscaler/internal/rerun"
	"github.com/runnerscaler/runnerscaler/internal/reservation"
	"github.com/runnerscaler/runnerscaler/internal/sweepevent"
)

// A workflow_job delivery is handled in three parts: the reads that deciding
// it needs (facts: where routing sends the job, where an earlier delivery
// recorded it, whose runner took it), a pure decision of everything it writes
// and whom it nudges (plan), and the writes in their order (apply), each step
// adding its log attributes and counting its metrics once its write is done.
// Some writes are planned on the condition of an earlier one's answer — the
// queue wait and the nudge once the reservation is applied, the runner
// pool's nudge once the count moved — and apply checks only that condition.

// facts are what a delivery's plan is decided from.
type facts struct {
	job      job
	delivery string
	state    reservation.State
	// pool is the pool whose reservation the delivery records (nil: none
	// matched), and why routing gave no pool or skipped some.
	pool *pool.Pool
	why  string
	// runnerPool is the pool of the deployment's runner that took the job
	// (nil: none of the deployment's runners did).
	runnerPool *pool.Pool
}

// deliveryPlan is everything a delivery writes, in the order apply writes it.
type deliveryPlan struct {
	state reservation.State
	job   job
	// link: record the job↔runner link under the runner (reservation.Store.RecordRunner).
	link bool
	// failure: a job that failed or was cancelled on one of the runners, for
	// the sweeper's re-run decision (nil: none).
	failure *rerun.Candidate
	// unrouted: a job that asked for a self-hosted runner and matched no pool
	// (nil: none, or the job is routed).
	unrouted *reservation.Unrouted
	// reservation is the delivery recorded in pool (nil pool: none); why is
	// routing's answer when there is no pool.
	pool        *pool.Pool
	why         string
	reservation reservation.Delivery
	// follow: move the job's count to runnerPool, the pool of its runner;
	// followNudge: the sweep asked for once the count moved (nil: none).
	follow      bool
	runnerPool  *pool.Pool
	followNudge *sweepevent.Event
	// queueWait: keep the job's queue wait once its in_progress is applied.
	queueWait bool
	// nudge: the sweep the delivery asks for once what it records is
	// applied (nil: none).
	nudge *sweepevent.Event
}

// plan decides what a delivery writes: a pure function of the facts.
func plan(f facts) deliveryPlan {
	j, p := f.job, f.pool
	dp := deliveryPlan{state: f.state, job: j, pool: p, why: f.why, runnerPool: f.runnerPool,
		reservation: reservation.Delivery{JobID: j.id, RunID: j.runID, Repository: j.route.Repository, DeliveryID: f.delivery,
			State: f.state, RunnerID: j.runnerID, RunnerName: j.runnerName, Created: j.created,
			AwaitsApproval: f.state == reservation.Queued && j.status == "waiting"}}
	if p != nil {
		dp.reservation.Pool = p.Name
		dp.reservation.Amount, dp.reservation.Duration = p.Trigger()
		dp.reservation.Labels, dp.reservation.Organization, dp.reservation.Enterprise = j.route.Labels, j.route.Organization, j.route.Enterprise
	}
	dp.link = f.runnerPool != nil && f.state >= reservation.InProgress
	if f.runnerPool != nil && f.state == reservation.Completed && rerun.Failed(j.conclusion) {
		dp.failure = &rerun.Candidate{Pool: f.runnerPool.Name, JobID: j.id, RunID: j.runID, RunAttempt: j.runAttempt,
			Repository: j.route.Repository, Runner: j.runnerName, Conclusion: j.conclusion,
			StartedMillis: unixMillis(j.started), CompletedMillis: unixMillis(j.completed)}
	}
	if p == nil && f.state != reservation.Waiting && selfHosted(j) {
		dp.unrouted = &reservation.Unrouted{JobID: j.id, Repository: j.route.Repository, Labels: j.route.Labels,
			Reason: f.why, DeliveryID: f.delivery, State: f.state, Created: j.created}
	}
	dp.follow = follows(p, f.runnerPool, f.state, j)
	if dp.follow && f.state == reservation.InProgress {
		// The runner's pool counts the job now, besides the job its runner
		// was created for, which needs another runner: its sweep is asked for.
		dp.followNudge = &sweepevent.Event{Pool: f.runnerPool.Name}
	}
	dp.queueWait = p != nil && f.state == reservation.InProgress
	dp.nudge = nudgeFor(p, f.runnerPool, f.state, j)
	return dp
}

// selfHosted: the job asked for a self-hosted runner (a job for GitHub-hosted
// runners is none of the deployment's business).
func selfHosted(j job) bool {
	return slices.ContainsFunc(j.route.Labels, func(l string) bool { return strings.EqualFold(l, "self-hosted") })
}

// follows: the job's count moves to the pool of the runner that took it
// (followRunner). A runner's pool that does not take the job (scope and
// labels) gets none of its jobs from GitHub: it is not followed. A job on a
// runner of its own pool is counted elsewhere only when its pool spilled it,
// and a `completed` ends the count wherever it is.
func follows(p, runnerPool *pool.Pool, state reservation.State, j job) bool {
	switch {
	case p == nil || runnerPool == nil || state < reservation.InProgress || !runnerPool.Takes(j.route):
		return false
	case runnerPool.Name == p.Name:
		return state != reservation.Completed && p.OverflowTo != ""
	}
	return true
}

// nudgeFor says whom a delivery nudges: a queued job its pool p, for its runner to
// be created; a job completed on one of our runners that runner's pool (whatever
// pool the job was routed to), so that the slot an ephemeral runner frees is
// refilled at once and a runner whose stop waited for this job is unregistered
// at once, before GitHub can hand it another job (while jobs wait for the
// pool, the sweeper replaces the runner at once once the link this delivery
// recorded shows its job completed; it stops the runner once its container
// exited, and does nothing at once when no job waits and no named runner is
// being stopped). A job completed on no runner of ours nudges
// nobody, and an in_progress only through its move (followNudge).
func nudgeFor(p, runnerPool *pool.Pool, state reservation.State, j job) *sweepevent.Event {
	switch {
	case state == reservation.Queued && p != nil:
		return &sweepevent.Event{Pool: p.Name, Jobs: []int64{j.id}}
	case state == reservation.Completed && runnerPool != nil:
		return &sweepevent.Event{Pool: runnerPool.Name, Finished: []string{j.runnerName}}
	}
	return nil
}

func unixMillis(t time.Time) int64 {
	if t.IsZero() {
		return 0
	}
	return t.UnixMilli()
}

// applying is one delivery's plan under way: what its steps recorded, the
// log attributes they added, the metric tally, and the response once a step
// ends the delivery.
type applying struct {
	plan    deliveryPlan
	outcome reservation.Outcome
	attrs   []slog.Attr
	tally   tally
	resp    *Response
}

// step is one write of a plan; what is the 503's reason when it fails.
type step struct {
	what string
	run  func(ctx context.Context, a *applying) error
}

// apply writes dp, step by step; a step that fails answers 503, for GitHub
// to redeliver, and the steps after it are not run.
func (h *Handler) apply(ctx context.Context, dp deliveryPlan, attrs []slog.Attr) (Response, []slog.Attr, tally) {
	a := &applying{plan: dp, attrs: attrs}
	for _, s := range h.steps() {
		if err := s.run(ctx, a); err != nil {
			a.attrs = append(a.attrs, slog.String("error", err.Error()))
			return Response{http.StatusServiceUnavailable, s.what + " failed; redeliver later"}, a.attrs, tally{outcome: outcomeUnavailable}
		}
		if a.resp != nil {
			return *a.resp, a.attrs, a.tally
		}
	}
	return Response{http.StatusInternalServerError, "no step answered"}, a.attrs, a.tally
}

// steps are a plan's writes, in order.
func (h *Handler) steps() []step {
	return []step{
		{"storing the runner's job", h.stepLink},
		{"storing the failed job", h.stepFailure},
		{"keeping the unrouted job", h.stepNoPool},
		{"storing the reservation", h.stepRecord},
		{"moving the job's count to its runner's pool", h.stepFollow},
		{"answering", h.stepAnswer},
	}
}

func (h *Handler) stepLink(ctx context.Context, a *applying) error {
	if !a.plan.link {
		return nil
	}
	a.attrs = append(a.attrs, slog.String("runnerPool", a.plan.runnerPool.Name))
	_, err := h.store.RecordRunner(ctx, a.plan.reservation)
	return err
}

func (h *Handler) stepFailure(ctx context.Context, a *applying) error {
	if a.plan.failure == nil || h.failures == nil {
		return nil
	}
	fresh, err := h.failures.Record(ctx, *a.plan.failure, h.clock.Now())
	if err == nil {
		a.attrs = append(a.attrs, slog.Bool("failureRecorded", fresh))
	}
	return err
}

// stepNoPool ends a delivery no pool matched: it keeps the job as unrouted
// (a failure only shows in the log line: the delivery reserves nothing) and
// nudges its runner's pool.
func (h *Handler) stepNoPool(ctx context.Context, a *applying) error {
	if a.plan.pool != nil {
		return nil
	}
	a.attrs = append(a.attrs, slog.String("outcome", outcomeNoPool))
	a.tally.outcome = outcomeNoPool
	if rec, ok := h.store.(UnroutedRecorder); ok && a.plan.unrouted != nil {
		if err := rec.RecordUnrouted(ctx, *a.plan.unrouted); err != nil {
			a.attrs = append(a.attrs, slog.String("unrouted", "not kept: "+err.Error()))
		}
	}
	if a.plan.nudge != nil {
		a.attrs = append(a.attrs, h.nudge(ctx, *a.plan.nudge, &a.tally))
	}
	a.resp = &Response{http.StatusAccepted, "no matching pool: " + a.plan.why}
	return nil
}

// stepRecord records the reservation; a `queued` too old to record ends the
// delivery.
func (h *Handler) stepRecord(ctx context.Context, a *applying) error {
	p := a.plan.pool
	a.attrs = append(a.attrs, slog.String("pool", p.Name))
	out, err := h.store.Record(ctx, a.plan.reservation)
	if err != nil {
		return err
	}
	a.outcome, a.tally.outcome = out, out.String()
	a.attrs = append(a.attrs, slog.String("outcome", out.String()))
	if out == reservation.TooOld {
		j := a.plan.job
		a.resp = &Response{http.StatusOK, fmt.Sprintf("%s job %d: stale: job created %s, over %s ago; not recorded for pool %s",
			a.plan.state, j.id, j.created.Format(time.RFC3339), hours(reservation.DefaultRetention), p.Name)}
	}
	return nil
}

func (h *Handler) stepFollow(ctx context.Context, a *applying) error {
	if !a.plan.follow {
		return nil
	}
	attrs, err := h.followRunner(ctx, a.plan, &a.tally)
	a.attrs = append(a.attrs, attrs...)
	return err
}

// stepAnswer writes what follows a recorded reservation: the job's queue wait
// (an in_progress applied), the nudge (a delivery applied or released), the
// approval's metric; and answers 200.
func (h *Handler) stepAnswer(ctx context.Context, a *applying) error {
	p, state, j := a.plan.pool, a.plan.state, a.plan.job
	if a.plan.queueWait && a.outcome == reservation.Applied {
		a.attrs = append(a.attrs, h.queueWait(ctx, p.Name, j)...)
	}
	if a.plan.nudge != nil && (a.outcome == reservation.Applied || a.outcome == reservation.Released) {
		a.attrs = append(a.attrs, h.nudge(ctx, *a.plan.nudge, &a.tally))
	}
	h.countApproval(ctx, p.Name, a.outcome)
	a.resp = &Response{http.StatusOK, fmt.Sprintf("%s job %d: %s for pool %s", state, j.id, a.outcome, p.Name)}
	return nil
}
