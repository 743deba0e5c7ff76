package loop

import (
	"strings"
	"testing"
	"time"

	"github.com/runnerscaler/runnerscaler/local/githubsim"
	"github.com/runnerscaler/runnerscaler/local/testenv"
)

// TestCeilingCountsRunnersAbleToTakeAJob: pool small (maxReplicas 2) with
// three StatefulSets is within its ceiling while one of their runners has
// ended a job (it takes no other), and over it once none has.
func TestCeilingCountsRunnersAbleToTakeAJob(t *testing.T) {
	t.Parallel()
	kube, ns := testenv.Namespace(t)
	for _, name := range []string{"small-a", "small-b", "small-c"} {
		runnerStatefulSetNamed(t, kube, ns, "small", name)
	}
	sim := githubsim.New(githubsim.Options{})
	l := testLoopIn(t, sim, kube, ns)
	l.judgeCeiling(t.Context(), func() []githubsim.Job {
		return []githubsim.Job{{ID: 1, State: githubsim.JobCompleted, RunnerName: "small-a-0", EndedAt: time.Now()}}
	})
	if v := l.Monitor.Violations(); len(v) != 0 {
		t.Fatalf("one of three runners ended its job: violations %v, want none", v)
	}
	l.judgeCeiling(t.Context(), func() []githubsim.Job {
		return []githubsim.Job{{ID: 1, State: githubsim.JobInProgress, RunnerName: "small-a-0"}}
	})
	if v := l.Monitor.Violations(); len(v) != 1 || !strings.Contains(v[0], "pool small had 3 runners able to take a job, over its maxReplicas 2") {
		t.Fatalf("three runners, none ended a job: violations %v, want the ceiling's", v)
	}
}
