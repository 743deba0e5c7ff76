package tests

import (
	"fmt"
	"log/slog"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"go.yaml.in/yaml/v3"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/watch"

	"github.com/runnerscaler/runnerscaler/internal/runnerpod"
	"github.com/runnerscaler/runnerscaler/local/githubsim"
	"github.com/runnerscaler/runnerscaler/local/loop"
	"github.com/runnerscaler/runnerscaler/local/testenv"
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
// arrivals at 4/s, 0.5–2 s each, seed 42 — through the closed loop, runners as
// real pods on the node, and reports job wait p50/p95, pod-seconds per job (how
// long runner pods existed, per job: what the runners cost), and the product's
// GitHub API calls per job (not the runners' own).
func BenchmarkStandardTrace(b *testing.B) {
	for b.Loop() {
		w := newWorld(b, twoPools, loop.Options{SweepEvery: 2 * time.Second})
		trace := loop.Generate(w.cfg, 100, 4, 500*time.Millisecond, 2*time.Second, 42)
		w.loop.Play(b.Context(), trace)
		w.waitFor("every job completed", 5*time.Minute, func() bool {
			return len(w.loop.Sim.Jobs()) == len(trace) && allDone(w.loop.Sim.Jobs())
		})
		w.waitFor("back to zero", 2*time.Minute, w.quiescent)
		calls := productCalls(w.loop.Sim.Calls())
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

// BenchmarkRunnerStartup measures, on the real node, how fast a runner comes and
// takes a job when its pool has room: 30 jobs of 1–3 s for a pool of
// maxReplicas 5, Poisson arrivals at one every 2 s (about one job running at a
// time), the webhook's nudge and a 60 s schedule as deployed. It reports pod
// created (seen by a watch) → runner online (listed by the simulator) and job
// queued → job started (the simulator's times), p50 and p95.
func BenchmarkRunnerStartup(b *testing.B) {
	for b.Loop() {
		w := newWorld(b, `
pools:
  - name: p
    organization: acme
    maxReplicas: 5
    scaleDownDelaySecondsAfterScaleOut: 1
    kubernetes: {namespace: %[1]s, template: %[2]s}
`, loop.Options{SweepEvery: time.Minute})
		trace := loop.Generate(w.cfg, 30, 0.5, time.Second, 3*time.Second, 7)
		w.loop.Play(b.Context(), trace)
		w.waitFor("every job completed", 5*time.Minute, func() bool {
			return len(w.loop.Sim.Jobs()) == len(trace) && allDone(w.loop.Sim.Jobs())
		})
		on, ws := w.loop.Monitor.OnlineLatencies(), w.loop.Waits()
		b.ReportMetric(ms(loop.Percentile(on, 50)), "pod-to-online-p50-ms")
		b.ReportMetric(ms(loop.Percentile(on, 95)), "pod-to-online-p95-ms")
		b.ReportMetric(ms(loop.Percentile(ws, 50)), "queued-to-started-p50-ms")
		b.ReportMetric(ms(loop.Percentile(ws, 95)), "queued-to-started-p95-ms")
		w.noViolations()
	}
}

// BenchmarkSaturatedSlotTurnaround measures how long a slot of a saturated pool
// stays unused: a pool of maxReplicas 5 (ephemeral runners, real pods) with a
// backlog of 50 jobs of 1–3 s queued at once, the sweeper on the deployed 60 s
// schedule plus the webhook's nudges (a `queued` one per job, and the refill
// nudge when a job completes on one of the pool's runners). A slot frees when a
// job ends; the k-th job end (in time order) is paired with the (k+5)-th job
// start, the job that took the freed slot on a runner created for it. Per slot:
//
//   - turnaround: the job's end → the next job's start (the measure);
//   - pod-start: that next job's runner pod created (seen by a watch) → its job
//     started: the pod's own start (scheduling, containers, registration, taking
//     the job), which the autoscaler does not control;
//   - refill: turnaround − pod-start = the job's end → its successor's pod
//     created: the autoscaler's part (the `completed` delivery, the nudge, the
//     wait for the runner's container to exit, the sweep that replaces it).
//
// and the turnaround in stages (slotStages), each from the one before, on the
// path the next job waits on: stage-counted-out (the job's end → the freed
// runner's StatefulSet marked finishing: its slot is free), stage-replaced (→
// the replacement StatefulSet created), stage-pod-created (→ its pod created
// by the StatefulSet controller), stage-pod-running (→ its runner container
// running, as the pod's status shows it), stage-online (→ its runner listed
// online), stage-started (→ its job started). The online time is the
// monitor's, which looks every 100 ms, and the kubelet reports a running
// container up to a second late: a runner that comes online and takes its job
// at once can do so before either is seen, and stage-online or stage-started
// is then negative. Off that path, the freed runner's stop: stop-exited (the
// job's end → its container's exit in its pod's status), stop-released (→ the
// stop recorded the runner released on GitHub: the unregistration-complete
// annotation), stop-sts-gone (→ its StatefulSet deleted).
//
// Each is reported as p50 and p95, with the backlog's duration and the product's
// GitHub API calls per job. The percentiles of refill and of each stage are
// taken over the slots, not computed from the others.
func BenchmarkSaturatedSlotTurnaround(b *testing.B) {
	for b.Loop() {
		w := newWorld(b, `
pools:
  - name: p
    organization: acme
    maxReplicas: 5
    scaleDownDelaySecondsAfterScaleOut: 1
    kubernetes: {namespace: %[1]s, template: %[2]s}
`, loop.Options{SweepEvery: time.Minute, WaitBound: time.Hour})
		seen := watchRunners(b, w)
		start := time.Now()
		for i := range 50 {
			w.queue(1, time.Second+time.Duration(i%5)*500*time.Millisecond)
		}
		w.waitFor("every job completed", 30*time.Minute, func() bool { return allDone(w.loop.Sim.Jobs()) })
		backlog := time.Since(start)
		ev := seen()
		jobs := w.loop.Sim.Jobs()
		turn, podStart, refill := slotTurnarounds(b, jobs, ev.podAdded, 5)
		for name, ds := range map[string][]time.Duration{"turnaround": turn, "pod-start": podStart, "refill": refill} {
			b.ReportMetric(ms(loop.Percentile(ds, 50)), name+"-p50-ms")
			b.ReportMetric(ms(loop.Percentile(ds, 95)), name+"-p95-ms")
		}
		for _, st := range slotStages(jobs, ev, w.loop.Monitor.OnlineTimes(), 5) {
			b.ReportMetric(ms(loop.Percentile(st.took, 50)), "stage-"+st.name+"-p50-ms")
			b.ReportMetric(ms(loop.Percentile(st.took, 95)), "stage-"+st.name+"-p95-ms")
		}
		b.ReportMetric(backlog.Seconds(), "backlog-s")
		b.ReportMetric(float64(productCalls(w.loop.Sim.Calls()))/50, "github-calls/job")
		w.noViolations()
	}
}

// runnerEvents is when a watch first saw each step of the runners' lives, by
// pod name (a runner's StatefulSet name + "-0", the name GitHub knows it by).
type runnerEvents struct {
	stsAdded, stsGone, countedOut, podAdded, podRunning, exited, released map[string]time.Time
}

// watchRunners records, from watches of the world's namespace, when each
// runner's StatefulSet was created, marked finishing and deleted, and when its pod was created,
// first showed its runner container running, first showed it ended, and was
// annotated released (unregistration complete); the returned function reads
// what was recorded so far.
func watchRunners(b *testing.B, w *world) func() runnerEvents {
	b.Helper()
	pods, err := w.kube.CoreV1().Pods(w.ns).Watch(b.Context(), metav1.ListOptions{})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(pods.Stop)
	sets, err := w.kube.AppsV1().StatefulSets(w.ns).Watch(b.Context(), metav1.ListOptions{})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(sets.Stop)
	var mu sync.Mutex
	ev := runnerEvents{stsAdded: map[string]time.Time{}, stsGone: map[string]time.Time{}, countedOut: map[string]time.Time{}, podAdded: map[string]time.Time{},
		podRunning: map[string]time.Time{}, exited: map[string]time.Time{}, released: map[string]time.Time{}}
	first := func(m map[string]time.Time, name string, now time.Time) {
		if _, ok := m[name]; !ok {
			m[name] = now
		}
	}
	go func() {
		for e := range pods.ResultChan() {
			pod, ok := e.Object.(*corev1.Pod)
			if !ok {
				continue
			}
			now := time.Now()
			mu.Lock()
			if e.Type == watch.Added {
				first(ev.podAdded, pod.Name, now)
			}
			if cs := runnerpod.RunnerStatus(pod); cs != nil {
				if cs.State.Running != nil && cs.RestartCount == 0 {
					first(ev.podRunning, pod.Name, now)
				}
				if cs.State.Terminated != nil || cs.LastTerminationState.Terminated != nil {
					first(ev.exited, pod.Name, now)
				}
			}
			if _, ok := pod.Annotations[runnerpod.AnnotationUnregistrationComplete]; ok {
				first(ev.released, pod.Name, now)
			}
			mu.Unlock()
		}
	}()
	go func() {
		for e := range sets.ResultChan() {
			sts, ok := e.Object.(*appsv1.StatefulSet)
			if !ok {
				continue
			}
			now := time.Now()
			mu.Lock()
			if e.Type == watch.Added {
				first(ev.stsAdded, sts.Name+"-0", now)
			}
			if e.Type == watch.Deleted || sts.DeletionTimestamp != nil {
				first(ev.stsGone, sts.Name+"-0", now)
			}
			if _, ok := sts.Annotations[runnerpod.AnnotationJobCompleted]; ok {
				first(ev.countedOut, sts.Name+"-0", now)
			}
			mu.Unlock()
		}
	}()
	return func() runnerEvents {
		mu.Lock()
		defer mu.Unlock()
		return runnerEvents{stsAdded: maps.Clone(ev.stsAdded), stsGone: maps.Clone(ev.stsGone), countedOut: maps.Clone(ev.countedOut), podAdded: maps.Clone(ev.podAdded),
			podRunning: maps.Clone(ev.podRunning), exited: maps.Clone(ev.exited), released: maps.Clone(ev.released)}
	}
}

// stage is one step of a slot's turnaround, measured per slot.
type stage struct {
	name string
	took []time.Duration
}

// slotStages splits each slot's turnaround (slotTurnarounds' pairing: the k-th
// job end with the (k+slots)-th job start) into the stages of
// BenchmarkSaturatedSlotTurnaround: the freed runner's (the one whose job ended
// k-th) counting out, then its successor's (the runner of the (k+slots)-th job
// start) StatefulSet, pod, running container, online listing and job start;
// and, off that path, the freed runner's exit, release and StatefulSet's
// deletion. A slot lacking an event (a watch that missed it, a runner
// replaced only once its container exited) leaves that stage out.
func slotStages(jobs []githubsim.Job, ev runnerEvents, online map[string]time.Time, slots int) []stage {
	byEnd := slices.Clone(jobs)
	slices.SortFunc(byEnd, func(x, y githubsim.Job) int { return x.EndedAt.Compare(y.EndedAt) })
	byStart := slices.Clone(jobs)
	slices.SortFunc(byStart, func(x, y githubsim.Job) int { return x.StartedAt.Compare(y.StartedAt) })
	stages := []stage{{name: "counted-out"}, {name: "replaced"}, {name: "pod-created"}, {name: "pod-running"},
		{name: "online"}, {name: "started"}, {name: "stop-exited"}, {name: "stop-released"}, {name: "stop-sts-gone"}}
	for k := 0; k+slots < len(byStart) && k < len(byEnd); k++ {
		freed, next := byEnd[k], byStart[k+slots]
		old, repl := freed.RunnerName, next.RunnerName
		steps := [][]time.Time{
			pair(freed.EndedAt, ev.countedOut, old),
			{ev.countedOut[old], ev.stsAdded[repl]},
			between(ev.stsAdded, ev.podAdded, repl),
			between(ev.podAdded, ev.podRunning, repl),
			between(ev.podRunning, online, repl),
			{online[repl], next.StartedAt},
			pair(freed.EndedAt, ev.exited, old),
			between(ev.exited, ev.released, old),
			between(ev.released, ev.stsGone, old),
		}
		for i, st := range steps {
			if len(st) == 2 && !st[0].IsZero() && !st[1].IsZero() {
				stages[i].took = append(stages[i].took, st[1].Sub(st[0]))
			}
		}
	}
	return stages
}

// pair is from at to name's time in m (zero when m lacks it).
func pair(at time.Time, m map[string]time.Time, name string) []time.Time {
	return []time.Time{at, m[name]}
}

// between is from name's time in from to its time in to.
func between(from, to map[string]time.Time, name string) []time.Time {
	return []time.Time{from[name], to[name]}
}

// slotTurnarounds pairs the k-th job end with the (k+slots)-th job start (see
// BenchmarkSaturatedSlotTurnaround) and returns per slot the turnaround, the
// pod-start of the job that took the slot (from its runner pod's creation, in
// created) and the refill (the difference).
func slotTurnarounds(b *testing.B, jobs []githubsim.Job, created map[string]time.Time, slots int) (turn, podStart, refill []time.Duration) {
	b.Helper()
	ends := make([]time.Time, 0, len(jobs))
	for _, j := range jobs {
		ends = append(ends, j.EndedAt)
	}
	slices.SortFunc(ends, time.Time.Compare)
	byStart := slices.Clone(jobs)
	slices.SortFunc(byStart, func(x, y githubsim.Job) int { return x.StartedAt.Compare(y.StartedAt) })
	for k := 0; k+slots < len(byStart); k++ {
		next := byStart[k+slots]
		at, ok := created[next.RunnerName]
		if !ok {
			b.Fatalf("job %d ran on %q, whose pod the watch never saw", next.ID, next.RunnerName)
		}
		turn = append(turn, next.StartedAt.Sub(ends[k]))
		podStart = append(podStart, next.StartedAt.Sub(at))
		refill = append(refill, at.Sub(ends[k]))
	}
	return turn, podStart, refill
}

// productCalls counts the product's GitHub API calls (not the runners' own, nor
// the App's installation token exchanges).
func productCalls(calls map[string]int) int {
	n := 0
	for endpoint, c := range calls {
		if endpoint != "POST /app/installations/{installation_id}/access_tokens" && !strings.Contains(endpoint, "/_runner/") {
			n += c
		}
	}
	return n
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
			pools, err := filepath.Abs("../local/pools.yaml")
			if err != nil {
				b.Fatal(err)
			}
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
				raw, err := os.ReadFile(event)
				if err != nil {
					b.Fatal(err)
				}
				_, _ = e.Invoke(b.Context(), raw) // its answer does not matter: init happens before it
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

// BenchmarkCostPer1000Jobs runs the standard trace (BenchmarkStandardTrace's: 100
// jobs for two pools, Poisson arrivals at 4/s, 0.5–2 s each, seed 42) through the
// closed loop with every request metered, and reports per 1,000 jobs what AWS
// bills by use: Lambda invocations and GB-seconds of the webhook and the sweeper
// (durations measured here, in-process on this machine, each rounded up to the
// millisecond, at template.yaml's memory sizes, also reported), DynamoDB read and
// write request units (capacityMeter), the bytes the functions log at INFO (JSON,
// as CloudWatch Logs ingests them) and the product's GitHub API calls.
//
// The trace runs on the webhook's nudges alone (no schedule); once every job is
// done, scheduled sweeps, one every 5 s, take the pools back to zero, and count
// as the jobs' cost: they do the teardown. Then three more scheduled sweeps of
// the idle pools give the schedule's own cost per sweep (idle-sweep-*), which
// does not depend on jobs: at the deployed rate, one a minute, 43,200 a month.
// local/cmd/benchtable turns both into dollars at on-demand prices.
func BenchmarkCostPer1000Jobs(b *testing.B) {
	webhookMB, sweeperMB := memorySizes(b)
	for b.Loop() {
		meter := &capacityMeter{}
		logs := &countingWriter{}
		w := newWorld(b, twoPools, loop.Options{SweepEvery: 24 * time.Hour, DB: meter.client(testenv.DynamoDBClient(b)),
			Log: meteredLog(b, logs)})
		trace := loop.Generate(w.cfg, 100, 4, 500*time.Millisecond, 2*time.Second, 42)
		w.loop.Play(b.Context(), trace)
		w.waitFor("every job completed", 5*time.Minute, func() bool {
			return len(w.loop.Sim.Jobs()) == len(trace) && allDone(w.loop.Sim.Jobs())
		})
		for i := 0; !w.quiescent(); i++ {
			if i == 24 {
				b.Fatalf("not back to zero after %d scheduled sweeps: %v", i, w.left)
			}
			if err := w.loop.Sweep(b.Context()); err != nil {
				b.Fatalf("scheduled sweep: %v", err)
			}
			time.Sleep(5 * time.Second)
		}
		jobs := usageOf(w, meter, logs)
		for range 3 {
			if err := w.loop.Sweep(b.Context()); err != nil {
				b.Fatalf("idle scheduled sweep: %v", err)
			}
		}
		idle := usageOf(w, meter, logs).minus(jobs)
		per := 1000 / float64(len(trace))
		gbs := func(d time.Duration, mb float64) float64 { return d.Seconds() * mb / 1024 }
		sweeps := jobs.usage.Nudged.Count + jobs.usage.Scheduled.Count
		b.ReportMetric(float64(jobs.usage.Webhook.Count)*per, "webhook-invocations/1k-jobs")
		b.ReportMetric(gbs(jobs.usage.Webhook.Duration, webhookMB)*per, "webhook-GB-s/1k-jobs")
		b.ReportMetric(float64(sweeps)*per, "sweeper-invocations/1k-jobs")
		b.ReportMetric(gbs(jobs.usage.Nudged.Duration+jobs.usage.Scheduled.Duration, sweeperMB)*per, "sweeper-GB-s/1k-jobs")
		b.ReportMetric(jobs.capacity.rru*per, "RRU/1k-jobs")
		b.ReportMetric(jobs.capacity.wru*per, "WRU/1k-jobs")
		b.ReportMetric(float64(jobs.logBytes)/1024*per, "log-KiB/1k-jobs")
		b.ReportMetric(float64(jobs.githubCalls)*per, "github-calls/1k-jobs")
		b.ReportMetric(float64(idle.usage.Scheduled.Duration.Milliseconds())/3, "idle-sweep-ms")
		b.ReportMetric(idle.capacity.rru/3, "idle-sweep-RRU")
		b.ReportMetric(idle.capacity.wru/3, "idle-sweep-WRU")
		b.ReportMetric(float64(idle.logBytes)/1024/3, "idle-sweep-log-KiB")
		b.ReportMetric(float64(idle.githubCalls)/3, "idle-sweep-github-calls")
		b.ReportMetric(webhookMB, "webhook-memory-MB")
		b.ReportMetric(sweeperMB, "sweeper-memory-MB")
		w.noViolations()
	}
}

// meteredLog logs at INFO, as JSON, into logs, which counts the bytes
// CloudWatch Logs would ingest; with $RUNNERSCALER_LOOP_LOG set, it also
// writes the debug log to a file there (debugLog), which the count leaves out.
func meteredLog(b *testing.B, logs *countingWriter) *slog.Logger {
	metered := slog.NewJSONHandler(logs, &slog.HandlerOptions{Level: slog.LevelInfo})
	if os.Getenv("RUNNERSCALER_LOOP_LOG") == "" {
		return slog.New(metered)
	}
	debug, _ := debugLog(b)
	return slog.New(slog.NewMultiHandler(metered, debug.Handler()))
}

// metered is what the loop used so far: invocations, DynamoDB capacity, log
// bytes, GitHub calls.
type metered struct {
	usage       loop.Usage
	capacity    capacity
	logBytes    int64
	githubCalls int
}

func usageOf(w *world, meter *capacityMeter, logs *countingWriter) metered {
	return metered{usage: w.loop.Usage(), capacity: meter.read(), logBytes: logs.n.Load(), githubCalls: productCalls(w.loop.Sim.Calls())}
}

func (m metered) minus(o metered) metered {
	sub := func(a, b loop.Invocations) loop.Invocations {
		return loop.Invocations{Count: a.Count - b.Count, Duration: a.Duration - b.Duration}
	}
	return metered{
		usage: loop.Usage{Webhook: sub(m.usage.Webhook, o.usage.Webhook), Nudged: sub(m.usage.Nudged, o.usage.Nudged),
			Scheduled: sub(m.usage.Scheduled, o.usage.Scheduled)},
		capacity: m.capacity.minus(o.capacity), logBytes: m.logBytes - o.logBytes, githubCalls: m.githubCalls - o.githubCalls,
	}
}

// countingWriter counts the bytes written to it.
type countingWriter struct{ n atomic.Int64 }

func (c *countingWriter) Write(p []byte) (int, error) {
	c.n.Add(int64(len(p)))
	return len(p), nil
}

// memorySizes reads the functions' memory sizes (MB) from template.yaml: each
// function's MemorySize, else Globals.Function's; a !Ref takes its parameter's
// default.
func memorySizes(b *testing.B) (webhook, sweeper float64) {
	b.Helper()
	raw, err := os.ReadFile("../template.yaml")
	if err != nil {
		b.Fatal(err)
	}
	type props struct {
		MemorySize yaml.Node `yaml:"MemorySize"`
	}
	var doc struct {
		Parameters map[string]struct {
			Default yaml.Node `yaml:"Default"`
		} `yaml:"Parameters"`
		Globals struct {
			Function props `yaml:"Function"`
		} `yaml:"Globals"`
		Resources map[string]struct {
			Properties props `yaml:"Properties"`
		} `yaml:"Resources"`
	}
	if err := yaml.Unmarshal(raw, &doc); err != nil {
		b.Fatalf("template.yaml: %v", err)
	}
	value := func(fn string) float64 {
		n := doc.Resources[fn].Properties.MemorySize
		if n.Kind == 0 {
			n = doc.Globals.Function.MemorySize
		}
		if n.Tag == "!Ref" {
			n = doc.Parameters[n.Value].Default
		}
		mb, err := strconv.ParseFloat(n.Value, 64)
		if err != nil || mb <= 0 {
			b.Fatalf("template.yaml: memory size of %s is %q, want a number of MB", fn, n.Value)
		}
		return mb
	}
	return value("WebhookFunction"), value("SweeperFunction")
}
