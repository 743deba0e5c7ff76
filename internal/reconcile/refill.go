package reconcile

import (
	"context"
	"fmt"
	"slices"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/labels"

	"github.com/runnerscaler/runnerscaler/internal/pool"
	"github.com/runnerscaler/runnerscaler/internal/runnerpod"
)

// StillRunning returns those of pods (runner pod names, as GitHub names the
// runners) whose runner container has not finished yet: the pod exists in the
// pool, is not being deleted, and its runner does not count as finished (see
// finished). A name that is no pod of the pool — gone already, another pool's,
// anyone else's — is not returned: there is nothing to wait for. It makes one
// pod list (by name for one pod) and no write and no GitHub call, so the sweeper
// can repeat it while it waits for a runner whose job GitHub reported completed
// to exit (the refill fast path); the sweep that follows decides what to do with
// the runner, by the usual rules.
func (r *Reconciler) StillRunning(ctx context.Context, p *pool.Pool, pods []string) ([]string, error) {
	if len(pods) == 0 {
		return nil, nil
	}
	opts := metav1.ListOptions{LabelSelector: labels.SelectorFromSet(labels.Set{runnerpod.LabelPool: p.Name}).String()}
	if len(pods) == 1 {
		opts.FieldSelector = fields.OneTermEqualSelector("metadata.name", pods[0]).String()
	}
	list, err := r.kube.CoreV1().Pods(p.Kubernetes.Namespace).List(ctx, opts)
	if err != nil {
		return nil, fmt.Errorf("listing pods of pool %s: %w", p.Name, err)
	}
	var out []string
	for i := range list.Items {
		pod := &list.Items[i]
		if slices.Contains(pods, pod.Name) && pod.DeletionTimestamp == nil && !finished(pod, p.IsEphemeral()) {
			out = append(out, pod.Name)
		}
	}
	return out, nil
}
