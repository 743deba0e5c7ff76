package scaling_test

import (
	"testing"
	"time"

	"github.com/runnerscaler/runnerscaler/internal/pool"
	"github.com/runnerscaler/runnerscaler/internal/scaling"
)

// TestHeadroom: headroom replicas follow their overrides' windows (the first
// active one wins, recurring ones repeat), and a pool without headroom or a
// draining one wants no placeholder.
func TestHeadroom(t *testing.T) {
	t.Parallel()
	cfg, err := pool.Parse([]byte(`
pools:
  - name: a
    organization: org
    maxReplicas: 5
    kubernetes: {namespace: ns, image: runner:1}
    headroom:
      replicas: 1
      scheduledOverrides:
        - {startTime: "2026-01-05T08:00:00Z", endTime: "2026-01-05T18:00:00Z", recurrenceRule: {frequency: Daily}, replicas: 3}
        - {startTime: "2026-01-05T00:00:00Z", endTime: "2026-01-07T00:00:00Z", replicas: 0}
  - name: b
    organization: org
    maxReplicas: 5
    kubernetes: {namespace: ns, image: runner:1}
`))
	if err != nil {
		t.Fatal(err)
	}
	a := cfg.Pool("a")
	at := func(s string) time.Time {
		v, err := time.Parse(time.RFC3339, s)
		if err != nil {
			t.Fatal(err)
		}
		return v
	}
	for _, tc := range []struct {
		name string
		p    *pool.Pool
		now  string
		want int
	}{
		{"before every window", a, "2026-01-04T12:00:00Z", 1},
		{"first override wins", a, "2026-01-05T09:00:00Z", 3},
		{"second override between the first's windows", a, "2026-01-05T19:00:00Z", 0},
		{"the first recurs", a, "2026-01-06T08:00:00Z", 3},
		{"its window ended", a, "2026-01-06T18:00:00Z", 0},
		{"after the second's end", a, "2026-01-07T19:00:00Z", 1},
		{"recurring again", a, "2026-01-09T17:59:59Z", 3},
		{"draining", a.Draining(), "2026-01-05T09:00:00Z", 0},
		{"no headroom", cfg.Pool("b"), "2026-01-05T09:00:00Z", 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			if got := scaling.Headroom(tc.p, at(tc.now)); got != tc.want {
				t.Fatalf("Headroom at %s = %d, want %d", tc.now, got, tc.want)
			}
		})
	}
}
