package tests

import (
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/watch"

	"github.com/runnerscaler/runnerscaler/internal/testenv"
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
	w := newWorldWith(b, `
pools:
  - name: p
    organization: acme
    maxReplicas: 1000
    kubernetes: {namespace: %[1]s, template: %[2]s}
`, loop.Options{SweepEvery: 2 * time.Second, NoFastPath: !fast}, pendingTemplate)
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

// BenchmarkStandardTrace runs the standard trace — 100 jobs for two pools, Poisson
// arrivals at 4/s, 0.5–2 s each, seed 42 — through the closed loop and reports job
// wait p50/p95, runner-seconds per job (time runners were registered, per job), and
// GitHub API calls per job.
func BenchmarkStandardTrace(b *testing.B) {
	for b.Loop() {
		w := newWorld(b, twoPools, loop.Options{SweepEvery: 2 * time.Second})
		trace := loop.Generate(w.cfg, 100, 4, 500*time.Millisecond, 2*time.Second, 42)
		w.loop.Play(b.Context(), trace)
		w.waitFor("every job completed", 5*time.Minute, func() bool {
			return len(w.loop.Sim.Jobs()) == len(trace) && allDone(w.loop.Sim.Jobs())
		})
		w.waitFor("back to zero", 2*time.Minute, w.quiescent)
		calls := 0
		for endpoint, n := range w.loop.Sim.Calls() {
			if endpoint != "POST /app/installations/{installation_id}/access_tokens" {
				calls += n
			}
		}
		ws := w.loop.Waits()
		b.ReportMetric(ms(loop.Percentile(ws, 50)), "wait-p50-ms")
		b.ReportMetric(ms(loop.Percentile(ws, 95)), "wait-p95-ms")
		b.ReportMetric(w.loop.Monitor.PodTime().Seconds()/float64(len(trace)), "pod-s/job")
		b.ReportMetric(float64(calls)/float64(len(trace)), "github-calls/job")
		if v := w.loop.Monitor.Violations(); len(v) > 0 {
			b.Fatalf("violations: %v", v)
		}
	}
}

// BenchmarkBootstraps reports each Lambda bootstrap's size (linux, this machine's
// architecture, the Lambda build flags) and its init duration under the Lambda
// Runtime Interface Emulator (a proxy for the cold start).
func BenchmarkBootstraps(b *testing.B) {
	for _, fn := range []string{"webhook", "sweeper"} {
		b.Run(fn, func(b *testing.B) {
			bin := build(b, fn)
			info, err := os.Stat(bin)
			if err != nil {
				b.Fatal(err)
			}
			_, tableName := testenv.Table(b)
			pools, _ := filepath.Abs("../local/pools.yaml")
			env := localEnv(b, "TABLE_NAME="+tableName, "POOLS_CONFIG="+pools, "WEBHOOK_SECRET=local-webhook-secret",
				"KUBECONFIG="+testenv.Kubeconfig(b), "GITHUB_TOKEN=ghp_unused")
			if fn == "webhook" {
				env = env[:len(env)-2]
			}
			for b.Loop() {
				e := start(b, bin, env)
				event := "../local/events/webhook-ping.json"
				if fn == "sweeper" {
					event = "../local/events/sweeper-nudge.json" // any event: init happens before it
				}
				raw, _ := os.ReadFile(event)
				_, _ = e.Invoke(b.Context(), raw)
				d, ok := e.InitDuration()
				if !ok {
					b.Fatalf("no init report:\n%s", e.Logs())
				}
				b.ReportMetric(ms(d), "init-ms")
				b.ReportMetric(float64(info.Size())/(1<<20), "size-MiB")
				e.Stop()
			}
		})
	}
}
