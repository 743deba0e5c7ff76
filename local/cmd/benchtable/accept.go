package main

import (
	"fmt"
	"os"
	"strings"
	"time"
)

// acceptBaseline writes the benchmark output in from to baseline, under a
// preamble saying what the file is, when and how it was accepted and load, the
// machine's load average then (empty: unknown). No preamble line reads as a
// result or a "key: value" configuration line of the benchmark format.
func acceptBaseline(from, baseline string, now time.Time, load string) error {
	out, err := os.ReadFile(from)
	if err != nil {
		return fmt.Errorf("reading the benchmark output to accept: %w", err)
	}
	if load == "" {
		load = "unknown"
	}
	preamble := fmt.Sprintf(`This is the baseline make bench compares with (BENCH_BASELINE), the output of
its go test -bench (-count runs of each benchmark), which make bench-accept
(benchtable -accept %s) took on %s.
The machine's load average then (1, 5, 15 minutes): %s.
The figures the docs quote are the medians of its runs, rewritten by
make bench-accept (benchtable -docs; the list: local/cmd/benchtable/docfigures.go).

`, from, now.UTC().Format("2006-01-02 at 15:04 UTC"), load)
	if err := os.WriteFile(baseline, append([]byte(preamble), out...), 0o644); err != nil {
		return fmt.Errorf("writing the baseline: %w", err)
	}
	return nil
}

// loadAverage is the 1, 5 and 15 minute load averages of /proc/loadavg; empty
// where there is none.
func loadAverage() string {
	b, err := os.ReadFile("/proc/loadavg")
	if f := strings.Fields(string(b)); err == nil && len(f) >= 3 {
		return strings.Join(f[:3], " ")
	}
	return ""
}
