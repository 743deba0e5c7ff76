package githubsim

import (
	"net/http"
	"strconv"
	"sync"
)

// removeCustomLabels: DELETE .../actions/runners/{runner_id}/labels removes
// every custom label of the runner and answers 200 with the read-only ones
// left (self-hosted, Linux, X64), or 404. From then on the runner is handed only
// jobs whose labels those cover (acquireLocked reads the labels at each hand-over).
func (s *Server) removeCustomLabels(w http.ResponseWriter, r *http.Request) {
	id, _ := strconv.ParseInt(r.PathValue("runner_id"), 10, 64)
	sc := scopeOf(r)
	s.mu.Lock()
	hold := s.labelHolds[id]
	delete(s.labelHolds, id)
	s.mu.Unlock()
	hold.wait(r)
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

// LabelRemovalHold is a runner's next label removal, held (HoldLabelRemoval).
type LabelRemovalHold struct {
	arrived, released chan struct{}
	release           sync.Once
}

// HoldLabelRemoval holds the next DELETE .../actions/runners/{id}/labels of
// runner id, once it has been authenticated and before it changes anything,
// until Release (or until its client gives up): a test can then act while the
// caller waits for GitHub's answer — hand the runner a job its labels still
// match, as GitHub may in that moment. The request is then answered as it would
// have been. A later call for the same runner replaces a hold whose request has
// not arrived.
func (s *Server) HoldLabelRemoval(id int64) *LabelRemovalHold {
	h := &LabelRemovalHold{arrived: make(chan struct{}), released: make(chan struct{})}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.labelHolds == nil {
		s.labelHolds = map[int64]*LabelRemovalHold{}
	}
	s.labelHolds[id] = h
	return h
}

// Arrived is closed once the held request has arrived.
func (h *LabelRemovalHold) Arrived() <-chan struct{} { return h.arrived }

// Release lets the held request go on (a request that has not arrived yet
// will not wait). Calling it again does nothing.
func (h *LabelRemovalHold) Release() { h.release.Do(func() { close(h.released) }) }

// wait holds r until h is released or r's client gives up; a nil h holds nothing.
func (h *LabelRemovalHold) wait(r *http.Request) {
	if h == nil {
		return
	}
	close(h.arrived)
	select {
	case <-h.released:
	case <-r.Context().Done():
	}
}
