package tests

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"

	"github.com/runnerscaler/runnerscaler/internal/pool"
	"github.com/runnerscaler/runnerscaler/local/apispec"
	"github.com/runnerscaler/runnerscaler/local/githubsim"
	"github.com/runnerscaler/runnerscaler/local/loop"
	"github.com/runnerscaler/runnerscaler/local/testenv"
)

// The end-to-end tests run the closed loop (local/loop) with runners as real pods
// on the local stack's node: runner/entrypoint.sh around the fake actions runner,
// registering with the GitHub simulator.

type world struct {
	t     testing.TB
	loop  *loop.Loop
	kube  kubernetes.Interface
	ns    string
	cfg   *pool.Config
	image string
	left  []string   // what the last quiescence check found
	logs  *logBuffer // the loop's log, when the test did not bring its own logger
	db    *dynamodb.Client
	table string
}

var (
	imageOnce sync.Once
	imageRef  string
	imageErr  error
)

// image is the runner image, built and imported into the node once per test binary.
func image(t testing.TB) string {
	t.Helper()
	imageOnce.Do(func() {
		imageRef, imageErr = loop.RunnerImage(context.Background(), testenv.ContainerdAddress(t), nil)
	})
	if imageErr != nil {
		t.Fatal(imageErr)
	}
	return imageRef
}

// newWorld starts a closed loop with the pools of poolsYAML, in which %[1]s is
// the test's namespace and %[2]s the runner pod template (loop.RunnerTemplate of
// the runner image).
func newWorld(t testing.TB, poolsYAML string, opts loop.Options) *world {
	t.Helper()
	return newWorldWith(t, poolsYAML, opts, loop.RunnerTemplate)
}

// newWorldWith is newWorld with templates made from the runner image by tmpls:
// %[2]s, %[3]s, ... in poolsYAML.
func newWorldWith(t testing.TB, poolsYAML string, opts loop.Options, tmpls ...func(image string) string) *world {
	t.Helper()
	img := image(t)
	db, tableName := testenv.Table(t)
	kube, ns := testenv.Namespace(t)
	args := []any{ns}
	for _, tmpl := range tmpls {
		args = append(args, tmpl(img))
	}
	cfg, err := pool.Parse(fmt.Appendf(nil, poolsYAML, args...))
	if err != nil {
		t.Fatal(err)
	}
	if opts.DB != nil {
		db = opts.DB // another client of the same server (a metered one: BenchmarkCostPer1000Jobs)
	}
	opts.Pools, opts.DB, opts.Table, opts.Kube = cfg, db, tableName, kube
	var logs *logBuffer
	if opts.Log == nil {
		opts.Log, logs = debugLog(t)
	}
	l, err := loop.Start(t.Context(), opts)
	if err != nil {
		t.Fatal(err)
	}
	// Cleanups run last in, first out: the loop stops, the finalizers of the pods
	// left (by a failed test) go, the simulator's exchanges and deliveries are
	// checked against GitHub's description, then testenv deletes the namespace.
	apispec.Verify(t, l.Sim)
	t.Cleanup(func() { releasePods(kube, ns) })
	t.Cleanup(l.Stop)
	return &world{t: t, loop: l, kube: kube, ns: ns, cfg: cfg, image: img, logs: logs, db: opts.DB, table: tableName}
}

// releasePods removes the finalizers of the pods in ns, so that deleting the
// namespace does not wait for a sweeper that is gone.
func releasePods(kube kubernetes.Interface, ns string) {
	ctx := context.Background()
	pods, err := kube.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{})
	if err != nil {
		return
	}
	for _, p := range pods.Items {
		if len(p.Finalizers) > 0 {
			_, _ = kube.CoreV1().Pods(ns).Patch(ctx, p.Name, types.JSONPatchType,
				[]byte(`[{"op":"remove","path":"/metadata/finalizers"}]`), metav1.PatchOptions{})
		}
	}
}

func (w *world) statefulSets() int {
	list, err := w.kube.AppsV1().StatefulSets(w.ns).List(context.Background(), metav1.ListOptions{})
	if err != nil {
		w.t.Fatal(err)
	}
	n := 0
	for _, s := range list.Items {
		if s.DeletionTimestamp == nil {
			n++
		}
	}
	return n
}

// activeStatefulSets counts runners not being stopped (a finished runner's
// StatefulSet lingers until the sweep that replaces it deletes it).
func (w *world) activeStatefulSets() int {
	list, err := w.kube.AppsV1().StatefulSets(w.ns).List(context.Background(), metav1.ListOptions{})
	if err != nil {
		w.t.Fatal(err)
	}
	n := 0
	for _, s := range list.Items {
		if _, marked := s.Annotations["actions-runner/unregistration-request-timestamp"]; !marked && s.DeletionTimestamp == nil {
			n++
		}
	}
	return n
}

// ableStatefulSets splits activeStatefulSets by the simulator's truth: those
// whose runner can still take a job, and those whose runner's job has ended
// (an ephemeral runner takes no other; its slot is refilled while its
// container exits).
func (w *world) ableStatefulSets() (able, finished int) {
	ended := map[string]bool{}
	for _, j := range w.loop.Sim.Jobs() {
		if !j.EndedAt.IsZero() && j.RunnerName != "" {
			ended[j.RunnerName] = true
		}
	}
	list, err := w.kube.AppsV1().StatefulSets(w.ns).List(context.Background(), metav1.ListOptions{})
	if err != nil {
		w.t.Fatal(err)
	}
	for _, s := range list.Items {
		if _, marked := s.Annotations["actions-runner/unregistration-request-timestamp"]; marked || s.DeletionTimestamp != nil {
			continue
		}
		if ended[s.Name+"-0"] {
			finished++
		} else {
			able++
		}
	}
	return able, finished
}

func (w *world) waitFor(what string, limit time.Duration, cond func() bool) {
	w.t.Helper()
	err := wait.PollUntilContextTimeout(w.t.Context(), 200*time.Millisecond, limit, true, func(context.Context) (bool, error) {
		return cond(), nil
	})
	if err != nil {
		w.t.Fatalf("%s: not within %s (statefulsets %d, jobs %v, left %v, violations %v)\n%s", what, limit, w.statefulSets(),
			summary(w.loop.Sim.Jobs()), w.left, w.loop.Monitor.Violations(), w.diagnose())
	}
}

// noViolations fails the test with the monitor's violations, and logs what the
// injected faults excused.
func (w *world) noViolations() {
	w.t.Helper()
	if ex := w.loop.Monitor.Excused(); len(ex) > 0 {
		w.t.Logf("excused by injected faults (%d): %s", len(ex), strings.Join(ex, "; "))
	}
	if v := w.loop.Monitor.Violations(); len(v) > 0 {
		w.t.Fatalf("%d invariant violations:\n%s", len(v), strings.Join(v, "\n"))
	}
}

func summary(jobs []githubsim.Job) map[string]int {
	out := map[string]int{}
	for _, j := range jobs {
		k := string(j.State)
		if j.Conclusion != "" && j.Conclusion != githubsim.JobSuccess {
			k += "/" + string(j.Conclusion)
		}
		out[k]++
	}
	return out
}

func allDone(jobs []githubsim.Job) bool {
	for _, j := range jobs {
		if j.State != githubsim.JobCompleted {
			return false
		}
	}
	return len(jobs) > 0
}

// quiescent: nothing left that no reservation or minReplicas explains
// (StatefulSets, pods, Secrets, GitHub runners).
func (w *world) quiescent() bool {
	left, err := w.loop.Leftovers(context.Background())
	w.left = left
	return err == nil && len(left) == 0
}

// jobs of d each, for a repository of acme with labels.
func (w *world) queue(n int, d time.Duration, labels ...string) {
	for range n {
		w.loop.Sim.QueueJob(githubsim.JobSpec{Repository: "acme/app", Organization: "acme",
			Labels: append([]string{"self-hosted"}, labels...), Duration: d})
	}
}

const twoPools = `
pools:
  - name: small
    organization: acme
    labels: [small]
    maxReplicas: 5
    scaleDownDelaySecondsAfterScaleOut: 1
    kubernetes: {namespace: %[1]s, template: %[2]s}
  - name: big
    organization: acme
    labels: [big]
    maxReplicas: 3
    scaleDownDelaySecondsAfterScaleOut: 1
    kubernetes: {namespace: %[1]s, template: %[2]s}
`

// TestScaleFromZeroAndBack: jobs for two pools run on runners created for them,
// and afterwards nothing is left.
func TestScaleFromZeroAndBack(t *testing.T) {
	t.Parallel()
	w := newWorld(t, twoPools, loop.Options{})
	for i := range 12 {
		label := "small"
		if i%3 == 0 {
			label = "big"
		}
		w.queue(1, time.Second+time.Duration(i%3)*500*time.Millisecond, label)
	}
	w.waitFor("every job completed", 4*time.Minute, func() bool { return allDone(w.loop.Sim.Jobs()) })
	w.waitFor("back to zero", 2*time.Minute, w.quiescent)
	w.noViolations()
	for _, j := range w.loop.Sim.Jobs() {
		want := "small-"
		if j.Labels[1] == "big" {
			want = "big-"
		}
		if !strings.HasPrefix(j.RunnerName, want) {
			t.Fatalf("job %d (%v) ran on %s", j.ID, j.Labels, j.RunnerName)
		}
	}
}

// TestConcurrentQueuedDeliveries: n queued deliveries at once end with exactly
// min(n, maxReplicas) StatefulSets (ARC v0.22 ended with 1–2 of 10 for n = 20).
// The pods stay Pending (no node matches their selector): only StatefulSets count.
func TestConcurrentQueuedDeliveries(t *testing.T) {
	t.Parallel()
	for _, n := range []int{20, 200} {
		t.Run(fmt.Sprint(n), func(t *testing.T) {
			w := newWorldWith(t, `
pools:
  - name: p
    organization: acme
    maxReplicas: 10
    kubernetes: {namespace: %[1]s, template: %[2]s}
`, loop.Options{SweepEvery: time.Hour}, pendingTemplate)
			var wg sync.WaitGroup
			start := time.Now()
			for range n {
				wg.Go(func() { w.queue(1, time.Hour) })
			}
			wg.Wait()
			want := min(n, 10)
			w.waitFor(fmt.Sprintf("%d statefulsets", want), 20*time.Second, func() bool { return w.statefulSets() >= want })
			t.Logf("%d concurrent queued deliveries: %d statefulsets after %s", n, w.statefulSets(), time.Since(start).Round(time.Millisecond))
			// Every delivery was answered, so every nudge was sent: once each
			// nudged sweep has returned, nothing else creates a runner.
			w.waitFor("every nudged sweep returned", time.Minute, func() bool { sent, done := w.loop.Nudges(); return sent == done })
			if sent, _ := w.loop.Nudges(); sent == 0 {
				t.Fatal("no delivery nudged the sweeper: the count proves nothing")
			}
			if got := w.statefulSets(); got != want {
				t.Fatalf("%d statefulsets, want exactly %d", got, want)
			}
		})
	}
}

// jobsPerRunner counts the jobs each runner ran.
func jobsPerRunner(jobs []githubsim.Job) map[string]int {
	n := map[string]int{}
	for _, j := range jobs {
		n[j.RunnerName]++
	}
	return n
}

func pendingTemplate(img string) string { return loop.Template{Image: img, Unschedulable: true}.Spec() }

// TestPersistentPool: persistent runners (registered by config.sh with a
// registration token) take job after job, then scale to zero.
func TestPersistentPool(t *testing.T) {
	t.Parallel()
	w := newWorld(t, `
pools:
  - name: keep
    organization: acme
    labels: [keep]
    ephemeral: false
    maxReplicas: 2
    scaleDownDelaySecondsAfterScaleOut: 1
    kubernetes: {namespace: %[1]s, template: %[2]s}
`, loop.Options{SweepEvery: time.Second})
	w.queue(6, time.Second, "keep")
	w.waitFor("every job completed", 3*time.Minute, func() bool { return allDone(w.loop.Sim.Jobs()) })
	perRunner := jobsPerRunner(w.loop.Sim.Jobs())
	if len(perRunner) > 2 {
		t.Fatalf("jobs ran on %d runners (%v), want at most maxReplicas 2", len(perRunner), perRunner)
	}
	reused := false
	for _, n := range perRunner {
		reused = reused || n > 1
	}
	if !reused {
		t.Fatalf("no persistent runner took a second job: %v", perRunner)
	}
	w.waitFor("back to zero", 2*time.Minute, w.quiescent)
	w.noViolations()
}

// TestEphemeralTokenPool: an ephemeral pool with `registration: token` registers
// its runners with the scope's registration token (config.sh --ephemeral), so a
// burst costs one GitHub request per scope instead of one JIT config per runner;
// each runner takes one job, and the pool scales back to zero.
func TestEphemeralTokenPool(t *testing.T) {
	t.Parallel()
	w := newWorld(t, `
pools:
  - name: burst
    organization: acme
    labels: [burst]
    registration: token
    maxReplicas: 3
    scaleDownDelaySecondsAfterScaleOut: 1
    kubernetes: {namespace: %[1]s, template: %[2]s}
`, loop.Options{SweepEvery: time.Second})
	w.queue(5, time.Second, "burst")
	w.waitFor("every job completed", 3*time.Minute, func() bool { return allDone(w.loop.Sim.Jobs()) })
	perRunner := jobsPerRunner(w.loop.Sim.Jobs())
	for name, n := range perRunner {
		if n != 1 {
			t.Errorf("runner %s took %d jobs, want 1 (ephemeral)", name, n)
		}
	}
	w.waitFor("back to zero", 2*time.Minute, w.quiescent)
	calls := w.loop.Sim.Calls()
	if n := calls["POST /orgs/{org}/actions/runners/generate-jitconfig"]; n != 0 {
		t.Errorf("%d JIT configs requested, want 0 in token mode", n)
	}
	if n := calls["POST /orgs/{org}/actions/runners/registration-token"]; n < 1 {
		t.Errorf("no registration token requested (calls: %v)", calls)
	}
	w.noViolations()
}

// TestScheduledOverrideKeepsAWarmPool: an active override keeps two runners
// registered with no job queued, so a job starts without waiting for a new runner.
func TestScheduledOverrideKeepsAWarmPool(t *testing.T) {
	t.Parallel()
	now := time.Now().UTC()
	w := newWorld(t, `
pools:
  - name: warm
    organization: acme
    maxReplicas: 4
    scaleDownDelaySecondsAfterScaleOut: 1
    scheduledOverrides:
      - {startTime: "`+now.Add(-time.Hour).Format(time.RFC3339)+`", endTime: "`+now.Add(time.Hour).Format(time.RFC3339)+`", minReplicas: 2}
    kubernetes: {namespace: %[1]s, template: %[2]s}
`, loop.Options{SweepEvery: time.Second})
	w.waitFor("two warm runners online", 2*time.Minute, func() bool {
		online := 0
		for _, r := range w.loop.Sim.Runners() {
			if r.Online {
				online++
			}
		}
		return online == 2
	})
	queued := time.Now()
	j := w.loop.Sim.QueueJob(githubsim.JobSpec{Repository: "acme/app", Organization: "acme", Labels: []string{"self-hosted"}, Duration: time.Second})
	w.waitFor("the job completed", time.Minute, func() bool { return allDone(w.loop.Sim.Jobs()) })
	if wait := w.loop.Sim.Jobs()[0].StartedAt.Sub(queued); wait > time.Second {
		t.Fatalf("job %d waited %s with two warm runners", j.ID, wait)
	}
	w.waitFor("back to two runners", time.Minute, func() bool { return w.activeStatefulSets() == 2 && w.statefulSets() == 2 })
	w.noViolations()
}

// TestTemplateChangeMidStream: a new image is deployed while jobs run; every job
// completes, no running job is cut short, and afterwards every runner runs the
// new image. (The new image is the runner image under a second name: a new
// reference in the template, as a deploy makes.)
func TestTemplateChangeMidStream(t *testing.T) {
	t.Parallel()
	const pools = `
pools:
  - name: roll
    organization: acme
    minReplicas: 2
    maxReplicas: 6
    scaleDownDelaySecondsAfterScaleOut: 1
    kubernetes: {namespace: %[1]s, template: %[2]s}
`
	w := newWorld(t, pools, loop.Options{SweepEvery: time.Second})
	next := "localhost/runnerscaler/runner:" + w.ns // a name of this test's own
	if err := loop.TagImage(t.Context(), testenv.ContainerdAddress(t), w.image, next); err != nil {
		t.Fatal(err)
	}
	w.queue(8, 3*time.Second)
	w.waitFor("jobs running", 2*time.Minute, func() bool { return summary(w.loop.Sim.Jobs())[string(githubsim.JobInProgress)] > 0 })
	cfg, err := pool.Parse(fmt.Appendf(nil, pools, w.ns, loop.RunnerTemplate(next)))
	if err != nil {
		t.Fatal(err)
	}
	if err := w.loop.UpdatePools(cfg); err != nil {
		t.Fatal(err)
	}
	w.waitFor("every job completed", 3*time.Minute, func() bool { return allDone(w.loop.Sim.Jobs()) })
	w.waitFor("only new runners left", 2*time.Minute, func() bool {
		list, err := w.kube.AppsV1().StatefulSets(w.ns).List(context.Background(), metav1.ListOptions{})
		if err != nil || len(list.Items) != 2 {
			return false
		}
		for _, s := range list.Items {
			if s.Spec.Template.Spec.Containers[0].Image != next {
				return false
			}
		}
		return true
	})
	w.noViolations()
}

// TestBurstAcrossThreePools: 50 jobs at once for three pools with different labels
// all run, each on a runner of its own pool, within the pools' limits.
func TestBurstAcrossThreePools(t *testing.T) {
	t.Parallel()
	w := newWorld(t, `
pools:
  - {name: cpu, organization: acme, labels: [cpu], maxReplicas: 6, scaleDownDelaySecondsAfterScaleOut: 1, kubernetes: {namespace: %[1]s, template: %[2]s}}
  - {name: gpu, organization: acme, labels: [gpu], maxReplicas: 3, scaleDownDelaySecondsAfterScaleOut: 1, kubernetes: {namespace: %[1]s, template: %[2]s}}
  - {name: arm, organization: acme, labels: [big], arch: arm64, maxReplicas: 4, scaleDownDelaySecondsAfterScaleOut: 1, kubernetes: {namespace: %[1]s, template: %[2]s}}
`, loop.Options{SweepEvery: time.Second})
	labels := [][]string{{"self-hosted", "cpu"}, {"self-hosted", "gpu"}, {"self-hosted", "big", "ARM64"}}
	var wg sync.WaitGroup
	for i := range 50 {
		wg.Go(func() {
			w.loop.Sim.QueueJob(githubsim.JobSpec{Repository: "acme/app", Organization: "acme", Labels: labels[i%3],
				Duration: time.Second + time.Duration(i%5)*500*time.Millisecond})
		})
	}
	wg.Wait()
	maxSeen, maxFinishing := 0, 0
	w.waitFor("every job completed", 6*time.Minute, func() bool {
		able, finishing := w.ableStatefulSets()
		maxSeen = max(maxSeen, able, len(w.loop.Sim.Runners()))
		maxFinishing = max(maxFinishing, finishing)
		return allDone(w.loop.Sim.Jobs())
	})
	if maxSeen > 6+3+4 {
		t.Fatalf("%d runners able to take a job at once, over the pools' total maxReplicas 13", maxSeen)
	}
	t.Logf("at most %d runners able to take a job, and %d whose job had ended beside them", maxSeen, maxFinishing)
	want := map[string]string{"cpu": "cpu-", "gpu": "gpu-", "big": "arm-"}
	for _, j := range w.loop.Sim.Jobs() {
		if p := want[j.Labels[1]]; !strings.HasPrefix(j.RunnerName, p) {
			t.Fatalf("job %d %v ran on %s", j.ID, j.Labels, j.RunnerName)
		}
	}
	w.waitFor("back to zero", 2*time.Minute, w.quiescent)
	w.noViolations()
}

// debugLog keeps the loop's logs for the failure report (world.diagnose) and
// also writes them to $RUNNERSCALER_LOOP_LOG/<test name>-<time>.log when that
// directory is set.
func debugLog(t testing.TB) (*slog.Logger, *logBuffer) {
	buf := &logBuffer{}
	var out io.Writer = buf
	if dir := os.Getenv("RUNNERSCALER_LOOP_LOG"); dir != "" {
		f, err := os.Create(fmt.Sprintf("%s/%s-%s.log", dir, strings.ReplaceAll(t.Name(), "/", "_"), time.Now().Format("150405")))
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { f.Close() })
		out = io.MultiWriter(buf, f)
	}
	return slog.New(slog.NewTextHandler(out, &slog.HandlerOptions{Level: slog.LevelDebug})), buf
}

// logBuffer holds log lines, safe for concurrent writers.
type logBuffer struct {
	mu    sync.Mutex
	lines []string
}

func (b *logBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.lines = append(b.lines, strings.TrimRight(string(p), "\n"))
	return len(p), nil
}

// matching returns the last n lines that contain any of words.
func (b *logBuffer) matching(words []string, n int) []string {
	b.mu.Lock()
	defer b.mu.Unlock()
	var out []string
	for _, l := range b.lines {
		for _, w := range words {
			if strings.Contains(l, w) {
				out = append(out, l)
				break
			}
		}
	}
	return out[max(0, len(out)-n):]
}
