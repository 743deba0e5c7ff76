package gather

import (
	"context"
	"fmt"
	"sort"
	"strconv"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/labels"

	"github.com/runnerscaler/runnerscaler/internal/pool"
	"github.com/runnerscaler/runnerscaler/internal/runnerpod"
	"github.com/runnerscaler/runnerscaler/internal/status"
)

// runners lists the pool's StatefulSets and pods (one call each) and describes
// each runner. stuck are the reasons the last sweep recorded, used when the
// cluster shows none now.
func (g *Gatherer) runners(ctx context.Context, p *pool.Pool, stuck map[string]string) ([]status.Runner, error) {
	sel := labels.SelectorFromSet(labels.Set{runnerpod.LabelPool: p.Name}).String()
	ns := p.Kubernetes.Namespace
	stss, err := g.kube.AppsV1().StatefulSets(ns).List(ctx, metav1.ListOptions{LabelSelector: sel})
	if err != nil {
		return nil, fmt.Errorf("listing statefulsets of pool %s in namespace %s: %w", p.Name, ns, err)
	}
	pods, err := g.kube.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{LabelSelector: sel})
	if err != nil {
		return nil, fmt.Errorf("listing pods of pool %s in namespace %s: %w", p.Name, ns, err)
	}
	byOwner := map[string]*corev1.Pod{}
	for i := range pods.Items {
		if ref := metav1.GetControllerOf(&pods.Items[i]); ref != nil {
			byOwner[string(ref.UID)] = &pods.Items[i]
		}
	}
	workflow, err := g.workflowPods(ctx, p)
	if err != nil {
		return nil, err
	}
	out := make([]status.Runner, 0, len(stss.Items))
	for i := range stss.Items {
		sts := &stss.Items[i]
		rn := describe(sts, byOwner[string(sts.UID)])
		if (rn.Phase == status.PhaseStopping || rn.Phase == status.PhaseTerminating) && rn.Reason == "" {
			rn.Reason = stuck[sts.Name] // a stop held up (GitHub refused to remove the runner)
		}
		if rn.Phase == status.PhasePending && rn.Reason == "" {
			rn.Reason = stuck[sts.Name]
			if rn.Reason == "" && byOwner[string(sts.UID)] == nil {
				rn.Reason = g.controllerWarning(ctx, sts)
			}
		}
		rn.WorkflowPod = workflow[rn.Name]
		out = append(out, rn)
	}
	sort.SliceStable(out, func(i, j int) bool { return out[i].Created.Before(out[j].Created) })
	return out, nil
}

// describe classifies a runner from its StatefulSet and pod (nil until the
// controller made it), more coarsely than the sweeper does: what an operator
// needs to see, not what decides a deletion.
func describe(sts *appsv1.StatefulSet, pod *corev1.Pod) status.Runner {
	rn := status.Runner{Name: runnerpod.PodName(sts.Name), StatefulSet: sts.Name, Created: created(sts),
		GitHubID: runnerID(sts, pod)}
	_, marked := sts.Annotations[runnerpod.AnnotationUnregistrationRequest]
	cs := runnerpod.RunnerStatus(pod)
	switch {
	case pod != nil && pod.DeletionTimestamp != nil:
		rn.Phase = status.PhaseTerminating
	case marked:
		rn.Phase = status.PhaseStopping
	case pod != nil && (pod.Status.Phase == corev1.PodSucceeded || pod.Status.Phase == corev1.PodFailed ||
		cs != nil && cs.State.Terminated != nil):
		rn.Phase = status.PhaseCompleted
	case pod != nil && pod.Status.Phase == corev1.PodRunning && cs != nil && cs.State.Running != nil:
		rn.Phase = status.PhaseRunning
	default:
		rn.Phase = status.PhasePending
		rn.Reason = podReason(pod, cs)
	}
	return rn
}

// podReason is why a pod is not running, as its status says: the scheduler's
// condition, an init container's waiting state (the docker sidecar's image that
// cannot be pulled: the runner container then waits as "PodInitializing"), or
// the runner container's (an image that cannot be pulled, a crash loop, a bad
// configuration); "" while it is simply starting.
func podReason(pod *corev1.Pod, cs *corev1.ContainerStatus) string {
	if pod == nil {
		return ""
	}
	for _, c := range pod.Status.Conditions {
		if c.Type == corev1.PodScheduled && c.Status == corev1.ConditionFalse && c.Reason != "" {
			return join(c.Reason, c.Message)
		}
	}
	if ic := runnerpod.InitWaiting(pod); ic != nil {
		return join(ic.Name+" container: "+ic.State.Waiting.Reason, ic.State.Waiting.Message)
	}
	if cs == nil || cs.State.Waiting == nil {
		return ""
	}
	switch w := cs.State.Waiting; w.Reason {
	case "", "ContainerCreating", "PodInitializing":
		return ""
	default:
		return join(w.Reason, w.Message)
	}
}

// workflowPods describes the workflow pods of a container-mode pool's hook
// namespace, by the runner pod name their hooks' label gives.
func (g *Gatherer) workflowPods(ctx context.Context, p *pool.Pool) (map[string]string, error) {
	ns := p.Kubernetes.HookNamespace()
	if ns == "" {
		return nil, nil
	}
	list, err := g.kube.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{LabelSelector: runnerpod.LabelHookRunnerPod})
	if err != nil {
		return nil, fmt.Errorf("listing workflow pods of pool %s in namespace %s: %w", p.Name, ns, err)
	}
	out := map[string]string{}
	for i := range list.Items {
		pod := &list.Items[i]
		d := pod.Name + " " + string(pod.Status.Phase)
		if pod.DeletionTimestamp != nil {
			d = pod.Name + " Terminating"
		}
		if why := podReason(pod, firstWaiting(pod)); pod.Status.Phase == corev1.PodPending && why != "" {
			d += " (" + why + ")"
		}
		out[pod.Labels[runnerpod.LabelHookRunnerPod]] = d
	}
	return out, nil
}

// firstWaiting is the first of the pod's containers that waits (an image that
// cannot be pulled), else its first container's status; nil without any.
func firstWaiting(pod *corev1.Pod) *corev1.ContainerStatus {
	for i := range pod.Status.ContainerStatuses {
		if pod.Status.ContainerStatuses[i].State.Waiting != nil && pod.Status.ContainerStatuses[i].State.Waiting.Reason != "ContainerCreating" {
			return &pod.Status.ContainerStatuses[i]
		}
	}
	if len(pod.Status.ContainerStatuses) > 0 {
		return &pod.Status.ContainerStatuses[0]
	}
	return nil
}

// controllerWarning is the newest warning event of the runner's StatefulSet
// (FailedCreate: a missing service account, a quota or admission refusal); ""
// when there is none or events cannot be read.
func (g *Gatherer) controllerWarning(ctx context.Context, sts *appsv1.StatefulSet) string {
	sel := fields.Set{"involvedObject.kind": "StatefulSet", "involvedObject.name": sts.Name}.AsSelector().String()
	list, err := g.kube.CoreV1().Events(sts.Namespace).List(ctx, metav1.ListOptions{FieldSelector: sel})
	if err != nil {
		return ""
	}
	var newest *corev1.Event
	for i := range list.Items {
		ev := &list.Items[i]
		if ev.Type == corev1.EventTypeWarning && (newest == nil || newest.LastTimestamp.Before(&ev.LastTimestamp)) {
			newest = ev
		}
	}
	if newest == nil {
		return ""
	}
	return join(newest.Reason, newest.Message)
}

// runnerID is the GitHub runner id: recorded on the pod at registration, or on
// the StatefulSet (and the pod's template) from the JIT config.
func runnerID(sts *appsv1.StatefulSet, pod *corev1.Pod) int64 {
	ms := []map[string]string{sts.Annotations}
	if pod != nil {
		ms = append([]map[string]string{pod.Annotations}, ms...)
	}
	for _, m := range ms {
		for _, k := range []string{runnerpod.AnnotationRunnerID, runnerpod.AnnotationJITRunnerID} {
			if id, err := strconv.ParseInt(m[k], 10, 64); err == nil && id > 0 {
				return id
			}
		}
	}
	return 0
}

func created(sts *appsv1.StatefulSet) time.Time {
	if t, err := time.Parse(time.RFC3339, sts.Annotations[runnerpod.AnnotationSyncTime]); err == nil {
		return t
	}
	return sts.CreationTimestamp.UTC()
}

func join(reason, message string) string {
	if message == "" {
		return reason
	}
	return reason + ": " + message
}
