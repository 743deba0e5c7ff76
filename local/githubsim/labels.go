package githubsim

import (
	"net/http"
	"strconv"
)

// removeCustomLabels: DELETE .../actions/runners/{runner_id}/labels removes
// every custom label of the runner and answers 200 with the read-only ones
// left (self-hosted, Linux, X64), or 404. From then on the runner is handed only
// jobs whose labels those cover (acquireLocked reads the labels at each hand-over).
func (s *Server) removeCustomLabels(w http.ResponseWriter, r *http.Request) {
	id, _ := strconv.ParseInt(r.PathValue("runner_id"), 10, 64)
	sc := scopeOf(r)
	s.mu.Lock()
	rn, ok := s.runners[id]
	if !ok || rn.Scope.String() != sc.String() {
		s.mu.Unlock()
		writeError(w, http.StatusNotFound, "Not Found")
		return
	}
	rn.Labels = rn.Labels[:min(len(rn.Labels), readOnlyLabels)]
	labels, n := runnerJSON(rn)["labels"], len(rn.Labels)
	s.mu.Unlock()
	writeJSON(w, http.StatusOK, map[string]any{"total_count": n, "labels": labels})
}

// readOnlyLabels is how many labels at the head of Runner.Labels GitHub adds
// itself (self-hosted, the OS and the architecture): no API call removes them.
const readOnlyLabels = 3
