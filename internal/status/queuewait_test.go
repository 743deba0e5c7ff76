package status_test

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/runnerscaler/runnerscaler/internal/status"
)

// TestPercentile: nearest rank, a value some job had; the ends of the list at
// the ends of the range.
func TestPercentile(t *testing.T) {
	t.Parallel()
	var twenty []time.Duration
	for i := 1; i <= 20; i++ {
		twenty = append(twenty, time.Duration(i)*time.Second)
	}
	for _, tc := range []struct {
		name   string
		sorted []time.Duration
		p      float64
		want   time.Duration
	}{
		{"empty", nil, 50, 0},
		{"one", []time.Duration{3 * time.Second}, 95, 3 * time.Second},
		{"p50 of twenty", twenty, 50, 10 * time.Second},
		{"p95 of twenty", twenty, 95, 19 * time.Second},
		{"p100 of twenty", twenty, 100, 20 * time.Second},
		{"p1 of twenty", twenty, 1, time.Second},
		{"p50 of two", []time.Duration{time.Second, 9 * time.Second}, 50, time.Second},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			if got := status.Percentile(tc.sorted, tc.p); got != tc.want {
				t.Fatalf("Percentile(%v, %v) = %v, want %v", tc.sorted, tc.p, got, tc.want)
			}
		})
	}
}

// TestQueueWaitInTheReport: a pool's recent waits, in any order, give its p50
// and p95 in the report, in the pools table next to the oldest queued job, in
// the pool's view and in JSON; a pool where no job started shows none.
func TestQueueWaitInTheReport(t *testing.T) {
	t.Parallel()
	// 20 waits of 1..20 s, shuffled: p50 10 s, p95 19 s.
	var waits []time.Duration
	for i := range 20 {
		waits = append(waits, time.Duration((i*7)%20+1)*time.Second)
	}
	r := status.Build(now, []status.Input{
		{Pool: "busy", MaxReplicas: 5, Jobs: []status.Job{queued(1, 95*time.Second)}, Waits: waits, WaitWindow: time.Hour},
		{Pool: "idle", MaxReplicas: 5, WaitWindow: time.Hour},
	}, nil)
	want := status.QueueWait{WindowSeconds: 3600, Jobs: 20, P50Seconds: 10, P95Seconds: 19}
	if got := r.Pools[0].QueueWait; got != want {
		t.Fatalf("busy pool's queue wait %+v, want %+v", got, want)
	}
	if got := r.Pools[1].QueueWait; got != (status.QueueWait{WindowSeconds: 3600}) {
		t.Fatalf("idle pool's queue wait %+v, want no jobs", got)
	}

	var out bytes.Buffer
	if err := status.RenderReport(&out, r); err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(out.String(), "\n")
	header, busy, idle := lines[2], lines[3], lines[4] // after the webhook's line and a blank one
	if !strings.Contains(header, "OLDEST  WAIT 1H P50/P95") {
		t.Fatalf("pools table header %q, want the wait column next to OLDEST", header)
	}
	if !strings.Contains(busy, "1m35s   10s / 19s (20 jobs)") {
		t.Fatalf("busy pool's row %q, want its oldest job then p50 / p95", busy)
	}
	if col := strings.Index(header, "WAIT"); len(idle) <= col || idle[col] != '-' {
		t.Fatalf("idle pool's row %q, want - under WAIT", idle)
	}

	out.Reset()
	if err := status.RenderPool(&out, now, r.Pools[0]); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(out.String(), "queue wait: p50 10s, p95 19s over the 20 jobs started in the last hour (created → started)") {
		t.Fatalf("pool view:\n%s", out.String())
	}
	out.Reset()
	if err := status.RenderPool(&out, now, r.Pools[1]); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(out.String(), "queue wait: no job started in the last hour") {
		t.Fatalf("idle pool view:\n%s", out.String())
	}

	out.Reset()
	if err := status.JSON(&out, r); err != nil {
		t.Fatal(err)
	}
	var doc struct {
		Pools []struct {
			QueueWait map[string]float64 `json:"queueWait"`
		} `json:"pools"`
	}
	if err := json.Unmarshal(out.Bytes(), &doc); err != nil {
		t.Fatal(err)
	}
	if q := doc.Pools[0].QueueWait; q["p50Seconds"] != 10 || q["p95Seconds"] != 19 || q["jobs"] != 20 || q["windowSeconds"] != 3600 {
		t.Fatalf("JSON queueWait %v", q)
	}
}
