package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// repoRoot is the repository's root seen from this package's directory.
const repoRoot = "../../.."

// TestDocsQuoteTheBaseline: every documented figure (docfigures.go) reads on
// its page as the committed baseline's medians render it.
func TestDocsQuoteTheBaseline(t *testing.T) {
	t.Parallel()
	f, err := os.Open(filepath.Join(repoRoot, "tests/testdata/bench-baseline.txt"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	v, err := baselineValues(f, "bench-baseline.txt")
	if err != nil {
		t.Fatal(err)
	}
	pages := map[string]string{}
	for _, fig := range docFigures {
		if _, ok := pages[fig.page]; !ok {
			b, err := os.ReadFile(filepath.Join(repoRoot, fig.page))
			if err != nil {
				t.Fatal(err)
			}
			pages[fig.page] = string(b)
		}
		o, err := place(fig, pages[fig.page], v)
		if err != nil {
			t.Error(err)
			continue
		}
		if o.found != o.want {
			t.Errorf("%s: found %q, the baseline says %q (make bench-accept, or go run ./local/cmd/benchtable -docs -baseline tests/testdata/bench-baseline.txt, rewrites it)",
				fig.page, o.found, o.want)
		}
	}
}

// TestUserPagesQuoteNoBenchmark: a figure of a user page (docs/*.md) names
// its benchmark in its placeholders only, never in the text the page keeps.
func TestUserPagesQuoteNoBenchmark(t *testing.T) {
	t.Parallel()
	for _, fig := range docFigures {
		if strings.HasPrefix(fig.page, "docs/") && !strings.HasPrefix(fig.page, "docs/design/") {
			if literal := placeholderRE.ReplaceAllString(fig.text, "1"); strings.Contains(literal, "Benchmark") {
				t.Errorf("%s: figure %q names a benchmark on a user page", fig.page, fig.text)
			}
		}
	}
}

const testBaseline = `pkg: github.com/runnerscaler/runnerscaler/tests
BenchmarkPool/size=big-2   	1	5 ns/op	1500 wait-ms	1234567 calls	7.000 writes
BenchmarkPool/size=big-2   	1	5 ns/op	1840 wait-ms	1234569 calls	6.000 writes
BenchmarkPool/size=big-2   	1	5 ns/op	1700 wait-ms	1234568 calls	7.000 writes
`

func testValues(t *testing.T) values {
	t.Helper()
	v, err := baselineValues(strings.NewReader(testBaseline), "baseline")
	if err != nil {
		t.Fatal(err)
	}
	return v
}

// TestRewriteChangesTheNumbersOnly: the figure is found across a line break
// and only its numbers change, to the medians as formatted; the rest of the
// page is kept byte for byte.
func TestRewriteChangesTheNumbersOnly(t *testing.T) {
	t.Parallel()
	root := t.TempDir()
	page := "# Pool\n\nA job waits p50 0.9 s\nafter 1,000 calls — five writes. Else: p50 0.9 s.\n"
	if err := os.WriteFile(filepath.Join(root, "pool.md"), []byte(page), 0o600); err != nil {
		t.Fatal(err)
	}
	figs := []figure{{"pool.md", "waits p50 {{Pool/size=big wait-ms s.1}} s after {{Pool/size=big calls n}} calls — " +
		"{{Pool/size=big writes word}} writes"}}
	changed, err := rewriteDocs(root, figs, testValues(t))
	if err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(filepath.Join(root, "pool.md"))
	if err != nil {
		t.Fatal(err)
	}
	want := "# Pool\n\nA job waits p50 1.7 s\nafter 1,234,568 calls — seven writes. Else: p50 0.9 s.\n"
	if string(b) != want || len(changed) != 1 {
		t.Errorf("rewritten page %q (changed %v), want %q", b, changed, want)
	}
	info, err := os.Stat(filepath.Join(root, "pool.md"))
	if err != nil || info.Mode().Perm() != 0o600 {
		t.Errorf("the page's mode: %v, %v; want it kept, 0600", info.Mode(), err)
	}
	if changed, err := rewriteDocs(root, figs, testValues(t)); err != nil || len(changed) != 0 {
		t.Errorf("a second rewrite changed %v, %v: want nothing", changed, err)
	}
}

// TestRewriteRefusesAMissingOrRepeatedFigure: a figure not on its page, found
// twice, or naming a metric the baseline lacks is an error naming the page and
// the figure, and no page is written.
func TestRewriteRefusesAMissingOrRepeatedFigure(t *testing.T) {
	t.Parallel()
	const page = "waits p50 0.9 s; waits p50 2 s. Calls: 12.\n"
	for _, tc := range []struct {
		name, text, want string
	}{
		{"missing", "sleeps p50 {{Pool/size=big wait-ms s.1}} s", "not on the page"},
		{"twice", "waits p50 {{Pool/size=big wait-ms s.1}} s", "2 times"},
		{"no such metric", "Calls: {{Pool/size=big reads n}}.", "the baseline has no Pool/size=big reads"},
		{"bad format", "Calls: {{Pool/size=big calls x.2}}.", "placeholder"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			root := t.TempDir()
			for _, name := range []string{"a.md", "b.md"} {
				if err := os.WriteFile(filepath.Join(root, name), []byte(page), 0o644); err != nil {
					t.Fatal(err)
				}
			}
			figs := []figure{{"a.md", "Calls: {{Pool/size=big calls n}}."}, {"b.md", tc.text}}
			_, err := rewriteDocs(root, figs, testValues(t))
			if err == nil || !strings.Contains(err.Error(), "b.md") || !strings.Contains(err.Error(), tc.text) ||
				!strings.Contains(err.Error(), tc.want) {
				t.Errorf("error %v: want one naming b.md, %q and %q", err, tc.text, tc.want)
			}
			if b, _ := os.ReadFile(filepath.Join(root, "a.md")); string(b) != page {
				t.Errorf("a.md was rewritten to %q though b.md's figure failed", b)
			}
		})
	}
}

func TestFormat(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		x      float64
		format string
		want   string
	}{
		{4467, "s.1", "4.5"},
		{3688, "s.2", "3.69"},
		{83.28, "n", "83"},
		{1234567.5, "n", "1,234,568"},
		{302400, "n", "302,400"},
		{1.78, "n.2", "1.78"},
		{0.0010040, "n.4", "0.0010"},
		{2638, "MiB.1", "2.6"},
		{7, "word", "seven"},
		{14, "word", "14"},
		{-33.56, "n.1", "-33.6"},
		{-0.01, "n", "0"},
	} {
		if got := format(tc.x, tc.format); got != tc.want {
			t.Errorf("format(%v, %q) = %q, want %q", tc.x, tc.format, got, tc.want)
		}
	}
}
