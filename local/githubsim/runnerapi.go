package githubsim

// Runner agents over HTTP: the endpoints the fake runner of local/fakerunner uses.
//
// These paths exist only in this simulator. The real runner (actions/runner)
// registers through POST {api}/actions/runner-registration and then speaks the
// Actions service's private protocol: OAuth credentials signed with an RSA key it
// keeps in .credentials_rsaparams, sessions and long-polled messages through the
// broker, job requests whose locks the worker renews, and results sent to the
// results service. That protocol is undocumented and changes with the service, so
// it cannot be simulated faithfully; what the autoscaler observes of it — runners
// appearing on registration, going online and offline, busy while a job runs,
// ephemeral ones deleted after their job, spent credentials refused — is kept:
//
//	POST   /_runner/registrations              config.sh (Authorization: RemoteAuth <registration token>;
//	                                           the runner's "version" in the body)
//	POST   /_runner/sessions                   run.sh connects: the runner is online while its session lives
//	                                           (Authorization: Bearer <runner credential>; body {"jit_config": ...}
//	                                           when started from a JIT config, which is single use, and
//	                                           "runner_version")
//	GET    /_runner/sessions/{session_id}/job  long-poll for a job (?wait=10s): 200 with the job, 204 when none came
//	DELETE /_runner/sessions/{session_id}      run.sh disconnects: the runner goes offline
//	POST   /_runner/jobs/{job_id}/result       Runner.Worker reports the job's conclusion, and its
//	                                           script's output, exit code and start when it had one
//	                                           (Authorization: Bearer <the job's token>)
//
// A session no poll touched for Options.SessionTimeout ends, and its runner goes
// offline, as when a runner's machine disappears. Failures answer GitHub's error
// body {"message": ...} with 401 for an unknown, expired or spent registration
// token, JIT config or credential; 410 when the runner was deleted on GitHub (an
// ephemeral one after its job, or removed through the REST API); 409 for a name
// taken without replace, a session already open (Retry-After says when it
// expires) or a job not in progress; 404 for an unknown session, job or runner
// group, and for a registration of a version GitHub no longer registers; 403 to
// the poll of a version GitHub gives no more jobs (releases.go); 422 for a
// malformed request.

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/runnerscaler/runnerscaler/internal/scope"

	"github.com/runnerscaler/runnerscaler/local/runnerfiles"
)

// Errors of the runner agents' endpoints, besides ErrInvalidCredential,
// ErrRunnerGone, ErrRunnerExists and ErrUnknownGroup.
var (
	// ErrSessionConflict: the runner already has a live session (another agent,
	// or the previous container of this one, which the session timeout will end).
	ErrSessionConflict = errors.New("githubsim: a session for this runner already exists")
	// ErrNoSession: the session was closed or expired.
	ErrNoSession = errors.New("githubsim: no such session")
)

// maxPollWait bounds a long-poll, like the broker's own (about 50 s).
const maxPollWait = 50 * time.Second

// agentState is the simulator's side of runner agents connected over HTTP.
type agentState struct {
	// credentials maps a runner credential to its runner; entries outlive their
	// runner so that a deleted runner's agent is told so, not "unknown credential".
	credentials map[string]int64
	sessions    map[string]*session // by session id
	sessionOf   map[int64]string    // runner id → its live session
	jobTokens   map[string]int64    // a running job's token → job id
	// wake is closed (and replaced) whenever a long-poll may have something new:
	// a job queued, a runner freed, removed or disconnected.
	wake chan struct{}
	// failRegistrations: the statuses the next registrations answer
	// (InjectRegistrationStatus), first to last.
	failRegistrations []int
}

type session struct {
	runnerID int64
	version  string // the runner's, as it reported it ("" none; releases.go)
	lastSeen time.Time
	polls    int // long-polls in flight keep the session alive
}

func newAgentState() agentState {
	return agentState{credentials: map[string]int64{}, sessions: map[string]*session{}, sessionOf: map[int64]string{},
		jobTokens: map[string]int64{}, wake: make(chan struct{})}
}

// registration is what config.sh sends and gets back.
type registrationRequest struct {
	URL         string   `json:"url"`
	Name        string   `json:"name"`
	Labels      []string `json:"labels"`
	RunnerGroup string   `json:"runner_group"`
	Ephemeral   bool     `json:"ephemeral"`
	Replace     bool     `json:"replace"`
	Version     string   `json:"version"` // the runner's own (releases.go)
}

type registrationResponse struct {
	Runner      runnerfiles.Settings    `json:"runner"`
	Credentials runnerfiles.Credentials `json:"credentials"`
}

type sessionResponse struct {
	SessionID string `json:"session_id"`
	RunnerID  int64  `json:"runner_id"`
	Name      string `json:"runner_name"`
	Ephemeral bool   `json:"ephemeral"`
}

// jobMessage is a job handed to a runner; Token authenticates its result.
type jobMessage struct {
	ID         int64    `json:"id"`
	RunID      int64    `json:"run_id"`
	Repository string   `json:"repository"`
	Labels     []string `json:"labels"`
	Duration   string   `json:"duration"` // time.Duration.String()
	Script     string   `json:"script,omitempty"`
	// Container and Services: the job's containers (JobSpec.Container, Services).
	Container *containerMessage  `json:"container,omitempty"`
	Services  []containerMessage `json:"services,omitempty"`
	Token     string             `json:"token"`
}

// containerMessage is a job or service container in a jobMessage.
type containerMessage struct {
	Image    string `json:"image"`
	Username string `json:"username,omitempty"`
	Password string `json:"password,omitempty"`
}

func toContainerMessage(c JobContainer) containerMessage {
	m := containerMessage{Image: c.Image}
	if c.Credentials != nil {
		m.Username, m.Password = c.Credentials.Username, c.Credentials.Password
	}
	return m
}

// jobMessageOf is the message handing job to a runner with token.
func jobMessageOf(job Job, token string) jobMessage {
	m := jobMessage{ID: job.ID, RunID: job.RunID, Repository: job.Repository, Labels: job.Labels,
		Duration: job.Duration.String(), Script: job.Script, Token: token}
	if job.Container != nil {
		c := toContainerMessage(*job.Container)
		m.Container = &c
	}
	for _, svc := range job.Services {
		m.Services = append(m.Services, toContainerMessage(svc))
	}
	return m
}

func (s *Server) runnerRoutes() {
	s.handle("POST /_runner/registrations", s.agentRegister)
	s.handle("POST /_runner/sessions", s.agentOpenSession)
	s.handle("DELETE /_runner/sessions/{session_id}", s.agentCloseSession)
	s.handle("GET /_runner/sessions/{session_id}/job", s.agentPollJob)
	s.handle("POST /_runner/jobs/{job_id}/result", s.agentJobResult)
}

// InjectRegistrationStatus makes the next n runner registrations (config.sh's
// POST /_runner/registrations) fail with status (e.g. 502), as GitHub's
// registration endpoint fails now and then: nothing is registered, and
// config.sh exits 1. (InjectStatus answers REST calls made with a token, which
// a runner's registration is not.)
func (s *Server) InjectRegistrationStatus(status, n int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for range n {
		s.agents.failRegistrations = append(s.agents.failRegistrations, status)
	}
}

// agentRegister: POST /_runner/registrations, what `config.sh --url URL --token T`
// does: the runner exists (offline) from now on and its credential is returned.
func (s *Server) agentRegister(w http.ResponseWriter, r *http.Request) {
	s.mu.Lock()
	if f := s.agents.failRegistrations; len(f) > 0 {
		s.agents.failRegistrations = f[1:]
		s.mu.Unlock()
		writeError(w, f[0], http.StatusText(f[0]))
		return
	}
	s.mu.Unlock()
	token, _ := strings.CutPrefix(r.Header.Get("Authorization"), "RemoteAuth ")
	var req registrationRequest
	if err := json.NewDecoder(r.Body).Decode(&req); err != nil || req.URL == "" || req.Name == "" {
		writeError(w, http.StatusUnprocessableEntity, "Invalid request: url and name are required.")
		return
	}
	sc, err := scopeFromURL(req.URL)
	if err != nil {
		writeError(w, http.StatusNotFound, "Not Found: "+err.Error())
		return
	}
	if msg := registrationRefusal(req.Version); msg != "" {
		writeError(w, http.StatusNotFound, msg)
		return
	}
	base := s.runnerBaseURL(r)
	s.mu.Lock()
	rn, err := s.registerLocked(Registration{Token: token, Scope: sc.String(), Name: req.Name, Labels: req.Labels,
		Ephemeral: req.Ephemeral, Group: req.RunnerGroup}, req.Replace)
	if err != nil {
		s.mu.Unlock()
		agentError(w, err)
		return
	}
	resp := registrationResponse{Runner: settingsOf(rn, base), Credentials: s.newCredentialLocked(rn.ID)}
	s.mu.Unlock()
	writeJSON(w, http.StatusCreated, resp)
}

// agentOpenSession: POST /_runner/sessions. The runner goes online.
func (s *Server) agentOpenSession(w http.ResponseWriter, r *http.Request) {
	var req struct {
		JITConfig string `json:"jit_config"`
		Version   string `json:"runner_version"`
	}
	if err := json.NewDecoder(r.Body).Decode(&req); err != nil && !errors.Is(err, io.EOF) {
		writeError(w, http.StatusUnprocessableEntity, "Invalid request body: "+err.Error())
		return
	}
	cred := bearer(r)
	s.mu.Lock()
	defer s.mu.Unlock()
	s.expireSessionsLocked()
	if req.JITConfig != "" {
		jit, err := s.useJITLocked(req.JITConfig, false)
		if err != nil {
			agentError(w, err)
			return
		}
		if id, ok := s.agents.credentials[cred]; !ok || id != jit.ID {
			agentError(w, fmt.Errorf("the credential is not the JIT config's: %w", ErrInvalidCredential))
			return
		}
	}
	rn, err := s.agentRunnerLocked(cred)
	if err != nil {
		agentError(w, err)
		return
	}
	now := s.opts.Clock.Now()
	if sid, open := s.agents.sessionOf[rn.ID]; open {
		left := s.opts.SessionTimeout - now.Sub(s.agents.sessions[sid].lastSeen)
		w.Header().Set("Retry-After", strconv.Itoa(int(math.Ceil(max(left, time.Second).Seconds()))))
		agentError(w, fmt.Errorf("runner %q: %w", rn.Name, ErrSessionConflict))
		return
	}
	if req.JITConfig != "" {
		_, _ = s.useJITLocked(req.JITConfig, true) // checked above, under the same lock
	}
	sid := randomToken("sess_")
	s.agents.sessions[sid] = &session{runnerID: rn.ID, lastSeen: now, version: req.Version}
	s.agents.sessionOf[rn.ID] = sid
	rn.Online, rn.Registered = true, true
	writeJSON(w, http.StatusCreated, sessionResponse{SessionID: sid, RunnerID: rn.ID, Name: rn.Name, Ephemeral: rn.Ephemeral})
}

// agentCloseSession: DELETE /_runner/sessions/{session_id}. The runner goes offline.
func (s *Server) agentCloseSession(w http.ResponseWriter, r *http.Request) {
	sid := r.PathValue("session_id")
	s.mu.Lock()
	defer s.mu.Unlock()
	ss, ok := s.agents.sessions[sid]
	if !ok {
		agentError(w, ErrNoSession)
		return
	}
	if id, ok := s.agents.credentials[bearer(r)]; !ok || id != ss.runnerID {
		agentError(w, ErrInvalidCredential)
		return
	}
	s.endSessionLocked(sid)
	w.WriteHeader(http.StatusNoContent)
}

// agentPollJob: GET /_runner/sessions/{session_id}/job?wait=10s. The session
// stays alive while the poll waits; a job taken is in progress on the runner.
func (s *Server) agentPollJob(w http.ResponseWriter, r *http.Request) {
	sid, cred := r.PathValue("session_id"), bearer(r)
	wait := 10 * time.Second
	if q := r.URL.Query().Get("wait"); q != "" {
		d, err := time.ParseDuration(q)
		if err != nil || d < 0 {
			writeError(w, http.StatusUnprocessableEntity, "Invalid wait: "+q)
			return
		}
		wait = min(d, maxPollWait)
	}
	s.mu.Lock()
	ss, err := s.sessionLocked(sid, cred)
	if err != nil {
		s.mu.Unlock()
		agentError(w, err)
		return
	}
	if msg := s.messageRefusalLocked(ss.version); msg != "" {
		ss.lastSeen = s.opts.Clock.Now()
		s.mu.Unlock()
		writeError(w, http.StatusForbidden, msg)
		return
	}
	ss.polls++
	s.mu.Unlock()
	defer func() {
		s.mu.Lock()
		ss.polls--
		ss.lastSeen = s.opts.Clock.Now()
		s.mu.Unlock()
	}()
	deadline := time.NewTimer(wait) // real time: how long a request is held, not simulated state
	defer deadline.Stop()
	tick := time.NewTicker(250 * time.Millisecond) // for changes that do not wake polls
	defer tick.Stop()
	for {
		s.mu.Lock()
		var job Job
		var ok bool
		if _, err = s.sessionLocked(sid, cred); err == nil && r.Context().Err() == nil {
			job, ok, err = s.acquireLocked(ss.runnerID)
		}
		token := ""
		if ok {
			token = randomToken("simjob_")
			s.agents.jobTokens[token] = job.ID
		}
		wake := s.agents.wake
		s.mu.Unlock()
		switch {
		case err != nil:
			agentError(w, err)
			return
		case ok:
			s.emit(job)
			writeJSON(w, http.StatusOK, jobMessageOf(job, token))
			return
		}
		select {
		case <-wake:
		case <-tick.C:
		case <-deadline.C:
			w.WriteHeader(http.StatusNoContent)
			return
		case <-r.Context().Done():
			return
		}
	}
}

// agentJobResult: POST /_runner/jobs/{job_id}/result {"conclusion": "success" |
// "failure" | "cancelled", "output": ..., "exit_code": ..., "script_started_at":
// ...}: the job completes and its runner is freed (an ephemeral one deleted);
// output, exit_code and script_started_at (of the job's script) are optional. A job lost because its runner was removed under it
// (Job.LostRunner) answers 410 and keeps its failure.
func (s *Server) agentJobResult(w http.ResponseWriter, r *http.Request) {
	jobID, _ := strconv.ParseInt(r.PathValue("job_id"), 10, 64)
	var req struct {
		Conclusion JobConclusion `json:"conclusion"`
		Output     string        `json:"output"`
		ExitCode   int           `json:"exit_code"`
		// ScriptStartedAt: when the worker started the job's script (its
		// first step), on the runner's clock, which is this machine's.
		ScriptStartedAt time.Time `json:"script_started_at"`
	}
	if err := json.NewDecoder(r.Body).Decode(&req); err != nil ||
		(req.Conclusion != JobSuccess && req.Conclusion != JobFailure && req.Conclusion != JobCancelled) {
		writeError(w, http.StatusUnprocessableEntity, `Invalid request: conclusion must be "success", "failure" or "cancelled".`)
		return
	}
	token := bearer(r)
	s.mu.Lock()
	if id, ok := s.agents.jobTokens[token]; !ok || id != jobID {
		s.mu.Unlock()
		agentError(w, fmt.Errorf("job token: %w", ErrInvalidCredential))
		return
	}
	if j := s.jobs[jobID]; j.LostRunner {
		delete(s.agents.jobTokens, token)
		s.mu.Unlock()
		agentError(w, fmt.Errorf("job %d failed: runner %s was removed while it ran: %w", jobID, j.RunnerName, ErrRunnerGone))
		return
	}
	j, err := s.completeLocked(jobID, req.Conclusion)
	if err == nil {
		if len(req.Output) > MaxJobOutput {
			req.Output = req.Output[:MaxJobOutput]
		}
		s.jobs[jobID].Output, s.jobs[jobID].ExitCode, s.jobs[jobID].ScriptStartedAt = req.Output, req.ExitCode, req.ScriptStartedAt
		j.Output, j.ExitCode, j.ScriptStartedAt = req.Output, req.ExitCode, req.ScriptStartedAt
	}
	delete(s.agents.jobTokens, token)
	s.mu.Unlock()
	if err != nil {
		agentError(w, err)
		return
	}
	s.emit(j)
	w.WriteHeader(http.StatusNoContent)
}

// newCredentialLocked issues runner id's credential, as its .credentials file.
func (s *Server) newCredentialLocked(id int64) runnerfiles.Credentials {
	cred := randomToken("simcred_")
	s.agents.credentials[cred] = id
	return runnerfiles.Credentials{Scheme: "OAuthAccessToken", Data: map[string]string{"token": cred}}
}

// jitConfigLocked issues runner rn's credential and returns its JIT config
// (runnerfiles.EncodeJIT: like GitHub's, the runner's files, which run.sh writes
// into its root directory). base is the simulator's URL as the runner reaches it.
func (s *Server) jitConfigLocked(rn *Runner, base string) (string, error) {
	return runnerfiles.EncodeJIT(settingsOf(rn, base), s.newCredentialLocked(rn.ID))
}

func settingsOf(rn *Runner, base string) runnerfiles.Settings {
	return runnerfiles.Settings{AgentID: rn.ID, AgentName: rn.Name, PoolID: rn.GroupID, ServerURL: base,
		GitHubURL: scopeURL(base, rn.Scope), WorkFolder: "_work", Ephemeral: rn.Ephemeral}
}

// runnerBaseURL is where runner agents reach the simulator.
func (s *Server) runnerBaseURL(r *http.Request) string {
	if s.opts.RunnerURL != "" {
		return strings.TrimSuffix(s.opts.RunnerURL, "/")
	}
	if r.TLS != nil {
		return "https://" + r.Host
	}
	return "http://" + r.Host
}

// agentRunnerLocked is the runner a credential belongs to.
func (s *Server) agentRunnerLocked(cred string) (*Runner, error) {
	id, ok := s.agents.credentials[cred]
	if !ok {
		return nil, ErrInvalidCredential
	}
	rn, ok := s.runners[id]
	if !ok {
		return nil, fmt.Errorf("runner %d: %w", id, ErrRunnerGone)
	}
	return rn, nil
}

// sessionLocked checks that session sid is live and belongs to cred's runner.
func (s *Server) sessionLocked(sid, cred string) (*session, error) {
	s.expireSessionsLocked()
	rn, err := s.agentRunnerLocked(cred)
	if err != nil {
		return nil, err
	}
	ss, ok := s.agents.sessions[sid]
	if !ok || ss.runnerID != rn.ID {
		return nil, ErrNoSession
	}
	return ss, nil
}

// expireSessionsLocked ends the sessions of deleted runners and those no poll
// touched for SessionTimeout (their runners go offline). It runs lazily wherever
// runners' state is read, so the simulator needs no goroutine of its own.
func (s *Server) expireSessionsLocked() {
	now := s.opts.Clock.Now()
	for sid, ss := range s.agents.sessions {
		if _, exists := s.runners[ss.runnerID]; exists && (ss.polls > 0 || now.Sub(ss.lastSeen) < s.opts.SessionTimeout) {
			continue
		}
		s.endSessionLocked(sid)
	}
}

func (s *Server) endSessionLocked(sid string) {
	ss := s.agents.sessions[sid]
	delete(s.agents.sessions, sid)
	delete(s.agents.sessionOf, ss.runnerID)
	if rn, ok := s.runners[ss.runnerID]; ok {
		rn.Online = false
	}
	s.notifyLocked()
}

// notifyLocked wakes every long-poll to look again.
func (s *Server) notifyLocked() {
	close(s.agents.wake)
	s.agents.wake = make(chan struct{})
}

// agentError answers err with the status a runner agent can act on.
func agentError(w http.ResponseWriter, err error) {
	status := http.StatusInternalServerError
	switch {
	case errors.Is(err, ErrRunnerGone):
		status = http.StatusGone
	case errors.Is(err, ErrInvalidCredential):
		status = http.StatusUnauthorized
	case errors.Is(err, ErrRunnerExists), errors.Is(err, ErrSessionConflict), errors.Is(err, ErrJobNotRunning):
		status = http.StatusConflict
	case errors.Is(err, ErrNoSession), errors.Is(err, ErrUnknownJob), errors.Is(err, ErrUnknownGroup):
		status = http.StatusNotFound
	}
	writeError(w, status, err.Error())
}

func bearer(r *http.Request) string {
	tok, _ := strings.CutPrefix(r.Header.Get("Authorization"), "Bearer ")
	return tok
}

// scopeFromURL reads a runner URL as config.sh takes it: {base}/{org},
// {base}/{owner}/{repo} or {base}/enterprises/{enterprise}.
func scopeFromURL(raw string) (scope.Scope, error) {
	u, err := url.Parse(raw)
	if err != nil || u.Host == "" {
		return scope.Scope{}, fmt.Errorf("%q is not a GitHub URL", raw)
	}
	parts := strings.Split(strings.Trim(u.Path, "/"), "/")
	switch {
	case len(parts) == 2 && parts[0] == "enterprises" && parts[1] != "":
		return scope.Scope{Enterprise: parts[1]}, nil
	case len(parts) == 1 && parts[0] != "":
		return scope.Scope{Organization: parts[0]}, nil
	case len(parts) == 2 && parts[0] != "" && parts[1] != "":
		return scope.Scope{Repository: parts[0] + "/" + parts[1]}, nil
	}
	return scope.Scope{}, fmt.Errorf("%q is not a repository, organization or enterprise URL", raw)
}

// scopeURL is the runner URL of a scope, the inverse of scopeFromURL.
func scopeURL(base string, sc scope.Scope) string {
	switch sc.Kind() {
	case scope.Enterprise:
		return base + "/enterprises/" + sc.Enterprise
	case scope.Organization:
		return base + "/" + sc.Organization
	}
	return base + "/" + sc.Repository
}
