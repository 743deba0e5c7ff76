package githubsim

import (
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/runnerscaler/runnerscaler/internal/scope"
)

// JobState is a workflow job's life-cycle state, as in workflow_job deliveries.
type JobState string

// Job states.
const (
	JobQueued     JobState = "queued"
	JobInProgress JobState = "in_progress"
	JobCompleted  JobState = "completed"
)

// JobSpec is a job to queue: where it runs and what it asks for.
type JobSpec struct {
	Repository   string // owner/name
	Organization string // "" for a user's repository
	Enterprise   string
	Labels       []string
	Duration     time.Duration
	// Script, when set, is what the job runs: the fake runner's Runner.Worker (see
	// local/fakerunner) runs it with /bin/sh as the runner's user, in the runner's
	// container, before the rest of Duration; its output and exit code come back
	// with the job's result (Job.Output, Job.ExitCode) and a non-zero exit fails
	// the job. Only runners that speak the /_runner/ protocol run it.
	Script string
	// Name is the job's name in the workflow run ("": "job-<id>" of the job
	// as first queued); its re-runs and copies in later attempts keep it.
	Name string
	// RunID puts the job in an existing workflow run (0: a run of its own), so
	// that a run can hold several jobs (the re-run rules look at the whole run).
	RunID int64
	// Container is the job's `container:` (nil: the job runs on the runner
	// itself) and Services its `services:`. They reach the runner with the job,
	// as GitHub's job message carries them to actions/runner; the fake runner
	// runs a container job through its container hook when the runner has one
	// (ACTIONS_RUNNER_CONTAINER_HOOKS, see local/fakehook), the Script then
	// running in the job container.
	Container *JobContainer
	Services  []JobContainer
}

// JobContainer is a job or service container of a workflow job, as the
// workflow's `container:` / `services.<id>:` give it.
type JobContainer struct {
	Image string
	// Credentials are the registry credentials (`credentials:`), nil for none.
	Credentials *RegistryCredentials
}

// RegistryCredentials log in to the registry of a container's image.
type RegistryCredentials struct {
	Username, Password string
}

// JobConclusion is how a completed job ended, as in workflow_job deliveries.
type JobConclusion string

// Job conclusions.
const (
	JobSuccess   JobConclusion = "success"
	JobFailure   JobConclusion = "failure"
	JobCancelled JobConclusion = "cancelled"
)

// Errors of CompleteJobAs.
var (
	ErrUnknownJob    = errors.New("githubsim: no such job")
	ErrJobNotRunning = errors.New("githubsim: job is not in progress")
)

// Job is a workflow job in the simulator (the Actions service side).
type Job struct {
	JobSpec
	ID, RunID int64
	// RunAttempt is the run's attempt the job belongs to (1, then one more per
	// re-run); RerunOf is the job of the previous attempt it re-runs (0: none);
	// CopyOf is the job of the previous attempt a re-run of other jobs carried
	// into this attempt with its result (0: none; see rerun.go).
	RunAttempt int
	RerunOf    int64
	CopyOf     int64
	// Environment is the environment the job deploys to, whose approval it
	// waited for ("": none; see QueueJobForApproval).
	Environment string
	State       JobState
	Conclusion  JobConclusion // set once completed
	RunnerID    int64
	RunnerName  string
	QueuedAt    time.Time
	StartedAt   time.Time
	EndedAt     time.Time
	// Output is what the job's Script wrote (stdout and stderr, as the runner
	// reported it, at most MaxJobOutput bytes), and ExitCode its exit code.
	Output   string
	ExitCode int
	// ScriptStartedAt is when the runner's worker started the job's Script
	// (its first step: in a container job, after the job's containers were
	// prepared), as the runner reported it with the result (zero: no script,
	// or none reported).
	ScriptStartedAt time.Time
	// LostRunner: the job failed because its runner was removed through the
	// REST API while it ran (possible while the REST busy flag lies, see
	// BusyLie); FailureReason is GitHub's message for it (LostRunnerReason).
	LostRunner    bool
	FailureReason string
}

// MaxJobOutput bounds a job's Output; a runner reporting more is cut there.
const MaxJobOutput = 1 << 20

// Deliverer receives each workflow_job event the simulator emits, with its payload,
// and returns the HTTP status the webhook answered (0 when nothing answered), which
// the App's delivery log records.
type Deliverer func(event, delivery string, payload []byte) int

// OnDelivery sets who receives workflow_job deliveries (the closed loop posts them,
// signed, to the webhook).
func (s *Server) OnDelivery(d Deliverer) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.deliver = d
}

// QueueJob queues a job and emits its `queued` delivery.
func (s *Server) QueueJob(spec JobSpec) Job {
	s.mu.Lock()
	s.nextJob++
	run := spec.RunID
	if run == 0 {
		run = 9_000_000 + s.nextJob
	}
	out := s.queueLocked(&Job{JobSpec: spec, ID: s.nextJob, RunID: run, RunAttempt: 1})
	s.mu.Unlock()
	s.emit(out)
	return out
}

// queueLocked adds j, queued now, and returns a copy; the caller emits its delivery.
func (s *Server) queueLocked(j *Job) Job {
	j.State, j.QueuedAt = JobQueued, s.opts.Clock.Now()
	if j.Name == "" {
		j.Name = "job-" + strconv.FormatInt(j.ID, 10)
	}
	if s.jobs == nil {
		s.jobs = map[int64]*Job{}
	}
	s.jobs[j.ID] = j
	s.notifyLocked()
	return *j
}

// AcquireJob gives runner id the oldest queued job it can run — its scope covers the
// job's repository, its labels include every job label and its runner group
// admits the repository (groups.go) — marking the job in
// progress and the runner busy, and emits the `in_progress` delivery. It returns
// false when there is none (or the runner is busy or offline), and ErrRunnerGone
// when the runner no longer exists.
func (s *Server) AcquireJob(id int64) (Job, bool, error) {
	s.mu.Lock()
	j, ok, err := s.acquireLocked(id)
	s.mu.Unlock()
	if ok {
		s.emit(j)
	}
	return j, ok, err
}

// acquireLocked is AcquireJob under the lock; the caller emits the delivery.
func (s *Server) acquireLocked(id int64) (Job, bool, error) {
	s.expireSessionsLocked()
	rn, ok := s.runners[id]
	if !ok {
		return Job{}, false, ErrRunnerGone
	}
	if rn.Busy || !rn.Online {
		return Job{}, false, nil
	}
	var best *Job
	for _, j := range s.jobs {
		if j.State == JobQueued && covers(rn.Scope, j.JobSpec) && hasLabels(rn.Labels, j.Labels) &&
			s.admitsLocked(rn.Scope.String(), rn.GroupID, j.Repository) && (best == nil || j.ID < best.ID) {
			best = j
		}
	}
	if best == nil {
		return Job{}, false, nil
	}
	best.State, best.RunnerID, best.RunnerName, best.StartedAt = JobInProgress, rn.ID, rn.Name, s.opts.Clock.Now()
	rn.Busy = true
	s.assignLocked(rn, uint64(best.ID))
	return *best, true, nil
}

// CompleteJob ends a job successfully: its runner becomes idle (an ephemeral one is
// removed, as GitHub does) and the `completed` delivery is emitted. Unknown and
// already completed jobs are ignored.
func (s *Server) CompleteJob(jobID int64) {
	_ = s.CompleteJobAs(jobID, JobSuccess)
}

// CompleteJobAs is CompleteJob with the job's conclusion (a cancelled job frees its
// runner like any other). It fails for an unknown job or one not in progress.
func (s *Server) CompleteJobAs(jobID int64, c JobConclusion) error {
	s.mu.Lock()
	j, err := s.completeLocked(jobID, c)
	s.mu.Unlock()
	if err != nil {
		return err
	}
	s.emit(j)
	return nil
}

// completeLocked is CompleteJobAs under the lock; the caller emits the delivery.
func (s *Server) completeLocked(jobID int64, c JobConclusion) (Job, error) {
	j, ok := s.jobs[jobID]
	switch {
	case !ok:
		return Job{}, fmt.Errorf("job %d: %w", jobID, ErrUnknownJob)
	case j.State != JobInProgress:
		return Job{}, fmt.Errorf("job %d is %s: %w", jobID, j.State, ErrJobNotRunning)
	}
	j.State, j.EndedAt, j.Conclusion = JobCompleted, s.opts.Clock.Now(), c
	if rn, ok := s.runners[j.RunnerID]; ok {
		rn.Busy = false
		if rn.Ephemeral {
			delete(s.runners, rn.ID)
			s.forgetRunnerLocked(rn.ID)
		}
	}
	s.notifyLocked()
	return *j, nil
}

// RunningJob returns the job runner id is running right now: the job its agent
// took and whose result it has not reported yet (state in_progress on that runner).
func (s *Server) RunningJob(runnerID int64) (Job, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, j := range s.jobs {
		if j.State == JobInProgress && j.RunnerID == runnerID {
			return *j, true
		}
	}
	return Job{}, false
}

// RunningJobs returns every job some runner is running right now (state
// in_progress), oldest first; RunnerID and RunnerName say which runner.
func (s *Server) RunningJobs() []Job {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []Job
	for _, j := range s.jobs {
		if j.State == JobInProgress {
			out = append(out, *j)
		}
	}
	slices.SortFunc(out, func(a, b Job) int { return int(a.ID - b.ID) })
	return out
}

// Jobs returns a copy of every job.
func (s *Server) Jobs() []Job {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make([]Job, 0, len(s.jobs))
	for _, j := range s.jobs {
		out = append(out, *j)
	}
	slices.SortFunc(out, func(a, b Job) int { return int(a.ID - b.ID) })
	return out
}

func covers(sc scope.Scope, j JobSpec) bool {
	switch sc.Kind() {
	case scope.Enterprise:
		return strings.EqualFold(sc.Enterprise, j.Enterprise)
	case scope.Organization:
		return strings.EqualFold(sc.Organization, j.Organization)
	}
	return strings.EqualFold(sc.Repository, j.Repository)
}

func hasLabels(have, want []string) bool {
	for _, w := range want {
		if !slices.ContainsFunc(have, func(h string) bool { return strings.EqualFold(h, w) }) {
			return false
		}
	}
	return true
}

// emit sends the job's current state as a workflow_job delivery, shaped like
// GitHub's (every field the webhook's schema requires).
func (s *Server) emit(j Job) {
	s.mu.Lock()
	d := s.deliver
	s.mu.Unlock()
	if d == nil || s.losing(j.ID, string(j.State)) {
		return
	}
	raw, _ := json.Marshal(s.workflowJobPayload(j)) // payloads.go
	s.send(d, "workflow_job", string(j.State), "", raw)
}

func nullable(v int64) any {
	if v == 0 {
		return nil
	}
	return v
}

func nullableString(v string) any {
	if v == "" {
		return nil
	}
	return v
}

func itoa(n int64) string {
	b, _ := json.Marshal(n)
	return string(b)
}
