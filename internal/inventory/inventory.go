// Package inventory finds a deployment's runner objects across its runner
// namespaces, whatever pool made them: what is left of each pool (for the
// teardown's drain and status), and the pools removed from the pools file
// whose runners remain, rebuilt for the sweeper to drain. Per-pool
// reconciliation is package reconcile's.
package inventory

import (
	"context"
	"errors"
	"fmt"
	"sort"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/runnerscaler/runnerscaler/internal/pool"
	"github.com/runnerscaler/runnerscaler/internal/roster"
	"github.com/runnerscaler/runnerscaler/internal/runnerpod"
)

// Finder looks for one deployment's runner objects.
type Finder struct {
	kube       kubernetes.Interface
	deployment string
	roster     Roster
}

// Roster is what the finder reads of the deployment's record of its runners
// (roster.Store).
type Roster interface {
	Lookup(ctx context.Context, pool, name string) (roster.Runner, bool, error)
}

// New returns the finder of deployment's runner objects: those that record it
// (runnerpod.AnnotationDeployment; the sweeper's deployment is its table name)
// and, once WithRoster gave it the roster, that the roster ties to a runner.
func New(kube kubernetes.Interface, deployment string) *Finder {
	return &Finder{kube: kube, deployment: deployment}
}

// WithRoster makes Remaining count only the objects the roster ties to one of
// the deployment's runners, as the sweeper acts only on those.
func (f *Finder) WithRoster(r Roster) *Finder {
	f.roster = r
	return f
}

// Pool is what is left of one pool's runners in a namespace: StatefulSets,
// pods and Secrets that carry its pool label.
type Pool struct {
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
func (i Pool) Total() int { return i.StatefulSets + i.Pods + i.Secrets }

// List lists, in each namespace, the runner objects of every pool and
// deployment (three list calls per namespace), sorted by pool.
func (f *Finder) List(ctx context.Context, namespaces []string) ([]Pool, error) {
	return f.list(ctx, namespaces, func(string, metav1.ObjectMeta) (bool, error) { return true, nil })
}

// list is List of the objects keep keeps.
func (f *Finder) list(ctx context.Context, namespaces []string, keep func(kind string, meta metav1.ObjectMeta) (bool, error)) ([]Pool, error) {
	byPool := map[[3]string]*Pool{}
	add := func(ns, kind string, meta metav1.ObjectMeta) error {
		if ok, err := keep(kind, meta); err != nil || !ok {
			return err
		}
		name, dep := meta.Labels[runnerpod.LabelPool], meta.Annotations[runnerpod.AnnotationDeployment]
		inv := byPool[[3]string{ns, name, dep}]
		if inv == nil {
			inv = &Pool{Pool: name, Namespace: ns, Deployment: dep}
			byPool[[3]string{ns, name, dep}] = inv
		}
		if _, ok := meta.Annotations[runnerpod.AnnotationScope]; ok || inv.annotations == nil {
			inv.annotations = meta.Annotations
		}
		switch kind {
		case kindStatefulSet:
			inv.StatefulSets++
		case kindPod:
			inv.Pods++
		default:
			inv.Secrets++
		}
		return nil
	}
	opts := metav1.ListOptions{LabelSelector: runnerpod.LabelPool}
	var errs []error
	for _, ns := range namespaces {
		stss, err := f.kube.AppsV1().StatefulSets(ns).List(ctx, opts)
		if err != nil {
			return nil, fmt.Errorf("listing runner statefulsets in %s: %w", ns, err)
		}
		for _, o := range stss.Items {
			errs = append(errs, add(ns, kindStatefulSet, o.ObjectMeta))
		}
		pods, err := f.kube.CoreV1().Pods(ns).List(ctx, opts)
		if err != nil {
			return nil, fmt.Errorf("listing runner pods in %s: %w", ns, err)
		}
		for _, o := range pods.Items {
			errs = append(errs, add(ns, kindPod, o.ObjectMeta))
		}
		secs, err := f.kube.CoreV1().Secrets(ns).List(ctx, opts)
		if err != nil {
			return nil, fmt.Errorf("listing runner secrets in %s: %w", ns, err)
		}
		for _, o := range secs.Items {
			errs = append(errs, add(ns, kindSecret, o.ObjectMeta))
		}
	}
	if err := errors.Join(errs...); err != nil {
		return nil, err
	}
	out := make([]Pool, 0, len(byPool))
	for _, inv := range byPool {
		out = append(out, *inv)
	}
	sort.Slice(out, func(i, j int) bool {
		return out[i].Pool < out[j].Pool || out[i].Pool == out[j].Pool && out[i].Namespace < out[j].Namespace
	})
	return out, nil
}

// Kinds of runner objects.
const (
	kindStatefulSet = "statefulset"
	kindPod         = "pod"
	kindSecret      = "secret"
)

// tied: the roster ties the object to one of the deployment's runners (live
// or retired) — the object the runner's entry recorded, or, where the entry
// recorded none of its kind yet, the object of the runner's name, which the
// sweeper adopts. Without a roster every object counts.
func (f *Finder) tied(ctx context.Context, kind string, meta metav1.ObjectMeta) (bool, error) {
	if f.roster == nil {
		return true, nil
	}
	name := meta.Name
	if kind != kindPod {
		name = runnerpod.PodName(meta.Name)
	}
	e, found, err := f.roster.Lookup(ctx, meta.Labels[runnerpod.LabelPool], name)
	if err != nil || !found || e.Namespace != "" && e.Namespace != meta.Namespace {
		return false, err
	}
	uid := string(meta.UID)
	switch kind {
	case kindStatefulSet:
		return e.StatefulSetUID == "" || e.StatefulSetUID == uid, nil
	case kindSecret:
		return e.SecretUID == "" || e.SecretUID == uid, nil
	}
	if e.HasPod(uid) {
		return true, nil
	}
	ref := metav1.GetControllerOf(&meta)
	return ref != nil && ref.Kind == "StatefulSet" && string(ref.UID) == e.StatefulSetUID || len(e.PodUIDs) == 0 && e.StatefulSetUID == "", nil
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
// reconcile's recordScope). A pool whose runners do not record their scope is
// reported in the error and left alone: nothing is deleted that cannot be
// unregistered first.
func (f *Finder) Removed(ctx context.Context, namespaces []string, known func(string) bool) ([]*pool.Pool, error) {
	invs, err := f.List(ctx, namespaces)
	if err != nil {
		return nil, err
	}
	var out []*pool.Pool
	var errs []error
	for _, inv := range invs {
		switch {
		case known(inv.Pool):
			continue
		case inv.Deployment != f.deployment:
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
func legacy(inv Pool) error {
	if _, ok := inv.annotations[runnerpod.AnnotationScope]; ok || inv.Deployment != "" {
		return nil
	}
	return fmt.Errorf("pool %s: its runners in namespace %s record neither their scope nor their deployment "+
		"(created by an older sweeper), so the sweeper leaves them alone: once they are idle, remove their runners on GitHub and delete them by hand (pods: remove the runnerscaler.dev/unregister finalizer)", inv.Pool, inv.Namespace)
}

// Remaining counts, by pool, this deployment's runner objects left in
// namespaces, of the pools known names and of its removed pools (see List).
// Objects that record another deployment, or none, and objects the roster ties
// to no runner (foreign, once WithRoster gave it the roster) are not counted:
// the sweeper never deletes them, so a drain does not wait for them.
func (f *Finder) Remaining(ctx context.Context, namespaces []string, _ func(string) bool) (map[string]int, error) {
	invs, err := f.list(ctx, namespaces, func(kind string, meta metav1.ObjectMeta) (bool, error) { return f.tied(ctx, kind, meta) })
	if err != nil {
		return nil, err
	}
	out := map[string]int{}
	for _, inv := range invs {
		if inv.Deployment != f.deployment {
			continue // not this deployment's
		}
		if n := inv.Total(); n > 0 {
			out[inv.Pool] += n
		}
	}
	return out, nil
}
