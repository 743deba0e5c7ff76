package reconcile_test

import (
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// TestEvictedStartingRunnerIsNotRemovedWhileItMayConnect: a pod evicted while
// its runner starts (GitHub lists the runner offline: its listener has not
// connected yet) may still connect and take a job within its grace period; so
// GitHub is not asked to remove it before that grace period is over — then its
// node is taken to be gone, and it is.
func TestEvictedStartingRunnerIsNotRemovedWhileItMayConnect(t *testing.T) {
	t.Parallel()
	e := newEnv(t, true)
	e.mustSweep(1, time.Time{})
	name := e.statefulSets()[0]
	r := e.start(name)
	if err := e.sim.SetOnline(r.ID, false); err != nil {
		t.Fatal(err)
	}
	// Bound to a node, as a starting runner's pod is: the API server deletes an
	// unbound pod at once (no grace period), which would end the wait at once.
	e.bind(name+"-0", "node-a")
	if err := e.raw.CoreV1().Pods(e.ns).Delete(t.Context(), name+"-0", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	pod, err := e.raw.CoreV1().Pods(e.ns).Get(t.Context(), name+"-0", metav1.GetOptions{})
	if err != nil || pod.DeletionTimestamp == nil {
		t.Fatalf("evicted pod: %v, deletion %v", err, pod.DeletionTimestamp)
	}
	for range 3 {
		if err := e.sweep(1, time.Time{}); err != nil {
			t.Fatal(err)
		}
	}
	if _, ok := e.sim.Runner(r.ID); !ok {
		t.Fatal("the runner was removed from GitHub within its pod's grace period, while it may still connect and take a job")
	}
	e.clock.SetTime(pod.DeletionTimestamp.Add(time.Second))
	if err := e.sweep(1, time.Time{}); err != nil {
		t.Fatal(err)
	}
	if _, ok := e.sim.Runner(r.ID); ok {
		t.Fatal("past the grace period, the offline runner of the pod being deleted is still registered")
	}
}
