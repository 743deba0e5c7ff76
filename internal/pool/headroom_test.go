package pool_test

import (
	"strings"
	"testing"

	"github.com/runnerscaler/runnerscaler/internal/pool"
)

// TestHeadroomLoads: a pool's headroom keeps its replicas, image and overrides;
// the image defaults to the pause image; a draining pool has none.
func TestHeadroomLoads(t *testing.T) {
	t.Parallel()
	cfg, err := pool.Parse([]byte(valid + `    headroom:
      replicas: 2
      scheduledOverrides: [{startTime: "2026-01-01T00:00:00Z", endTime: "2026-01-01T01:00:00Z", recurrenceRule: {frequency: Daily}, replicas: 3}]
  - name: b
    organization: org
    maxReplicas: 3
    kubernetes: {namespace: ns, image: runner:1}
    headroom: {replicas: 1, image: mirror.example/pause:3.10}
`))
	if err != nil {
		t.Fatal(err)
	}
	h := cfg.Pool("a").Headroom
	if h == nil || h.Replicas != 2 || len(h.ScheduledOverrides) != 1 || *h.ScheduledOverrides[0].Replicas != 3 ||
		h.ScheduledOverrides[0].RecurrenceRule.Frequency != "Daily" {
		t.Fatalf("headroom = %+v", h)
	}
	if got := h.HeadroomImage(); got != pool.DefaultHeadroomImage {
		t.Errorf("default image = %q, want %q", got, pool.DefaultHeadroomImage)
	}
	if got := cfg.Pool("b").Headroom.HeadroomImage(); got != "mirror.example/pause:3.10" {
		t.Errorf("image = %q", got)
	}
	if d := cfg.Pool("a").Draining(); d.Headroom != nil {
		t.Errorf("a draining pool keeps its headroom: %+v", d.Headroom)
	}
}

// TestHeadroomValidationNamesTheField: each invalid headroom is rejected with
// the pool and the field's path.
func TestHeadroomValidationNamesTheField(t *testing.T) {
	t.Parallel()
	window := `startTime: "2026-01-01T00:00:00Z", endTime: "2026-01-01T01:00:00Z"`
	for _, tc := range []struct{ name, headroom, want string }{
		{"negative replicas", "{replicas: -1}", "pools[0] (a): headroom.replicas: -1 must be between 0 and maxReplicas (3)"},
		{"replicas above max", "{replicas: 4}", "pools[0] (a): headroom.replicas: 4 must be between 0 and maxReplicas (3)"},
		{"override without replicas", "{scheduledOverrides: [{" + window + "}]}",
			"pools[0] (a): headroom.scheduledOverrides[0].replicas: required, between 0 and maxReplicas (3)"},
		{"override above max", "{scheduledOverrides: [{" + window + ", replicas: 9}]}",
			"pools[0] (a): headroom.scheduledOverrides[0].replicas: required, between 0 and maxReplicas (3)"},
		{"override without end", `{scheduledOverrides: [{startTime: "2026-01-01T00:00:00Z", replicas: 1}]}`,
			"pools[0] (a): headroom.scheduledOverrides[0]: startTime and endTime are required"},
		{"bad frequency", "{scheduledOverrides: [{" + window + ", replicas: 1, recurrenceRule: {frequency: Hourly}}]}",
			`pools[0] (a): headroom.scheduledOverrides[0].recurrenceRule.frequency: "Hourly"`},
		{"unknown field", "{replicas: 1, minReplicas: 1}", "pools[0].headroom.minReplicas: line 7: unknown field"},
		{"not a mapping", "2", "pools[0].headroom: line 7: want a mapping"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			_, err := pool.Parse([]byte(valid + "    headroom: " + tc.headroom + "\n"))
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("error = %v\nwant it to contain %q", err, tc.want)
			}
		})
	}
}
