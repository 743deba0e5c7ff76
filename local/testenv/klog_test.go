package testenv

import (
	"io"
	"os"
	"strings"
	"testing"

	"k8s.io/klog/v2"
)

// TestKlogIsHeldUntilTheRunEnds: an error client-go logs through klog reaches
// stderr only when the held log is printed, not as it is logged (a benchmark's
// result line would be split by it).
func TestKlogIsHeldUntilTheRunEnds(t *testing.T) {
	r, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	stderr := os.Stderr
	os.Stderr = w
	t.Cleanup(func() { os.Stderr = stderr })
	printHeld := holdKlog()
	klog.Error("Unexpected error when reading response body")
	klog.Flush()
	if _, err := io.WriteString(w, "MARK\n"); err != nil {
		t.Fatal(err)
	}
	printHeld()
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	out, err := io.ReadAll(r)
	if err != nil {
		t.Fatal(err)
	}
	before, after, ok := strings.Cut(string(out), "MARK\n")
	if !ok || strings.Contains(before, "Unexpected error") || !strings.Contains(after, "Unexpected error") {
		t.Fatalf("stderr %q: want the klog line only after the mark, when the held log is printed", out)
	}
}
