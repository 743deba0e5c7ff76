package webhook_test

import (
	"bytes"
	"log/slog"
	"testing"
	"time"

	clocktesting "k8s.io/utils/clock/testing"

	"github.com/runnerscaler/runnerscaler/internal/pool"
	"github.com/runnerscaler/runnerscaler/internal/rerun"
	"github.com/runnerscaler/runnerscaler/internal/reservation"
	"github.com/runnerscaler/runnerscaler/internal/roster"
	"github.com/runnerscaler/runnerscaler/internal/webhook"
	"github.com/runnerscaler/runnerscaler/local/testenv"
)

// A `completed` delivery of a job that failed or was cancelled on one of our
// runners is recorded for the sweeper's re-run decision, once, with what the
// decision needs (GitHub's payload, its runner renamed to one of ours); a job
// that succeeded, or failed on a runner that is not ours, records nothing.
func TestFailedJobOfOurRunnerIsRecorded(t *testing.T) {
	t.Parallel()
	cfg, err := pool.Parse([]byte(pools))
	if err != nil {
		t.Fatal(err)
	}
	db, name := testenv.Table(t)
	failures := rerun.NewStore(db, name)
	clk := clocktesting.NewFakePassiveClock(fixtureTime)
	ours := roster.NewStore(db, name)
	if err := ours.Add(t.Context(), roster.Runner{Pool: "octo", Name: "octo-abcde-0"}, fixtureTime); err != nil {
		t.Fatal(err)
	}
	h := webhook.New([]byte(secret), cfg, reservation.New(db, name, clk), webhook.WithFailures(failures), webhook.WithRoster(ours),
		webhook.WithClock(clk), webhook.WithLogger(slog.New(slog.DiscardHandler)))
	deliver := func(fixtureName, runner string) {
		t.Helper()
		body := fixture(t, "workflow_job/"+fixtureName)
		body = bytes.ReplaceAll(body, []byte(`"runner_name": "GitHub Actions 5"`), []byte(`"runner_name": "`+runner+`"`))
		if resp := h.Serve(t.Context(), headersFor("workflow_job", body), body); resp.Status != 200 && resp.Status != 202 {
			t.Fatalf("%s: %+v", fixtureName, resp)
		}
	}
	deliver("completed.failure.with-organization.payload.json", "GitHub Actions 5") // not ours
	deliver("completed.success.with-organization.payload.json", "octo-abcde-0")     // succeeded
	deliver("completed.failure.with-organization.payload.json", "octo-bcdfg-0")     // named like ours, another deployment's
	if got, err := failures.Pending(t.Context(), "octo"); err != nil || len(got) != 0 {
		t.Fatalf("pending = %+v, %v: want nothing recorded", got, err)
	}
	deliver("completed.failure.with-organization.payload.json", "octo-abcde-0")
	deliver("completed.failure.with-organization.payload.json", "octo-abcde-0") // redelivered
	got, err := failures.Pending(t.Context(), "octo")
	if err != nil || len(got) != 1 {
		t.Fatalf("pending = %+v, %v: want the one failure", got, err)
	}
	c := got[0]
	want := rerun.Candidate{Pool: "octo", JobID: 289782451, RunID: 2202229078, RunAttempt: 1, Repository: "Codertocat/Hello-World",
		Runner: "octo-abcde-0", Conclusion: "failure",
		StartedMillis:   time.Date(2021, 8, 5, 10, 34, 58, 0, time.UTC).UnixMilli(),
		CompletedMillis: time.Date(2021, 8, 5, 10, 38, 16, 0, time.UTC).UnixMilli(), RecordedMillis: fixtureTime.UnixMilli()}
	if c != want {
		t.Fatalf("recorded %+v\nwant     %+v", c, want)
	}
}

// TestWithoutARosterNoRunnerIsOurs: a handler given no roster takes no runner
// for this deployment's, however it is named: a job on a runner named like a
// pool's records no link, no failure and nudges nobody.
func TestWithoutARosterNoRunnerIsOurs(t *testing.T) {
	t.Parallel()
	cfg, err := pool.Parse([]byte(pools))
	if err != nil {
		t.Fatal(err)
	}
	db, name := testenv.Table(t)
	failures := rerun.NewStore(db, name)
	clk := clocktesting.NewFakePassiveClock(fixtureTime)
	store := reservation.New(db, name, clk)
	nudger := &recordingNudger{}
	h := webhook.New([]byte(secret), cfg, store, webhook.WithFailures(failures), webhook.WithNudger(nudger),
		webhook.WithClock(clk), webhook.WithLogger(slog.New(slog.DiscardHandler)))
	for _, f := range []string{"in_progress.payload.json", "completed.failure.with-organization.payload.json"} {
		body := fixture(t, "workflow_job/"+f)
		body = bytes.ReplaceAll(body, []byte(`"runner_name": "GitHub Actions 5"`), []byte(`"runner_name": "octo-abcde-0"`))
		if resp := h.Serve(t.Context(), headersFor("workflow_job", body), body); resp.Status != 200 && resp.Status != 202 {
			t.Fatalf("%s: %+v", f, resp)
		}
	}
	if got, err := failures.Pending(t.Context(), "octo"); err != nil || len(got) != 0 {
		t.Fatalf("failures %+v, %v: want none recorded without a roster", got, err)
	}
	if links, err := store.RunnerJobs(t.Context(), "octo-abcde-0"); err != nil || len(links) != 0 {
		t.Fatalf("links %+v, %v: want none without a roster", links, err)
	}
	for _, ev := range nudger.events {
		if len(ev.Finished) > 0 {
			t.Fatalf("nudges %+v: want no runner's pool nudged without a roster", nudger.events)
		}
	}
}
