package tests

import (
	"bytes"
	"encoding/json"
	"fmt"
	"math"
	"slices"
	"strings"
	"testing"
	"time"

	"k8s.io/utils/clock"

	"github.com/runnerscaler/runnerscaler/internal/pool"
	"github.com/runnerscaler/runnerscaler/internal/poolstate"
	"github.com/runnerscaler/runnerscaler/internal/queuewait"
	"github.com/runnerscaler/runnerscaler/internal/redeliver"
	"github.com/runnerscaler/runnerscaler/internal/reservation"
	"github.com/runnerscaler/runnerscaler/internal/status"
	"github.com/runnerscaler/runnerscaler/internal/status/gather"
	"github.com/runnerscaler/runnerscaler/internal/webhook"
	"github.com/runnerscaler/runnerscaler/local/apispec"
	"github.com/runnerscaler/runnerscaler/local/githubsim"
	"github.com/runnerscaler/runnerscaler/local/loop"
	"github.com/runnerscaler/runnerscaler/local/testenv"
)

// TestQueueWaitFromTheClosedLoop: jobs queue behind a pool of two runners in
// the closed loop, and the simulator's own deliveries reach the real webhook.
// Each job's wait becomes exactly one QueueWaitSeconds sample of its pool,
// and the samples are the jobs' started_at minus created_at as the simulator
// stamped them (to the second, as GitHub does); `runnerscaler status` shows
// the pool's p50 and p95 of the same waits next to its oldest queued job.
func TestQueueWaitFromTheClosedLoop(t *testing.T) {
	t.Parallel()
	img := image(t)
	db, tableName := testenv.Table(t)
	kube, ns := testenv.Namespace(t)
	cfg, err := pool.Parse(fmt.Appendf(nil, `
pools:
  - name: slo
    organization: acme
    labels: [slo]
    maxReplicas: 2
    scaleDownDelaySecondsAfterScaleOut: 1
    kubernetes: {namespace: %[1]s, template: %[2]s}
`, ns, loop.RunnerTemplate(img)))
	if err != nil {
		t.Fatal(err)
	}
	log, logs := debugLog(t)
	metrics := &logBuffer{}
	l, err := loop.Start(t.Context(), loop.Options{Pools: cfg, DB: db, Table: tableName, Kube: kube, Log: log, WebhookMetrics: metrics})
	if err != nil {
		t.Fatal(err)
	}
	apispec.Verify(t, l.Sim)
	t.Cleanup(func() { releasePods(kube, ns) })
	t.Cleanup(l.Stop)
	w := &world{t: t, loop: l, kube: kube, ns: ns, cfg: cfg, image: img, logs: logs}
	const jobs = 6
	w.queue(jobs, 2*time.Second, "slo")
	w.waitFor("every job completed", 3*time.Minute, func() bool { return allDone(l.Sim.Jobs()) })

	var want []float64
	for _, j := range l.Sim.Jobs() {
		want = append(want, stampedWait(j).Seconds())
	}
	slices.Sort(want)
	if want[len(want)-1] == 0 {
		t.Fatalf("no job waited (waits %v): the test shows nothing", want)
	}
	var got []float64
	w.waitFor("a wait sample per job", 30*time.Second, func() bool {
		got = queueWaitSamples(t, metrics, "slo")
		return len(got) >= jobs
	})
	slices.Sort(got)
	if !slices.Equal(got, want) {
		t.Fatalf("QueueWaitSeconds samples %v, want the simulator's started_at − created_at %v", got, want)
	}

	clk := clock.RealClock{}
	g := gather.New(cfg, reservation.New(db, tableName, clk), poolstate.NewStore(db, tableName),
		redeliver.NewStore(db, tableName), kube, clk, gather.WithQueueWaits(queuewait.New(db, tableName, clk)))
	r, err := g.Report(t.Context(), "")
	if err != nil {
		t.Fatal(err)
	}
	sorted := make([]time.Duration, len(want))
	for i, s := range want {
		sorted[i] = time.Duration(s * float64(time.Second))
	}
	wantWait := status.QueueWait{WindowSeconds: 3600, Jobs: jobs,
		P50Seconds: status.Percentile(sorted, 50).Seconds(), P95Seconds: status.Percentile(sorted, 95).Seconds()}
	if q := r.Pools[0].QueueWait; q != wantWait {
		t.Fatalf("status shows queue wait %+v, want %+v (waits %v)", q, wantWait, want)
	}
	var out bytes.Buffer
	if err := status.RenderReport(&out, r); err != nil {
		t.Fatal(err)
	}
	t.Logf("runnerscaler status:\n%s", out.String())
	cell := fmt.Sprintf(" %s / %s (%d jobs) ", statusSeconds(wantWait.P50Seconds), statusSeconds(wantWait.P95Seconds), jobs)
	if !strings.Contains(out.String(), cell) {
		t.Fatalf("status output lacks %q", cell)
	}
}

// stampedWait is a job's wait as its deliveries stamp it: RFC 3339 to the
// second, a start before the creation counting as none.
func stampedWait(j githubsim.Job) time.Duration {
	return max(j.StartedAt.Truncate(time.Second).Sub(j.QueuedAt.Truncate(time.Second)), 0)
}

// queueWaitSamples are the values of the webhook's QueueWaitSeconds lines of pool.
func queueWaitSamples(t *testing.T, metrics *logBuffer, pool string) []float64 {
	t.Helper()
	var out []float64
	for _, line := range metrics.matching([]string{webhook.QueueWaitMetric}, math.MaxInt) {
		var rec struct {
			Pool             string
			QueueWaitSeconds float64
		}
		if err := json.Unmarshal([]byte(line), &rec); err != nil {
			t.Fatalf("metric line %s: %v", line, err)
		}
		if rec.Pool == pool {
			out = append(out, rec.QueueWaitSeconds)
		}
	}
	return out
}

// statusSeconds is how status prints a wait under an hour: 0s, 7s, 1m5s, 2m.
func statusSeconds(s float64) string {
	out := time.Duration(s * float64(time.Second)).Round(time.Second).String()
	if strings.HasSuffix(out, "m0s") {
		out = strings.TrimSuffix(out, "0s")
	}
	return out
}
