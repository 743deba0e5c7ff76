package inventory_test

import (
	"context"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes/fake"

	"github.com/runnerscaler/runnerscaler/internal/inventory"
	"github.com/runnerscaler/runnerscaler/internal/roster"
	"github.com/runnerscaler/runnerscaler/internal/runnerpod"
)

// TestForgedPodDoesNotHoldTheTeardown: anyone who may create pods in a runner
// namespace can create one with the pool label, this deployment's annotation
// and our finalizer. The sweeper never acts on it (foreign: no roster entry
// ties it to a runner), so a drain that waits for it never ends
// (teardown.ErrNotDrained for ever). What is left must count only what the
// sweeper will remove.
func TestForgedPodDoesNotHoldTheTeardown(t *testing.T) {
	forged := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "p-bcdfg-0", Namespace: "ns",
		Labels:      map[string]string{runnerpod.LabelPool: "p"},
		Annotations: map[string]string{runnerpod.AnnotationDeployment: "d"},
		Finalizers:  []string{runnerpod.Finalizer}}}
	f := inventory.New(fake.NewClientset(forged), "d").WithRoster(noRunners{})
	left, err := f.Remaining(t.Context(), []string{"ns"}, func(string) bool { return true })
	if err != nil {
		t.Fatal(err)
	}
	if len(left) != 0 {
		t.Fatalf("remaining %v: a forged pod no roster entry ties to a runner holds the teardown", left)
	}
	// The runner's own pod, whose UID the roster recorded, counts.
	forged.UID = "pod-uid"
	f = inventory.New(fake.NewClientset(forged), "d").WithRoster(oneRunner{roster.Runner{Pool: "p", Name: "p-bcdfg-0", PodUIDs: []string{"pod-uid"}}})
	if left, err = f.Remaining(t.Context(), []string{"ns"}, func(string) bool { return true }); err != nil || left["p"] != 1 {
		t.Fatalf("remaining %v, %v: want the runner's pod counted", left, err)
	}
}

// oneRunner is a roster with one runner on it.
type oneRunner struct{ rn roster.Runner }

func (o oneRunner) Lookup(_ context.Context, pool, name string) (roster.Runner, bool, error) {
	return o.rn, pool == o.rn.Pool && name == o.rn.Name, nil
}

// noRunners is a roster with no runner on it.
type noRunners struct{}

func (noRunners) Lookup(context.Context, string, string) (roster.Runner, bool, error) {
	return roster.Runner{}, false, nil
}
