package githubsim

import (
	"bytes"
	"io"
	"net/http"
	"strings"
	"sync"
)

// The simulator records every exchange of its REST API and every webhook
// delivery it sends, so that tests can check them against GitHub's published
// description (local/apispec, whose Verify does it at the end of a test). The
// simulator-only paths, those that start with "/_" (the runner agents'
// /_runner/ protocol), are not GitHub's API and are not recorded.
//
// The record is bounded (maxRecordedBytes of bodies), so that a long-running
// simulator (make run) does not grow without end; what does not fit is counted
// in Record.Dropped, which a check must treat as a failure.

// maxRecordedBytes bounds the bodies a Server keeps between two Conformance calls:
// a 300-job chaos run has filled 64 MiB.
const maxRecordedBytes = 256 << 20

// Exchange is one request to the simulated REST API and the simulator's answer.
type Exchange struct {
	Method         string
	Path           string // the URL's path
	Query          string // the URL's raw query
	RequestHeader  http.Header
	RequestBody    []byte
	Status         int
	ResponseHeader http.Header
	ResponseBody   []byte
}

// Delivery is one webhook delivery the simulator sent (redeliveries included).
type Delivery struct {
	Event   string
	GUID    string
	Payload []byte
}

// Record is what the simulator recorded since the previous Conformance call.
type Record struct {
	Exchanges  []Exchange
	Deliveries []Delivery
	// Dropped counts exchanges and deliveries left out because the record was full.
	Dropped int
}

// recorder holds the record; its zero value is ready.
type recorder struct {
	mu    sync.Mutex
	rec   Record
	bytes int
}

// Conformance returns what the simulator recorded since the previous call, and
// forgets it.
func (s *Server) Conformance() Record {
	s.recorder.mu.Lock()
	defer s.recorder.mu.Unlock()
	out := s.recorder.rec
	s.recorder.rec, s.recorder.bytes = Record{}, 0
	return out
}

func (r *recorder) fits(n int) bool {
	if r.bytes+n > maxRecordedBytes {
		r.rec.Dropped++
		return false
	}
	r.bytes += n
	return true
}

func (r *recorder) exchange(x Exchange) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.fits(len(x.RequestBody) + len(x.ResponseBody)) {
		r.rec.Exchanges = append(r.rec.Exchanges, x)
	}
}

func (r *recorder) delivery(d Delivery) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.fits(len(d.Payload)) {
		r.rec.Deliveries = append(r.rec.Deliveries, d)
	}
}

// recorded wraps the API's handler so that every exchange outside the
// simulator-only paths is recorded.
func (s *Server) recorded(h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if strings.HasPrefix(r.URL.Path, "/_") {
			h.ServeHTTP(w, r)
			return
		}
		body, err := io.ReadAll(r.Body)
		if err != nil {
			writeError(w, http.StatusBadRequest, "Problems reading the request body")
			return
		}
		r.Body = io.NopCloser(bytes.NewReader(body))
		cw := &capturingWriter{ResponseWriter: w}
		h.ServeHTTP(cw, r)
		if cw.status == 0 {
			cw.status = http.StatusOK
		}
		s.recorder.exchange(Exchange{Method: r.Method, Path: r.URL.Path, Query: r.URL.RawQuery,
			RequestHeader: r.Header.Clone(), RequestBody: body, Status: cw.status,
			ResponseHeader: w.Header().Clone(), ResponseBody: cw.body.Bytes()})
	})
}

// capturingWriter passes a response through and keeps a copy of it.
type capturingWriter struct {
	http.ResponseWriter
	status int
	body   bytes.Buffer
}

func (c *capturingWriter) WriteHeader(status int) {
	if c.status == 0 {
		c.status = status
	}
	c.ResponseWriter.WriteHeader(status)
}

func (c *capturingWriter) Write(p []byte) (int, error) {
	if c.status == 0 {
		c.status = http.StatusOK
	}
	c.body.Write(p)
	return c.ResponseWriter.Write(p)
}

// Unwrap lets http.ResponseController reach the underlying writer.
func (c *capturingWriter) Unwrap() http.ResponseWriter { return c.ResponseWriter }
