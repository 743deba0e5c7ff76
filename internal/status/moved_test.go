package status_test

import (
	"bytes"
	"strings"
	"testing"
	"time"

	"github.com/runnerscaler/runnerscaler/internal/status"
)

// TestMovedJobsShowInBothPools: a linux job that a gpu runner runs is listed
// by both pools, counted by gpu only (gpu's runner is busy with it, linux is not
// saturated by it); a job spilled from linux to big waits in linux's queue as
// spilled, and big says where it came from. The report renders them apart.
func TestMovedJobsShowInBothPools(t *testing.T) {
	t.Parallel()
	stolen := status.Job{ID: 1, Pool: "linux", State: "in_progress", Amount: 1, FirstSeen: now.Add(-time.Minute),
		Expires: now.Add(10 * time.Minute), RunnerName: "gpu-abcde-0", CountedIn: "gpu", MovedBy: status.MovedByRunner}
	spilled := queued(2, time.Minute)
	spilled.Pool, spilled.CountedIn, spilled.MovedBy = "linux", "big", status.MovedBySpill
	linux := status.Input{Pool: "linux", MaxReplicas: 1, Sweep: sweptAt(now, 0), Jobs: []status.Job{stolen, spilled}}
	gpu := status.Input{Pool: "gpu", MaxReplicas: 1, Sweep: sweptAt(now, 1), MovedIn: []status.Job{stolen},
		Runners: []status.Runner{{Name: "gpu-abcde-0", Phase: status.PhaseRunning}}}
	big := status.Input{Pool: "big", MaxReplicas: 1, Sweep: sweptAt(now, 1), MovedIn: []status.Job{spilled}}
	r := status.Build(now, []status.Input{linux, gpu, big}, nil)
	l, g, b := r.Pools[0], r.Pools[1], r.Pools[2]
	if l.Saturated || len(l.Queued) != 1 || !strings.Contains(l.Queued[0].Waiting, "spilled to pool big") {
		t.Fatalf("linux: saturated %v, queued %+v; want not saturated, job 2 spilled to big", l.Saturated, l.Queued)
	}
	wantMoves := func(p status.Pool, want ...string) {
		t.Helper()
		var got []string
		for _, m := range p.Moves {
			got = append(got, m.Direction+": "+m.Text)
		}
		if strings.Join(got, "\n") != strings.Join(want, "\n") {
			t.Fatalf("%s moves:\n%s\nwant:\n%s", p.Name, strings.Join(got, "\n"), strings.Join(want, "\n"))
		}
	}
	wantMoves(l, "counted-elsewhere: job 1 of pool linux runs on runner gpu-abcde-0", "counted-elsewhere: job 2 spilled from linux to big")
	wantMoves(g, "counted-here: job 1 of pool linux runs on runner gpu-abcde-0")
	wantMoves(b, "counted-here: job 2 spilled from linux to big")
	if !g.Runners[0].Busy || g.Runners[0].Job != 1 {
		t.Fatalf("gpu runner %+v: want busy with job 1", g.Runners[0])
	}
	var out bytes.Buffer
	if err := status.RenderReport(&out, r); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(out.String(), "JOBS COUNTED IN ANOTHER POOL") || !strings.Contains(out.String(), "job 2 spilled from linux to big") {
		t.Fatalf("report:\n%s\nwant the moved jobs' section", out.String())
	}
	out.Reset()
	if err := status.RenderPool(&out, now, g); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(out.String(), "JOBS COUNTED IN ANOTHER POOL") || !strings.Contains(out.String(), "job 1 of pool linux runs on runner gpu-abcde-0") {
		t.Fatalf("gpu's view:\n%s\nwant the moved jobs' section", out.String())
	}
}
