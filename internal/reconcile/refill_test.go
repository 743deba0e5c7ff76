package reconcile_test

import (
	"slices"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// TestStillRunning: the refill fast path's look at runners whose job completed.
// A runner counts as still running until its container has exited, its pod
// being deleted or not (a stopping runner is unregistered once it exited); a
// name that is no pod of the pool, or a gone pod, is nothing to wait for.
// Stopping tells whether a named runner is being stopped. The looks write
// nothing and ask GitHub nothing.
func TestStillRunning(t *testing.T) {
	t.Parallel()
	e := newEnv(t, true)
	e.mustSweep(2, time.Time{})
	names := e.statefulSets()
	a, b := names[0], names[1]
	e.run(a)
	e.run(b)
	look := func(pods ...string) []string {
		t.Helper()
		writes, calls := e.writes.Load(), e.gh.Stats().Calls
		got, err := e.rec.StillRunning(t.Context(), e.pool, pods)
		if err != nil {
			t.Fatal(err)
		}
		if w, c := e.writes.Load()-writes, e.gh.Stats().Calls-calls; w != 0 || c != 0 {
			t.Fatalf("a look made %d Kubernetes writes and %d GitHub calls, want none", w, c)
		}
		slices.Sort(got)
		return got
	}
	if got := look(a + "-0"); !slices.Equal(got, []string{a + "-0"}) {
		t.Fatalf("running runner %s: %v, want it still running", a, got)
	}
	want := []string{a + "-0", b + "-0"}
	slices.Sort(want)
	if got := look(a+"-0", b+"-0", "p-zzzzz-0", "kube-dns-0"); !slices.Equal(got, want) {
		t.Fatalf("two running runners and two strangers: %v, want %v", got, want)
	}
	e.exit(a, 0)
	if got := look(a + "-0"); len(got) != 0 {
		t.Fatalf("runner %s exited: %v, want nothing to wait for", a, got)
	}
	if stopping, err := e.rec.Stopping(t.Context(), e.pool, []string{a + "-0", b + "-0"}); err != nil || stopping {
		t.Fatalf("Stopping before any stop: %v, %v; want false", stopping, err)
	}
	if err := e.kube.CoreV1().Pods(e.ns).Delete(t.Context(), b+"-0", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	if stopping, err := e.rec.Stopping(t.Context(), e.pool, []string{b + "-0"}); err != nil || !stopping {
		t.Fatalf("Stopping of a runner being deleted: %v, %v; want true", stopping, err)
	}
	if got := look(a+"-0", b+"-0"); !slices.Equal(got, []string{b + "-0"}) {
		t.Fatalf("an exited runner and a running one being deleted: %v, want the one being deleted", got)
	}
	deleting, err := e.kube.CoreV1().Pods(e.ns).Get(t.Context(), b+"-0", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	deleting.Status.ContainerStatuses = []corev1.ContainerStatus{{Name: "runner", State: corev1.ContainerState{
		Terminated: &corev1.ContainerStateTerminated{ExitCode: 143, FinishedAt: metav1.NewTime(e.clock.Now())}}}}
	if _, err := e.kube.CoreV1().Pods(e.ns).UpdateStatus(t.Context(), deleting, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	if got := look(a+"-0", b+"-0"); len(got) != 0 {
		t.Fatalf("an exited runner and an exited one being deleted: %v, want nothing to wait for", got)
	}
	if got := look(); got != nil {
		t.Fatalf("no runners named: %v", got)
	}
}
