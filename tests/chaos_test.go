package tests

import (
	"context"
	"errors"
	"fmt"
	"maps"
	mrand "math/rand/v2"
	"net/http"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/runnerscaler/runnerscaler/internal/pool"
	"github.com/runnerscaler/runnerscaler/internal/runnerpod"
	"github.com/runnerscaler/runnerscaler/local/githubsim"
	"github.com/runnerscaler/runnerscaler/local/loop"
	"github.com/runnerscaler/runnerscaler/local/testenv"
)

// TestChaos runs a job stream (jobs of 1–3 s, one a second, on runners that are
// real pods: two ephemeral pools and a persistent one) through the closed loop
// while
//   - deliveries are lost (20%), duplicated (20%) and delayed/reordered (up to 300 ms),
//   - 15% of sweeper invocations are killed at a random point and 5% of the
//     sweeper's Kubernetes writes fail,
//   - GitHub answers a tenth of the API calls with 502, and one every 20 s with a
//     secondary rate limit,
//   - and the node misbehaves, one fault every 6 s in turn (faultCycle; a turn
//     with no target, or whose fault failed, is tried again a second later): a
//     runner process killed (SIGKILL, the container restarts), an OOM kill of a
//     runner container (a real one, by the kernel, at the pod's memory limit), a
//     runner pod deleted by hand, a node drain through the eviction API (as
//     `kubectl drain`: a busy runner's pod refuses eviction, and is tried again
//     every second for up to a minute; a refused eviction excuses nothing), and the
//     sweeper throttled for 8 s, during which ephemeral runners that finish are
//     restarted by the kubelet after exiting 0, and the kubelet itself restarted
//     (runner containers keep running: no violation is excused by it) — each
//     runner fault aimed at a runner that runs a job when there is one,
//   - and GitHub's REST busy flag lies as GitHub's does (loop.ScaledBusyLie:
//     busy: false for a lag drawn per job after its assignment, and at short
//     moments mid-job; GitHub's 25–60 s scaled to the 1 s schedule), a removal
//     in such a moment being answered 204 and losing the job.
//
// It passes only if every job completes, the monitor (local/loop) records no
// violation — no job lost because the product removed its runner's
// registration while it ran, whatever fault hit its pod; no runner pod deleted
// or runner container stopped under a running job, no job cancelled or failed,
// no ephemeral runner running twice, unless a fault hit that very pod; no job
// waiting over a minute while its pool has fewer runners than jobs and room for
// more — and nothing is left at the end. One job in 20 fails by itself (its
// script exits 1) and must not be re-run; every other job that failed — its
// runner died under a fault — must be re-run (the pools allow 3 re-runs per
// workflow run), and every workflow run must end with a successful attempt
// unless its budget was spent; the summary gives the time from each failure
// to its re-run. The summary also sums the sweeper's
// metrics of the removals each busy signal vetoed. `make
// test` runs 60 jobs (about 2 minutes here); `make chaos` runs
// RUNNERSCALER_CHAOS_JOBS (300 take about 7 minutes).
func TestChaos(t *testing.T) {
	t.Parallel()
	jobs := 60
	if v, err := strconv.Atoi(os.Getenv("RUNNERSCALER_CHAOS_JOBS")); err == nil && v > 0 {
		jobs = v
	}
	kubeFaults := &faultyKube{rate: 0.05}
	rc := testenv.RESTConfig(t)
	rc.Wrap(kubeFaults.wrap)
	sweeperKube, err := kubernetes.NewForConfig(rc)
	if err != nil {
		t.Fatal(err)
	}
	// A job whose queued delivery is lost twice waits for two recovery rounds: the
	// wait bound is a minute here.
	seed := uint64(time.Now().UnixNano())
	cm := newContainerModeStack(t, chaosMemoryLimit)
	w := newWorldWith(t, chaosPools, loop.Options{SweepEvery: time.Second, Lease: 3 * time.Second, SweeperKube: sweeperKube,
		WaitBound: time.Minute,
		BusyLie:   loop.ScaledBusyLie(time.Second, seed),
		Chaos:     loop.Chaos{Drop: 0.2, Duplicate: 0.2, Delay: 300 * time.Millisecond, KillSweeps: 0.15}}, chaosTemplate,
		cm.template, cm.storageClass, cm.jobsNamespace)
	cm.prepare(t, w)
	const rate = 1.0 // jobs per second: what the node sustains with these faults on 2 cores
	// One job in 20 fails by itself (its script exits 1): never re-run. One
	// in chaosContainerEvery is a container job, on the container-mode pools
	// in turn; the others go to the other pools.
	stream := loop.FailEvery(loop.Generate(&pool.Config{Pools: w.cfg.Pools[:3]}, jobs, rate, time.Second, 3*time.Second, seed), 20)
	stream = loop.ContainerJobs(stream, chaosContainerEvery, []*pool.Pool{&w.cfg.Pools[3], &w.cfg.Pools[4]}, cm.jobImage)
	start := time.Now()
	done := make(chan struct{})
	go func() {
		defer close(done)
		w.loop.Play(t.Context(), stream)
	}()
	nodeFaults := &nodeFaults{w: w}
	api := &apiFaults{sim: w.loop.Sim}
	tick := time.NewTicker(2 * time.Second)
	defer tick.Stop()
	nextFault := time.Now().Add(5 * time.Second)
	// A job that never starts shows as a stall: no job queued, started or ended
	// for chaosStall. The limit only bounds the run within CI's budget: the
	// stream's pace is the machine's (a loaded one runs it slower), not the
	// product's.
	limit := time.Now().Add(time.Duration(3*float64(jobs)/rate*float64(time.Second)) + 5*time.Minute)
	progress := progressOf(w.loop.Sim.Jobs())
	lastProgress := time.Now()
	for !allDone(w.loop.Sim.Jobs()) || len(w.loop.Sim.Jobs()) < jobs {
		if p := progressOf(w.loop.Sim.Jobs()); p != progress {
			progress, lastProgress = p, time.Now()
		}
		if stalled := time.Since(lastProgress) > chaosStall; stalled || time.Now().After(limit) {
			t.Fatalf("jobs %v not all done (stalled for %s: %t); faults %+v, violations %v", summary(w.loop.Sim.Jobs()),
				time.Since(lastProgress).Round(time.Second), stalled, w.loop.Faults(), w.loop.Monitor.Violations())
		}
		select {
		case <-tick.C:
			api.inject()
		case <-time.After(100 * time.Millisecond):
		}
		if time.Now().After(nextFault) {
			// A turn that found no target, or whose fault failed, comes again soon,
			// so that every kind is injected even in a short run.
			next := time.Second
			if nodeFaults.next(t) {
				next = 6 * time.Second
			}
			nextFault = time.Now().Add(next)
		}
	}
	<-done
	// A failed job is decided the settling time after its failure, and a re-run
	// then runs.
	w.waitFor("every failed job decided and every re-run done", 5*time.Minute, w.rerunsSettled)
	reruns := w.checkReruns(chaosRerunBudget)
	// A persistent runner told "busy" while being stopped is asked again after a
	// back-off of up to 5 minutes (internal/reconcile), meanwhile idle: hence 6.
	// Back to zero includes, for the container-mode pools, no workflow pod or
	// hooks' Secret in the hook namespaces and no work claim (Leftovers).
	w.waitFor("back to zero", 6*time.Minute, w.quiescent)
	w.noJobCountedTwiceOrNowhere()
	containerJobs := checkContainerJobs(t, w)
	f := w.loop.Faults()
	ws, on := w.loop.Waits(), w.loop.Monitor.OnlineLatencies()
	t.Logf("%d jobs run in %s (%v); delivery and API faults: %d deliveries lost, %d duplicated, %d delayed, "+
		"%d sweeper invocations killed, %d Kubernetes writes failed, %d GitHub 502s, %d secondary rate limits; "+
		"node faults: %d runner processes killed, %d OOM kills, %d pods deleted by hand, %d drains evicting %d pods (%d evictions refused), "+
		"%d sweeper pauses (%d invocations throttled), %d kubelet restarts, %d failed injections; %d runner containers restarted after exit 0, "+
		"%d jobs failed after their runner died, %d violations excused by those faults; runner container stops by exit code and reason %v; "+
		"wait p50 %s p95 %s; pod created → runner online p50 %s p95 %s",
		jobs, time.Since(start).Round(time.Second), summary(w.loop.Sim.Jobs()), f.Dropped, f.Duplicated, f.Delayed, f.KilledSweeps,
		kubeFaults.failed.Load(), api.failed, api.limits, f.RunnerKills, f.OOMKills, f.PodDeletes, f.Drains, f.Evictions, f.EvictionsRefused,
		f.SweeperPauses, f.ThrottledSweeps, f.KubeletRestarts, nodeFaults.failed, w.loop.Monitor.RestartsAfterExit0(), w.loop.LostJobs(),
		len(w.loop.Monitor.Excused()), w.loop.Monitor.ContainerStops(), loop.Percentile(ws, 50).Round(time.Millisecond), loop.Percentile(ws, 95).Round(time.Millisecond),
		loop.Percentile(on, 50).Round(time.Millisecond), loop.Percentile(on, 95).Round(time.Millisecond))
	t.Logf("GitHub's busy flag (seed %d): REST said idle %d times while the runner ran a job; %d jobs lost because the product removed "+
		"their runner's registration while they ran; %d jobs handed over as their idle runner was being stopped (each let finish); "+
		"the sweeper's busy signals over the run: %s; %s",
		seed, w.loop.Sim.BusyLiesTold(), w.loop.Monitor.JobsLostToRemoval(), w.loop.Monitor.Handovers(), busySignals(w.loop.BusySignalMetrics()),
		checkWindows(w.loop.RemovalCheckWindows()))
	t.Logf("re-runs (%d per workflow run): %s", chaosRerunBudget, reruns)
	t.Logf("container jobs (one in %d, with a service): %s", chaosContainerEvery, containerJobs)
	for _, p := range reruns.problems {
		t.Error(p)
	}
	w.noViolations()
	if reruns.rerun == 0 || reruns.byItself == 0 {
		t.Fatalf("re-runs: %s: a job dying with its runner, or one failing by itself, was never exercised", reruns)
	}
	if f.Dropped == 0 || f.Duplicated == 0 || f.KilledSweeps == 0 || kubeFaults.failed.Load() == 0 || api.failed == 0 {
		t.Fatalf("faults %+v: the run injected no loss or duplication, so it proves nothing", f)
	}
	if f.RunnerKills == 0 || f.OOMKills == 0 || f.PodDeletes == 0 || f.Evictions == 0 || f.SweeperPauses == 0 || f.KubeletRestarts == 0 {
		t.Fatalf("node faults %+v: some were never injected, so the run proves nothing about them", f)
	}
	if w.loop.Monitor.RestartsAfterExit0() == 0 {
		t.Fatal("no runner container was restarted after exiting 0: that case was never exercised")
	}
	if w.loop.Sim.BusyLiesTold() == 0 {
		t.Fatal("REST never said idle for a runner running a job: the busy flag's lie was never exercised")
	}
}

// chaosStall: how long the chaos run may go without a job queued, started or
// ended before the jobs still waiting are judged never to start. It is chosen
// well above the slowest recovery the design expects (a job whose deliveries
// are lost waits for scheduled sweeps a second apart to redeliver them, 10 s
// apart when a redelivery is lost again); that bound is reasoned, not measured.
const chaosStall = 3 * time.Minute

// progressOf sums the jobs by state: it changes whenever a job is queued,
// starts or ends.
func progressOf(jobs []githubsim.Job) string { return fmt.Sprint(summary(jobs)) }

// busySignals prints the sweeper's busy-signal sums, names sorted ("none
// written" when the sweeper wrote none).
// checkWindows describes the times from the sweeper's last busy-signal read to
// its RemoveRunner calls (ms, sorted).
func checkWindows(ms []float64) string {
	if len(ms) == 0 {
		return "no RemoveRunner after a busy-signal read"
	}
	at := func(p int) float64 { return ms[min(len(ms)-1, len(ms)*p/100)] }
	return fmt.Sprintf("last busy-signal read → stop (pod deletion or RemoveRunner) over %d stops: p50 %.1f ms, p95 %.1f ms, max %.1f ms",
		len(ms), at(50), at(95), ms[len(ms)-1])
}

func busySignals(sums map[string]float64) string {
	if len(sums) == 0 {
		return "none written"
	}
	var parts []string
	for _, k := range slices.Sorted(maps.Keys(sums)) {
		parts = append(parts, fmt.Sprintf("%s %g", k, sums[k]))
	}
	return strings.Join(parts, ", ")
}

// apiFaults makes about a tenth of the GitHub API calls made with an
// installation token fail with 502 (as many as a tenth of those made since the
// last time, rounded at random), and answers one call every 20 s with a
// secondary rate limit of 2 s.
type apiFaults struct {
	sim            *githubsim.Server
	calls, rounds  int
	failed, limits int
}

func (a *apiFaults) inject() {
	// Only calls made with an installation token can be answered by an
	// injection: counting the App's own calls too (its JWT reads the delivery
	// log, some 15 pages a scheduled sweep late in a run) queued failures faster
	// than the token calls used them up, until every token call failed.
	calls := a.sim.TokenCalls()
	share := float64(calls-a.calls) / 10
	a.calls = calls
	n := int(share)
	if mrand.Float64() < share-float64(n) {
		n++
	}
	a.sim.InjectStatus(http.StatusBadGateway, n)
	a.failed += n
	if a.rounds++; a.rounds%10 == 0 {
		a.sim.InjectSecondaryLimit(2 * time.Second)
		a.limits++
	}
}

// nodeFaults injects the node's faults in turn.
type nodeFaults struct {
	w      *world
	i      int
	failed int
}

// faultCycle is the order in which nodeFaults injects, one every 6 s: runner
// faults often, a drain, a sweeper pause and a kubelet restart once per cycle
// (54 s).
var faultCycle = []string{"kill", "oom", "delete", "drain", "pause", "kubelet", "kill", "oom", "delete"}

// next injects the next fault of the cycle and reports whether it did.
func (n *nodeFaults) next(t *testing.T) bool {
	ctx := t.Context()
	pods, busy, err := n.w.loop.RunnerPods(ctx)
	if err != nil {
		t.Logf("node fault: listing runner pods: %v", err)
		return false
	}
	pod, ok := loop.BusyRunnerPod(pods, busy, mrand.IntN)
	kind := faultCycle[n.i%len(faultCycle)]
	if !ok && kind != "pause" && kind != "kubelet" {
		return false // no busy runner yet: try again at the next turn
	}
	switch kind {
	case "kill":
		err = n.w.loop.KillRunnerProcess(&pod)
	case "oom":
		err = n.w.loop.OOMKill(ctx, &pod)
	case "delete":
		err = n.w.loop.DeletePod(ctx, &pod)
	case "drain":
		var r loop.DrainReport
		r, err = n.w.loop.Drain(ctx, pod.Spec.NodeName, loop.DrainOptions{Cordon: true, Hold: 3 * time.Second, Timeout: time.Minute})
		t.Logf("node drained: %d runner pods evicted, %d gone first, %d evictions refused (a busy runner's budget), given up on %v",
			len(r.Evicted), len(r.Gone), refused(r), r.GaveUp)
		if err == nil && len(r.Evicted) == 0 {
			// Every pod went before its eviction: a drain that proves nothing.
			err = errors.New("no runner pod was left to evict")
		}
	case "pause":
		n.w.loop.PauseSweeps(8 * time.Second)
	case "kubelet":
		err = n.w.loop.RestartKubelet(ctx, testenv.StackDir(t))
	}
	if err != nil {
		// The target went away under the fault (its container had just exited,
		// say): the same kind is tried again at the next turn.
		n.failed++
		t.Logf("node fault %s on %s (job %d): %v", kind, pod.Name, busy[pod.Name], err)
		return false
	}
	n.i++
	return true
}

// refused counts the evictions a drain's pods were refused (429).
func refused(r loop.DrainReport) int {
	n := 0
	for _, a := range r.Answers {
		if a.Code == http.StatusTooManyRequests {
			n++
		}
	}
	return n
}

// faultyKube fails a fraction of mutating requests, as a flaky API server would.
type faultyKube struct {
	rate   float64
	failed atomic.Int64
}

func (f *faultyKube) wrap(rt http.RoundTripper) http.RoundTripper {
	return roundTripper(func(req *http.Request) (*http.Response, error) {
		if req.Method != http.MethodGet && mrand.Float64() < f.rate {
			f.failed.Add(1)
			return nil, fmt.Errorf("injected failure of %s %s", req.Method, req.URL.Path)
		}
		return rt.RoundTrip(req)
	})
}

type roundTripper func(*http.Request) (*http.Response, error)

func (f roundTripper) RoundTrip(r *http.Request) (*http.Response, error) { return f(r) }

// chaosTemplate gives the runner containers a memory limit, for the OOM kills:
// 24,000 pages of 4 KiB exactly (see loop.OOMKill).
func chaosTemplate(img string) string {
	return loop.Template{Image: img, MemoryLimit: chaosMemoryLimit}.Spec()
}

// chaosMemoryLimit: 24,000 pages of 4 KiB.
const chaosMemoryLimit = "98304000"

// chaosContainerEvery: one job in this many of the chaos stream is a
// container job (about 14%).
const chaosContainerEvery = 7

// containerJobsSummary counts the chaos run's container jobs by pool and end.
type containerJobsSummary map[string]map[string]int

func (s containerJobsSummary) String() string {
	var parts []string
	for _, p := range slices.Sorted(maps.Keys(s)) {
		parts = append(parts, fmt.Sprintf("%s %v", p, s[p]))
	}
	return strings.Join(parts, "; ")
}

// checkContainerJobs: every container job that succeeded, or failed with its
// runner alive and no fault on it, ran its script in its runner's workflow pod
// (the script names its host: the workflow pod's name), not on the runner —
// a failure of the hooks' own (prepare_job) shows here; and the container-mode
// pools ran some. The
// monitor has judged them as every job (how they ended, how many each runner
// ran, how long they waited).
func checkContainerJobs(t *testing.T, w *world) containerJobsSummary {
	t.Helper()
	out := containerJobsSummary{}
	for _, j := range w.loop.Sim.Jobs() {
		if j.Container == nil {
			continue
		}
		p, _ := w.cfg.Route(pool.Job{Repository: j.Repository, Organization: j.Organization, Labels: j.Labels}, nil)
		name := "unrouted"
		if p != nil {
			name = p.Name + " (" + p.Kubernetes.ContainerMode + ")"
		}
		// A job that failed with its runner alive (loop.FailedByItself) failed
		// in its script, in the workflow pod, unless a fault hit its runner: a
		// kubelet restart cuts the hooks' exec, in prepare_job too.
		end, ran := string(j.Conclusion), strings.Contains(j.Output, "ran in "+runnerpod.WorkflowPodName(j.RunnerName)+"\n")
		switch {
		case loop.FailedByItself(j) && w.loop.Monitor.OnlyExecCut(j.RunnerName):
			end = "failed as a kubelet restart cut its exec"
		case loop.FailedByItself(j):
			end = "failed by itself"
		}
		if out[name] == nil {
			out[name] = map[string]int{}
		}
		out[name][end]++
		if (j.Conclusion == githubsim.JobSuccess || (loop.FailedByItself(j) && !w.loop.Monitor.Faulted(j.RunnerName))) && !ran {
			t.Errorf("container job %d on %s ended %s, output:\n%s\nwant its script run in its workflow pod %s", j.ID, j.RunnerName,
				j.Conclusion, j.Output, runnerpod.WorkflowPodName(j.RunnerName))
		}
	}
	for _, p := range w.cfg.Pools[3:] {
		if out[p.Name+" ("+p.Kubernetes.ContainerMode+")"][string(githubsim.JobSuccess)] == 0 {
			t.Errorf("container jobs %s: pool %s ran none to success", out, p.Name)
		}
	}
	return out
}

// chaosRerunBudget is the chaos pools' rerunsPerRun: a re-run may be hit by another fault.
const chaosRerunBudget = 3

const chaosPools = `
pools:
  - name: small
    organization: acme
    labels: [small]
    maxReplicas: 10
    scaleDownDelaySecondsAfterScaleOut: 1
    rerunsPerRun: 3
    kubernetes: {namespace: %[1]s, template: %[2]s}
  - name: big
    organization: acme
    labels: [big]
    maxReplicas: 6
    scaleDownDelaySecondsAfterScaleOut: 1
    rerunsPerRun: 3
    kubernetes: {namespace: %[1]s, template: %[2]s}
  - name: keep
    organization: acme
    labels: [keep]
    ephemeral: false
    maxReplicas: 3
    scaleDownDelaySecondsAfterScaleOut: 1
    rerunsPerRun: 3
    kubernetes: {namespace: %[1]s, template: %[2]s}
  - name: cmk
    organization: acme
    labels: [cmk]
    maxReplicas: 3
    scaleDownDelaySecondsAfterScaleOut: 1
    rerunsPerRun: 3
    kubernetes:
      namespace: %[1]s
      serviceAccountName: cmk-runner
      containerMode: kubernetes
      workVolumeClaim: {storageClassName: %[4]s, accessModes: [ReadWriteOnce], resources: {requests: {storage: 1Gi}}}
      template: %[3]s
  - name: cmn
    organization: acme
    labels: [cmn]
    maxReplicas: 3
    scaleDownDelaySecondsAfterScaleOut: 1
    rerunsPerRun: 3
    kubernetes:
      namespace: %[1]s
      serviceAccountName: cmn-runner
      containerMode: kubernetes-novolume
      jobsNamespace: %[5]s
      template: %[3]s
`

// TestChaosUnpullableImage: a pool whose image cannot be pulled (the kubelet
// tries, and fails: no registry is reachable) runs no job, but its runners do not
// hold its slots forever: the pool's status names why they are stuck, each one is
// replaced after the registration timeout, and the pool never has more than
// maxReplicas runners. A healthy pool beside it is not disturbed, and once a fixed
// template is deployed the broken pool's job runs and nothing is left.
func TestChaosUnpullableImage(t *testing.T) {
	t.Parallel()
	const pools = `
pools:
  - name: broken
    organization: acme
    labels: [broken]
    maxReplicas: 2
    scaleDownDelaySecondsAfterScaleOut: 1
    kubernetes: {namespace: %[1]s, template: %[2]s}
  - name: fine
    organization: acme
    labels: [fine]
    maxReplicas: 2
    scaleDownDelaySecondsAfterScaleOut: 1
    kubernetes: {namespace: %[1]s, template: %[3]s}
`
	missing := fmt.Sprintf("localhost/runnerscaler/no-such-image:%d", mrand.IntN(1e9))
	broken := func(string) string { return loop.Template{Image: missing, PullPolicy: "IfNotPresent"}.Spec() }
	w := newWorldWith(t, pools, loop.Options{SweepEvery: time.Second, RegistrationTimeout: 20 * time.Second}, broken, loop.RunnerTemplate)
	w.loop.Monitor.PoolFault("broken", "its image cannot be pulled")
	w.queue(1, time.Second, "broken")
	w.queue(6, time.Second, "fine")
	runners := map[string]bool{}
	// Every reason the status gave: the node is shared with the tests that run
	// beside this one (TestChaos cordons it to drain it), so a runner may be
	// stuck unschedulable for a while too; the image pull must show.
	var stuck []string
	w.waitFor("the broken pool's runners replaced twice, the fine pool's jobs done", 4*time.Minute, func() bool {
		list, err := w.kube.AppsV1().StatefulSets(w.ns).List(context.Background(), metav1.ListOptions{LabelSelector: "runnerscaler.dev/pool=broken"})
		if err != nil {
			return false
		}
		live := 0
		for _, s := range list.Items {
			runners[s.Name] = true
			if s.DeletionTimestamp == nil {
				live++
			}
		}
		if live > 2 {
			t.Fatalf("pool broken has %d runners, over its maxReplicas 2", live)
		}
		for _, st := range w.loop.Stats(context.Background()) {
			for _, why := range st.Stuck {
				if st.Pool == "broken" && !slices.Contains(stuck, why) {
					stuck = append(stuck, why)
				}
			}
		}
		fineDone := 0
		for _, j := range w.loop.Sim.Jobs() {
			if j.Labels[1] == "fine" && j.State == githubsim.JobCompleted {
				fineDone++
			}
		}
		return len(runners) >= 4 && fineDone == 6
	})
	if !slices.ContainsFunc(stuck, func(why string) bool { return strings.Contains(why, "Pull") || strings.Contains(why, "pull") }) {
		t.Fatalf("the broken pool's status said its runners are stuck because %q, never the image pull", stuck)
	}
	t.Logf("broken pool: %d runners created in turn, stuck: %q", len(runners), stuck)
	cfg, err := pool.Parse(fmt.Appendf(nil, pools, w.ns, loop.RunnerTemplate(w.image), loop.RunnerTemplate(w.image)))
	if err != nil {
		t.Fatal(err)
	}
	if err := w.loop.UpdatePools(cfg); err != nil {
		t.Fatal(err)
	}
	w.waitFor("every job completed", 3*time.Minute, func() bool { return allDone(w.loop.Sim.Jobs()) })
	w.waitFor("back to zero", 2*time.Minute, w.quiescent)
	w.noViolations()
}
