package webhook

import (
	"io"
	"net/http"
	"strings"

	"github.com/aws/aws-lambda-go/events"
)

// HTTPHandler serves deliveries over plain HTTP (the local stack) by turning each
// request into the Lambda event Handle receives, so the same code path runs.
func (h *Handler) HTTPHandler() http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method != http.MethodPost {
			http.Error(w, "POST only", http.StatusMethodNotAllowed)
			return
		}
		// Read one byte past the cap so Serve can tell an oversized body.
		body, err := io.ReadAll(io.LimitReader(r.Body, int64(h.maxBody)+1))
		if err != nil {
			http.Error(w, "reading body: "+err.Error(), http.StatusBadRequest)
			return
		}
		hdr := make(map[string]string, len(r.Header))
		for k, v := range r.Header {
			hdr[strings.ToLower(k)] = strings.Join(v, ",")
		}
		resp, _ := h.Handle(r.Context(), events.APIGatewayV2HTTPRequest{
			Version: "2.0", RouteKey: "POST " + r.URL.Path, RawPath: r.URL.Path, Headers: hdr, Body: string(body),
		})
		for k, v := range resp.Headers {
			w.Header().Set(k, v)
		}
		w.WriteHeader(resp.StatusCode)
		_, _ = io.WriteString(w, resp.Body)
	})
}
