package githubsim

import (
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"
)

// Environment approvals. A job that deploys to an environment with required
// reviewers is created waiting: GitHub sends `queued` (its workflow_job.status
// already "waiting", and with the deployment) and then `waiting`, and no runner
// gets it. Once a reviewer approves, GitHub sends `queued` again, as a delivery
// of its own, and the job runs like any other. Every delivery of such a job
// carries its deployment.

// JobWaiting is the state of a job held for its environment's approval.
const JobWaiting JobState = "waiting"

// ErrJobNotWaiting: Approve of a job that is not waiting for an approval.
var ErrJobNotWaiting = errors.New("githubsim: job is not waiting for an approval")

// QueueJobForApproval creates a job that deploys to environment, whose required
// reviewers hold it: it sends the job's `queued` and `waiting` deliveries (or
// the actions given, in order), and no runner can take it until Approve.
func (s *Server) QueueJobForApproval(spec JobSpec, environment string, deliveries ...string) Job {
	s.mu.Lock()
	s.nextJob++
	run := spec.RunID
	if run == 0 {
		run = 9_000_000 + s.nextJob
	}
	j := &Job{JobSpec: spec, ID: s.nextJob, RunID: run, RunAttempt: 1, Environment: environment,
		State: JobWaiting, QueuedAt: s.opts.Clock.Now()}
	if s.jobs == nil {
		s.jobs = map[int64]*Job{}
	}
	s.jobs[j.ID] = j
	out := *j
	s.mu.Unlock()
	if deliveries == nil {
		deliveries = []string{"queued", string(JobWaiting)}
	}
	for _, action := range deliveries {
		s.emitAs(out, action)
	}
	return out
}

// Approve approves the waiting job jobID: it is queued for a runner and its
// second `queued` delivery is sent. It fails for an unknown job or one that is
// not waiting.
func (s *Server) Approve(jobID int64) error {
	s.mu.Lock()
	j, ok := s.jobs[jobID]
	switch {
	case !ok:
		s.mu.Unlock()
		return fmt.Errorf("job %d: %w", jobID, ErrUnknownJob)
	case j.State != JobWaiting:
		s.mu.Unlock()
		return fmt.Errorf("job %d is %s: %w", jobID, j.State, ErrJobNotWaiting)
	}
	j.State = JobQueued
	s.notifyLocked()
	out := *j
	s.mu.Unlock()
	s.emit(out)
	return nil
}

// QueueJobForEnvironment creates a job that deploys to environment, which
// has protection rules but no required reviewers: GitHub is reported to send
// its `queued` twice, about 200 ms apart (gap) — the first while the rules
// are evaluated, its workflow_job.status already "waiting", the second once
// they passed — and no `waiting`. The job can be taken once the second is
// sent.
func (s *Server) QueueJobForEnvironment(spec JobSpec, environment string, gap time.Duration) Job {
	j := s.QueueJobForApproval(spec, environment, "queued")
	time.Sleep(gap)
	if err := s.Approve(j.ID); err != nil {
		panic(fmt.Sprintf("githubsim: approving job %d, created waiting: %v", j.ID, err))
	}
	return j
}

// LoseDelivery makes GitHub never send the nth (from 1) workflow_job
// delivery of action about job: lost for good, it is in no delivery log
// either, so no redelivery brings it (a delivery GitHub failed to deliver is
// logged and can be redelivered).
func (s *Server) LoseDelivery(job int64, action string, nth int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.dropped == nil {
		s.dropped = map[lostKey]int{}
	}
	s.dropped[lostKey{job, action}] = nth
}

// lostKey names a job's deliveries of one action.
type lostKey struct {
	job    int64
	action string
}

// losing counts j's delivery of action and reports whether it is one
// LoseDelivery lost.
func (s *Server) losing(job int64, action string) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	k := lostKey{job, action}
	if s.sent == nil {
		s.sent = map[lostKey]int{}
	}
	s.sent[k]++
	return s.dropped[k] != 0 && s.dropped[k] == s.sent[k]
}

// emitAs sends j's current state as a workflow_job delivery of action.
func (s *Server) emitAs(j Job, action string) {
	s.mu.Lock()
	d := s.deliver
	s.mu.Unlock()
	if d == nil || s.losing(j.ID, action) {
		return
	}
	p := s.workflowJobPayload(j)
	p["action"] = action
	raw, _ := json.Marshal(p)
	s.send(d, "workflow_job", action, "", raw)
}

// deploymentJSON is the deployment of a job to its environment, as its
// deliveries carry it.
func deploymentJSON(j Job, creator map[string]any) map[string]any {
	id := objectID("deployment", strconv.FormatInt(j.ID, 10))
	repoURL := apiURL + "/repos/" + j.Repository
	u := repoURL + "/deployments/" + strconv.FormatInt(id, 10)
	return map[string]any{
		"id": id, "node_id": "DE_sim" + strconv.FormatInt(id, 10), "task": "deploy", "environment": j.Environment,
		"original_environment": j.Environment, "description": nil, "payload": map[string]any{},
		"sha": strings.Repeat("0", 40), "ref": "main", "creator": creator,
		"created_at": stamp(j.QueuedAt), "updated_at": stamp(j.QueuedAt),
		"transient_environment": false, "production_environment": false,
		"url": u, "statuses_url": u + "/statuses", "repository_url": repoURL,
	}
}
