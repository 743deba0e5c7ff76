package tests

import (
	"net/http"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/runnerscaler/runnerscaler/internal/reconcile"
	"github.com/runnerscaler/runnerscaler/internal/runnerpod"
	"github.com/runnerscaler/runnerscaler/local/githubsim"
	"github.com/runnerscaler/runnerscaler/local/loop"
)

// TestDrainWaitsForBusyRunners: a node with two runners of a pool, one running
// a 20 s job and one idle, is drained through the eviction API as `kubectl
// drain` does (every runner pod on it evicted at once, each eviction refused
// with 429 tried again every second). The idle runner's pod is evicted at its
// first eviction; the busy one's evictions are refused while its job runs
// (its pod is Ready, and the pool's PodDisruptionBudget, as the real disruption
// controller computed it, allows no disruption), and the drain completes only
// after the job ended (the pod evicted, or gone), which succeeded. The busy runner's pod carries the
// disruption annotations, the idle one's does not.
func TestDrainWaitsForBusyRunners(t *testing.T) {
	t.Parallel()
	w := newWorld(t, `
pools:
  - name: drain
    organization: acme
    labels: [drain]
    minReplicas: 2
    maxReplicas: 2
    scaleDownDelaySecondsAfterScaleOut: 1
    kubernetes: {namespace: %[1]s, template: %[2]s}
`, loop.Options{SweepEvery: time.Second})
	ctx := t.Context()
	w.waitFor("two idle runners online", 2*time.Minute, func() bool { return onlineRunners(w.loop.Sim) == 2 })
	w.queue(1, 20*time.Second, "drain")
	var job githubsim.Job
	var busy, idle corev1.Pod
	w.waitFor("the job running on a runner whose pod reports it, beside an idle runner", time.Minute, func() bool {
		running := w.loop.Sim.RunningJobs()
		pods, _, err := w.loop.RunnerPods(ctx)
		if err != nil || len(running) != 1 || len(pods) != 2 {
			return false
		}
		job = running[0]
		for _, p := range pods {
			if p.Name == job.RunnerName {
				busy = p
			} else {
				idle = p
			}
		}
		return podReady(&busy) && busy.Annotations[runnerpod.AnnotationDoNotDisrupt] == "true" && !podReady(&idle)
	})
	if a := idle.Annotations; a[runnerpod.AnnotationDoNotDisrupt] != "" || a[runnerpod.AnnotationSafeToEvict] != "" {
		t.Fatalf("idle runner's pod %s annotated %v", idle.Name, a)
	}
	if a := busy.Annotations[runnerpod.AnnotationSafeToEvict]; a != "false" {
		t.Fatalf("busy runner's pod %s: safe-to-evict %q, want \"false\"", busy.Name, a)
	}
	var pdb *policyv1.PodDisruptionBudget
	w.waitFor("the disruption controller's view of the budget: 1 of 2 pods healthy, no disruption allowed", 30*time.Second, func() bool {
		var err error
		if pdb, err = w.kube.PolicyV1().PodDisruptionBudgets(w.ns).Get(ctx, reconcile.BudgetName(w.cfg.Pool("drain")), metav1.GetOptions{}); err != nil {
			return false
		}
		st := pdb.Status
		return st.ObservedGeneration == pdb.Generation && st.ExpectedPods == 2 && st.CurrentHealthy == 1 &&
			st.DesiredHealthy == 2 && st.DisruptionsAllowed == 0
	})
	t.Logf("budget %s: %+v", pdb.Name, pdb.Status)

	r, err := w.loop.Drain(ctx, busy.Spec.NodeName, loop.DrainOptions{Timeout: time.Minute, Retry: time.Second})
	if err != nil || len(r.GaveUp) > 0 {
		t.Fatalf("drain: %v, gave up on %v; answers %+v", err, r.GaveUp, r.Answers)
	}
	done := w.job(job.ID)
	if done.State != githubsim.JobCompleted || done.Conclusion != githubsim.JobSuccess {
		t.Fatalf("job %d %s/%s after the drain, want completed successfully", done.ID, done.State, done.Conclusion)
	}
	var idleAnswers, busyAnswers []loop.Eviction
	for _, a := range r.Answers {
		switch a.Pod {
		case idle.Name:
			idleAnswers = append(idleAnswers, a)
		case busy.Name:
			busyAnswers = append(busyAnswers, a)
		}
	}
	if len(idleAnswers) != 1 || idleAnswers[0].Code != http.StatusCreated {
		t.Fatalf("idle pod's evictions answered %+v, want evicted at the first", idleAnswers)
	}
	refusedWhileRunning := 0
	for i, a := range busyAnswers {
		last := i == len(busyAnswers)-1
		switch {
		case !last && a.Code != http.StatusTooManyRequests:
			t.Fatalf("busy pod's eviction %d answered %+v, want 429 until the last", i, a)
		case last && a.Code == http.StatusTooManyRequests:
			t.Fatalf("busy pod's evictions all refused: %+v", busyAnswers)
		case last && a.At.Before(done.EndedAt):
			t.Fatalf("busy pod evicted (%d) at %s, before its job ended at %s", a.Code, a.At.Format(time.StampMilli), done.EndedAt.Format(time.StampMilli))
		case a.Code == http.StatusTooManyRequests && a.At.Before(done.EndedAt):
			refusedWhileRunning++
		}
	}
	if refusedWhileRunning < 5 {
		t.Fatalf("busy pod's evictions refused %d times while its job ran, want one a second for most of its 20 s: %+v", refusedWhileRunning, busyAnswers)
	}
	t.Logf("idle pod %s evicted at once; busy pod %s refused %d times while its job ran, then %d at %s (job ended %s)",
		idle.Name, busy.Name, refusedWhileRunning, busyAnswers[len(busyAnswers)-1].Code,
		busyAnswers[len(busyAnswers)-1].At.Format(time.StampMilli), done.EndedAt.Format(time.StampMilli))
	w.noViolations()
}

// onlineRunners counts the runners the simulator lists online and idle.
func onlineRunners(sim *githubsim.Server) int {
	n := 0
	for _, r := range sim.Runners() {
		if r.Online && !r.Busy {
			n++
		}
	}
	return n
}

// podReady: the pod's Ready condition is true.
func podReady(pod *corev1.Pod) bool {
	for _, c := range pod.Status.Conditions {
		if c.Type == corev1.PodReady {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}

// job is the simulator's job id.
func (w *world) job(id int64) githubsim.Job {
	w.t.Helper()
	for _, j := range w.loop.Sim.Jobs() {
		if j.ID == id {
			return j
		}
	}
	w.t.Fatalf("no job %d", id)
	return githubsim.Job{}
}
