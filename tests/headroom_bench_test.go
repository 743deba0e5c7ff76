package tests

import (
	"fmt"
	"testing"
	"time"

	"github.com/runnerscaler/runnerscaler/internal/headroom"
	"github.com/runnerscaler/runnerscaler/local/loop"
)

// simulatedNodeBoot stands, in BenchmarkHeadroom, for the time a cluster
// autoscaler takes to bring up a node for an unschedulable pod. The local
// stack has one node and no autoscaler: the benchmark adds the capacity itself
// this long after the runner pod was found unschedulable. On EKS a new node
// takes 45–65 s to become Ready.
const simulatedNodeBoot = 15 * time.Second

// BenchmarkHeadroom measures job queued → job started (the simulator's times)
// on the real node, full for the runner's size (one unit of the test's
// extended resource, which each runner pod asks for), for 3 jobs of 1 s one
// after the other, through the closed loop (the webhook's nudges create the
// runners; a 5 s schedule, instead of the deployed minute, replaces finished
// ones sooner, so that the benchmark is short):
//
//   - headroom=true: the pool keeps one placeholder on the node; a job's
//     runner pod preempts it (the real scheduler) and starts at once. The next
//     job is queued once the placeholder runs again (here when the runner's
//     pod is gone; in a cluster, on the node the autoscaler added for it);
//   - headroom=false: no placeholder, and the unit the runner needs appears
//     only simulatedNodeBoot after its pod was found unschedulable — a node
//     boot, simulated — and is taken away after the job.
//
// It reports p50 and max of queued → started; headroom=false also reports the
// simulated boot it includes.
func BenchmarkHeadroom(b *testing.B) {
	for _, with := range []bool{true, false} {
		b.Run(fmt.Sprintf("headroom=%v", with), func(b *testing.B) {
			for b.Loop() {
				ws := headroomWaits(b, with, 3)
				b.ReportMetric(ms(loop.Percentile(ws, 50)), "queued-to-started-p50-ms")
				b.ReportMetric(ms(loop.Percentile(ws, 100)), "queued-to-started-max-ms")
				if !with {
					b.ReportMetric(simulatedNodeBoot.Seconds(), "simulated-node-boot-s")
				}
			}
		})
	}
}

func headroomWaits(b *testing.B, with bool, jobs int) []time.Duration {
	s := newSlots(b)
	setting := ""
	if with {
		setting = "headroom: {replicas: 1, image: %[3]s}"
		applyPriorityClass(b, s.kube)
		s.set(1)
	} else {
		s.set(0)
	}
	w := newWorldWith(b, `
pools:
  - name: p
    organization: acme
    maxReplicas: 2
    scaleDownDelaySecondsAfterScaleOut: 1
    `+setting+`
    kubernetes: {namespace: %[1]s, template: %[2]s}
`, loop.Options{SweepEvery: 5 * time.Second}, s.template, pauseImage)
	placeholder := headroom.Name("p") + "-0"
	for i := range jobs {
		if with {
			poll(b, "the placeholder running", 2*time.Minute, func() (bool, error) { return running(pod(b, w.kube, w.ns, placeholder)), nil })
		}
		w.queue(1, time.Second)
		if !with {
			poll(b, "the runner pod unschedulable", time.Minute, func() (bool, error) {
				for _, p := range w.runnerPods() {
					if unschedulable(&p) {
						return true, nil
					}
				}
				return false, nil
			})
			time.Sleep(simulatedNodeBoot) // the simulated node boot, not a proof of anything
			s.set(1)
		}
		w.waitFor(fmt.Sprintf("job %d completed", i+1), 2*time.Minute, func() bool { return allDone(w.loop.Sim.Jobs()) })
		w.waitFor("its runner gone", 2*time.Minute, func() bool { return len(w.runnerPods()) == 0 })
		if !with {
			s.set(0)
		}
	}
	w.noViolations()
	return w.loop.Waits()
}
