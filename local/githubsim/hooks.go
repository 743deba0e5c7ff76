package githubsim

import (
	"net/http"
	"strconv"
	"time"
)

// hookDelivery is one attempt in the App's webhook delivery log.
type hookDelivery struct {
	ID          int64     `json:"id"`
	GUID        string    `json:"guid"`
	DeliveredAt time.Time `json:"delivered_at"`
	Redelivery  bool      `json:"redelivery"`
	Duration    float64   `json:"duration"`
	Status      string    `json:"status"`
	StatusCode  int       `json:"status_code"`
	Event       string    `json:"event"`
	Action      string    `json:"action"`
	// InstallationID and RepositoryID are always null here (GitHub's are null
	// for deliveries not tied to an installation or repository).
	InstallationID *int64 `json:"installation_id"`
	RepositoryID   *int64 `json:"repository_id"`
	payload        []byte
}

// send delivers a payload (a new GUID, or guid for a redelivery) and logs the attempt.
func (s *Server) send(d Deliverer, event, action, guid string, payload []byte) {
	s.mu.Lock()
	s.nextDelivery++
	id := s.nextDelivery
	redelivery := guid != ""
	if !redelivery {
		guid = "sim-" + strconv.FormatInt(id, 10)
	}
	s.mu.Unlock()
	s.recorder.delivery(Delivery{Event: event, GUID: guid, Payload: payload})
	start := s.opts.Clock.Now()
	code := d(event, guid, payload)
	status := "OK"
	if code < 200 || code > 299 {
		status = "failed to connect"
		if code != 0 {
			status = "Invalid HTTP Response: " + strconv.Itoa(code)
		}
	}
	s.mu.Lock()
	s.hooks = append(s.hooks, hookDelivery{ID: id, GUID: guid, DeliveredAt: start, Redelivery: redelivery,
		Duration: s.opts.Clock.Since(start).Seconds(), Status: status, StatusCode: code, Event: event, Action: action, payload: payload})
	s.mu.Unlock()
}

// listHookDeliveries: GET /app/hook/deliveries (App JWT), newest first, cursor pagination.
func (s *Server) listHookDeliveries(w http.ResponseWriter, r *http.Request) {
	if err := s.verifyJWT(r.Header.Get("Authorization")); err != nil {
		writeError(w, http.StatusUnauthorized, "A JSON web token could not be decoded: "+err.Error())
		return
	}
	perPage := intParam(r, "per_page", 30, 1, 100)
	cursor, _ := strconv.ParseInt(r.URL.Query().Get("cursor"), 10, 64)
	s.mu.Lock()
	var page []hookDelivery
	next := int64(0)
	for i := len(s.hooks) - 1; i >= 0; i-- {
		h := s.hooks[i]
		if cursor != 0 && h.ID >= cursor {
			continue
		}
		if len(page) == perPage {
			next = page[len(page)-1].ID
			break
		}
		page = append(page, h)
	}
	s.mu.Unlock()
	if next != 0 {
		w.Header().Set("Link", "<http://"+r.Host+r.URL.Path+"?per_page="+strconv.Itoa(perPage)+"&cursor="+strconv.FormatInt(next, 10)+`>; rel="next"`)
	}
	if page == nil {
		page = []hookDelivery{}
	}
	writeJSON(w, http.StatusOK, page)
}

// redeliver: POST /app/hook/deliveries/{delivery_id}/attempts (App JWT).
func (s *Server) redeliver(w http.ResponseWriter, r *http.Request) {
	if err := s.verifyJWT(r.Header.Get("Authorization")); err != nil {
		writeError(w, http.StatusUnauthorized, "A JSON web token could not be decoded: "+err.Error())
		return
	}
	id, _ := strconv.ParseInt(r.PathValue("delivery_id"), 10, 64)
	s.mu.Lock()
	var found *hookDelivery
	for i := range s.hooks {
		if s.hooks[i].ID == id {
			h := s.hooks[i]
			found = &h
		}
	}
	d := s.deliver
	s.mu.Unlock()
	if found == nil || d == nil {
		writeError(w, http.StatusNotFound, "Not Found")
		return
	}
	writeJSON(w, http.StatusAccepted, map[string]any{})
	go s.send(d, found.Event, found.Action, found.GUID, found.payload)
}
