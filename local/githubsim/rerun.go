package githubsim

import (
	"fmt"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"time"
)

// Re-runs of workflow jobs, as GitHub's REST API does them:
//
//	POST /repos/{owner}/{repo}/actions/jobs/{job_id}/rerun            one job
//	POST /repos/{owner}/{repo}/actions/runs/{run_id}/rerun-failed-jobs every failed or cancelled job of the run's latest attempt
//	GET  /repos/{owner}/{repo}/actions/runs/{run_id}/jobs             the jobs of the run's latest attempt (or of all)
//	GET  /repos/{owner}/{repo}/actions/jobs/{job_id}                  one job, of any attempt
//
// A re-run starts a new attempt of the workflow run: each re-run job is queued
// again as a new job (a new id, the run's next run_attempt) and its `queued`
// delivery is sent; 201 with an empty object. GitHub's rules, each answered 403
// as GitHub answers it:
//   - a run still in progress (a job of it queued or running) cannot re-run a
//     job of it (cli/cli#9221 shows GitHub's 403 for it; the message is ours);
//   - a run created over 30 days ago cannot be re-run (GitHub's message);
//   - a run re-runs at most 50 times (GitHub's documented limit; the message is
//     ours);
//   - an App needs the `actions: write` permission (Options.ActionsReadOnly
//     takes it away): "Resource not accessible by integration".
//
// A job or run not in the repository of the path is 404.

// Limits of re-runs (GitHub's documentation, "Re-running workflows and jobs").
const (
	MaxRunAttempts = 50
	RerunWindow    = 30 * 24 * time.Hour
)

// Messages of refused re-runs.
const (
	msgRunInProgress = "This workflow run is not completed: a job of it can be re-run once every job has completed."
	msgRunTooOld     = "Unable to retry this workflow run because it was created over a month ago"
	msgTooManyRuns   = "This workflow run has been re-run the maximum number of times."
	msgNoPermission  = "Resource not accessible by integration"
)

func (s *Server) rerunRoutes() {
	s.handle("POST /repos/{owner}/{repo}/actions/jobs/{job_id}/rerun", s.authed(s.rerunJob))
	s.handle("POST /repos/{owner}/{repo}/actions/runs/{run_id}/rerun-failed-jobs", s.authed(s.rerunFailedJobs))
	s.handle("GET /repos/{owner}/{repo}/actions/runs/{run_id}/jobs", s.authed(s.runJobs))
	s.handle("GET /repos/{owner}/{repo}/actions/jobs/{job_id}", s.authed(s.getJob))
}

// getJob: GET /repos/{owner}/{repo}/actions/jobs/{job_id} — one job, of any
// attempt; 404 for a job not in the repository of the path.
func (s *Server) getJob(w http.ResponseWriter, r *http.Request) {
	id, err := strconv.ParseInt(r.PathValue("job_id"), 10, 64)
	if err != nil {
		writeError(w, http.StatusNotFound, "Not Found")
		return
	}
	s.mu.Lock()
	j, ok := s.jobs[id]
	var job Job
	if ok && sameRepo(j.Repository, r) {
		job = *j
	}
	s.mu.Unlock()
	if job.ID == 0 {
		writeError(w, http.StatusNotFound, "Not Found")
		return
	}
	writeJSON(w, http.StatusOK, s.workflowJobPayload(job)["workflow_job"])
}

// runJobs: GET /repos/{owner}/{repo}/actions/runs/{run_id}/jobs — the jobs of
// the run's latest attempt (filter=latest, the default) or of every attempt
// (filter=all), one page.
func (s *Server) runJobs(w http.ResponseWriter, r *http.Request) {
	run, err := strconv.ParseInt(r.PathValue("run_id"), 10, 64)
	if err != nil {
		writeError(w, http.StatusNotFound, "Not Found")
		return
	}
	s.mu.Lock()
	all := s.runJobsLocked(run)
	var jobs []Job
	if len(all) > 0 && sameRepo(all[0].Repository, r) {
		latest := all[len(all)-1].RunAttempt
		for _, j := range all {
			if r.URL.Query().Get("filter") == "all" || j.RunAttempt == latest {
				jobs = append(jobs, *j)
			}
		}
	}
	s.mu.Unlock()
	if len(jobs) == 0 {
		writeError(w, http.StatusNotFound, "Not Found")
		return
	}
	out := make([]any, 0, len(jobs))
	for _, j := range jobs {
		out = append(out, s.workflowJobPayload(j)["workflow_job"]) // payloads.go: the REST job's fields
	}
	writeJSON(w, http.StatusOK, map[string]any{"total_count": len(out), "jobs": out})
}

func (s *Server) actionsPermission() string {
	if s.opts.ActionsReadOnly {
		return "read"
	}
	return "write"
}

// rerunJob: POST /repos/{owner}/{repo}/actions/jobs/{job_id}/rerun.
func (s *Server) rerunJob(w http.ResponseWriter, r *http.Request) {
	id, err := strconv.ParseInt(r.PathValue("job_id"), 10, 64)
	if err != nil {
		writeError(w, http.StatusNotFound, "Not Found")
		return
	}
	s.rerun(w, r, func() []*Job {
		if j, ok := s.jobs[id]; ok && sameRepo(j.Repository, r) {
			return []*Job{j}
		}
		return nil
	})
}

// rerunFailedJobs: POST /repos/{owner}/{repo}/actions/runs/{run_id}/rerun-failed-jobs.
func (s *Server) rerunFailedJobs(w http.ResponseWriter, r *http.Request) {
	run, err := strconv.ParseInt(r.PathValue("run_id"), 10, 64)
	if err != nil {
		writeError(w, http.StatusNotFound, "Not Found")
		return
	}
	s.rerun(w, r, func() []*Job {
		jobs := s.runJobsLocked(run)
		if len(jobs) == 0 || !sameRepo(jobs[0].Repository, r) {
			return nil
		}
		latest := jobs[len(jobs)-1].RunAttempt
		var failed []*Job
		for _, j := range jobs {
			if j.RunAttempt == latest && (j.Conclusion == JobFailure || j.Conclusion == JobCancelled) {
				failed = append(failed, j)
			}
		}
		if failed == nil {
			return jobs[:1] // the run exists; the rules below answer for it
		}
		return failed
	})
}

// rerun re-runs the jobs pick returns (nil: 404) under GitHub's rules.
func (s *Server) rerun(w http.ResponseWriter, r *http.Request, pick func() []*Job) {
	identity, _, _ := s.identity(r)
	if strings.HasPrefix(identity, "installation/") && s.opts.ActionsReadOnly {
		writeError(w, http.StatusForbidden, msgNoPermission)
		return
	}
	s.mu.Lock()
	jobs := pick()
	if len(jobs) == 0 {
		s.mu.Unlock()
		writeError(w, http.StatusNotFound, "Not Found")
		return
	}
	if msg := s.refuseRerunLocked(jobs[0].RunID); msg != "" {
		s.mu.Unlock()
		writeError(w, http.StatusForbidden, msg)
		return
	}
	attempt := s.latestAttemptLocked(jobs[0].RunID) + 1
	var queued []Job
	for _, old := range jobs {
		if old.State != JobCompleted {
			continue
		}
		s.nextJob++
		spec := old.JobSpec
		spec.RunID = old.RunID
		queued = append(queued, s.queueLocked(&Job{JobSpec: spec, ID: s.nextJob, RunID: old.RunID, RunAttempt: attempt, RerunOf: old.ID}))
	}
	s.mu.Unlock()
	for _, j := range queued {
		s.emit(j)
	}
	writeJSON(w, http.StatusCreated, map[string]any{})
}

// refuseRerunLocked is GitHub's reason not to re-run a job of run, or "".
func (s *Server) refuseRerunLocked(run int64) string {
	jobs := s.runJobsLocked(run)
	switch {
	case slices.ContainsFunc(jobs, func(j *Job) bool { return j.State != JobCompleted }):
		return msgRunInProgress
	case s.opts.Clock.Now().Sub(jobs[0].QueuedAt) > RerunWindow:
		return msgRunTooOld
	case s.latestAttemptLocked(run) >= MaxRunAttempts:
		return msgTooManyRuns
	}
	return ""
}

// runJobsLocked returns the jobs of run, every attempt, oldest first.
func (s *Server) runJobsLocked(run int64) []*Job {
	var out []*Job
	for _, j := range s.jobs {
		if j.RunID == run {
			out = append(out, j)
		}
	}
	slices.SortFunc(out, func(a, b *Job) int { return int(a.ID - b.ID) })
	return out
}

func (s *Server) latestAttemptLocked(run int64) int {
	n := 0
	for _, j := range s.runJobsLocked(run) {
		n = max(n, j.RunAttempt)
	}
	return n
}

func sameRepo(repo string, r *http.Request) bool {
	return strings.EqualFold(repo, r.PathValue("owner")+"/"+r.PathValue("repo"))
}

// Reruns returns, for each job re-run, the jobs that re-ran it (first attempt
// first), keyed by the job of the first attempt.
func (s *Server) Reruns() map[int64][]int64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	first := func(j *Job) int64 {
		for j.RerunOf != 0 {
			prev, ok := s.jobs[j.RerunOf]
			if !ok {
				break
			}
			j = prev
		}
		return j.ID
	}
	out := map[int64][]int64{}
	for _, j := range s.jobs {
		if j.RerunOf != 0 {
			out[first(j)] = append(out[first(j)], j.ID)
		}
	}
	for _, ids := range out {
		slices.Sort(ids)
	}
	return out
}

// String names a job for messages: its id, run and attempt.
func (j Job) String() string {
	return fmt.Sprintf("job %d (run %d, attempt %d)", j.ID, j.RunID, max(j.RunAttempt, 1))
}
