package main

import (
	"encoding/json"
	"regexp"
	"strings"
	"testing"
	"time"

	"k8s.io/utils/clock"

	"github.com/runnerscaler/runnerscaler/internal/queuewait"
	"github.com/runnerscaler/runnerscaler/internal/status"
)

// TestStatusShowsTheRecentQueueWaits: the waits the webhook kept for a pool
// within the last hour show as its p50 and p95 next to its oldest queued job,
// in the pool's view and in JSON; a pool whose jobs did not start shows none.
func TestStatusShowsTheRecentQueueWaits(t *testing.T) {
	w := newWorld(t, `
pools:
  - name: small
    organization: acme
    maxReplicas: 1
    kubernetes: {namespace: %[1]s, image: runner:1}
  - name: quiet
    organization: other
    maxReplicas: 1
    kubernetes: {namespace: %[1]s, image: runner:1}
`, false)
	waits := queuewait.New(w.db, w.table, clock.RealClock{}) // the command reads on real time
	for _, wait := range []time.Duration{30 * time.Second, 2 * time.Second, 4 * time.Second} {
		if _, err := waits.Add(t.Context(), "small", wait); err != nil {
			t.Fatal(err)
		}
	}
	// The job is queued 90 s before the world's clock, which stands at the
	// world's creation; status runs on real time, which has moved on since.
	queued := w.clock.Now()
	w.queue("small", 101, 90*time.Second)
	out := w.status()
	elapsed := time.Since(queued)
	t.Logf("runnerscaler status:\n%s", out)
	mustContain(t, out, "OLDEST  WAIT 1H P50/P95")
	row := line(out, "small ")
	m := regexp.MustCompile(`(\d+m\d+s)\s+4s / 30s \(3 jobs\)`).FindStringSubmatch(row)
	if m == nil {
		t.Fatalf("pool row %q: want the oldest job's age, then p50 4s and p95 30s of 3 jobs", row)
	}
	// The job was queued 90 s before the test queued it; status runs on real time.
	if age, err := time.ParseDuration(m[1]); err != nil || age < 90*time.Second || age > 90*time.Second+elapsed+time.Second {
		t.Errorf("pool row %q: oldest job's age %s, want 1m30s plus at most the %s since the world's clock was set", row, m[1], elapsed.Round(time.Second))
	}
	if row := line(out, "quiet "); !strings.Contains(row, "-       -  ") {
		t.Errorf("quiet pool's row %q: want no oldest job and no wait", row)
	}
	mustContain(t, w.status("small"), "queue wait: p50 4s, p95 30s over the 3 jobs started in the last hour")
	var p status.Pool
	if err := json.Unmarshal([]byte(w.status("small", "-o", "json")), &p); err != nil {
		t.Fatal(err)
	}
	if want := (status.QueueWait{WindowSeconds: 3600, Jobs: 3, P50Seconds: 4, P95Seconds: 30}); p.QueueWait != want {
		t.Fatalf("JSON queueWait %+v, want %+v", p.QueueWait, want)
	}
}
