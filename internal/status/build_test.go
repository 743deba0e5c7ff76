package status_test

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/runnerscaler/runnerscaler/internal/status"
)

var now = time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC)

func queued(id int64, age time.Duration) status.Job {
	return status.Job{ID: id, Pool: "p", Repository: "o/r", State: "queued", Amount: 1,
		FirstSeen: now.Add(-age), Expires: now.Add(10 * time.Minute)}
}

func sweptAt(at time.Time, desired int) *status.Sweep {
	return &status.Sweep{At: at, Desired: desired}
}

// TestWhyWaiting: each reason in its turn, most decisive first.
func TestWhyWaiting(t *testing.T) {
	t.Parallel()
	expired := queued(1, time.Hour)
	expired.Expires = now.Add(-2 * time.Minute)
	running := func(name string) status.Runner {
		return status.Runner{Name: name, Phase: status.PhaseRunning, Created: now.Add(-time.Minute)}
	}
	inProgress := queued(9, time.Minute)
	inProgress.State, inProgress.RunnerName = "in_progress", "p-a-0"
	cases := []struct {
		name string
		in   status.Input
		want string
	}{
		{"expired", status.Input{MaxReplicas: 5, Jobs: []status.Job{expired}, Sweep: sweptAt(now, 0)}, "reservation expired 2m ago"},
		{"never swept", status.Input{MaxReplicas: 5, Jobs: []status.Job{queued(1, time.Second)}}, "pool never swept yet"},
		{"not swept since", status.Input{MaxReplicas: 5, Jobs: []status.Job{queued(1, time.Second)}, Sweep: sweptAt(now.Add(-5*time.Second), 0)},
			"not swept since it was queued (last sweep 5s ago)"},
		{"at max", status.Input{MaxReplicas: 1, Jobs: []status.Job{queued(1, time.Minute), queued(2, time.Minute)},
			Sweep: sweptAt(now, 1), Runners: []status.Runner{running("p-a-0")}}, "pool at maxReplicas (1): 2 jobs reserve capacity"},
		{"runner stuck", status.Input{MaxReplicas: 5, Jobs: []status.Job{queued(1, time.Minute)}, Sweep: sweptAt(now, 1),
			Runners: []status.Runner{{Name: "p-a-0", Phase: status.PhasePending, Reason: "ErrImagePull: not found"}}},
			"runner p-a-0 pending: ErrImagePull: not found"},
		{"runner starting", status.Input{MaxReplicas: 5, Jobs: []status.Job{queued(1, time.Minute)}, Sweep: sweptAt(now, 1),
			Runners: []status.Runner{{Name: "p-a-0", Phase: status.PhasePending, Created: now.Add(-7 * time.Second)}}},
			"runner p-a-0 starting (created 7s ago)"},
		{"held by stopping", status.Input{MaxReplicas: 2, Jobs: []status.Job{queued(1, time.Minute)}, Sweep: sweptAt(now, 1),
			Runners: []status.Runner{{Name: "p-a-0", Phase: status.PhaseStopping}, {Name: "p-b-0", Phase: status.PhaseStopping}}},
			"creation held: 2 runners still stopping count against maxReplicas (2)"},
		{"held, sweep failed", status.Input{MaxReplicas: 5, Jobs: []status.Job{queued(1, time.Minute)},
			Sweep: &status.Sweep{At: now, Desired: 1, Failed: true}}, "creation held: the last sweep wanted 1 runners, 0 exist; the last sweep failed"},
		{"idle runner", status.Input{MaxReplicas: 5, Jobs: []status.Job{queued(1, time.Minute), inProgress}, Sweep: sweptAt(now, 2),
			Runners: []status.Runner{running("p-a-0"), running("p-b-0")}}, "1 idle runners have not taken it"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			c.in.Pool = "p"
			p := status.Build(now, []status.Input{c.in}, nil).Pools[0]
			if len(p.Queued) == 0 || !strings.HasPrefix(p.Queued[0].Waiting, c.want) {
				t.Fatalf("why = %+v, want it to start with %q", p.Queued, c.want)
			}
		})
	}
}

func TestBusyRunnersAndCounts(t *testing.T) {
	t.Parallel()
	job := queued(9, time.Minute)
	job.State, job.RunnerName, job.RunnerID = "in_progress", "p-b-0", 77
	in := status.Input{Pool: "p", MaxReplicas: 3, Jobs: []status.Job{queued(2, time.Second), job, queued(1, time.Minute)},
		Sweep: sweptAt(now, 3), Runners: []status.Runner{
			{Name: "p-a-0", Phase: status.PhaseRunning}, {Name: "p-b-0", Phase: status.PhaseRunning},
			{Name: "p-c-0", Phase: status.PhaseTerminating}}}
	p := status.Build(now, []status.Input{in}, nil).Pools[0]
	if p.Running != 2 || p.Stopping != 1 || p.Pending != 0 || p.Desired != 3 || p.Saturated {
		t.Fatalf("counts %+v", p)
	}
	if p.Runners[0].Busy || !p.Runners[1].Busy || p.Runners[1].Job != 9 {
		t.Fatalf("busy flags %+v", p.Runners)
	}
	if len(p.Queued) != 2 || p.Queued[0].ID != 1 || p.Queued[0].AgeSeconds != 60 || len(p.InProgress) != 1 {
		t.Fatalf("queued %+v, in progress %+v; want job 1 (60 s) first", p.Queued, p.InProgress)
	}
	var out bytes.Buffer
	if err := status.RenderPool(&out, now, p); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"p-b-0", "running", "yes", "QUEUED JOBS", "JOBS IN PROGRESS"} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("pool view lacks %q:\n%s", want, out.String())
		}
	}
}

func TestTrace(t *testing.T) {
	t.Parallel()
	job := queued(5, time.Minute)
	job.State, job.RunnerName, job.RunnerID = "completed", "p-a-0", 42
	job.Deliveries = []status.Delivery{{State: "queued", ID: "d1", At: now.Add(-time.Minute)}, {State: "completed", ID: "d3", At: now}}
	tr := status.NewTrace(now, job, []status.Runner{{Name: "p-a-0", StatefulSet: "p-a", Phase: status.PhaseCompleted}})
	if tr.Active || tr.Runner == nil || tr.Runner.StatefulSet != "p-a" || tr.RunnerGone {
		t.Fatalf("trace %+v", tr)
	}
	if gone := status.NewTrace(now, job, nil); !gone.RunnerGone || gone.Runner != nil {
		t.Fatalf("trace without the runner %+v, want it gone", gone)
	}
	var out bytes.Buffer
	if err := status.RenderTrace(&out, now, tr); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"released (job completed)", "p-a-0 (GitHub id 42), StatefulSet p-a", "d1", "d3"} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("trace lacks %q:\n%s", want, out.String())
		}
	}
	out.Reset()
	if err := status.JSON(&out, tr); err != nil {
		t.Fatal(err)
	}
	var back status.Trace
	if err := json.Unmarshal(out.Bytes(), &back); err != nil || back.Job.RunnerID != 42 || back.Runner.Name != "p-a-0" {
		t.Fatalf("JSON round trip: %v, %+v", err, back)
	}
}
