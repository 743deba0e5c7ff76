package status_test

import (
	"bytes"
	"strings"
	"testing"
	"time"

	"github.com/runnerscaler/runnerscaler/internal/status"
)

// TestJobsWaitingForApprovalAreApart: jobs held for their environment's
// approval are listed apart from the queued ones, longest held first, aged from
// their hold; they reserve nothing, so they do not make the pool saturated; the
// pools table counts them with the oldest, the pool view and the trace say so.
func TestJobsWaitingForApprovalAreApart(t *testing.T) {
	t.Parallel()
	heldJob := func(id int64, heldFor time.Duration) status.Job {
		j := queued(id, 3*24*time.Hour)
		j.HeldSince = now.Add(-heldFor)
		return j
	}
	in := status.Input{Pool: "p", MaxReplicas: 1, Sweep: sweptAt(now, 1),
		Jobs: []status.Job{heldJob(1, time.Hour), queued(2, time.Minute), heldJob(3, 50*time.Hour)}}
	r := status.Build(now, []status.Input{in}, nil)
	p := r.Pools[0]
	if len(p.Queued) != 1 || p.Queued[0].ID != 2 || p.Saturated {
		t.Fatalf("queued %+v, saturated %v; want job 2 alone, not saturated", p.Queued, p.Saturated)
	}
	if len(p.WaitingForApproval) != 2 || p.WaitingForApproval[0].ID != 3 || p.WaitingForApproval[1].ID != 1 ||
		p.WaitingForApproval[0].AgeSeconds != (50*time.Hour).Seconds() {
		t.Fatalf("waiting for approval %+v; want job 3 (held 50h) then job 1", p.WaitingForApproval)
	}
	var out bytes.Buffer
	if err := status.RenderReport(&out, r); err != nil {
		t.Fatal(err)
	}
	if err := status.RenderPool(&out, now, p); err != nil {
		t.Fatal(err)
	}
	tr := status.NewTrace(now, in.Jobs[0], nil)
	if tr.Active {
		t.Fatal("a held job's trace says its reservation is active")
	}
	if err := status.RenderTrace(&out, now, tr); err != nil {
		t.Fatal(err)
	}
	text := out.String()
	for _, want := range []string{"APPROVAL", "2 (oldest 50h0m)", "WAITING FOR APPROVAL", "waiting for approval: 2 (oldest 50h0m)",
		"none: waiting for its environment's approval since"} {
		if !strings.Contains(text, want) {
			t.Errorf("output lacks %q:\n%s", want, text)
		}
	}
}
