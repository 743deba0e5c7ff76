// Command benchtable reads `go test -bench` output on stdin, passes it through, and
// prints at the end one table of every benchmark's reported metrics — what
// `make bench` shows — and, when BenchmarkCostPer1000Jobs ran, what its usage
// costs in dollars (cost.go); when BenchmarkScaleEnvelope ran, the scale
// envelope against its goals (scale.go).
package main

import (
	"bufio"
	"fmt"
	"os"
	"strings"
	"text/tabwriter"
)

type row struct{ bench, metric, value string }

func main() {
	var rows []row
	pkg := ""
	sc := bufio.NewScanner(os.Stdin)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		line := sc.Text()
		fmt.Println(line)
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
}
