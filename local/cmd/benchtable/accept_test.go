package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// TestAcceptKeepsAPreamble: the accepted baseline starts with a preamble
// saying when and how, and reads as the same runs as the output it took.
func TestAcceptKeepsAPreamble(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	from, baseline := filepath.Join(dir, "latest.txt"), filepath.Join(dir, "baseline.txt")
	if err := os.WriteFile(from, []byte(testBaseline), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := acceptBaseline(from, baseline, time.Date(2026, 12, 7, 19, 50, 0, 0, time.UTC), "3.10 2.50 2.00"); err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(baseline)
	if err != nil {
		t.Fatal(err)
	}
	text := string(b)
	for _, want := range []string{"make bench-accept", "2026-12-07 at 19:50 UTC", "3.10 2.50 2.00", "docfigures.go"} {
		if !strings.Contains(text, want) {
			t.Errorf("the preamble lacks %q:\n%s", want, text)
		}
	}
	if !strings.HasSuffix(text, "\n\n"+testBaseline) {
		t.Errorf("the baseline does not end with the accepted output after a blank line:\n%s", text)
	}
	got, err := baselineValues(strings.NewReader(text), "baseline")
	if err != nil {
		t.Fatal(err)
	}
	want := testValues(t)
	if len(got) != len(want) {
		t.Errorf("the accepted baseline reads as %v, the output as %v", got, want)
	}
	for k, x := range want {
		if got[k] != x {
			t.Errorf("%v: %v in the accepted baseline, %v in the output", k, got[k], x)
		}
	}
}
