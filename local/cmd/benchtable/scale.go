package main

import (
	"fmt"
	"io"
	"strconv"
	"strings"
	"text/tabwriter"
)

// scaleBench is the benchmark whose envelope printScale prints (tests/scale_test.go).
const scaleBench = "ScaleEnvelope"

// coreBudget is one App installation's primary budget on github.com, requests an hour.
const coreBudget = 5000

// printScale prints the scale envelope BenchmarkScaleEnvelope measured, against
// the goals; nothing when it did not run.
func printScale(w io.Writer, rows []row) {
	m := map[string]float64{}
	for _, r := range rows {
		if strings.HasSuffix(r.bench, scaleBench) {
			if v, err := strconv.ParseFloat(r.value, 64); err == nil {
				m[r.metric] = v
			}
		}
	}
	if len(m) == 0 {
		return
	}
	verdict := func(ok bool) string {
		if ok {
			return "met"
		}
		return "not met"
	}
	fmt.Fprintf(w, "\nscale envelope (300 pools, 2,000 runners, one installation, GitHub's budget enforced; schedule time, a sweep a minute):\n")
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintf(tw, "  0 -> 1,000 runners\t%s\tgoal <= 2 min: %s\n", minutes(m["to-1000-s"]), verdict(m["to-1000-s"] <= 120))
	fmt.Fprintf(tw, "  0 -> 2,000 runners\t%s\t%.0f invocations, %.0f GitHub calls (%.0f refused), %.0f RRU, %.0f WRU\n",
		minutes(m["to-2000-s"]), m["burst-invocations"], m["burst-github-calls"], m["burst-github-refused"], m["burst-RRU"], m["burst-WRU"])
	share := m["steady-github-units/h"] / coreBudget * 100
	fmt.Fprintf(tw, "  steady at 2,000\t%.1f s an invocation\t%.0f GitHub calls/h, %.0f units/h = %.0f%% of %d: goal <= 50%%: %s; %.0f RRU, %.0f WRU an invocation\n",
		m["steady-invocation-s"], m["steady-github-calls/h"], m["steady-github-units/h"], share, coreBudget, verdict(share <= 50),
		m["steady-RRU/invocation"], m["steady-WRU/invocation"])
	fmt.Fprintf(tw, "  2,000 -> 0\t%s\t%.0f GitHub calls (%.0f refused)\n", minutes(m["to-zero-s"]), m["to-zero-github-calls"], m["to-zero-github-refused"])
	fmt.Fprintf(tw, "  longest invocation\t%.1f s\tthe template's sweeper timeout: 120 s\n", m["invocation-max-s"])
	fmt.Fprintf(tw, "  Go heap, at most\t%.0f MiB\tthe whole test process (simulator included), an upper bound for the sweeper's; the template gives it 512 MB\n", m["heap-peak-MiB"])
	_ = tw.Flush()
}

func minutes(s float64) string { return fmt.Sprintf("%d min %02d s", int(s)/60, int(s)%60) }
