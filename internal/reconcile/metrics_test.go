package reconcile_test

import (
	"bytes"
	"encoding/json"
	"slices"
	"testing"
	"time"

	"github.com/runnerscaler/runnerscaler/internal/emf"
	"github.com/runnerscaler/runnerscaler/internal/pool"
	"github.com/runnerscaler/runnerscaler/internal/reconcile"
	"github.com/runnerscaler/runnerscaler/internal/scaling"
)

// poolRecord is the part of a pool's metric record the test reads.
type poolRecord struct {
	Level, Pool                                               string
	Created, QueuedJobs, OldestQueuedAge, Saturated, Extended float64
	GitHubRateRemaining                                       *float64
	RunnerRegistrationTime                                    []float64
}

// TestPoolMetricsAtLogLevelError: with the function at LogLevel ERROR, each
// sweep's metric record carries level ERROR (Lambda's filter keeps it) and the
// queue as the decision saw it, and the registration time of a runner GitHub
// listed for the first time.
func TestPoolMetricsAtLogLevelError(t *testing.T) {
	t.Parallel()
	e := newEnv(t, false) // token mode: its registration is looked up as soon as it runs
	out := e.writeMetrics("ERROR")
	e.mustSweep(1, time.Time{})
	name := e.statefulSets()[0]
	e.clock.Step(40 * time.Second)
	e.start(name)
	e.status.Extended = 3
	d := scaling.Decision{Desired: 1, Queued: 2, Saturated: true, OldestQueued: e.clock.Now().Add(-90 * time.Second)}
	if err := e.rec.Reconcile(t.Context(), e.pool, d, &e.status); err != nil {
		t.Fatal(err)
	}
	lines := bytes.Split(bytes.TrimSpace(out.Bytes()), []byte("\n"))
	if len(lines) != 2 {
		t.Fatalf("%d metric lines for 2 sweeps:\n%s", len(lines), out.Bytes())
	}
	var first, second poolRecord
	if err := json.Unmarshal(lines[0], &first); err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(lines[1], &second); err != nil {
		t.Fatal(err)
	}
	for _, r := range []poolRecord{first, second} {
		if slices.Index(emf.Levels, r.Level) < slices.Index(emf.Levels, "ERROR") || r.Pool != "p" {
			t.Fatalf("record at level %q for pool %q: Lambda at ERROR drops it", r.Level, r.Pool)
		}
	}
	if first.Created != 1 || first.RunnerRegistrationTime != nil {
		t.Errorf("first sweep: %+v, want one runner created and no registration yet", first)
	}
	if second.QueuedJobs != 2 || second.OldestQueuedAge != 90 || second.Saturated != 1 || second.Extended != 3 ||
		!slices.Equal(second.RunnerRegistrationTime, []float64{40}) {
		t.Errorf("second sweep: %+v, want 2 queued, oldest 90 s, saturated, 3 extended, one registration after 40 s", second)
	}
	if want := e.sim.RateRemaining(1); second.GitHubRateRemaining == nil || *second.GitHubRateRemaining != float64(want) {
		t.Errorf("GitHubRateRemaining %v, want %d", second.GitHubRateRemaining, want)
	}
}

// TestGitHubCallsCountEveryRequest: a pool's GitHubCalls metric counts every
// request its sweep sent to GitHub — the installation token the first call
// needs included — as GitHub counted them.
func TestGitHubCallsCountEveryRequest(t *testing.T) {
	t.Parallel()
	e := newEnv(t, false)
	out := e.writeMetrics("")
	sent := func() int {
		n := 0
		for _, c := range e.sim.Calls() {
			n += c
		}
		return n
	}
	before := sent()
	if err := e.sweep(2, time.Time{}); err != nil {
		t.Fatal(err)
	}
	var rec struct{ GitHubCalls float64 }
	if err := json.Unmarshal(bytes.TrimSpace(out.Bytes()), &rec); err != nil {
		t.Fatalf("metric record %q: %v", out.Bytes(), err)
	}
	if got, want := int(rec.GitHubCalls), sent()-before; got != want || want < 2 {
		t.Fatalf("GitHubCalls %d, GitHub got %d requests (want at least the installation token and a registration token)", got, want)
	}
}

// writeMetrics gives the env a persistent pool's reconciler that writes its
// metric records, at the function's log level, to the buffer returned.
func (e *env) writeMetrics(level string) *bytes.Buffer {
	e.t.Helper()
	out := &bytes.Buffer{}
	metrics, err := emf.NewWriter(out, level)
	if err != nil {
		e.t.Fatal(err)
	}
	cfg, err := pool.Parse([]byte(poolYAML(e.ns, e.pool.IsEphemeral(), "runner:1")))
	if err != nil {
		e.t.Fatal(err)
	}
	if e.rec, err = reconcile.New(cfg, e.kube, e.gh, e.clock, nil, reconcile.Options{Metrics: metrics, JobLinks: e.links, Roster: e.roster}); err != nil {
		e.t.Fatal(err)
	}
	return out
}
