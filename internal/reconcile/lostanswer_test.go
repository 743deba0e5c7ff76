package reconcile_test

import (
	"io"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"k8s.io/client-go/kubernetes"

	"github.com/runnerscaler/runnerscaler/internal/runnerpod"
	"github.com/runnerscaler/runnerscaler/local/testenv"
)

// TestLostAnswerToOwnWriteIsNotAnotherWriter: the API server applies the
// sweep's annotation of a runner's pod but its answer is lost — it answers 504
// with Retry-After, as its timeout filter does under load — so client-go sends
// the patch again, which the sweep's own write now fences out (409). The
// sweeper recognises its own change: the sweep ends without error, instead of
// reporting another writer and leaving the runner for the next sweep.
func TestLostAnswerToOwnWriteIsNotAnotherWriter(t *testing.T) {
	t.Parallel()
	e := newEnv(t, true)
	e.mustSweep(1, time.Time{})
	name := e.statefulSets()[0]
	e.start(name)
	e.mustSweep(1, time.Time{})
	lose := &losingTransport{path: "/pods/" + name + "-0"}
	cfg := testenv.RESTConfig(t)
	cfg.Wrap(func(rt http.RoundTripper) http.RoundTripper { lose.rt = rt; return lose })
	kube, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	e.rec = e.newReconciler(kube, e.gh)
	lose.armed.Store(true)
	if err := e.sweep(0, time.Time{}); err != nil {
		t.Fatalf("sweep: %v; want the lost answer to its own write taken for its own", err)
	}
	if lose.armed.Load() {
		t.Fatal("no pod patch was sent: the test proves nothing")
	}
	if pod := e.pod(name + "-0"); pod.Annotations[runnerpod.AnnotationUnregistrationRequest] == "" {
		t.Fatalf("pod annotations %v, want the unregistration request", pod.Annotations)
	}
}

// losingTransport sends requests on; once armed, the first PATCH of path is
// applied by the API server and answered with a 504 and Retry-After instead.
type losingTransport struct {
	rt    http.RoundTripper
	path  string
	armed atomic.Bool
}

func (l *losingTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	resp, err := l.rt.RoundTrip(req)
	if err != nil || req.Method != http.MethodPatch || !strings.HasSuffix(req.URL.Path, l.path) || resp.StatusCode != http.StatusOK ||
		!l.armed.CompareAndSwap(true, false) {
		return resp, err
	}
	_ = resp.Body.Close()
	body := `{"kind":"Status","apiVersion":"v1","metadata":{},"status":"Failure",` +
		`"message":"Timeout: request did not complete within the allotted timeout","reason":"Timeout","code":504}`
	return &http.Response{StatusCode: http.StatusGatewayTimeout, Status: "504 Gateway Timeout", Request: req,
		Header: http.Header{"Content-Type": {"application/json"}, "Retry-After": {"1"}},
		Body:   io.NopCloser(strings.NewReader(body))}, nil
}
