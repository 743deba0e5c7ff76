package status_test

import (
	"bytes"
	"strings"
	"testing"
	"time"
	"unicode"
	"unicode/utf8"

	"github.com/runnerscaler/runnerscaler/internal/status"
)

// hostile carries what a payload could put in a label or a name to take over the
// operator's terminal: an ESC sequence (clear the screen, set the title), a C1
// CSI, DEL, a bidi override, a zero-width space, a bell, a NUL and a byte that
// is not UTF-8.
const hostile = "gpu\x1b[2J\x1b]0;owned\x07\u009b31m\x7f\u202eevil\u200b\x00\xff-x"

// TestRenderStripsControlCharacters: no payload-derived string reaches the
// terminal with a control or other non-printing character; the printable rest of
// it does.
func TestRenderStripsControlCharacters(t *testing.T) {
	t.Parallel()
	job := queued(7, time.Minute)
	job.Repository = "o/" + hostile
	unrouted := job
	unrouted.Waiting = "no matching pool for labels [self-hosted " + hostile + "]: no pool has these labels"
	progress := queued(8, time.Minute)
	progress.State, progress.RunnerName, progress.RunnerID = "in_progress", hostile, 3
	progress.Deliveries = []status.Delivery{{State: "queued", ID: hostile, At: now}}
	runner := status.Runner{Name: hostile, StatefulSet: hostile, Phase: status.PhasePending, Reason: "pending: " + hostile}
	sweep := &status.Sweep{At: now, Failed: true, Reason: hostile, Errors: []status.SweepError{{At: now, Error: hostile}}}
	r := status.Report{At: now, Pools: []status.Pool{{Name: "p", Queued: []status.Job{job}, InProgress: []status.Job{progress},
		LastSweep: sweep, Runners: []status.Runner{runner}}}, Unrouted: []status.Job{unrouted}}
	latest := &status.FailedDelivery{At: now, StatusCode: 502, Action: hostile, GUID: hostile}
	r.Webhook = status.NewWebhook(now, check(time.Minute, map[int]int{502: 1}, latest))
	var out bytes.Buffer
	if err := status.RenderReport(&out, r); err != nil {
		t.Fatal(err)
	}
	if err := status.RenderPool(&out, now, r.Pools[0]); err != nil {
		t.Fatal(err)
	}
	tr := status.NewTrace(now, progress, []status.Runner{runner})
	if err := status.RenderTrace(&out, now, tr); err != nil {
		t.Fatal(err)
	}
	text := out.String()
	if !utf8.ValidString(text) {
		t.Fatalf("output is not UTF-8:\n%q", text)
	}
	for i, r := range text {
		if r != '\n' && !unicode.IsPrint(r) {
			t.Fatalf("output has %U at byte %d:\n%q", r, i, text)
		}
	}
	clean := "gpu[2J]0;owned31mevil-x"
	if n := strings.Count(text, clean); n < 10 {
		t.Fatalf("output has the printable rest %q %d times, want it wherever the string was shown:\n%s", clean, n, text)
	}
}

// TestRenderPoolSaysWhatWasDeferred: a pool whose last sweep deferred GitHub
// calls near the rate limit says so, and one whose sweep deferred nothing
// has no such line.
func TestRenderPoolSaysWhatWasDeferred(t *testing.T) {
	t.Parallel()
	const why = "list runners deferred: 312 of 5000 GitHub requests left this hour"
	for _, deferred := range []string{why, ""} {
		var out bytes.Buffer
		p := status.Pool{Name: "p", LastSweep: &status.Sweep{At: now, Deferred: deferred}}
		if err := status.RenderPool(&out, now, p); err != nil {
			t.Fatal(err)
		}
		if got := strings.Contains(out.String(), "deferred: "+why); got != (deferred != "") {
			t.Errorf("deferred %q: output has the line %v:\n%s", deferred, got, out.String())
		}
		if deferred == "" && strings.Contains(out.String(), "deferred:") {
			t.Errorf("no deferral: output has a deferred line:\n%s", out.String())
		}
	}
}

// TestRenderPoolNamesForeignObjects: each object the last sweep left alone as
// foreign is named on a line of its own; a pool with none has no such line.
func TestRenderPoolNamesForeignObjects(t *testing.T) {
	t.Parallel()
	forged := "pod ci/p-bcdfg: an orphan the roster knows no runner of"
	for _, foreign := range [][]string{{forged}, nil} {
		var out bytes.Buffer
		p := status.Pool{Name: "p", LastSweep: &status.Sweep{At: now, Foreign: foreign}}
		if err := status.RenderPool(&out, now, p); err != nil {
			t.Fatal(err)
		}
		if got := strings.Contains(out.String(), "foreign object, left alone: "+forged); got != (foreign != nil) {
			t.Errorf("foreign %q: output names it %v:\n%s", foreign, got, out.String())
		}
		if foreign == nil && strings.Contains(out.String(), "foreign object") {
			t.Errorf("no foreign object: output has a foreign line:\n%s", out.String())
		}
	}
}
