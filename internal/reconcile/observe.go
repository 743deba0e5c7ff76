package reconcile

import (
	"context"
	"fmt"
	"sort"
	"strconv"
	"sync"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"

	"github.com/runnerscaler/runnerscaler/internal/pool"
	"github.com/runnerscaler/runnerscaler/internal/runnerpod"
)

// Phase classifies a runner (its StatefulSet and pod) as ARC's getPodsForOwner does.
type Phase string

// Phases, counted in the pool status.
const (
	Pending     Phase = "pending"
	Running     Phase = "running"
	Completed   Phase = "completed"
	TimedOut    Phase = "registration-timed-out"
	Terminating Phase = "terminating"
	// Stopping counts runners marked for unregistration (scale-down, replacement).
	Stopping Phase = "stopping"
)

// runner is one StatefulSet of the pool and its pod (nil until the controller made it).
type runner struct {
	sts   *appsv1.StatefulSet
	pod   *corev1.Pod
	phase Phase
}

func (r *runner) name() string { return r.sts.Name }

func (r *runner) marked() bool {
	_, ok := r.sts.Annotations[runnerpod.AnnotationUnregistrationRequest]
	return ok
}

func (r *runner) outdated(hash string) bool { return r.sts.Labels[runnerpod.LabelTemplateHash] != hash }

// runnerID is the GitHub runner id: observed at registration (pod annotation), or
// known from the JIT config (StatefulSet annotation). 0 when unknown.
func (r *runner) runnerID() int64 {
	for _, m := range []map[string]string{podAnnotations(r.pod), r.sts.Annotations} {
		if id, err := strconv.ParseInt(m[runnerpod.AnnotationRunnerID], 10, 64); err == nil && id > 0 {
			return id
		}
	}
	return 0
}

// registered: GitHub has listed this runner online or busy (the pod annotation is set then).
func (r *runner) registered() bool {
	_, ok := podAnnotations(r.pod)[runnerpod.AnnotationRunnerID]
	return ok
}

func podAnnotations(p *corev1.Pod) map[string]string {
	if p == nil {
		return nil
	}
	return p.Annotations
}

// observe lists the pool's StatefulSets and pods (one call each, concurrently) and
// classifies them.
func (r *Reconciler) observe(ctx context.Context, p *pool.Pool, now time.Time) ([]*runner, error) {
	sel := labels.SelectorFromSet(labels.Set{runnerpod.LabelPool: p.Name}).String()
	ns := p.Kubernetes.Namespace
	var (
		stss    *appsv1.StatefulSetList
		pods    *corev1.PodList
		podsErr error
		wg      sync.WaitGroup
	)
	wg.Go(func() { pods, podsErr = r.kube.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{LabelSelector: sel}) })
	stss, err := r.kube.AppsV1().StatefulSets(ns).List(ctx, metav1.ListOptions{LabelSelector: sel})
	wg.Wait()
	if err != nil {
		return nil, fmt.Errorf("listing statefulsets of pool %s: %w", p.Name, err)
	}
	if podsErr != nil {
		return nil, fmt.Errorf("listing pods of pool %s: %w", p.Name, podsErr)
	}
	byOwner := map[string]*corev1.Pod{}
	for i := range pods.Items {
		pod := &pods.Items[i]
		if ref := metav1.GetControllerOf(pod); ref != nil {
			byOwner[string(ref.UID)] = pod
		}
	}
	runners := make([]*runner, 0, len(stss.Items))
	for i := range stss.Items {
		sts := &stss.Items[i]
		rn := &runner{sts: sts, pod: byOwner[string(sts.UID)]}
		rn.phase = r.classify(rn, now)
		runners = append(runners, rn)
	}
	// Oldest first: scale-down keeps the oldest, as ARC.
	sort.SliceStable(runners, func(i, j int) bool {
		return runners[i].sts.CreationTimestamp.Before(&runners[j].sts.CreationTimestamp)
	})
	return runners, nil
}

// classify follows ARC: completed (pod Succeeded or runner container exited 0),
// terminating, running, registration-timed-out (Running and Ready for the
// registration timeout without GitHub listing the runner), pending.
func (r *Reconciler) classify(rn *runner, now time.Time) Phase {
	pod := rn.pod
	switch {
	case pod == nil:
		return Pending
	case completed(pod):
		return Completed
	case pod.DeletionTimestamp != nil:
		return Terminating
	}
	readySince, ready := readyTime(pod)
	switch {
	case pod.Status.Phase != corev1.PodRunning || !ready:
		return Pending
	case !rn.registered() && now.Sub(readySince) >= r.opts.RegistrationTimeout:
		return TimedOut
	}
	return Running
}

// completed: the pod succeeded, or the runner container exited 0 (it restarts
// under the StatefulSet's restart policy, so the last termination counts too).
func completed(pod *corev1.Pod) bool {
	if pod.Status.Phase == corev1.PodSucceeded {
		return true
	}
	for _, cs := range pod.Status.ContainerStatuses {
		if cs.Name != runnerpod.ContainerName {
			continue
		}
		for _, t := range []*corev1.ContainerStateTerminated{cs.State.Terminated, cs.LastTerminationState.Terminated} {
			if t != nil && t.ExitCode == 0 {
				return true
			}
		}
	}
	return false
}

func readyTime(pod *corev1.Pod) (time.Time, bool) {
	for _, c := range pod.Status.Conditions {
		if c.Type == corev1.PodReady && c.Status == corev1.ConditionTrue {
			return c.LastTransitionTime.Time, true
		}
	}
	return time.Time{}, false
}
