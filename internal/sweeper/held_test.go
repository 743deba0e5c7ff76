package sweeper_test

import (
	"context"
	"fmt"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/runnerscaler/runnerscaler/internal/githubapi"
	"github.com/runnerscaler/runnerscaler/internal/pool"
	"github.com/runnerscaler/runnerscaler/internal/reservation"
	"github.com/runnerscaler/runnerscaler/internal/scope"
	"github.com/runnerscaler/runnerscaler/internal/sweeper"
)

// gitHubJobs answers GET .../actions/jobs/{id} from a map of job statuses
// (absent: 404), and counts the calls per job.
type gitHubJobs struct {
	mu     sync.Mutex
	status map[int64]string
	calls  map[int64]int
}

func (g *gitHubJobs) Job(_ context.Context, _ scope.Scope, _ string, id int64) (githubapi.Job, error) {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.calls[id]++
	st, ok := g.status[id]
	if !ok {
		return githubapi.Job{}, fmt.Errorf("job %d: %w", id, githubapi.ErrNotFound)
	}
	return githubapi.Job{ID: id, Status: st}, nil
}

// TestHeldJobsAreSettledByGitHub: jobs left held by their deliveries — the
// approval's `queued` the only one recorded (the first lost for good), or a
// `waiting` alone — are asked about once held longer than the grace, on a
// scheduled sweep, and settled by GitHub's answer: queued (approved) counts
// again, completed and unknown stop holding anything, waiting stays held and
// is not asked again before its interval. A job held less than the grace is
// not asked about.
func TestHeldJobsAreSettledByGitHub(t *testing.T) {
	t.Parallel()
	cfg, err := pool.Load(filepath.Join("..", "..", "local", "pools.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	e := newEnv(t, nil)
	gh := &gitHubJobs{status: map[int64]string{1: "queued", 2: "waiting", 3: "completed"}, calls: map[int64]int{}}
	if e.sweeper, err = sweeper.New(cfg, e.rs, e.status, e.leases, nil, e.clock, nil, sweeper.Options{HeldJobs: gh}); err != nil {
		t.Fatal(err)
	}
	p := cfg.Pools[0].Name
	hold := func(job int64, approvalQueued bool) {
		t.Helper()
		d := reservation.Delivery{Pool: p, JobID: job, Repository: "acme/app", Amount: 1, Duration: 10 * time.Minute}
		d.State, d.DeliveryID = reservation.Waiting, fmt.Sprint("w", job)
		if _, err := e.rs.Record(t.Context(), d); err != nil {
			t.Fatal(err)
		}
		if approvalQueued {
			d.State, d.DeliveryID = reservation.Queued, fmt.Sprint("q", job)
			if _, err := e.rs.Record(t.Context(), d); err != nil {
				t.Fatal(err)
			}
		}
	}
	hold(1, true)  // approved; its first queued lost for good
	hold(2, false) // still waiting for a reviewer
	hold(3, false) // cancelled while waiting; its completed lost
	hold(4, false) // unknown to GitHub
	scheduled := func() {
		t.Helper()
		if _, err := e.sweeper.Handle(t.Context(), sweeper.Event{Source: "aws.events", DetailType: "Scheduled Event"}); err != nil {
			t.Fatal(err)
		}
	}
	scheduled()
	if len(gh.calls) != 0 {
		t.Fatalf("GitHub asked about jobs held less than HeldGrace: %v", gh.calls)
	}
	e.clock.Step(sweeper.DefaultHeldGrace + time.Second)
	scheduled()
	rs, err := e.rs.Active(t.Context(), p, 1, 2, 3, 4)
	if err != nil {
		t.Fatal(err)
	}
	if len(rs) != 1 || rs[0].JobID != 1 || rs[0].Held() {
		t.Fatalf("active after the check: %+v; want job 1 alone, released", rs)
	}
	if got := e.desired(t, p).Desired; got < 1 {
		t.Fatalf("desired %d after job 1's release, want a runner for it", got)
	}
	for _, job := range []int64{3, 4} {
		if r, ok, err := e.rs.Job(t.Context(), p, job); err != nil || !ok || r.State != reservation.Completed {
			t.Fatalf("job %d: %+v, %v, %v; want completed", job, r, ok, err)
		}
	}
	r, _, err := e.rs.Job(t.Context(), p, 2)
	if err != nil || !r.Held() || r.HeldCheckedMillis == 0 {
		t.Fatalf("job 2: %+v, %v; want held, its check recorded", r, err)
	}
	e.clock.Step(time.Minute)
	scheduled()
	if gh.calls[2] != 1 {
		t.Fatalf("job 2 asked %d times within its interval, want once", gh.calls[2])
	}
	e.clock.Step(5 * time.Minute)
	scheduled()
	if gh.calls[2] != 2 || gh.calls[1] != 1 {
		t.Fatalf("calls %v: want job 2 asked again after its interval, job 1 never again", gh.calls)
	}
}

// TestHeldChecksAreCappedPerSweep: of seven jobs held past the grace, one
// scheduled sweep asks GitHub about five, and the next asks about the other
// two, not the five again (their interval has not passed).
func TestHeldChecksAreCappedPerSweep(t *testing.T) {
	t.Parallel()
	cfg, err := pool.Load(filepath.Join("..", "..", "local", "pools.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	e := newEnv(t, nil)
	gh := &gitHubJobs{status: map[int64]string{}, calls: map[int64]int{}}
	if e.sweeper, err = sweeper.New(cfg, e.rs, e.status, e.leases, nil, e.clock, nil, sweeper.Options{HeldJobs: gh}); err != nil {
		t.Fatal(err)
	}
	p := cfg.Pools[0].Name
	for job := int64(1); job <= 7; job++ {
		gh.status[job] = "waiting"
		d := reservation.Delivery{Pool: p, JobID: job, Repository: "acme/app", Amount: 1, Duration: 10 * time.Minute,
			State: reservation.Waiting, DeliveryID: fmt.Sprint("w", job)}
		if _, err := e.rs.Record(t.Context(), d); err != nil {
			t.Fatal(err)
		}
	}
	e.clock.Step(sweeper.DefaultHeldGrace + time.Second)
	total := func() (n int) {
		gh.mu.Lock()
		defer gh.mu.Unlock()
		for _, c := range gh.calls {
			n += c
		}
		return n
	}
	for i, want := range []int{5, 7} {
		if _, err := e.sweeper.Handle(t.Context(), sweeper.Event{Source: "aws.events", DetailType: "Scheduled Event"}); err != nil {
			t.Fatal(err)
		}
		if got := total(); got != want || len(gh.calls) != want {
			t.Fatalf("after sweep %d: %d calls for %d jobs (%v), want %d for %d", i+1, got, len(gh.calls), gh.calls, want, want)
		}
	}
}
