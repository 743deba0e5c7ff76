package main

import (
	"bytes"
	"strings"
	"testing"
)

// TestPrintScale: the envelope's times read in minutes, each goal is judged
// from the benchmark's numbers, and nothing prints when the benchmark did not run.
func TestPrintScale(t *testing.T) {
	t.Parallel()
	rows := []row{
		{"tests.ScaleEnvelope", "to-1000-s", "305.5"},
		{"tests.ScaleEnvelope", "to-2000-s", "670"},
		{"tests.ScaleEnvelope", "steady-github-units/h", "1200"},
		{"tests.CostPer1000Jobs", "to-1000-s", "1"},
	}
	var out bytes.Buffer
	printScale(&out, rows)
	for _, want := range []string{"0 -> 1,000 runners  5 min 05 s", "goal <= 2 min: not met", "11 min 10 s", "= 24% of 5000: goal <= 50%: met"} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("output lacks %q:\n%s", want, out.String())
		}
	}
	out.Reset()
	printScale(&out, rows[3:])
	if out.Len() != 0 {
		t.Errorf("printed without the benchmark:\n%s", out.String())
	}
}
