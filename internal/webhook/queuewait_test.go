package webhook_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"slices"
	"strings"
	"testing"
	"time"

	clocktesting "k8s.io/utils/clock/testing"

	"github.com/runnerscaler/runnerscaler/internal/emf"
	"github.com/runnerscaler/runnerscaler/internal/pool"
	"github.com/runnerscaler/runnerscaler/internal/queuewait"
	"github.com/runnerscaler/runnerscaler/internal/reservation"
	"github.com/runnerscaler/runnerscaler/internal/webhook"
	"github.com/runnerscaler/runnerscaler/local/testenv"
)

// stepsPool routes the in_progress fixture with queued steps: a job created at
// 03:31:29 and started at 03:31:36, a wait of 7 s.
const stepsPool = `
pools:
  - name: steps
    repository: wolfy1339/github-events-schemas
    labels: [ubuntu-latest]
    maxReplicas: 5
    kubernetes: {namespace: runners, image: runner:1}
`

const stepsFixture = "workflow_job/in_progress.with-queued-steps.payload.json"

// stepsStarted is the fixture's workflow_job.started_at.
var stepsStarted = time.Date(2023, 6, 26, 3, 31, 36, 0, time.UTC)

// waitEnv is a handler whose queue waits go to a metric buffer and a real store.
type waitEnv struct {
	handler *webhook.Handler
	metrics *bytes.Buffer
	waits   *queuewait.Store
	logs    *syncBuffer
}

func newWaitEnv(t *testing.T, waits webhook.QueueWaits) *waitEnv {
	t.Helper()
	cfg, err := pool.Parse([]byte(stepsPool))
	if err != nil {
		t.Fatal(err)
	}
	db, name := testenv.Table(t)
	clk := clocktesting.NewFakePassiveClock(stepsStarted.Add(2 * time.Second))
	e := &waitEnv{metrics: &bytes.Buffer{}, waits: queuewait.New(db, name, clk), logs: &syncBuffer{}}
	w, err := emf.NewWriter(e.metrics, "")
	if err != nil {
		t.Fatal(err)
	}
	if waits == nil {
		waits = e.waits
	}
	e.handler = webhook.New([]byte(secret), cfg, reservation.New(db, name, clk), webhook.WithClock(clk),
		webhook.WithMetrics(w), webhook.WithQueueWaits(waits), webhook.WithLogger(slog.New(slog.NewJSONHandler(e.logs, nil))))
	return e
}

// deliver serves body as delivery id and wants a 200.
func (e *waitEnv) deliver(t *testing.T, id string, body []byte) {
	t.Helper()
	h := headersFor("workflow_job", body)
	h["X-GitHub-Delivery"] = id
	if resp := e.handler.Serve(t.Context(), h, body); resp.Status != 200 {
		t.Fatalf("delivery %s: %d %s", id, resp.Status, resp.Reason)
	}
}

// waitLine is a QueueWaitSeconds metric line.
type waitLine struct {
	Pool             string
	QueueWaitSeconds float64
	AWS              struct {
		CloudWatchMetrics []struct {
			Dimensions [][]string
			Metrics    []struct{ Name, Unit string }
		}
	} `json:"_aws"`
}

// waitLines are the QueueWaitSeconds lines among the metric lines.
func (e *waitEnv) waitLines(t *testing.T) []waitLine {
	t.Helper()
	var out []waitLine
	for _, raw := range bytes.Split(bytes.TrimSpace(e.metrics.Bytes()), []byte("\n")) {
		if !bytes.Contains(raw, []byte(webhook.QueueWaitMetric)) {
			continue
		}
		var l waitLine
		if err := json.Unmarshal(raw, &l); err != nil {
			t.Fatalf("metric line %s: %v", raw, err)
		}
		out = append(out, l)
	}
	return out
}

// edit replaces old by new in body, once, and fails if old is not there.
func edit(t *testing.T, body []byte, old, new string) []byte {
	t.Helper()
	if !bytes.Contains(body, []byte(old)) {
		t.Fatalf("fixture edit: %q not found", old)
	}
	return bytes.Replace(body, []byte(old), []byte(new), 1)
}

// TestQueueWaitOnceFromARealInProgress: GitHub's in_progress gives a wait of
// 7 s: one metric sample under the job's pool and in the series without
// dimensions, and one wait kept for status. Its redelivery and the job's
// completed add nothing.
func TestQueueWaitOnceFromARealInProgress(t *testing.T) {
	t.Parallel()
	e := newWaitEnv(t, nil)
	body := fixture(t, stepsFixture)
	e.deliver(t, "d-in-progress", body)
	e.deliver(t, "d-in-progress", body) // GitHub's redelivery reuses the id
	completed := edit(t, body, `"action": "in_progress"`, `"action": "completed"`)
	e.deliver(t, "d-completed", completed)

	lines := e.waitLines(t)
	if len(lines) != 1 {
		t.Fatalf("%d QueueWaitSeconds lines, want 1:\n%s", len(lines), e.metrics)
	}
	l := lines[0]
	cw := l.AWS.CloudWatchMetrics
	if l.Pool != "steps" || l.QueueWaitSeconds != 7 || len(cw) != 1 ||
		!slices.EqualFunc(cw[0].Dimensions, [][]string{{"Pool"}, {}}, slices.Equal) ||
		len(cw[0].Metrics) != 1 || cw[0].Metrics[0].Unit != string(emf.Seconds) {
		t.Fatalf("metric line %+v, want 7 Seconds under Pool steps and without dimensions", l)
	}
	got, err := e.waits.Recent(t.Context(), "steps")
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(got, []time.Duration{7 * time.Second}) {
		t.Fatalf("kept waits %v, want [7s]", got)
	}
	if !strings.Contains(e.logs.String(), `"queueWaitSeconds":7`) {
		t.Fatalf("the in_progress log line does not say the wait:\n%s", e.logs)
	}
}

// TestQueueWaitOfGitHubsQuirks: a delivery whose times give no wait is still
// applied (200), with no metric and nothing kept; a start stamped before the
// creation is a wait of zero; a job that deploys to an environment has no wait
// (its created_at includes the protection rules' hold).
func TestQueueWaitOfGitHubsQuirks(t *testing.T) {
	t.Parallel()
	const started = `"started_at": "2023-06-26T03:31:36Z"`
	for _, tc := range []struct {
		name     string
		old, new string
		want     []float64
	}{
		{"no started_at", started + ",", "", nil},
		{"started_at null", started, `"started_at": null`, nil},
		{"started_at not a time", started, `"started_at": "soon"`, nil},
		{"started_at zero", started, `"started_at": "0001-01-01T00:00:00Z"`, nil},
		{"created_at null", `"created_at": "2023-06-26T03:31:29Z"`, `"created_at": null`, nil},
		{"started before created", started, `"started_at": "2023-06-26T03:31:27Z"`, []float64{0}},
		{"deploys to an environment", `"action": "in_progress",`, `"action": "in_progress", "deployment": {"id": 1},`, nil},
		{"fractional seconds", started, `"started_at": "2023-06-26T03:31:36.250Z"`, []float64{7.25}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			e := newWaitEnv(t, nil)
			e.deliver(t, "d", edit(t, fixture(t, stepsFixture), tc.old, tc.new))
			var got []float64
			for _, l := range e.waitLines(t) {
				got = append(got, l.QueueWaitSeconds)
			}
			if !slices.Equal(got, tc.want) {
				t.Fatalf("QueueWaitSeconds samples %v, want %v", got, tc.want)
			}
			kept, err := e.waits.Recent(t.Context(), "steps")
			if err != nil {
				t.Fatal(err)
			}
			if len(kept) != len(tc.want) {
				t.Fatalf("kept waits %v, want %d", kept, len(tc.want))
			}
		})
	}
}

// refusingWaits is a QueueWaits that fails or refuses every wait.
type refusingWaits struct{ err error }

func (r refusingWaits) Add(context.Context, string, time.Duration) (bool, error) { return false, r.err }

// TestQueueWaitNotKeptDoesNotFailTheDelivery: when the wait cannot be kept
// (DynamoDB down, or the minute's bound), the delivery is still applied, the
// metric still written, and the log line says why the wait was not kept.
func TestQueueWaitNotKeptDoesNotFailTheDelivery(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name string
		err  error
		log  string
	}{
		{"store down", errors.New("throttled"), `"queueWaitKept":"failed: throttled"`},
		{"minute full", nil, `"queueWaitKept":"no: the pool's minute holds its most waits"`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			e := newWaitEnv(t, refusingWaits{tc.err})
			e.deliver(t, "d", fixture(t, stepsFixture))
			if n := len(e.waitLines(t)); n != 1 {
				t.Fatalf("%d QueueWaitSeconds lines, want 1", n)
			}
			if !strings.Contains(e.logs.String(), tc.log) {
				t.Fatalf("log lacks %s:\n%s", tc.log, e.logs)
			}
		})
	}
}
