package reconcile

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"

	"github.com/runnerscaler/runnerscaler/internal/githubapi"
	"github.com/runnerscaler/runnerscaler/internal/rerun"
	"github.com/runnerscaler/runnerscaler/internal/runnerpod"
	"github.com/runnerscaler/runnerscaler/internal/scope"
)

// Re-runs (package rerun). Each sweep first records the deaths its pool's pods
// show — a runner container OOM-killed, killed or ended with an error, a pod
// deleted, evicted or lost with its node — once per death and process, so
// that they outlive the pod.
// Then it decides its pool's failed jobs: a job whose runner died under it is
// re-run through GitHub within its workflow run's budget (rerunsPerRun),
// shared by every pool the run's jobs ran in; one whose runner did not is left
// failed. A candidate is acted on only when its runner is on the pool's roster:
// the webhook's role may write a candidate in any pool's partition, and the
// pool's policy, budget and credentials are only for the pool's own runners.

// Reruns is what the reconciler keeps of deaths and failed jobs (rerun.Store).
type Reruns interface {
	RecordDeath(ctx context.Context, d rerun.Death, now time.Time) error
	Deaths(ctx context.Context, runner string) ([]rerun.Death, error)
	Pending(ctx context.Context, pool string) ([]rerun.Candidate, error)
	Charge(ctx context.Context, c rerun.Candidate, max int, now time.Time) (bool, error)
	Claim(ctx context.Context, c rerun.Candidate, from int, now time.Time) (int64, error)
	Calls(ctx context.Context, c rerun.Candidate) (rerun.Calls, error)
	Release(ctx context.Context, c rerun.Candidate, from int) error
	Decide(ctx context.Context, c rerun.Candidate, now time.Time) error
	Later(ctx context.Context, c rerun.Candidate, next time.Time) error
}

// Rerunner re-runs a job through the credentials that serve a scope
// (githubapi.Router). A GitHub without it re-runs nothing.
type Rerunner interface {
	RerunJob(ctx context.Context, s scope.Scope, repo string, jobID int64) error
	// LatestJobs are the jobs of the run's latest attempt: which attempt that
	// is, and the job of it that is a job of an earlier attempt.
	LatestJobs(ctx context.Context, s scope.Scope, repo string, runID int64) ([]githubapi.Job, error)
	// Job is what GitHub says of a job: a candidate is a claim the webhook
	// recorded, and a job is re-run only as GitHub describes it.
	Job(ctx context.Context, s scope.Scope, repo string, jobID int64) (githubapi.Job, error)
}

// errDeathsUnrecorded: a death a pod shows could not be recorded; the sweep
// stops before anything could delete that pod.
var errDeathsUnrecorded = errors.New("runner deaths not recorded: this sweep stops here")

// Back-off of a re-run GitHub refused for now.
const (
	rerunBackoff    = 5 * time.Second
	rerunBackoffMax = 10 * time.Minute
)

// rerunCounts is what the re-run stage did in one sweep, for the metrics.
type rerunCounts struct {
	deaths, rerun, notRerun, refused int
	// delays: for each re-run, the time from the job's completion to the call.
	delays []time.Duration
}

func (r *Reconciler) reruns(ctx context.Context, s *sweep) error {
	if r.opts.Reruns == nil {
		return nil
	}
	var errs []error
	var pods []*corev1.Pod
	for _, rn := range slices.Concat(s.orphans, s.runners) {
		if rn.pod != nil {
			pods = append(pods, rn.pod)
		}
	}
	for _, pod := range pods {
		if err := r.noteDeaths(ctx, s, pod); err != nil {
			errs = append(errs, err)
		}
	}
	if len(errs) > 0 {
		// A death not recorded could be missing from a decision, and the
		// stages after this one could delete the pod that shows it.
		return fmt.Errorf("%w: %w", errDeathsUnrecorded, errors.Join(errs...))
	}
	pending, err := r.opts.Reruns.Pending(ctx, s.p.Name)
	if err != nil {
		return err
	}
	for _, c := range pending {
		if err := r.decideRerun(ctx, s, c); err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

// noteDeaths records the deaths pod shows that this process has not recorded
// (a write is idempotent: after a restart of the process, a death is written
// once more).
func (r *Reconciler) noteDeaths(ctx context.Context, s *sweep, pod *corev1.Pod) error {
	for _, d := range deaths(pod, s.p.IsEphemeral()) {
		key := d.Runner + "/" + d.Key()
		if _, seen := r.deaths.Load(key); seen {
			continue
		}
		if err := r.opts.Reruns.RecordDeath(ctx, d, s.now); err != nil {
			return err
		}
		r.deaths.Store(key, struct{}{})
		s.stats.reruns.deaths++
		s.log.Info("runner died", "runner", d.Runner, "cause", d.Cause, "from", d.From(), "to", d.To(), "deleted", d.Deleted)
	}
	return nil
}

// deaths are the runner deaths pod shows: its deletion while its runner ran
// (Deleted; From: when it was asked, To: the end of its grace period), and its
// runner container's end with an OOM kill or a non-zero exit code — but 143,
// the entrypoint's own end on SIGTERM, in a pod being deleted (the deletion is
// the death then).
func deaths(pod *corev1.Pod, ephemeral bool) []rerun.Death {
	if pod == nil {
		return nil
	}
	var out []rerun.Death
	cs := runnerStatus(pod)
	deleting := pod.DeletionTimestamp != nil
	if deleting {
		end := pod.DeletionTimestamp.Time
		from := end
		if g := pod.DeletionGracePeriodSeconds; g != nil {
			from = end.Add(-time.Duration(*g) * time.Second)
		}
		if !endedBefore(cs, from) {
			out = append(out, rerun.Death{Runner: pod.Name, Cause: deletionCause(pod), FromMillis: from.UnixMilli(), ToMillis: end.UnixMilli(), Deleted: true})
		}
	}
	if d, ok := containerDeath(pod, cs, ephemeral); ok {
		out = append(out, d)
	}
	return out
}

// containerDeath is the runner container's death pod shows, if any. A
// persistent runner's is the end the kubelet shows (From = To). An ephemeral
// runner runs once, in its pod's first container: while the kubelet still shows
// that container's end, that end decides, exactly; otherwise only restarted
// containers show, which repeat the run's outcome later (see
// runner/entrypoint.sh), so the death is bounded by the pod's start and their
// end (Repeated).
func containerDeath(pod *corev1.Pod, cs *corev1.ContainerStatus, ephemeral bool) (rerun.Death, bool) {
	if cs == nil {
		return rerun.Death{}, false
	}
	deleting := pod.DeletionTimestamp != nil
	ends := []*corev1.ContainerStateTerminated{cs.State.Terminated, cs.LastTerminationState.Terminated}
	repeated := false
	if ephemeral {
		if first := firstRun(cs); first != nil {
			ends = []*corev1.ContainerStateTerminated{first}
		} else {
			repeated = true
		}
	}
	for _, t := range ends {
		killed := t != nil && (t.Reason == "OOMKilled" || t.ExitCode == 137)
		if t == nil || neverRan(t) || (t.ExitCode == 0 && !killed) || (deleting && t.ExitCode == 143) {
			continue
		}
		cause := fmt.Sprintf("runner container %s (exit code %d)", t.Reason, t.ExitCode)
		if msg := strings.TrimSpace(t.Message); msg != "" {
			cause += ": " + firstLine(msg)
		}
		d := rerun.Death{Runner: pod.Name, Cause: cause, FromMillis: t.FinishedAt.UnixMilli(), ToMillis: t.FinishedAt.UnixMilli(),
			Killed: killed, Repeated: repeated}
		if repeated && pod.Status.StartTime != nil {
			d.FromMillis = pod.Status.StartTime.UnixMilli()
		}
		return d, true
	}
	return rerun.Death{}, false
}

// neverRan: the end of a container whose process the runtime could not start
// (StartError, ContainerCannotRun): no runner ran in it, so no job died with
// it, and the kubelet starts it again as a first start.
func neverRan(t *corev1.ContainerStateTerminated) bool {
	return t != nil && (t.Reason == "StartError" || t.Reason == "ContainerCannotRun")
}

// firstRun is the end of the pod's first runner container while the kubelet
// still shows it (nil otherwise). The kubelet shows the container's current
// state and the end before it — or, while it waits to restart the container,
// its latest end — and counts the restarts it made; a restarted container that
// repeats the run names the death it repeats in its termination message
// (repeatMessage).
func firstRun(cs *corev1.ContainerStatus) *corev1.ContainerStateTerminated {
	var t *corev1.ContainerStateTerminated
	waiting := cs.State.Waiting != nil
	switch {
	case cs.RestartCount == 0 && waiting:
		t = cs.LastTerminationState.Terminated
	case cs.RestartCount == 0:
		t = cs.State.Terminated
	case cs.RestartCount == 1 && !waiting:
		t = cs.LastTerminationState.Terminated
	}
	if t != nil && strings.HasPrefix(strings.TrimSpace(t.Message), repeatMessage) {
		return nil
	}
	return t
}

// repeatMessage begins the termination message of a restarted ephemeral
// container that repeats its run's non-zero outcome (runner/entrypoint.sh,
// exit_again).
const repeatMessage = "runner died:"

// endedBefore: the runner container is not running and its last run ended
// before t (the kubelet's times have a second's precision).
func endedBefore(cs *corev1.ContainerStatus, t time.Time) bool {
	if cs == nil || cs.State.Running != nil {
		return cs == nil
	}
	end := lastEnd(cs)
	return end != nil && end.FinishedAt.Time.Before(t.Add(-time.Second))
}

// deletionCause names who deleted the pod, as far as its conditions say
// (DisruptionTarget: an eviction, a preemption, its node's taint or loss).
func deletionCause(pod *corev1.Pod) string {
	for _, c := range pod.Status.Conditions {
		if c.Type == corev1.DisruptionTarget && c.Status == corev1.ConditionTrue {
			return "pod deleted: " + c.Reason
		}
	}
	if _, ok := pod.Annotations[runnerpod.AnnotationUnregistrationRequest]; ok {
		return "pod deleted: stopped by the sweeper"
	}
	return "pod deleted"
}

func firstLine(s string) string {
	line, _, _ := strings.Cut(s, "\n")
	return line
}

// decideRerun decides one failed job of the pool (package rerun). The
// candidate is what the webhook recorded of the job's `completed` delivery;
// the deaths are the sweeper's own observations. A job that may have died
// with its runner is then read from GitHub, and decided again by GitHub's
// account of it (verified): only that is re-run.
func (r *Reconciler) decideRerun(ctx context.Context, s *sweep, c rerun.Candidate) error {
	if s.now.Before(c.NextTry()) {
		return nil
	}
	ours, err := r.onRoster(ctx, s, c.Runner)
	switch {
	case err != nil:
		return err
	case !ours:
		return r.settleRerun(ctx, s, c, rerun.NotRerun, notOnRoster)
	}
	deaths, err := r.opts.Reruns.Deaths(ctx, c.Runner)
	if err != nil {
		return err
	}
	starts, err := r.otherStarts(ctx, c, deaths)
	if err != nil {
		return err
	}
	v := rerun.Decide(c, deaths, starts, s.now)
	switch {
	case v.Decision == rerun.Pending:
		return nil
	case len(deaths) == 0:
		return r.settleRerun(ctx, s, c, rerun.NotRerun, v.Reason)
	}
	if why := r.rerunsRefused(s, c); why != "" {
		return r.settleRerun(ctx, s, c, rerun.NotRerun, why)
	}
	job, why, err := r.verified(ctx, s, c)
	switch {
	case err != nil:
		return r.rerunLater(ctx, s, c, err)
	case why != "":
		return r.settleRerun(ctx, s, c, rerun.NotRerun, why)
	}
	c.Conclusion = job.Conclusion
	c.StartedMillis, c.CompletedMillis = unixMillis(job.Started), unixMillis(job.Completed)
	v = rerun.Decide(c, deaths, starts, s.now)
	switch v.Decision {
	case rerun.Pending:
		return nil
	case rerun.NotRerun:
		s.log.Info("the runner's deaths fall outside the job", "job", c.JobID, "started", c.Started(), "completed", c.Completed(),
			"deaths", deaths, "otherJobsStarted", starts)
		return r.settleRerun(ctx, s, c, rerun.NotRerun, v.Reason)
	}
	c.Cause = v.Cause
	return r.rerunJob(ctx, s, c, job.Name)
}

// notOnRoster is the reason a candidate whose runner is not on its pool's
// roster is not re-run.
const notOnRoster = "runner not on this pool's roster"

// onRoster reports whether runner is on the pool's roster. Only then is a candidate naming it the pool's to act on, and every
// GitHub call about its job made with the pool's scope — the credentials of
// the runner's pool.
func (r *Reconciler) onRoster(ctx context.Context, s *sweep, runner string) (bool, error) {
	return r.opts.Roster.Has(ctx, s.p.Name, runner)
}

// otherStarts are when the other jobs c's runner took started (none are read
// when the runner has no death).
func (r *Reconciler) otherStarts(ctx context.Context, c rerun.Candidate, deaths []rerun.Death) ([]time.Time, error) {
	if len(deaths) == 0 {
		return nil, nil
	}
	links, err := r.opts.JobLinks.RunnerJobs(ctx, c.Runner)
	if err != nil {
		return nil, err
	}
	var starts []time.Time
	for _, l := range links {
		if l.JobID != c.JobID && l.StartedMillis != 0 {
			starts = append(starts, time.UnixMilli(l.StartedMillis))
		}
	}
	return starts, nil
}

// rerunsRefused says why the pool re-runs no job of c ("" when it may).
func (r *Reconciler) rerunsRefused(s *sweep, c rerun.Candidate) string {
	_, ok := r.gh.(Rerunner)
	switch {
	case s.p.Reruns() == 0:
		return "re-runs are off for this pool (rerunsPerRun: 0)"
	case !rerun.InScope(s.p.Scope(), c.Repository):
		return fmt.Sprintf("repository %q is outside the pool's scope %s", c.Repository, s.p.Scope())
	case !ok:
		return "this deployment's GitHub client cannot re-run jobs"
	}
	return ""
}

// verified is GitHub's account of c's job. It says why it is not re-run ("" when it
// may be) when GitHub has no such job in c's repository, or says the job did
// not fail, or ran it in another run, attempt or on another runner than the
// candidate claims. An error is GitHub's answer for now (the job still running
// is one): ask again later.
func (r *Reconciler) verified(ctx context.Context, s *sweep, c rerun.Candidate) (githubapi.Job, string, error) {
	job, err := r.gh.(Rerunner).Job(ctx, s.p.Scope(), c.Repository, c.JobID)
	switch {
	case errors.Is(err, githubapi.ErrNotFound):
		return job, fmt.Sprintf("GitHub has no job %d in %s", c.JobID, c.Repository), nil
	case err != nil:
		return job, "", err
	case job.Status != "completed":
		return job, "", fmt.Errorf("GitHub says job %d is %s, not completed", c.JobID, job.Status)
	case !rerun.Failed(job.Conclusion):
		return job, fmt.Sprintf("GitHub says job %d ended %s", c.JobID, job.Conclusion), nil
	case job.RunID != c.RunID || job.RunAttempt != max(c.RunAttempt, 1):
		return job, fmt.Sprintf("GitHub says job %d is of run %d attempt %d, not of run %d attempt %d as recorded",
			c.JobID, job.RunID, job.RunAttempt, c.RunID, max(c.RunAttempt, 1)), nil
	case job.RunnerName != c.Runner:
		return job, fmt.Sprintf("GitHub says job %d ran on runner %q, not on %s as recorded", c.JobID, job.RunnerName, c.Runner), nil
	}
	return job, "", nil
}

func unixMillis(t time.Time) int64 {
	if t.IsZero() {
		return 0
	}
	return t.UnixMilli()
}

// rerunJob re-runs the job of c, whose runner died under it and whose name
// in its run is name, if the pool's budget allows. GitHub re-runs only a job
// of the run's latest attempt, and every re-run makes a new one: the calls
// this deployment recorded say who made each attempt after c's (rerun.Next),
// and c's job is re-run as the latest attempt holds it.
func (r *Reconciler) rerunJob(ctx context.Context, s *sweep, c rerun.Candidate, name string) error {
	rr := r.gh.(Rerunner)
	jobs, err := rr.LatestJobs(ctx, s.p.Scope(), c.Repository, c.RunID)
	if err != nil {
		return r.rerunLater(ctx, s, c, err)
	}
	calls, err := r.opts.Reruns.Calls(ctx, c)
	if err != nil {
		return err
	}
	step := rerun.Next(c, githubapi.LatestAttempt(jobs), calls)
	switch {
	case step.Decision != rerun.Pending:
		return r.settleRerun(ctx, s, c, step.Decision, step.Reason)
	case step.Wait != 0:
		return r.rerunLater(ctx, s, c, rerunWait(step.Reason))
	}
	target, why := jobIn(c, name, step.From, jobs)
	if why != "" {
		return r.settleRerun(ctx, s, c, rerun.NotRerun, why)
	}
	return r.callRerun(ctx, s, c, step.From, target)
}

// callRerun charges the run's budget for c, records the call from attempt
// from, and asks GitHub to re-run target, c's job in that attempt.
func (r *Reconciler) callRerun(ctx context.Context, s *sweep, c rerun.Candidate, from int, target int64) error {
	budget := s.p.Reruns()
	charged, err := r.opts.Reruns.Charge(ctx, c, budget, s.now)
	if err != nil {
		return err
	}
	if !charged {
		return r.settleRerun(ctx, s, c, rerun.NotRerun, fmt.Sprintf("the workflow run's budget of %d re-run(s) is spent (rerunsPerRun)", budget))
	}
	holder, err := r.opts.Reruns.Claim(ctx, c, from, s.now)
	switch {
	case err != nil:
		return err
	case holder != c.JobID:
		return r.rerunLater(ctx, s, c, rerunWait(fmt.Sprintf(
			"waiting for the re-run of job %d from attempt %d: GitHub re-runs a run's jobs one attempt at a time", holder, from)))
	}
	c.Tries++
	err = r.gh.(Rerunner).RerunJob(ctx, s.p.Scope(), c.Repository, target)
	reason := ""
	if target != c.JobID {
		reason = fmt.Sprintf("re-run as job %d of attempt %d, the run's latest after this deployment's re-runs of its other jobs", target, from)
	}
	switch {
	case err == nil:
		s.stats.reruns.delays = append(s.stats.reruns.delays, s.now.Sub(c.Completed()))
		return r.settleRerun(ctx, s, c, rerun.Rerun, reason)
	case refusedForGood(err) || answeredWithError(err) && givenUp(s, c):
		return r.refuseRerun(ctx, s, c, from, err)
	}
	return r.rerunLater(ctx, s, c, err)
}

// refuseRerun records that GitHub refused c's call from attempt from for
// good, or still refused it at rerun.GiveUpAfter. GitHub answered the call, so
// it did not move the run: c's claim on that attempt and its charge are given
// back, and the run's other jobs whose runners died are re-run in turn rather
// than wait behind a call that never moves the run.
func (r *Reconciler) refuseRerun(ctx context.Context, s *sweep, c rerun.Candidate, from int, err error) error {
	if err := r.opts.Reruns.Release(ctx, c, from); err != nil {
		return err
	}
	return r.settleRerun(ctx, s, c, rerun.Refused, err.Error())
}

// givenUp: c has waited rerun.GiveUpAfter since its failure was recorded.
func givenUp(s *sweep, c rerun.Candidate) bool { return s.now.Sub(c.Recorded()) > rerun.GiveUpAfter }

// jobIn is the id of c's job in attempt from of its run, whose latest jobs
// are jobs: c's own in its own attempt; in a later one, the one job of that
// name (GitHub carries a job that was not re-run into the new attempt under
// its name) — or, of several of that name (a matrix whose jobs share one),
// the one carried with c's results: c's runner, and GitHub's start and
// completion of c's job (c's times are GitHub's by then: decideRerun). A
// runner runs one job at a time, so two jobs cannot share all three. It says
// why there is none to re-run ("" when there is).
func jobIn(c rerun.Candidate, name string, from int, jobs []githubapi.Job) (int64, string) {
	if from == max(c.RunAttempt, 1) {
		return c.JobID, ""
	}
	var named []githubapi.Job
	for _, j := range jobs {
		if j.Name == name && j.RunAttempt == from {
			named = append(named, j)
		}
	}
	if len(named) > 1 {
		named = slices.DeleteFunc(named, func(j githubapi.Job) bool {
			return j.RunnerName != c.Runner || unixMillis(j.Started) != c.StartedMillis || unixMillis(j.Completed) != c.CompletedMillis
		})
		if len(named) != 1 {
			return 0, fmt.Sprintf("attempt %d of the run has %d jobs named %q carried from runner %s with this job's times: which one is this job cannot be told",
				from, len(named), name, c.Runner)
		}
	}
	switch {
	case len(named) != 1:
		return 0, fmt.Sprintf("attempt %d of the run has %d jobs named %q: which one is this job cannot be told", from, len(named), name)
	case named[0].Status == "completed" && !rerun.Failed(named[0].Conclusion):
		return 0, fmt.Sprintf("GitHub says this job, job %d in attempt %d, ended %s", named[0].ID, from, named[0].Conclusion)
	}
	return named[0].ID, ""
}

// rerunWait is a re-run that waits for another of its run: asked again later.
type rerunWait string

func (w rerunWait) Error() string { return string(w) }

// rerunLater records that c's re-run is asked again after a back-off, or gives
// up once rerun.GiveUpAfter has passed since the failure: as refused when
// GitHub's last answer was an error status or a rate limit, and as not re-run
// otherwise (it waited for another job's re-run, GitHub still showed the job
// running, or GitHub could not be reached), with the reason it waited.
func (r *Reconciler) rerunLater(ctx context.Context, s *sweep, c rerun.Candidate, err error) error {
	if givenUp(s, c) {
		if answeredWithError(err) {
			return r.settleRerun(ctx, s, c, rerun.Refused, err.Error())
		}
		return r.settleRerun(ctx, s, c, rerun.NotRerun, fmt.Sprintf("gave up after %s: %v", rerun.GiveUpAfter, err))
	}
	c.Reason = err.Error()
	next := s.now.Add(min(rerunBackoff<<min(max(c.Tries-1, 0), 10), rerunBackoffMax))
	if w := rerunWait(""); errors.As(err, &w) {
		s.log.Info("a re-run waits for another of its run", "job", c.JobID, "run", c.RunID, "reason", err, "next", next)
	} else {
		s.log.Warn("GitHub refused a re-run for now: asking again later", "job", c.JobID, "run", c.RunID, "error", err, "next", next)
	}
	return r.opts.Reruns.Later(ctx, c, next)
}

// answeredWithError: GitHub answered the call with an error status or a rate
// limit (not one the client kept to itself).
func answeredWithError(err error) bool {
	var ae *githubapi.APIError
	var rl *githubapi.RateLimitError
	return errors.As(err, &ae) || errors.As(err, &rl) && !rl.Local
}

// refusedForGood: GitHub's answer will not change by asking again — the App
// lacks the `actions: write` permission, the job is not found, or the run is
// over 30 days old. Other refusals (a run still in progress, 5xx, rate limits)
// are asked again, until rerun.GiveUpAfter.
func refusedForGood(err error) bool {
	var ae *githubapi.APIError
	if !errors.As(err, &ae) {
		return false
	}
	msg := strings.ToLower(ae.Message)
	return ae.Status == 404 || ae.Status == 401 || (ae.Status == 403 && (strings.Contains(msg, "not accessible by integration") ||
		strings.Contains(msg, "over a month ago")))
}

// settleRerun writes c's outcome once, logs it and counts it.
func (r *Reconciler) settleRerun(ctx context.Context, s *sweep, c rerun.Candidate, o rerun.Decision, reason string) error {
	c.Decision, c.Reason = o, reason
	err := r.opts.Reruns.Decide(ctx, c, s.now)
	if errors.Is(err, rerun.ErrDecided) {
		return nil // another sweeper decided it first
	}
	if err != nil {
		return err
	}
	log := s.log.With("job", c.JobID, "run", c.RunID, "attempt", c.RunAttempt, "repository", c.Repository, "runner", c.Runner, "conclusion", c.Conclusion)
	switch o {
	case rerun.Rerun:
		s.stats.reruns.rerun++
		log.Info("job re-run: its runner died under it", "cause", c.Cause, "afterFailure", s.now.Sub(c.Completed()).Round(time.Millisecond))
	case rerun.Refused:
		s.stats.reruns.refused++
		log.Error("GitHub refused to re-run a job whose runner died under it (the App needs the `actions: write` permission to re-run jobs)",
			"cause", c.Cause, "error", reason)
	default:
		s.stats.reruns.notRerun++
		log.Info("failed job not re-run", "reason", reason, "cause", c.Cause)
	}
	return nil
}
