package tests

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"

	"github.com/runnerscaler/runnerscaler/internal/pool"
	"github.com/runnerscaler/runnerscaler/internal/testenv"
	"github.com/runnerscaler/runnerscaler/local/githubsim"
	"github.com/runnerscaler/runnerscaler/local/loop"
)

type world struct {
	t    testing.TB
	loop *loop.Loop
	kube kubernetes.Interface
	ns   string
	cfg  *pool.Config
}

// newWorld starts a closed loop with the pools of poolsYAML (%[1]s is the test's
// namespace).
func newWorld(t testing.TB, poolsYAML string, opts loop.Options) *world {
	t.Helper()
	db, tableName := testenv.Table(t)
	kube, ns := testenv.Namespace(t)
	cfg, err := pool.Parse(fmt.Appendf(nil, poolsYAML, ns))
	if err != nil {
		t.Fatal(err)
	}
	opts.Pools, opts.DB, opts.Table, opts.Kube = cfg, db, tableName, kube
	l, err := loop.Start(t.Context(), opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(l.Stop)
	return &world{t: t, loop: l, kube: kube, ns: ns, cfg: cfg}
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

func (w *world) waitFor(what string, limit time.Duration, cond func() bool) {
	w.t.Helper()
	err := wait.PollUntilContextTimeout(w.t.Context(), 100*time.Millisecond, limit, true, func(context.Context) (bool, error) {
		return cond(), nil
	})
	if err != nil {
		w.t.Fatalf("%s: not within %s (statefulsets %d, jobs %v, violations %v)", what, limit, w.statefulSets(),
			summary(w.loop.Sim.Jobs()), w.loop.Monitor.Violations())
	}
}

func summary(jobs []githubsim.Job) map[githubsim.JobState]int {
	out := map[githubsim.JobState]int{}
	for _, j := range jobs {
		out[j.State]++
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

// quiescent: nothing left that no reservation or minReplicas explains.
func (w *world) quiescent() bool {
	secrets, err := w.kube.CoreV1().Secrets(w.ns).List(context.Background(), metav1.ListOptions{LabelSelector: "runnerscaler.dev/pool"})
	if err != nil {
		return false
	}
	return w.statefulSets() == 0 && len(secrets.Items) == 0 && len(w.loop.Sim.Runners()) == 0
}

const twoPools = `
pools:
  - name: small
    organization: acme
    labels: [small]
    maxReplicas: 5
    scaleDownDelaySecondsAfterScaleOut: 1
    kubernetes: {namespace: %[1]s, image: runner:1}
  - name: big
    organization: acme
    labels: [big]
    maxReplicas: 3
    scaleDownDelaySecondsAfterScaleOut: 1
    kubernetes: {namespace: %[1]s, image: runner:1}
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
		w.loop.Sim.QueueJob(githubsim.JobSpec{Repository: "acme/app", Organization: "acme",
			Labels: []string{"self-hosted", label}, Duration: 300 * time.Millisecond})
	}
	w.waitFor("every job completed", 90*time.Second, func() bool { return allDone(w.loop.Sim.Jobs()) })
	w.waitFor("back to zero", 60*time.Second, w.quiescent)
	if v := w.loop.Monitor.Violations(); len(v) > 0 {
		t.Fatalf("violations: %v", v)
	}
	for _, j := range w.loop.Sim.Jobs() {
		want := "small-"
		if j.Labels[1] == "big" {
			want = "big-"
		}
		if len(j.RunnerName) < len(want) || j.RunnerName[:len(want)] != want {
			t.Fatalf("job %d (%v) ran on %s", j.ID, j.Labels, j.RunnerName)
		}
	}
}

// TestConcurrentQueuedDeliveries: n queued deliveries at once end with exactly
// min(n, maxReplicas) StatefulSets (ARC v0.22 ended with 1–2 of 10 for n = 20).
func TestConcurrentQueuedDeliveries(t *testing.T) {
	t.Parallel()
	for _, n := range []int{20, 200} {
		t.Run(fmt.Sprint(n), func(t *testing.T) {
			w := newWorld(t, `
pools:
  - name: p
    organization: acme
    maxReplicas: 10
    kubernetes: {namespace: %[1]s, image: runner:1}
`, loop.Options{StartDelay: time.Hour, SweepEvery: time.Hour}) // pods stay pending: count StatefulSets only
			var wg sync.WaitGroup
			start := time.Now()
			for range n {
				wg.Go(func() {
					w.loop.Sim.QueueJob(githubsim.JobSpec{Repository: "acme/app", Organization: "acme", Labels: []string{"self-hosted"}, Duration: time.Hour})
				})
			}
			wg.Wait()
			want := min(n, 10)
			w.waitFor(fmt.Sprintf("%d statefulsets", want), 10*time.Second, func() bool { return w.statefulSets() >= want })
			t.Logf("%d concurrent queued deliveries: %d statefulsets after %s", n, w.statefulSets(), time.Since(start).Round(time.Millisecond))
			time.Sleep(time.Second) // let every nudge finish
			if got := w.statefulSets(); got != want {
				t.Fatalf("%d statefulsets, want exactly %d", got, want)
			}
		})
	}
}
