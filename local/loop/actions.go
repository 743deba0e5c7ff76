package loop

import (
	"context"
	"time"

	"github.com/runnerscaler/runnerscaler/local/githubsim"
)

// failLostJobs plays a part of the Actions service the simulator leaves to its
// user: a job whose runner stopped talking to GitHub in the middle of it (its
// container was killed with the job's worker: an OOM kill, a crash) is failed
// once the runner has been offline for LostAfter — on GitHub, after some minutes,
// "The self-hosted runner lost communication with the server". The runner is
// then idle again, and an ephemeral one deleted, as after any job. Without it
// such a job would stay in progress and its runner busy forever.
func (l *Loop) failLostJobs(ctx context.Context) {
	t := time.NewTicker(time.Second)
	defer t.Stop()
	offline := map[int64]time.Time{} // runner id → when it was first seen offline with a job
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		now := time.Now()
		running := map[int64]bool{}
		for _, j := range l.Sim.RunningJobs() {
			running[j.RunnerID] = true
			if r, ok := l.Sim.Runner(j.RunnerID); ok && r.Online {
				delete(offline, j.RunnerID)
				continue
			}
			since, ok := offline[j.RunnerID]
			if !ok {
				offline[j.RunnerID] = now
				continue
			}
			if now.Sub(since) < l.opts.LostAfter {
				continue
			}
			if err := l.Sim.CompleteJobAs(j.ID, githubsim.JobFailure); err == nil {
				l.lost.Add(1)
				l.opts.Log.Warn("job failed: its runner lost communication", "job", j.ID, "runner", j.RunnerName, "offline", now.Sub(since).Round(time.Second))
			}
			delete(offline, j.RunnerID)
		}
		for id := range offline {
			if !running[id] {
				delete(offline, id)
			}
		}
	}
}
