package tests

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	clocktesting "k8s.io/utils/clock/testing"

	"github.com/runnerscaler/runnerscaler/internal/reservation"
	"github.com/runnerscaler/runnerscaler/local/githubsim"
	"github.com/runnerscaler/runnerscaler/local/testenv"
)

// Counted reads the jobs a pool counts now (reservation.Store.Active: what a
// sweep counts).
type Counted interface {
	Active(ctx context.Context, pool string, nudged ...int64) ([]reservation.Reservation, error)
}

// countedOnce compares where the sweeps count jobs (each pool's Active, read
// pool after pool) with GitHub's account of the jobs: no job is counted in two
// pools, no job GitHub shows queued or running is counted in none, and no job
// GitHub shows completed is counted. It returns one line per job that breaks a
// rule. Read while jobs move between pools, two pools' reads may straddle a
// move: call it once the run is quiet. (A job held for an approval, or whose
// deliveries are all lost, is counted in none; a quiet run has none.)
func countedOnce(ctx context.Context, store Counted, pools []string, jobs []githubsim.Job) ([]string, error) {
	where := map[int64][]string{}
	for _, p := range pools {
		rs, err := store.Active(ctx, p)
		if err != nil {
			return nil, fmt.Errorf("reading the jobs pool %s counts: %w", p, err)
		}
		for _, r := range rs {
			where[r.JobID] = append(where[r.JobID], p)
		}
	}
	var problems []string
	for _, j := range jobs {
		in := where[j.ID]
		switch {
		case len(in) > 1:
			problems = append(problems, fmt.Sprintf("job %d (%s on GitHub): counted twice, in pools %s", j.ID, j.State, strings.Join(in, ", ")))
		case j.State == githubsim.JobCompleted && len(in) == 1:
			problems = append(problems, fmt.Sprintf("job %d (completed on GitHub): still counted, in pool %s", j.ID, in[0]))
		case j.State != githubsim.JobCompleted && len(in) == 0:
			problems = append(problems, fmt.Sprintf("job %d (%s on GitHub): counted nowhere", j.ID, j.State))
		}
		delete(where, j.ID)
	}
	for id, in := range where {
		problems = append(problems, fmt.Sprintf("job %d (unknown to GitHub): counted in pools %s", id, strings.Join(in, ", ")))
	}
	slices.Sort(problems)
	return problems, nil
}

// noJobCountedTwiceOrNowhere fails the test for each job countedOnce finds
// counted twice, nowhere, or after its end, in the world's pools.
func (w *world) noJobCountedTwiceOrNowhere() {
	w.t.Helper()
	var pools []string
	for _, p := range w.cfg.Pools {
		pools = append(pools, p.Name)
	}
	store := reservation.New(w.db, w.table, clocktesting.NewFakePassiveClock(time.Now()))
	problems, err := countedOnce(context.Background(), store, pools, w.loop.Sim.Jobs())
	if err != nil {
		w.t.Fatalf("checking where the jobs are counted: %v", err)
	}
	for _, p := range problems {
		w.t.Error(p)
	}
	w.t.Logf("jobs counted twice, nowhere or after their end, once the run was quiet: %d", len(problems))
}

// TestCountedOnceFindsJobsCountedTwiceOrNowhere: the check passes on jobs
// recorded, moved and completed as GitHub shows them, and names a job counted
// in two pools, a queued one counted nowhere, a completed one still counted
// and a counted one GitHub does not know.
func TestCountedOnceFindsJobsCountedTwiceOrNowhere(t *testing.T) {
	t.Parallel()
	db, name := testenv.Table(t)
	s := reservation.New(db, name, clocktesting.NewFakePassiveClock(time.Now()))
	record := func(pool string, job int64, st reservation.State) {
		t.Helper()
		d := reservation.Delivery{Pool: pool, JobID: job, State: st, Amount: 1, Duration: time.Hour, DeliveryID: fmt.Sprint(pool, job, st)}
		if _, err := s.Record(t.Context(), d); err != nil {
			t.Fatal(err)
		}
	}
	record("a", 1, reservation.Queued)
	record("a", 2, reservation.InProgress)
	record("a", 3, reservation.Completed)
	if _, _, err := s.FollowRunner(t.Context(), "a", 2, "b"); err != nil {
		t.Fatal(err)
	}
	jobs := []githubsim.Job{{ID: 1, State: githubsim.JobQueued}, {ID: 2, State: githubsim.JobInProgress}, {ID: 3, State: githubsim.JobCompleted}}
	if problems, err := countedOnce(t.Context(), s, []string{"a", "b"}, jobs); err != nil || len(problems) != 0 {
		t.Fatalf("countedOnce on jobs counted once = %v, %v; want nothing", problems, err)
	}
	record("b", 1, reservation.Queued) // a second item of job 1, in pool b's partition
	record("a", 5, reservation.Queued)
	jobs = append(jobs, githubsim.Job{ID: 4, State: githubsim.JobQueued}, githubsim.Job{ID: 6, State: githubsim.JobCompleted})
	record("a", 6, reservation.Queued)
	problems, err := countedOnce(t.Context(), s, []string{"a", "b"}, jobs)
	if err != nil {
		t.Fatal(err)
	}
	got := strings.Join(problems, "\n")
	for _, want := range []string{"job 1 (queued on GitHub): counted twice, in pools a, b", "job 4 (queued on GitHub): counted nowhere",
		"job 6 (completed on GitHub): still counted, in pool a", "job 5 (unknown to GitHub): counted in pools a"} {
		if !strings.Contains(got, want) {
			t.Errorf("countedOnce said:\n%s\nwant a line with %q", got, want)
		}
	}
}
