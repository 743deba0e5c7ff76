package reconcile

import (
	"context"
	"errors"
	"fmt"
	"sort"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/runnerscaler/runnerscaler/internal/pool"
	"github.com/runnerscaler/runnerscaler/internal/runnerpod"
)

// Inventory is what is left of one pool's runners in a namespace: StatefulSets,
// pods and Secrets that carry its pool label.
type Inventory struct {
	Pool      string `json:"pool"`
	Namespace string `json:"namespace"`
	// Deployment is the deployment recorded on the objects ("" when none is).
	Deployment   string `json:"deployment,omitempty"`
	StatefulSets int    `json:"statefulSets"`
	Pods         int    `json:"pods"`
	Secrets      int    `json:"secrets"`
	// annotations of one of its objects, which record the pool (runnerpod.RemovedPool).
	annotations map[string]string
}

// Total counts every object left.
func (i Inventory) Total() int { return i.StatefulSets + i.Pods + i.Secrets }

// Inventory lists, in each namespace, the runner objects of every pool and
// deployment (three list calls per namespace), sorted by pool.
func (r *Reconciler) Inventory(ctx context.Context, namespaces []string) ([]Inventory, error) {
	byPool := map[[3]string]*Inventory{}
	add := func(ns string, meta metav1.ObjectMeta, count func(*Inventory)) {
		name, dep := meta.Labels[runnerpod.LabelPool], meta.Annotations[runnerpod.AnnotationDeployment]
		inv := byPool[[3]string{ns, name, dep}]
		if inv == nil {
			inv = &Inventory{Pool: name, Namespace: ns, Deployment: dep}
			byPool[[3]string{ns, name, dep}] = inv
		}
		if _, ok := meta.Annotations[runnerpod.AnnotationScope]; ok || inv.annotations == nil {
			inv.annotations = meta.Annotations
		}
		count(inv)
	}
	opts := metav1.ListOptions{LabelSelector: runnerpod.LabelPool}
	for _, ns := range namespaces {
		stss, err := r.kube.AppsV1().StatefulSets(ns).List(ctx, opts)
		if err != nil {
			return nil, fmt.Errorf("listing runner statefulsets in %s: %w", ns, err)
		}
		for _, o := range stss.Items {
			add(ns, o.ObjectMeta, func(i *Inventory) { i.StatefulSets++ })
		}
		pods, err := r.kube.CoreV1().Pods(ns).List(ctx, opts)
		if err != nil {
			return nil, fmt.Errorf("listing runner pods in %s: %w", ns, err)
		}
		for _, o := range pods.Items {
			add(ns, o.ObjectMeta, func(i *Inventory) { i.Pods++ })
		}
		secs, err := r.kube.CoreV1().Secrets(ns).List(ctx, opts)
		if err != nil {
			return nil, fmt.Errorf("listing runner secrets in %s: %w", ns, err)
		}
		for _, o := range secs.Items {
			add(ns, o.ObjectMeta, func(i *Inventory) { i.Secrets++ })
		}
	}
	out := make([]Inventory, 0, len(byPool))
	for _, inv := range byPool {
		out = append(out, *inv)
	}
	sort.Slice(out, func(i, j int) bool {
		return out[i].Pool < out[j].Pool || out[i].Pool == out[j].Pool && out[i].Namespace < out[j].Namespace
	})
	return out, nil
}

// Removed finds, in namespaces, the runners of this deployment of pools that
// known does not name (pools removed from the file) and returns those pools in
// their draining form, rebuilt from what their runners record
// (runnerpod.RemovedPool), for the sweeper to stop like a scale-down to zero.
//
// Only objects that record this deployment (ours) are taken: never another
// deployment's, nor one that records none. A removed pool's scope comes from its
// objects' annotations, which anyone who can write an object in a runner
// namespace can write too, this deployment's name included: the caller drains a
// returned pool only in a scope it serves (the sweeper: a scope of its pools
// file, or the one the pool's status recorded while the pool was in the file;
// see recordScope). A pool whose runners do not record their scope is
// reported in the error and left alone: nothing is deleted that cannot be
// unregistered first.
func (r *Reconciler) Removed(ctx context.Context, namespaces []string, known func(string) bool) ([]*pool.Pool, error) {
	invs, err := r.Inventory(ctx, namespaces)
	if err != nil {
		return nil, err
	}
	var out []*pool.Pool
	var errs []error
	for _, inv := range invs {
		switch {
		case known(inv.Pool):
			continue
		case inv.Deployment != r.opts.Deployment:
			errs = append(errs, legacy(inv))
			continue
		}
		p, err := runnerpod.RemovedPool(inv.Pool, inv.Namespace, inv.annotations)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		out = append(out, p)
	}
	return out, errors.Join(errs...)
}

// legacy reports objects that record neither their scope nor a deployment: a
// sweeper older than these annotations made them, and it cannot be told whose
// they are. Objects of another deployment are not reported (nil).
func legacy(inv Inventory) error {
	if _, ok := inv.annotations[runnerpod.AnnotationScope]; ok || inv.Deployment != "" {
		return nil
	}
	return fmt.Errorf("pool %s: its runners in namespace %s record neither their scope nor their deployment "+
		"(created by an older sweeper): put the pool back in the file to drain it", inv.Pool, inv.Namespace)
}

// Remaining counts, by pool, this deployment's runner objects left in
// namespaces, of the pools known names and of its removed pools (see Inventory).
// Objects that record another deployment, or none, are not counted: the sweeper
// never deletes them, so a drain does not wait for them.
func (r *Reconciler) Remaining(ctx context.Context, namespaces []string, _ func(string) bool) (map[string]int, error) {
	invs, err := r.Inventory(ctx, namespaces)
	if err != nil {
		return nil, err
	}
	out := map[string]int{}
	for _, inv := range invs {
		if inv.Deployment != r.opts.Deployment {
			continue // not this deployment's
		}
		if n := inv.Total(); n > 0 {
			out[inv.Pool] += n
		}
	}
	return out, nil
}
