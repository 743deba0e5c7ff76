package githubsim

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"net/http"
	"slices"
	"strconv"
	"time"

	"github.com/runnerscaler/runnerscaler/internal/scope"
)

func (s *Server) routes() {
	s.mux = http.NewServeMux()
	s.handle("POST /app/installations/{installation_id}/access_tokens", s.createAccessToken)
	for _, prefix := range []string{"/repos/{owner}/{repo}", "/orgs/{org}", "/enterprises/{enterprise}"} {
		s.handle("POST "+prefix+"/actions/runners/registration-token", s.authed(s.registrationToken))
		s.handle("POST "+prefix+"/actions/runners/generate-jitconfig", s.authed(s.generateJIT))
		s.handle("GET "+prefix+"/actions/runners", s.listRunners)
		s.handle("GET "+prefix+"/actions/runners/{runner_id}", s.authed(s.getRunner))
		s.handle("DELETE "+prefix+"/actions/runners/{runner_id}", s.authed(s.removeRunner))
		s.handle("DELETE "+prefix+"/actions/runners/{runner_id}/labels", s.authed(s.removeCustomLabels)) // labels.go
	}
	for _, prefix := range []string{"/orgs/{org}", "/enterprises/{enterprise}"} {
		s.handle("GET "+prefix+"/actions/runner-groups", s.authed(s.listGroups))
	}
	s.handle("GET /orgs/{org}/actions/runner-groups/{group_id}", s.getGroup)
	s.handle("GET /orgs/{org}/actions/runner-groups/{group_id}/repositories", s.groupRepositories)
	s.handle("GET /app/hook/deliveries", s.listHookDeliveries)
	s.handle("POST /app/hook/deliveries/{delivery_id}/attempts", s.redeliver)
	s.handle("GET /repos/{owner}/{repo}/releases/latest", s.latestRelease)
	s.runnerRoutes()
	s.installationRoutes()
	s.rerunRoutes()
}

// handle registers h, within the budget when there is one, and counts its
// calls by pattern.
func (s *Server) handle(pattern string, h http.HandlerFunc) {
	h = s.budgeted(pattern, h)
	s.mux.HandleFunc(pattern, func(w http.ResponseWriter, r *http.Request) {
		s.mu.Lock()
		s.calls[pattern]++
		s.mu.Unlock()
		h(w, r)
	})
}

// authed wraps an endpoint that always costs one rate-limit unit.
func (s *Server) authed(h http.HandlerFunc) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		if s.authenticate(w, r, nil) {
			h(w, r)
		}
	}
}

func scopeOf(r *http.Request) scope.Scope {
	switch {
	case r.PathValue("enterprise") != "":
		return scope.Scope{Enterprise: r.PathValue("enterprise")}
	case r.PathValue("org") != "":
		return scope.Scope{Organization: r.PathValue("org")}
	}
	return scope.Scope{Repository: r.PathValue("owner") + "/" + r.PathValue("repo")}
}

// registrationToken: POST .../actions/runners/registration-token.
func (s *Server) registrationToken(w http.ResponseWriter, r *http.Request) {
	tok := randomToken("AABF")
	expires := s.opts.Clock.Now().Add(s.opts.RegistrationTokenLifetime).UTC().Truncate(time.Second)
	s.mu.Lock()
	s.regTokens[tok] = credential{scope: scopeOf(r), expires: expires}
	s.mu.Unlock()
	writeJSON(w, http.StatusCreated, map[string]any{"token": tok, "expires_at": expires.Format(time.RFC3339)})
}

// generateJIT: POST .../actions/runners/generate-jitconfig. The runner exists
// (offline) from now on, as on GitHub.
func (s *Server) generateJIT(w http.ResponseWriter, r *http.Request) {
	var req struct {
		Name          string   `json:"name"`
		RunnerGroupID int64    `json:"runner_group_id"`
		Labels        []string `json:"labels"`
	}
	if err := json.NewDecoder(r.Body).Decode(&req); err != nil || req.Name == "" || req.RunnerGroupID == 0 || len(req.Labels) == 0 {
		writeError(w, http.StatusUnprocessableEntity, "Invalid request: name, runner_group_id and labels are required.")
		return
	}
	sc := scopeOf(r)
	s.mu.Lock()
	defer s.mu.Unlock()
	if !s.groupExists(sc, req.RunnerGroupID) {
		writeError(w, http.StatusNotFound, "Runner group not found")
		return
	}
	for _, x := range s.runners {
		if x.Scope.String() == sc.String() && x.Name == req.Name {
			writeError(w, http.StatusConflict, "Already exists - A runner with the name "+req.Name+" already exists.")
			return
		}
	}
	rn := &Runner{ID: s.nextID + 1, Name: req.Name, Scope: sc, Labels: append([]string{"self-hosted", "Linux", "X64"}, req.Labels...),
		GroupID: req.RunnerGroupID, Ephemeral: true}
	enc, err := s.jitConfigLocked(rn, s.runnerBaseURL(r))
	if err != nil {
		writeError(w, http.StatusInternalServerError, err.Error())
		return
	}
	s.nextID++
	s.runners[rn.ID] = rn
	s.jitConfigs[enc] = credential{scope: sc, runnerID: rn.ID, expires: s.opts.Clock.Now().Add(s.opts.RegistrationTokenLifetime)}
	writeJSON(w, http.StatusCreated, map[string]any{"runner": runnerJSON(rn), "encoded_jit_config": enc})
}

func (s *Server) groupExists(sc scope.Scope, id int64) bool {
	if id == 1 {
		return true
	}
	for _, g := range s.groups[sc.String()] {
		if g.ID == id {
			return true
		}
	}
	return false
}

// listRunners: GET .../actions/runners with per_page/page, Link and ETag.
func (s *Server) listRunners(w http.ResponseWriter, r *http.Request) {
	sc := scopeOf(r)
	perPage, page := intParam(r, "per_page", 30, 1, 100), intParam(r, "page", 1, 1, 1<<30)
	s.mu.Lock()
	s.expireSessionsLocked()
	var all []*Runner
	for _, x := range s.runners {
		if x.Scope.String() == sc.String() {
			all = append(all, x)
		}
	}
	slices.SortFunc(all, func(a, b *Runner) int { return int(a.ID - b.ID) })
	total := len(all)
	from, to := min((page-1)*perPage, total), min(page*perPage, total)
	list := make([]map[string]any, 0, to-from)
	for _, x := range all[from:to] {
		shown := *x
		shown.Busy = s.restBusyLocked(x) // the REST view, which may lie (BusyLie)
		if x.Busy && !shown.Busy {
			s.liesTold++
		}
		list = append(list, runnerJSON(&shown))
	}
	s.mu.Unlock()
	body, _ := json.Marshal(map[string]any{"total_count": total, "runners": list})
	sum := sha256.Sum256(body)
	etag := `W/"` + hex.EncodeToString(sum[:16]) + `"`
	notModified := r.Header.Get("If-None-Match") == etag
	if !s.authenticate(w, r, func() bool { return !notModified }) {
		return
	}
	w.Header().Set("ETag", etag)
	if to < total {
		last := (total + perPage - 1) / perPage
		w.Header().Set("Link", fmt.Sprintf(`<%s?per_page=%d&page=%d>; rel="next", <%s?per_page=%d&page=%d>; rel="last"`,
			linkBase(r), perPage, page+1, linkBase(r), perPage, last))
	}
	if notModified {
		w.WriteHeader(http.StatusNotModified)
		return
	}
	w.Header().Set("Content-Type", "application/json; charset=utf-8")
	_, _ = w.Write(body)
}

// getRunner: GET .../actions/runners/{runner_id}: the runner as the list shows
// it (its REST busy flag may lie the same way, see BusyLie), or 404 when the
// scope has no runner with that id.
func (s *Server) getRunner(w http.ResponseWriter, r *http.Request) {
	id, _ := strconv.ParseInt(r.PathValue("runner_id"), 10, 64)
	sc := scopeOf(r)
	s.mu.Lock()
	s.expireSessionsLocked()
	x, ok := s.runners[id]
	if !ok || x.Scope.String() != sc.String() {
		s.mu.Unlock()
		writeError(w, http.StatusNotFound, "Not Found")
		return
	}
	shown := *x
	shown.Busy = s.restBusyLocked(x)
	if x.Busy && !shown.Busy {
		s.liesTold++
	}
	body := runnerJSON(&shown)
	s.mu.Unlock()
	writeJSON(w, http.StatusOK, body)
}

func linkBase(r *http.Request) string { return "http://" + r.Host + r.URL.Path }

// removeRunner: DELETE .../actions/runners/{runner_id}: 204, 404, or 422 while
// busy as the REST view says (which may lie, see BusyLie): a runner removed
// while it runs a job loses the job, whose `completed` delivery (failure) is
// emitted before the answer.
func (s *Server) removeRunner(w http.ResponseWriter, r *http.Request) {
	id, _ := strconv.ParseInt(r.PathValue("runner_id"), 10, 64)
	sc := scopeOf(r)
	s.mu.Lock()
	rn, ok := s.runners[id]
	switch {
	case !ok || rn.Scope.String() != sc.String():
		s.mu.Unlock()
		writeError(w, http.StatusNotFound, "Not Found")
	case s.restBusyLocked(rn):
		s.mu.Unlock()
		writeError(w, http.StatusUnprocessableEntity, fmt.Sprintf("Bad request - Runner %q is still running a job", rn.Name))
	default:
		if rn.Busy {
			s.liesTold++
		}
		delete(s.runners, id)
		s.forgetRunnerLocked(id)
		lost, wasLost := s.loseJobLocked(rn)
		s.notifyLocked() // its agent's long-poll learns at once
		s.mu.Unlock()
		if wasLost {
			s.emit(lost)
		}
		w.WriteHeader(http.StatusNoContent)
	}
}

// listGroups: GET /orgs/{org}/actions/runner-groups (and the enterprise one).
func (s *Server) listGroups(w http.ResponseWriter, r *http.Request) {
	s.mu.Lock()
	groups := append([]Group{{ID: 1, Name: "Default", Visibility: "all"}}, s.groups[scopeOf(r).String()]...)
	s.mu.Unlock()
	list := make([]map[string]any, len(groups))
	for i, g := range groups {
		list[i] = runnerGroupJSON(r.URL.Path, g) // payloads.go
	}
	writeJSON(w, http.StatusOK, map[string]any{"total_count": len(groups), "runner_groups": list})
}

func runnerJSON(x *Runner) map[string]any {
	status := "offline"
	if x.Online {
		status = "online"
	}
	labels := make([]map[string]any, len(x.Labels))
	for i, l := range x.Labels {
		kind := "custom"
		if i < readOnlyLabels {
			kind = "read-only"
		}
		labels[i] = map[string]any{"id": i + 1, "name": l, "type": kind}
	}
	return map[string]any{"id": x.ID, "name": x.Name, "os": "Linux", "status": status, "busy": x.Busy, "labels": labels}
}

func intParam(r *http.Request, name string, def, lo, hi int) int {
	v, err := strconv.Atoi(r.URL.Query().Get(name))
	if err != nil {
		return def
	}
	return min(max(v, lo), hi)
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json; charset=utf-8")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(v)
}

func writeError(w http.ResponseWriter, status int, msg string) {
	writeErrorDoc(w, status, msg, "https://docs.github.com/rest")
}

func writeErrorDoc(w http.ResponseWriter, status int, msg, doc string) {
	writeJSON(w, status, map[string]any{"message": msg, "documentation_url": doc})
}
