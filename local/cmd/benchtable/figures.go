package main

import (
	"errors"
	"fmt"
	"io"
	"math"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
)

// The figures the docs quote from the baseline (docFigures, docfigures.go).
// Each is a page and a piece of its text as the page writes it, with every
// number a placeholder {{Benchmark metric format}}: the benchmark as go test
// names it without its package (sub-benchmarks included), one of its metrics,
// and how the page writes the number (format). A placeholder's value is the
// median of the baseline's runs of that metric; BenchmarkCostPer1000Jobs also
// has the priced figures of cost.go (pricedFigures), computed from its medians.
//
// -docs finds each figure's text on its page — the literal parts as written,
// except that any run of white space matches any other (a paragraph may be
// re-wrapped), each placeholder as any number — and rewrites the numbers only,
// so the page keeps every other byte. The text must be on its page exactly
// once: a figure not found, or found twice, is an error, never skipped.

// figure is one documented figure: a page, repository-relative, and its text.
type figure struct {
	page string
	text string
}

// placeholder is one number of a figure's text.
type placeholder struct{ bench, metric, format string }

var (
	placeholderRE = regexp.MustCompile(`\{\{([^{}]*)\}\}`)
	spaceRE       = regexp.MustCompile(`\s+`)
	formatRE      = regexp.MustCompile(`^(n|s|MiB)(?:\.([0-9]))?$|^word$`)
)

// number matches a number as the pages write one ("5,020", "1.8", "0.0105");
// word also a small count in words.
const number = `-?[0-9][0-9,]*(?:\.[0-9]+)?`

var words = []string{"zero", "one", "two", "three", "four", "five", "six", "seven", "eight", "nine", "ten", "eleven", "twelve"}

// parse is the figure's text as a regexp, one group per placeholder, and its placeholders.
func (f figure) parse() (*regexp.Regexp, []placeholder, error) {
	var pattern strings.Builder
	var holes []placeholder
	literal := func(s string) {
		parts := spaceRE.Split(s, -1)
		for i, p := range parts {
			if i > 0 {
				pattern.WriteString(`\s+`)
			}
			pattern.WriteString(regexp.QuoteMeta(p))
		}
	}
	last := 0
	for _, m := range placeholderRE.FindAllStringSubmatchIndex(f.text, -1) {
		literal(f.text[last:m[0]])
		last = m[1]
		fields := strings.Fields(f.text[m[2]:m[3]])
		if len(fields) != 3 || !formatRE.MatchString(fields[2]) {
			return nil, nil, fmt.Errorf("placeholder %s: want {{Benchmark metric format}}, the format n, s or MiB, with .D for D decimals, or word",
				f.text[m[0]:m[1]])
		}
		holes = append(holes, placeholder{fields[0], fields[1], fields[2]})
		if fields[2] == "word" {
			pattern.WriteString(`(` + strings.Join(words, "|") + `|` + number + `)`)
		} else {
			pattern.WriteString(`(` + number + `)`)
		}
	}
	literal(f.text[last:])
	if len(holes) == 0 {
		return nil, nil, errors.New("no placeholder")
	}
	re, err := regexp.Compile(pattern.String())
	return re, holes, err
}

// values are the numbers placeholders name: the baseline's medians by
// benchmark (without its package) and metric, and the priced figures.
type values map[metricKey]float64

// baselineValues reads the baseline's runs (go test -bench output).
func baselineValues(r io.Reader, name string) (values, error) {
	runs, err := samples(r, name)
	if err != nil {
		return nil, err
	}
	v := values{}
	for k, vs := range runs {
		short := metricKey{withoutPackage(k.bench), k.unit}
		if _, dup := v[short]; dup {
			return nil, fmt.Errorf("%s: %s %s is reported by two packages' benchmarks", name, short.bench, short.unit)
		}
		v[short] = median(vs)
	}
	cost := map[string]float64{}
	for k, x := range v {
		if k.bench == costBench {
			cost[k.unit] = x
		}
	}
	if len(cost) > 0 {
		for metric, x := range pricedFigures(cost) {
			v[metricKey{costBench, metric}] = x
		}
	}
	return v, nil
}

// withoutPackage is a benchmark's name without the package samples prefixes
// it with: a benchmark function's name has no dot, a package's last element may.
func withoutPackage(bench string) string {
	top, _, _ := strings.Cut(bench, "/")
	return bench[strings.LastIndex(top, ".")+1:]
}

// median is the middle value of vs, or the mean of the two middle ones.
func median(vs []float64) float64 {
	s := slices.Sorted(slices.Values(vs))
	n := len(s)
	if n%2 == 1 {
		return s[n/2]
	}
	return (s[n/2-1] + s[n/2]) / 2
}

// render writes the placeholder's value as its format says.
func (p placeholder) render(v values) (string, error) {
	x, ok := v[metricKey{p.bench, p.metric}]
	if !ok {
		return "", fmt.Errorf("the baseline has no %s %s", p.bench, p.metric)
	}
	return format(x, p.format), nil
}

// format writes x as the pages do: "n" as it is, "s" milliseconds in seconds,
// "MiB" KiB in MiB, each rounded to a whole number or, with ".D", to D
// decimals, the whole part grouped by commas ("5,020"); "word" a whole number
// up to twelve as a word ("seven"), as prose writes small counts. The format
// is one parse accepted.
func format(x float64, spec string) string {
	if spec == "word" {
		if r := math.Round(x); r >= 0 && int(r) < len(words) {
			return words[int(r)]
		}
		spec = "n"
	}
	m := formatRE.FindStringSubmatch(spec)
	switch m[1] {
	case "s":
		x /= 1000
	case "MiB":
		x /= 1024
	}
	decimals := 0
	if m[2] != "" {
		decimals = int(m[2][0] - '0')
	}
	s := strconv.FormatFloat(x, 'f', decimals, 64)
	sign, s := "", strings.TrimPrefix(s, "-")
	if x < 0 && strings.Trim(s, "0.") != "" {
		sign = "-"
	}
	whole, frac, _ := strings.Cut(s, ".")
	for i := len(whole) - 3; i > 0; i -= 3 {
		whole = whole[:i] + "," + whole[i:]
	}
	if frac != "" {
		return sign + whole + "." + frac
	}
	return sign + whole
}

// occurrence is a figure found on its page.
type occurrence struct {
	found string // the text on the page
	want  string // the same with the baseline's numbers
	page  string // the page's content with want for found
}

// place finds f's text, once, in content, the content of f.page.
func place(f figure, content string, v values) (occurrence, error) {
	fail := func(format string, a ...any) (occurrence, error) {
		return occurrence{}, fmt.Errorf("%s: figure %q: %s", f.page, f.text, fmt.Sprintf(format, a...))
	}
	re, holes, err := f.parse()
	if err != nil {
		return fail("%v", err)
	}
	ms := re.FindAllStringSubmatchIndex(content, -1)
	if len(ms) != 1 {
		if len(ms) == 0 {
			return fail("not on the page")
		}
		return fail("on the page %d times, not once", len(ms))
	}
	m := ms[0]
	var want strings.Builder
	last := m[0]
	for i, h := range holes {
		s, err := h.render(v)
		if err != nil {
			return fail("%v", err)
		}
		want.WriteString(content[last:m[2+2*i]])
		want.WriteString(s)
		last = m[3+2*i]
	}
	want.WriteString(content[last:m[1]])
	return occurrence{found: content[m[0]:m[1]], want: want.String(),
		page: content[:m[0]] + want.String() + content[m[1]:]}, nil
}

// rewriteDocs rewrites the figures on their pages, under root, from v, and
// returns the pages it changed. It writes nothing when any figure fails.
func rewriteDocs(root string, figures []figure, v values) ([]string, error) {
	var pages []string
	original, content := map[string]string{}, map[string]string{}
	var errs []error
	for _, f := range figures {
		if _, ok := content[f.page]; !ok {
			b, err := os.ReadFile(filepath.Join(root, f.page))
			if err != nil {
				return nil, fmt.Errorf("reading the page of a figure: %w", err)
			}
			pages = append(pages, f.page)
			original[f.page], content[f.page] = string(b), string(b)
		}
		o, err := place(f, content[f.page], v)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		content[f.page] = o.page
	}
	if len(errs) > 0 {
		return nil, errors.Join(errs...)
	}
	var changed []string
	for _, page := range pages {
		if original[page] == content[page] {
			continue
		}
		path := filepath.Join(root, page)
		info, err := os.Stat(path)
		if err != nil {
			return changed, err
		}
		if err := os.WriteFile(path, []byte(content[page]), info.Mode().Perm()); err != nil {
			return changed, fmt.Errorf("rewriting %s: %w", page, err)
		}
		changed = append(changed, page)
	}
	return changed, nil
}
