package tests

import (
	"context"
	"fmt"
	"strings"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/runnerscaler/runnerscaler/internal/runnerpod"
)

// diagnose describes what is left in the test's namespace — each runner
// StatefulSet and pod with its annotations and container states, and GitHub's
// runners — followed by the loop's log lines about those runners, so a failed
// wait in CI says why without a rerun.
func (w *world) diagnose() string {
	ctx := context.Background()
	var b strings.Builder
	opts := metav1.ListOptions{LabelSelector: runnerpod.LabelPool}
	var names []string
	if stss, err := w.kube.AppsV1().StatefulSets(w.ns).List(ctx, opts); err == nil {
		for _, s := range stss.Items {
			names = append(names, s.Name)
			fmt.Fprintf(&b, "statefulset %s created %s deleting=%v annotations %v\n", s.Name,
				s.CreationTimestamp.UTC().Format("15:04:05"), s.DeletionTimestamp != nil, s.Annotations)
		}
	}
	if pods, err := w.kube.CoreV1().Pods(w.ns).List(ctx, opts); err == nil {
		for _, p := range pods.Items {
			fmt.Fprintf(&b, "pod %s phase %s node %q deleting=%v finalizers %v annotations %v\n", p.Name, p.Status.Phase,
				p.Spec.NodeName, p.DeletionTimestamp != nil, p.Finalizers, p.Annotations)
			for _, c := range p.Status.ContainerStatuses {
				fmt.Fprintf(&b, "  container %s ready=%v restarts %d state %+v last %+v\n", c.Name, c.Ready, c.RestartCount, c.State, c.LastTerminationState)
			}
		}
	}
	for _, r := range w.loop.Sim.Runners() {
		fmt.Fprintf(&b, "github runner %+v\n", r)
	}
	if w.logs != nil && len(names) > 0 {
		lines := w.logs.matching(names, 60)
		fmt.Fprintf(&b, "last %d log lines about them:\n%s\n", len(lines), strings.Join(lines, "\n"))
	}
	return b.String()
}
