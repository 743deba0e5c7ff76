// Command benchtable reads `go test -bench` output on stdin, passes it through, and
// prints at the end one table of every benchmark's reported metrics — what
// `make bench` shows — and, when BenchmarkCostPer1000Jobs ran, what its usage
// costs in dollars (cost.go); when BenchmarkScaleEnvelope ran, the scale
// envelope against its goals (scale.go). With -baseline FILE (the committed
// output of the last accepted run, tests/testdata/bench-baseline.txt for `make
// bench`), it ends with the metrics that changed beyond the noise (compare.go).
//
// `make bench-accept` runs it twice, from the repository's root: with -accept
// FILE, it writes FILE (the last `make bench`'s output) to the baseline under a
// preamble (accept.go); with -docs, it rewrites the figures the docs quote
// (docfigures.go) from the baseline's medians (figures.go). Neither reads stdin.
package main

import (
	"bufio"
	"bytes"
	"errors"
	"flag"
	"fmt"
	"io/fs"
	"os"
	"strings"
	"text/tabwriter"
	"time"
)

type row struct{ bench, metric, value string }

func main() {
	baseline := flag.String("baseline", "", "benchmark output to compare with (go test -bench, any -count)")
	accept := flag.String("accept", "", "write this benchmark output to -baseline, under a preamble, and exit")
	docs := flag.Bool("docs", false, "rewrite the figures the docs quote (docfigures.go) from -baseline's medians, and exit")
	flag.Parse()
	if *accept != "" || *docs {
		if err := acceptAndRewrite(*baseline, *accept, *docs); err != nil {
			fmt.Fprintln(os.Stderr, "benchtable:", err)
			os.Exit(1)
		}
		return
	}
	var rows []row
	var input bytes.Buffer
	pkg := ""
	sc := bufio.NewScanner(os.Stdin)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		line := sc.Text()
		fmt.Println(line)
		input.WriteString(line + "\n")
		if p, ok := strings.CutPrefix(line, "pkg: "); ok {
			pkg = p[strings.LastIndex(p, "/")+1:]
		}
		f := strings.Fields(line)
		if len(f) < 4 || !strings.HasPrefix(f[0], "Benchmark") {
			continue
		}
		name := pkg + "." + strings.TrimPrefix(f[0], "Benchmark")
		if i := strings.LastIndex(name, "-"); i > 0 && strings.Trim(name[i+1:], "0123456789") == "" {
			name = name[:i] // the -GOMAXPROCS suffix
		}
		for i := 2; i+1 < len(f); i += 2 {
			if f[i+1] == "ns/op" || f[i+1] == "B/op" || f[i+1] == "allocs/op" {
				continue
			}
			rows = append(rows, row{name, f[i+1], f[i]})
		}
	}
	if len(rows) == 0 {
		return
	}
	fmt.Println("\nbenchmark results (this machine):")
	tw := tabwriter.NewWriter(os.Stdout, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "BENCHMARK\tMETRIC\tVALUE")
	for _, r := range rows {
		fmt.Fprintf(tw, "%s\t%s\t%s\n", r.bench, r.metric, r.value)
	}
	_ = tw.Flush()
	printCost(os.Stdout, rows)
	printScale(os.Stdout, rows)
	if *baseline != "" {
		if err := compareWith(*baseline, &input); err != nil {
			fmt.Fprintln(os.Stderr, "benchtable:", err)
			os.Exit(1)
		}
	}
}

// acceptAndRewrite writes from (when not empty) to the baseline, then, with
// docs, rewrites the documented figures from the baseline.
func acceptAndRewrite(baseline, from string, docs bool) error {
	if baseline == "" {
		return errors.New("-accept and -docs need -baseline")
	}
	if from != "" {
		if err := acceptBaseline(from, baseline, time.Now(), loadAverage()); err != nil {
			return err
		}
		fmt.Printf("accepted %s as the baseline %s\n", from, baseline)
	}
	if !docs {
		return nil
	}
	f, err := os.Open(baseline)
	if err != nil {
		return fmt.Errorf("reading the baseline: %w", err)
	}
	defer f.Close()
	v, err := baselineValues(f, baseline)
	if err != nil {
		return fmt.Errorf("reading the baseline %s: %w", baseline, err)
	}
	changed, err := rewriteDocs(".", docFigures, v)
	if err != nil {
		return fmt.Errorf("the documented figures (local/cmd/benchtable/docfigures.go), no page rewritten:\n%w", err)
	}
	if len(changed) == 0 {
		fmt.Printf("the %d documented figures already say what %s does\n", len(docFigures), baseline)
		return nil
	}
	fmt.Printf("the %d documented figures rewritten from %s, in %s\n", len(docFigures), baseline, strings.Join(changed, ", "))
	return nil
}

// compareWith prints the comparison of input with the baseline file.
func compareWith(baseline string, input *bytes.Buffer) error {
	f, err := os.Open(baseline)
	if errors.Is(err, fs.ErrNotExist) {
		fmt.Printf("\nno baseline at %s to compare with: `make bench-accept` takes this run's output as one\n", baseline)
		return nil
	}
	if err != nil {
		return fmt.Errorf("reading the baseline: %w", err)
	}
	defer f.Close()
	old, err := samples(f, baseline)
	if err != nil {
		return fmt.Errorf("reading the baseline %s: %w", baseline, err)
	}
	now, err := samples(input, "stdin")
	if err != nil {
		return fmt.Errorf("reading the benchmark output: %w", err)
	}
	printComparison(os.Stdout, baseline, old, now)
	return nil
}
