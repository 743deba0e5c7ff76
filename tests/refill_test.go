package tests

import (
	"testing"
	"time"

	"github.com/runnerscaler/runnerscaler/local/loop"
)

// TestSaturatedPoolRefillsWithoutTheSchedule: a backlog of 8 one-second jobs for
// a pool of 2 ephemeral runners, queued at once, with the schedule at 10 minutes.
// Only the first two runners come from the `queued` nudges; every later one
// must come from the refill nudge of a `completed` delivery, within seconds of
// its predecessor's exit. Without the refill path the backlog would wait for
// the schedule, three ticks of 10 minutes.
func TestSaturatedPoolRefillsWithoutTheSchedule(t *testing.T) {
	t.Parallel()
	w := newWorld(t, `
pools:
  - name: p
    organization: acme
    maxReplicas: 2
    scaleDownDelaySecondsAfterScaleOut: 1
    kubernetes: {namespace: %[1]s, template: %[2]s}
`, loop.Options{SweepEvery: 10 * time.Minute, WaitBound: time.Hour})
	w.queue(8, time.Second)
	w.waitFor("the backlog done by refills", 3*time.Minute, func() bool { return allDone(w.loop.Sim.Jobs()) })
	if u := w.loop.Usage(); u.Scheduled.Count != 0 {
		t.Fatalf("%d scheduled sweeps ran; the test means to show the backlog done without them", u.Scheduled.Count)
	}
	w.noViolations()
}
