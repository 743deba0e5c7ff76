package reconcile_test

import (
	"context"
	"fmt"
	"slices"
	"sync/atomic"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/runnerscaler/runnerscaler/internal/githubapi"
	"github.com/runnerscaler/runnerscaler/internal/reconcile"
	"github.com/runnerscaler/runnerscaler/internal/runnerpod"
	"github.com/runnerscaler/runnerscaler/internal/scaling"
	"github.com/runnerscaler/runnerscaler/internal/scope"
	"github.com/runnerscaler/runnerscaler/local/githubsim"
)

// TestStoppedIdleRunnerIsHandedNoJobOfItsPool: the sweeper stops an idle
// runner by deleting its pod, and its entrypoint then stops the listener; a
// job of the pool queued in between, which GitHub would hand to that listener
// (and the listener's stop would then cancel), is not handed to it: its custom
// labels were removed before the pod was deleted.
func TestStoppedIdleRunnerIsHandedNoJobOfItsPool(t *testing.T) {
	t.Parallel()
	w := newBusyWorld(t)
	w.scaleDownAndConfirmIdle()
	if err := w.sweep(0, time.Time{}); err != nil { // idle by every signal: its pod deleted to stop it
		t.Fatal(err)
	}
	pod := w.pod(w.name + "-0")
	if pod.DeletionTimestamp == nil {
		t.Fatalf("pod %s not deleted after the idle confirmation", pod.Name)
	}
	if _, ok := pod.Annotations[runnerpod.AnnotationLabelsRemoved]; !ok {
		t.Fatalf("pod %s annotations %v, want %s", pod.Name, pod.Annotations, runnerpod.AnnotationLabelsRemoved)
	}
	if rn, _ := w.sim.Runner(w.id); !slices.Equal(rn.Labels, []string{"self-hosted", "Linux", "X64"}) {
		t.Fatalf("runner labels on GitHub %v, want only the read-only ones", rn.Labels)
	}
	job := w.sim.QueueJob(githubsim.JobSpec{Repository: "acme/app", Organization: "acme", Labels: []string{"self-hosted", "big"}})
	if got, ok, err := w.sim.AcquireJob(w.id); err != nil || ok {
		t.Fatalf("the stopping runner's listener polled: job %d handed over %v (%v), want job %d kept for another runner", got.ID, ok, err, job.ID)
	}
}

// TestWithdrawnRunnerIsNotHeldForAWaitingJob: a runner whose labels were
// removed can take no job of its pool, so a job that waits does not hold it
// (as it holds an idle runner that could take the job): its pod is deleted.
func TestWithdrawnRunnerIsNotHeldForAWaitingJob(t *testing.T) {
	t.Parallel()
	w := newBusyWorld(t)
	gh := &labelsGitHub{GitHub: w.gh}
	w.useGitHub(gh)
	w.scaleDownAndConfirmIdle()
	if err := w.gh.RemoveRunnerLabels(t.Context(), w.pool.Scope(), w.id); err != nil {
		t.Fatal(err)
	}
	patch := fmt.Sprintf(`{"metadata":{"annotations":{%q:%q}}}`, runnerpod.AnnotationLabelsRemoved, w.clock.Now().UTC().Format(time.RFC3339))
	if _, err := w.raw.CoreV1().Pods(w.ns).Patch(t.Context(), w.name+"-0", types.MergePatchType, []byte(patch), metav1.PatchOptions{}); err != nil {
		t.Fatal(err)
	}
	waiting := scaling.Decision{Desired: 0, Queued: 1} // a job of the pool waits
	if err := w.rec.Reconcile(t.Context(), w.pool, waiting, &w.status); err != nil {
		t.Fatal(err)
	}
	if pod := w.pod(w.name + "-0"); pod.DeletionTimestamp == nil {
		t.Fatal("a runner without its labels was held for a job it cannot take")
	}
	if n := gh.labelCalls.Load(); n != 0 {
		t.Fatalf("%d label removals for a runner whose labels were already removed, want none", n)
	}
}

// TestUnrecordedLabelRemovalIsNotHeldForAWaitingJob: a sweep removed the
// runner's labels on GitHub but its record on the pod did not stick (the
// write failed, or the pod had changed): GitHub lists the runner without its
// pool's labels, so a job that waits does not hold it either. It can take no
// job of its pool, and held it would keep a slot that job needs.
func TestUnrecordedLabelRemovalIsNotHeldForAWaitingJob(t *testing.T) {
	t.Parallel()
	w := newBusyWorld(t)
	w.scaleDownAndConfirmIdle()
	if err := w.gh.RemoveRunnerLabels(t.Context(), w.pool.Scope(), w.id); err != nil {
		t.Fatal(err)
	}
	waiting := scaling.Decision{Desired: 0, Queued: 1} // a job of the pool waits
	if err := w.rec.Reconcile(t.Context(), w.pool, waiting, &w.status); err != nil {
		t.Fatal(err)
	}
	if pod := w.pod(w.name + "-0"); pod.DeletionTimestamp == nil {
		t.Fatal("a runner GitHub lists without its labels was held for a job it cannot take")
	}
}

// TestLabelRemovalFailureKeepsThePod: GitHub fails the label removal (5xx):
// the pod is not deleted, and the next sweep tries again.
func TestLabelRemovalFailureKeepsThePod(t *testing.T) {
	t.Parallel()
	w := newBusyWorld(t)
	gh := &labelsGitHub{GitHub: w.gh}
	gh.fail.Store(true)
	w.useGitHub(gh)
	w.scaleDownAndConfirmIdle()
	if err := w.sweep(0, time.Time{}); err != nil {
		t.Fatal(err)
	}
	if pod := w.pod(w.name + "-0"); pod.DeletionTimestamp != nil {
		t.Fatal("pod deleted although the runner's labels could not be removed")
	}
	gh.fail.Store(false)
	w.clock.Step(reconcile.DefaultIdleConfirmation)
	if err := w.sweep(0, time.Time{}); err != nil {
		t.Fatal(err)
	}
	if pod := w.pod(w.name + "-0"); pod.DeletionTimestamp == nil {
		t.Fatal("pod kept after the label removal succeeded")
	}
	if n := gh.labelCalls.Load(); n != 2 {
		t.Fatalf("%d label removals, want 2 (one failed, one done)", n)
	}
}

// pod reads a pod as the API server has it.
func (e *env) pod(name string) *corev1.Pod {
	e.t.Helper()
	pod, err := e.raw.CoreV1().Pods(e.ns).Get(e.t.Context(), name, metav1.GetOptions{})
	if err != nil {
		e.t.Fatal(err)
	}
	return pod
}

// labelsGitHub counts label removals and fails them with GitHub's
// 502 while fail is set.
type labelsGitHub struct {
	reconcile.GitHub
	fail       atomic.Bool
	labelCalls atomic.Int64
}

func (g *labelsGitHub) RemoveRunnerLabels(ctx context.Context, s scope.Scope, id int64) error {
	g.labelCalls.Add(1)
	if g.fail.Load() {
		return fmt.Errorf("injected: %w", githubapi.ErrServer)
	}
	return g.GitHub.RemoveRunnerLabels(ctx, s, id)
}
