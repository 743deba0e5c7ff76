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
// Documented by GitHub ("Re-running workflows and jobs", and the REST
// reference of these endpoints): a re-run of one job, or of a run's failed
// jobs, starts a new attempt of the workflow run; 201 with an empty object;
// a run is re-run up to 30 days after it was created and at most 50 times;
// an App needs the `actions: write` permission. Each re-run job is queued
// again as a new job (a new id, the run's next run_attempt) and its `queued`
// delivery is sent. (GitHub also re-runs the jobs that depend on a re-run
// job; the simulator's runs have no dependencies.)
//
// Not documented, taken from GitHub's answers quoted in public issue threads
// (each answered 403 with the message quoted):
//   - a run still in progress (a job of it queued or running) cannot re-run a
//     job of it: "The workflow run containing this job is already running";
//   - only a job of the run's latest attempt is re-run: after a re-run of
//     another job moved the run to a new attempt, a job of the earlier attempt
//     is refused, "Only jobs from the current attempt can be re-run".
//
// Assumed (GitHub's interface shows the jobs of an attempt that were not re-run
// with their results, which a user's report describes as cloned into the new
// attempt): the new attempt holds, beside the re-run jobs, a copy of each other
// job of the previous attempt, completed as it was, under its name, with a new
// id and the new run_attempt (CopyOf); a copy sends no delivery. That copy of a
// failed job is what a later re-run of it names. The 403 for a run over 30
// days old carries GitHub's message as quoted in public threads; the 403 for
// 50 attempts a message of our own.
//
// A job or run not in the repository of the path is 404.

// Limits of re-runs (GitHub's documentation, "Re-running workflows and jobs").
const (
	MaxRunAttempts = 50
	RerunWindow    = 30 * 24 * time.Hour
)

// Messages of refused re-runs.
const (
	msgRunInProgress = "The workflow run containing this job is already running"
	msgOlderAttempt  = "Only jobs from the current attempt can be re-run"
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
// (filter=all), with per_page/page and a Link to the next page, as GitHub pages it.
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
	perPage, page := intParam(r, "per_page", 30, 1, 100), intParam(r, "page", 1, 1, 1<<30)
	from, to := min((page-1)*perPage, len(jobs)), min(page*perPage, len(jobs))
	out := make([]any, 0, to-from)
	for _, j := range jobs[from:to] {
		out = append(out, s.workflowJobPayload(j)["workflow_job"]) // payloads.go: the REST job's fields
	}
	if to < len(jobs) {
		filter := r.URL.Query().Get("filter")
		if filter == "" {
			filter = "latest"
		}
		w.Header().Set("Link", fmt.Sprintf(`<%s?filter=%s&per_page=%d&page=%d>; rel="next"`, linkBase(r), filter, perPage, page+1))
	}
	writeJSON(w, http.StatusOK, map[string]any{"total_count": len(jobs), "jobs": out})
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
	s.rerun(w, r, func() ([]*Job, string) {
		j, ok := s.jobs[id]
		switch {
		case !ok || !sameRepo(j.Repository, r):
			return nil, ""
		case j.RunAttempt != s.latestAttemptLocked(j.RunID):
			return []*Job{j}, msgOlderAttempt
		}
		return []*Job{j}, ""
	})
}

// rerunFailedJobs: POST /repos/{owner}/{repo}/actions/runs/{run_id}/rerun-failed-jobs.
func (s *Server) rerunFailedJobs(w http.ResponseWriter, r *http.Request) {
	run, err := strconv.ParseInt(r.PathValue("run_id"), 10, 64)
	if err != nil {
		writeError(w, http.StatusNotFound, "Not Found")
		return
	}
	s.rerun(w, r, func() ([]*Job, string) {
		jobs := s.runJobsLocked(run)
		if len(jobs) == 0 || !sameRepo(jobs[0].Repository, r) {
			return nil, ""
		}
		latest := jobs[len(jobs)-1].RunAttempt
		var failed []*Job
		for _, j := range jobs {
			if j.RunAttempt == latest && (j.Conclusion == JobFailure || j.Conclusion == JobCancelled) {
				failed = append(failed, j)
			}
		}
		if failed == nil {
			return jobs[:1], "" // the run exists; the rules below answer for it
		}
		return failed, ""
	})
}

// rerun re-runs the jobs pick returns (nil: 404; a message: GitHub's refusal
// of them, 403) under GitHub's rules, as one new attempt of their run that
// also holds a copy of each other job of the run's latest attempt.
func (s *Server) rerun(w http.ResponseWriter, r *http.Request, pick func() ([]*Job, string)) {
	identity, _, _ := s.identity(r)
	if strings.HasPrefix(identity, "installation/") && s.opts.ActionsReadOnly {
		writeError(w, http.StatusForbidden, msgNoPermission)
		return
	}
	s.mu.Lock()
	jobs, refusal := pick()
	if len(jobs) == 0 {
		s.mu.Unlock()
		writeError(w, http.StatusNotFound, "Not Found")
		return
	}
	if refusal == "" {
		refusal = s.refuseRerunLocked(jobs[0].RunID)
	}
	if refusal != "" {
		s.mu.Unlock()
		writeError(w, http.StatusForbidden, refusal)
		return
	}
	queued := s.nextAttemptLocked(jobs)
	s.mu.Unlock()
	for _, j := range queued {
		s.emit(j)
	}
	writeJSON(w, http.StatusCreated, map[string]any{})
}

// nextAttemptLocked starts the run's next attempt: the completed jobs of
// rerun queued again, each other job of the latest attempt copied with its
// result. It returns the jobs queued, whose deliveries the caller emits.
func (s *Server) nextAttemptLocked(rerun []*Job) []Job {
	run := rerun[0].RunID
	latest := s.latestAttemptLocked(run)
	var queued []Job
	for _, old := range s.runJobsLocked(run) {
		if old.RunAttempt != latest {
			continue
		}
		s.nextJob++
		spec := old.JobSpec
		spec.RunID = run
		if slices.Contains(rerun, old) && old.State == JobCompleted {
			queued = append(queued, s.queueLocked(&Job{JobSpec: spec, ID: s.nextJob, RunID: run, RunAttempt: latest + 1, RerunOf: old.ID}))
			continue
		}
		cp := *old
		cp.JobSpec, cp.ID, cp.RunAttempt, cp.RerunOf, cp.CopyOf = spec, s.nextJob, latest+1, 0, old.ID
		s.jobs[cp.ID] = &cp
	}
	s.notifyLocked()
	return queued
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
// first), keyed by the job of the first attempt (a re-run of a job's copy in a
// later attempt is a re-run of that job).
func (s *Server) Reruns() map[int64][]int64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	first := func(j *Job) int64 {
		for j.RerunOf != 0 || j.CopyOf != 0 {
			prev, ok := s.jobs[max(j.RerunOf, j.CopyOf)]
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
