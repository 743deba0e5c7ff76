package tests

import (
	"fmt"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/watch"

	"github.com/runnerscaler/runnerscaler/local/githubsim"
	"github.com/runnerscaler/runnerscaler/local/loop"
)

// BenchmarkQueuedToStatefulSet measures, on the closed loop, the time from a job
// being queued (its delivery sent to the webhook) to its runner's StatefulSet
// existing, for 40 deliveries one at a time, 200 ms apart so that each finds the
// previous sweep finished — with the webhook's nudge (fast path) and with the
// schedule alone (every 2 s here; every minute in AWS).
func BenchmarkQueuedToStatefulSet(b *testing.B) {
	for _, fast := range []bool{true, false} {
		b.Run(fmt.Sprintf("fastpath=%v", fast), func(b *testing.B) {
			for b.Loop() {
				lat := queuedToStatefulSet(b, fast, 40)
				b.ReportMetric(ms(loop.Percentile(lat, 50)), "p50-ms")
				b.ReportMetric(ms(loop.Percentile(lat, 99)), "p99-ms")
				b.ReportMetric(ms(loop.Percentile(lat, 100)), "max-ms")
			}
		})
	}
}

func ms(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }

func queuedToStatefulSet(b *testing.B, fast bool, n int) []time.Duration {
	w := newWorld(b, `
pools:
  - name: p
    organization: acme
    maxReplicas: 1000
    kubernetes: {namespace: %[1]s, image: runner:1}
`, loop.Options{StartDelay: time.Hour, SweepEvery: 2 * time.Second, NoFastPath: !fast})
	watcher, err := w.kube.AppsV1().StatefulSets(w.ns).Watch(b.Context(), metav1.ListOptions{})
	if err != nil {
		b.Fatal(err)
	}
	defer watcher.Stop()
	var lat []time.Duration
	for range n {
		time.Sleep(200 * time.Millisecond)
		start := time.Now()
		w.loop.Sim.QueueJob(githubsim.JobSpec{Repository: "acme/app", Organization: "acme", Labels: []string{"self-hosted"}, Duration: time.Hour})
		for ev := range watcher.ResultChan() {
			if ev.Type == watch.Added {
				lat = append(lat, time.Since(start))
				break
			}
		}
	}
	return lat
}
