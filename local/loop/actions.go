package loop

import (
	"context"
	"time"

	"github.com/runnerscaler/runnerscaler/local/githubsim"
)

// failLostJobs plays a part of the Actions service the simulator leaves to its
// user: a job whose worker died with its runner (its container killed: an OOM
// kill, a crash, a runner process killed before its worker reported) is failed,
// as GitHub fails a job whose lock its worker stopped renewing ("The self-hosted
// runner lost communication with the server"), after minutes on GitHub and
// LostAfter here. The simulator cannot see a worker; what betrays a dead one is
// its runner's container stopping after the job started (the worker is one of
// its processes: they all die with it, even if the kubelet restarts the
// container and a persistent runner reconnects at once), or its runner going
// offline while the job runs (a healthy listener keeps its session alive by
// long-polling throughout the job). The runner is then idle again, and an
// ephemeral one deleted, as after any job. Without it such a job would stay in
// progress and its runner busy forever.
func (l *Loop) failLostJobs(ctx context.Context) {
	t := time.NewTicker(time.Second)
	defer t.Stop()
	lost := map[int64]time.Time{}
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		l.failLost(time.Now(), lost)
	}
}

// failLost is one look of failLostJobs, at now. lost maps a running job's id to
// when its runner was first seen gone, offline or stopped during it; a job that
// stays so for LostAfter is failed, and a job no longer running is forgotten.
func (l *Loop) failLost(now time.Time, lost map[int64]time.Time) {
	running := map[int64]bool{}
	for _, j := range l.Sim.RunningJobs() {
		running[j.ID] = true
		since, seen := lost[j.ID]
		if !seen {
			if r, ok := l.Sim.Runner(j.RunnerID); !ok || !r.Online || l.Monitor.stoppedSince(j.RunnerName, j.StartedAt) {
				lost[j.ID] = now
			}
			continue
		}
		if now.Sub(since) < l.opts.LostAfter {
			continue
		}
		if err := l.Sim.CompleteJobAs(j.ID, githubsim.JobFailure); err == nil {
			l.lost.Add(1)
			l.opts.Log.Warn("job failed: its runner lost communication", "job", j.ID, "runner", j.RunnerName, "offline", now.Sub(since).Round(time.Second))
		}
	}
	for id := range lost {
		if !running[id] {
			delete(lost, id)
		}
	}
}
