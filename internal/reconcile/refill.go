package reconcile

import (
	"context"

	"fmt"
	corev1 "k8s.io/api/core/v1"
	"slices"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/labels"

	"github.com/runnerscaler/runnerscaler/internal/pool"
	"github.com/runnerscaler/runnerscaler/internal/runnerpod"
)

// StillRunning returns those of pods (runner pod names, as GitHub names the
// runners) whose runner container has not finished yet: the pod exists in the
// pool and its runner does not count as finished (see finished) — for a pod
// being deleted, its runner container is still running. A name that is no pod of the pool — gone already, another pool's,
// anyone else's — is not returned: there is nothing to wait for. It makes one
// pod list (by name for one pod) and no write and no GitHub call, so the sweeper
// can repeat it while it waits for a runner whose job GitHub reported completed
// to exit (the refill fast path); the sweep that follows decides what to do with
// the runner, by the usual rules.
func (r *Reconciler) StillRunning(ctx context.Context, p *pool.Pool, pods []string) ([]string, error) {
	list, err := r.listNamed(ctx, p, pods)
	if err != nil {
		return nil, err
	}
	var out []string
	for _, pod := range list {
		deleting := pod.DeletionTimestamp != nil
		if deleting && runnerRunning(pod) || !deleting && !finished(pod, p.IsEphemeral()) {
			out = append(out, pod.Name)
		}
	}
	return out, nil
}

// Stopping reports whether any of pods (runner pod names) is being stopped: its
// pod is being deleted (by hand, an eviction) or marked for unregistration. One
// pod list, no write, no GitHub call.
func (r *Reconciler) Stopping(ctx context.Context, p *pool.Pool, pods []string) (bool, error) {
	list, err := r.listNamed(ctx, p, pods)
	if err != nil {
		return false, err
	}
	for _, pod := range list {
		if _, marked := pod.Annotations[runnerpod.AnnotationUnregistrationRequest]; marked || pod.DeletionTimestamp != nil {
			return true, nil
		}
	}
	return false, nil
}

// listNamed lists those of the pool's pods named in pods (by name for one pod).
func (r *Reconciler) listNamed(ctx context.Context, p *pool.Pool, pods []string) ([]*corev1.Pod, error) {
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
	var out []*corev1.Pod
	for i := range list.Items {
		if slices.Contains(pods, list.Items[i].Name) {
			out = append(out, &list.Items[i])
		}
	}
	return out, nil
}
