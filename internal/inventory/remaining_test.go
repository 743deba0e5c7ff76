package inventory_test

import (
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes/fake"

	"github.com/runnerscaler/runnerscaler/internal/inventory"
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
	f := inventory.New(fake.NewClientset(forged), "d")
	left, err := f.Remaining(t.Context(), []string{"ns"}, func(string) bool { return true })
	if err != nil {
		t.Fatal(err)
	}
	if len(left) != 0 {
		t.Fatalf("remaining %v: a forged pod no roster entry ties to a runner holds the teardown", left)
	}
}
