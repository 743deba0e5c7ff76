package webhook_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"slices"
	"strings"
	"testing"

	"github.com/runnerscaler/runnerscaler/internal/emf"
	"github.com/runnerscaler/runnerscaler/internal/pool"
	"github.com/runnerscaler/runnerscaler/internal/reservation"
	"github.com/runnerscaler/runnerscaler/internal/webhook"
)

// TestInProgressRecordsItsRunner: the fixture's in_progress names runner 5,
// "GitHub Actions 5"; the reservation keeps it, and the delivery's log line says it.
func TestInProgressRecordsItsRunner(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	queued, inProgress := fixture(t, "workflow_job/queued.payload.json"), fixture(t, "workflow_job/in_progress.payload.json")
	for _, d := range []struct {
		body []byte
		id   string
	}{{queued, "d-queued"}, {inProgress, "d-in-progress"}} {
		h := headersFor("workflow_job", d.body)
		h["X-GitHub-Delivery"] = d.id
		if resp := e.handler.Serve(t.Context(), h, d.body); resp.Status != 200 {
			t.Fatalf("delivery %s: %d %s", d.id, resp.Status, resp.Reason)
		}
	}
	r, ok, err := e.store.Job(t.Context(), "octo", 289782451)
	if err != nil || !ok {
		t.Fatalf("Job = %v, %v", ok, err)
	}
	if r.State != reservation.InProgress || r.RunnerID != 5 || r.RunnerName != "GitHub Actions 5" {
		t.Fatalf("reservation: state %s, runner %d %q; want in_progress on runner 5 \"GitHub Actions 5\"", r.State, r.RunnerID, r.RunnerName)
	}
	if trail := r.Trail(); len(trail) != 2 || trail[0].DeliveryID != "d-queued" || trail[1].DeliveryID != "d-in-progress" {
		t.Fatalf("trail = %+v", trail)
	}
	if !strings.Contains(e.logs.String(), `"runner":"GitHub Actions 5","runnerId":5`) {
		t.Fatalf("the in_progress log line does not name the runner:\n%s", e.logs.String())
	}
}

// failingStore fails every write, as DynamoDB does after the SDK's retries.
type failingStore struct{}

func (failingStore) Record(_ context.Context, _ reservation.Delivery) (reservation.Outcome, error) {
	return 0, errors.New("throttled")
}

func (failingStore) RecordRunner(_ context.Context, _ reservation.Delivery) (reservation.Outcome, error) {
	return 0, errors.New("throttled")
}

func (failingStore) Job(_ context.Context, _ string, _ int64) (reservation.Reservation, bool, error) {
	return reservation.Reservation{}, false, errors.New("throttled")
}

func (failingStore) FollowRunner(_ context.Context, _ string, _ int64, _ string) (string, bool, error) {
	return "", false, errors.New("throttled")
}

// TestDeliveryMetricsAtLogLevelError: each delivery writes one metric record
// under its outcome, and with the function at LogLevel ERROR every record still
// passes Lambda's filter.
func TestDeliveryMetricsAtLogLevelError(t *testing.T) {
	t.Parallel()
	cfg, err := pool.Parse([]byte(pools))
	if err != nil {
		t.Fatal(err)
	}
	var out bytes.Buffer
	metrics, err := emf.NewWriter(&out, "ERROR")
	if err != nil {
		t.Fatal(err)
	}
	e := newEnvWith(t, cfg, secret)
	nudger := &recordingNudger{err: errors.New("lambda down")}
	h := webhook.New([]byte(secret), cfg, e.store, webhook.WithNudger(nudger), webhook.WithMetrics(metrics))
	down := webhook.New([]byte(secret), cfg, failingStore{}, webhook.WithMetrics(metrics))
	queued := fixture(t, "workflow_job/queued.payload.json")
	unmatched := []byte(strings.Replace(string(queued), `"ubuntu-latest"`, `"windows-2022"`, 1))
	badSig := headersFor("workflow_job", queued)
	badSig["X-Hub-Signature-256"] = sign(queued, "wrong")
	steps := []struct {
		h    *webhook.Handler
		hdr  map[string]string
		body []byte
	}{
		{h, headersFor("workflow_job", queued), queued},       // applied, nudge fails
		{h, headersFor("workflow_job", queued), queued},       // stale
		{h, headersFor("workflow_job", unmatched), unmatched}, // no pool
		{h, headersFor("ping", []byte(`{}`)), []byte(`{}`)},   // ignored
		{h, badSig, queued}, // 401
		{h, headersFor("workflow_job", []byte("{")), []byte("{")}, // 400
		{down, headersFor("workflow_job", queued), queued},        // 503
	}
	for _, s := range steps {
		s.h.Serve(t.Context(), s.hdr, s.body)
	}
	var got []string
	nudgeFailures := 0.0
	for _, line := range bytes.Split(bytes.TrimSpace(out.Bytes()), []byte("\n")) {
		var rec struct {
			Level, Outcome            string
			Deliveries, NudgeFailures float64
		}
		if err := json.Unmarshal(line, &rec); err != nil {
			t.Fatalf("metric line %s: %v", line, err)
		}
		if rec.Level != "ERROR" {
			t.Fatalf("metric line at level %q, want ERROR (the function's level): %s", rec.Level, line)
		}
		if rec.Deliveries != 1 {
			t.Fatalf("Deliveries = %v in %s", rec.Deliveries, line)
		}
		got = append(got, rec.Outcome)
		nudgeFailures += rec.NudgeFailures
	}
	want := []string{"applied", "stale", "no-pool", "ignored",
		"unauthorized", "rejected", "unavailable"}
	if !slices.Equal(got, want) {
		t.Fatalf("outcomes %v, want %v", got, want)
	}
	if nudgeFailures != 1 {
		t.Fatalf("NudgeFailures summed to %v, want 1", nudgeFailures)
	}
}

// TestUnroutedSelfHostedJobsAreKept: a job asking for a self-hosted runner that
// no pool matches is kept (for `runnerscaler status`); one for a GitHub-hosted
// runner costs no write.
func TestUnroutedSelfHostedJobsAreKept(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	queued := fixture(t, "workflow_job/queued.payload.json")
	hosted := []byte(strings.Replace(string(queued), `"ubuntu-latest"`, `"windows-2022"`, 1))
	selfHosted := []byte(strings.Replace(string(queued), `"ubuntu-latest"`, `"self-hosted", "windows"`, 1))
	for _, body := range [][]byte{hosted, selfHosted} {
		if resp := e.handler.Serve(t.Context(), headersFor("workflow_job", body), body); resp.Status != 202 {
			t.Fatalf("unmatched delivery: %d %s", resp.Status, resp.Reason)
		}
	}
	us, err := e.store.UnroutedQueued(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	if len(us) != 1 || us[0].JobID != 289782451 || !slices.Equal(us[0].Labels, []string{"self-hosted", "windows"}) ||
		!strings.Contains(us[0].Reason, "none has every label") {
		t.Fatalf("unrouted jobs %+v, want the self-hosted one with the router's reason", us)
	}
	if n := e.items(t); n != 0 {
		t.Fatalf("%d pool items written for jobs no pool matched", n)
	}
}
