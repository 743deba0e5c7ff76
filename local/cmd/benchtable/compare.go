package main

import (
	"fmt"
	"io"
	"math"
	"slices"
	"strings"
	"text/tabwriter"

	"golang.org/x/perf/benchfmt"
	"golang.org/x/perf/benchmath"
)

// The comparison with a baseline (-baseline): every metric of every benchmark
// in both, as benchstat's library sees them. Each side's runs (go test -count)
// are one sample per metric; benchmath summarises a sample by its median and
// the median's confidence interval, and compares two samples with a
// Mann-Whitney U test, assuming nothing of their distribution. A change is
// beyond the noise when the test rejects "same distribution" at alpha 0.05 or
// the new median lies outside the baseline median's interval: the noise is the
// baseline's own spread. With fewer than 4 runs a side the U test cannot reach
// 0.05 (3+3 runs: p ≥ 0.1), and fewer than 6 runs give no 95% interval: the
// interval is then asked at the level the runs allow (confidence), which the
// table says; one run measures no noise, and nothing is called a change.

// metricKey names one metric of one benchmark.
type metricKey struct{ bench, unit string }

// samples reads go test -bench output: the values of each metric, by benchmark
// (package.Name, without the -GOMAXPROCS suffix) and unit. ns/op, B/op and
// allocs/op are left out, as in the table.
func samples(r io.Reader, name string) (map[metricKey][]float64, error) {
	out := map[metricKey][]float64{}
	br := benchfmt.NewReader(r, name)
	for br.Scan() {
		res, ok := br.Result().(*benchfmt.Result)
		if !ok {
			continue // a syntax error or unit metadata: not a result
		}
		bench := benchName(res)
		for _, v := range res.Values {
			unit, value := v.Unit, v.Value
			if v.OrigUnit != "" {
				unit, value = v.OrigUnit, v.OrigValue
			}
			if unit == "ns/op" || unit == "B/op" || unit == "allocs/op" {
				continue
			}
			k := metricKey{bench, unit}
			out[k] = append(out[k], value)
		}
	}
	return out, br.Err()
}

// benchName is package.Name, as the table names benchmarks.
func benchName(res *benchfmt.Result) string {
	name := res.Name.String()
	if i := strings.LastIndex(name, "-"); i > 0 && strings.Trim(name[i+1:], "0123456789") == "" {
		name = name[:i]
	}
	pkg := res.GetConfig("pkg")
	return pkg[strings.LastIndex(pkg, "/")+1:] + "." + name
}

// change is one metric compared with its baseline.
type change struct {
	key       metricKey
	old, new  benchmath.Summary
	cmp       benchmath.Comparison
	outside   bool // the new median lies outside the baseline median's interval
	rejected  bool // the U test rejects "same distribution"
	oldN      int
	newN      int
	remarks   []string
	beyondAll bool
}

// compareSamples compares every metric current and baseline both have.
func compareSamples(baseline, current map[metricKey][]float64) (changes []change, onlyNew, onlyOld []metricKey) {
	thresholds := benchmath.DefaultThresholds
	for k, vals := range current {
		base, ok := baseline[k]
		if !ok {
			onlyNew = append(onlyNew, k)
			continue
		}
		s1 := benchmath.NewSample(slices.Clone(base), &thresholds)
		s2 := benchmath.NewSample(slices.Clone(vals), &thresholds)
		c := change{key: k, old: benchmath.AssumeNothing.Summary(s1, confidence(len(base))),
			new: benchmath.AssumeNothing.Summary(s2, confidence(len(vals))),
			cmp: benchmath.AssumeNothing.Compare(s1, s2), oldN: len(base), newN: len(vals)}
		c.rejected = c.cmp.P < c.cmp.Alpha
		finite := !math.IsInf(c.old.Lo, 0) && !math.IsInf(c.old.Hi, 0)
		c.outside = finite && (c.new.Center < c.old.Lo || c.new.Center > c.old.Hi)
		c.beyondAll = c.rejected || c.outside
		for _, w := range append(append(c.old.Warnings, c.new.Warnings...), c.cmp.Warnings...) {
			if !slices.Contains(c.remarks, w.Error()) {
				c.remarks = append(c.remarks, w.Error())
			}
		}
		changes = append(changes, c)
	}
	for k := range baseline {
		if _, ok := current[k]; !ok {
			onlyOld = append(onlyOld, k)
		}
	}
	byKey := func(a, b metricKey) int { return strings.Compare(a.bench+" "+a.unit, b.bench+" "+b.unit) }
	slices.SortFunc(changes, func(a, b change) int { return byKey(a.key, b.key) })
	slices.SortFunc(onlyNew, byKey)
	slices.SortFunc(onlyOld, byKey)
	return changes, onlyNew, onlyOld
}

// printComparison writes the changes beyond the noise (see above), then how
// many metrics stayed within it and which ones either side lacks.
func printComparison(w io.Writer, baselineName string, baseline, current map[metricKey][]float64) {
	changes, onlyNew, onlyOld := compareSamples(baseline, current)
	fmt.Fprintf(w, "\ncompared with %s (benchmath: median, its interval, Mann-Whitney U):\n", baselineName)
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "BENCHMARK\tMETRIC\tBASELINE\tNOW\tDELTA\tTEST\tWHY")
	within := 0
	var remarks []string
	for _, c := range changes {
		for _, r := range c.remarks {
			if !slices.Contains(remarks, r) {
				remarks = append(remarks, r)
			}
		}
		if !c.beyondAll {
			within++
			continue
		}
		var why []string
		if c.rejected {
			why = append(why, "U test")
		}
		if c.outside {
			why = append(why, fmt.Sprintf("outside the baseline's %.0f%% interval", 100*c.old.Confidence))
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t%s\n", c.key.bench, c.key.unit, summary(c.old, c.oldN), summary(c.new, c.newN),
			delta(c.old.Center, c.new.Center), c.cmp.String(), strings.Join(why, ", "))
	}
	_ = tw.Flush()
	fmt.Fprintf(w, "%d metrics within the noise", within)
	if len(onlyNew) > 0 {
		fmt.Fprintf(w, "; not in the baseline: %s", keys(onlyNew))
	}
	if len(onlyOld) > 0 {
		fmt.Fprintf(w, "; not measured now: %s", keys(onlyOld))
	}
	fmt.Fprintln(w)
	for _, r := range remarks {
		fmt.Fprintf(w, "note: %s\n", r)
	}
}

// confidence is the level asked of a median's interval from n runs: 95%, or,
// for fewer runs than that needs (6), the most their range can give, 1 − 2·0.5ⁿ
// (3 runs: 75%), so that a few runs still measure their noise.
func confidence(n int) float64 {
	if n < 2 {
		return 0.95 // no interval: one run measures no noise
	}
	return min(0.95, 1-2*math.Pow(0.5, float64(n))-1e-9)
}

// summary is a sample's median and interval: "12.3 [11.0, 14.1] n=3".
func summary(s benchmath.Summary, n int) string {
	return fmt.Sprintf("%s [%s, %s] n=%d", num(s.Center), num(s.Lo), num(s.Hi), n)
}

func delta(old, new float64) string {
	if old == 0 {
		return "?"
	}
	return fmt.Sprintf("%+.1f%%", (new/old-1)*100)
}

func num(v float64) string {
	if math.IsInf(v, 0) || math.IsNaN(v) {
		return fmt.Sprint(v)
	}
	return fmt.Sprintf("%.4g", v)
}

func keys(ks []metricKey) string {
	var out []string
	for _, k := range ks {
		out = append(out, k.bench+" "+k.unit)
	}
	return strings.Join(out, ", ")
}
