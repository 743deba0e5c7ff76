package main

import (
	"fmt"
	"strings"
	"testing"
)

// benchOutput is go test -bench output of BenchmarkSaturatedSlotTurnaround,
// one run per refill value, each with the given turnaround.
func benchOutput(refill, turnaround []float64) string {
	var b strings.Builder
	b.WriteString("goos: linux\ngoarch: amd64\npkg: github.com/runnerscaler/runnerscaler/tests\n")
	for i := range refill {
		fmt.Fprintf(&b, "BenchmarkSaturatedSlotTurnaround-2   \t       1\t12345678 ns/op\t%g refill-p50-ms\t%g turnaround-p50-ms\n", refill[i], turnaround[i])
	}
	b.WriteString("PASS\n")
	return b.String()
}

// TestComparisonShowsOnlyChangesBeyondTheNoise: a refill that doubled in every
// run is shown, with both medians; a turnaround whose runs interleave with the
// baseline's is not; a metric either side lacks is named.
func TestComparisonShowsOnlyChangesBeyondTheNoise(t *testing.T) {
	t.Parallel()
	old, err := samples(strings.NewReader(benchOutput([]float64{1000, 1100, 1050, 980, 1020}, []float64{1800, 1900, 1700, 1850, 1750})), "baseline")
	if err != nil {
		t.Fatal(err)
	}
	now, err := samples(strings.NewReader(benchOutput([]float64{2100, 2050, 2200, 1990, 2300}, []float64{1820, 1720, 1880, 1780, 1810})+
		"BenchmarkQueuedToStatefulSet-2 \t 1\t 5 ns/op\t26 fast-p50-ms\n"), "now")
	if err != nil {
		t.Fatal(err)
	}
	var out strings.Builder
	printComparison(&out, "baseline.txt", old, now)
	text := out.String()
	var refill, turnaround bool
	for _, line := range strings.Split(text, "\n") {
		if strings.Contains(line, "refill-p50-ms") {
			refill = true
			if !strings.Contains(line, "tests.SaturatedSlotTurnaround") || !strings.Contains(line, "1020 [") ||
				!strings.Contains(line, "2100 [") || !strings.Contains(line, "+105.9%") {
				t.Errorf("the refill's line lacks its benchmark, medians or delta: %q", line)
			}
		}
		if strings.Contains(line, "turnaround-p50-ms") && !strings.Contains(line, "not in the baseline") {
			turnaround = true
		}
	}
	if !refill {
		t.Errorf("the doubled refill is not shown:\n%s", text)
	}
	if turnaround {
		t.Errorf("the turnaround, within the noise, is shown:\n%s", text)
	}
	if !strings.Contains(text, "1 metrics within the noise") || !strings.Contains(text, "not in the baseline: tests.QueuedToStatefulSet fast-p50-ms") {
		t.Errorf("the summary line does not count the turnaround or name the new metric:\n%s", text)
	}
}

// TestComparisonOfSingleRunsCallsNothing: one run a side measures no noise:
// benchmath gives no interval and the test no verdict, so nothing is called a
// change, and its warning says why.
func TestComparisonOfSingleRunsCallsNothing(t *testing.T) {
	t.Parallel()
	old, _ := samples(strings.NewReader(benchOutput([]float64{1000}, []float64{1800})), "baseline")
	now, _ := samples(strings.NewReader(benchOutput([]float64{3000}, []float64{1800})), "now")
	var out strings.Builder
	printComparison(&out, "baseline.txt", old, now)
	if !strings.Contains(out.String(), "2 metrics within the noise") || !strings.Contains(out.String(), "note:") {
		t.Fatalf("single runs: %s", out.String())
	}
}
