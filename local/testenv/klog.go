package testenv

import (
	"bytes"
	"flag"
	"fmt"
	"os"
	"sync"

	"k8s.io/klog/v2"
)

// heldLog keeps what client-go logs (through klog) during a test binary's
// run, for Main to print once the run is over. Written to stderr as it came,
// a line could land in the middle of a benchmark's result line, which `go
// test -bench` prints in two writes with the benchmark run between them, and
// the benchmark tools could no longer read that result.
type heldLog struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (h *heldLog) Write(p []byte) (int, error) {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.buf.Write(p)
}

// holdKlog sends klog's output, errors too (which klog also writes to
// stderr below its stderr threshold), to a heldLog until the returned
// function, which prints what was held to stderr.
func holdKlog() func() {
	held := &heldLog{}
	fs := flag.NewFlagSet("klog", flag.ContinueOnError)
	klog.InitFlags(fs)
	for name, value := range map[string]string{"logtostderr": "false", "alsologtostderr": "false", "stderrthreshold": "FATAL"} {
		if err := fs.Set(name, value); err != nil {
			fmt.Fprintf(os.Stderr, "testenv: klog -%s=%s: %v (its lines may split benchmark results)\n", name, value, err)
		}
	}
	klog.SetOutput(held)
	return func() {
		klog.Flush()
		held.mu.Lock()
		defer held.mu.Unlock()
		if held.buf.Len() > 0 {
			fmt.Fprintf(os.Stderr, "testenv: client-go logged during the run:\n%s", held.buf.Bytes())
		}
	}
}
