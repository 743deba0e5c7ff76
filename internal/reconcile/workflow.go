package reconcile

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/runnerscaler/runnerscaler/internal/roster"
	"github.com/runnerscaler/runnerscaler/internal/runnername"
	"github.com/runnerscaler/runnerscaler/internal/runnerpod"
)

// Workflow pods (container mode). The container hooks create, in the pool's
// hook namespace, a workflow pod per job and Secrets for it, each labelled
// runnerpod.LabelHookRunnerPod with the name of the runner pod that made it.
// Anyone who may create pods there can write that label, so it only ever
// names a runner; what the sweeper does with such an object depends on what
// the roster and the runner's own pod say:
//
//   - a busy signal (signalWorkflowPod): while a pod labelled with a runner's
//     pod name exists, not older than the runner's current pod, the runner is
//     not stopped, nor its labels withdrawn: the sweep's listing vetoes the
//     stop (confirmIdle), and a read of the hook namespace right before the
//     runner pod's delete (checkNow) too. This only ever holds a runner: a forged pod keeps an idle
//     runner until the pod is deleted, no longer than its creator could by
//     running a job;
//   - a leftover (finishWorkflowObjects): a pod or Secret labelled with the pod
//     name of a runner of the pool's roster whose pod it cannot belong to —
//     the runner was retired, or its pod was made again after it (the runner
//     pod was killed or deleted mid-job: the hooks' cleanup never ran, and the
//     workflow pod would run `tail -f /dev/null` for ever, holding its job's
//     Secrets) — is deleted once it has been one for Options.WorkflowPodGrace.
//     Its job, whose runner died, is the re-run stage's (rerun.go).
//     A label naming no runner of the pool's roster, live or retired, makes
//     nothing happen. A pod or Secret that is a runner's own (our finalizer,
//     a StatefulSet controller, the pool's runner labels) is never deleted
//     here, whatever its labels.
//
// The hooks' step Jobs (kubernetes mode) are not removed: their pods run the
// step to its end and the Job's TTL (300 s) removes them.

// signalWorkflowPod names the workflow-pod busy signal in the metrics.
const signalWorkflowPod = "WorkflowPod"

// DefaultWorkflowPodGrace is the default Options.WorkflowPodGrace.
const DefaultWorkflowPodGrace = 30 * time.Second

// hookObjects is what the sweep listed in the pool's hook namespace: the pods
// and Secrets that carry the hooks' label (err: the listing failed).
type hookObjects struct {
	pods    []corev1.Pod
	secrets []corev1.Secret
	err     error
}

// listHookObjects lists the hook namespace's labelled pods and Secrets, for
// a pool in container mode.
func (r *Reconciler) listHookObjects(ctx context.Context, s *sweep) {
	ns := s.p.Kubernetes.HookNamespace()
	if ns == "" {
		return
	}
	opts := metav1.ListOptions{LabelSelector: runnerpod.LabelHookRunnerPod}
	pods, err := r.kube.CoreV1().Pods(ns).List(ctx, opts)
	if err != nil {
		s.hook.err = fmt.Errorf("listing workflow pods in %s: %w", ns, err)
		return
	}
	secrets, err := r.kube.CoreV1().Secrets(ns).List(ctx, opts)
	if err != nil {
		s.hook.err = fmt.Errorf("listing the hooks' secrets in %s: %w", ns, err)
		return
	}
	s.hook.pods, s.hook.secrets = pods.Items, secrets.Items
}

// current: obj, labelled with a runner's pod name, may be the work of the
// runner's current pod (created no earlier than it, to the second the API
// server records; or the runner has no pod now, and nothing says otherwise).
func current(obj metav1.ObjectMeta, runnerPod *corev1.Pod) bool {
	return runnerPod == nil || !obj.CreationTimestamp.Before(&runnerPod.CreationTimestamp)
}

// workflowPods are the pods of the hook namespace that name rn's pod and may
// be its current pod's work.
func (s *sweep) workflowPods(rn *runner) []corev1.Pod {
	var out []corev1.Pod
	for _, pod := range s.hook.pods {
		if pod.Labels[runnerpod.LabelHookRunnerPod] == runnerpod.PodName(rn.name()) && current(pod.ObjectMeta, rn.pod) && !runnersOwn(pod.ObjectMeta) {
			out = append(out, pod)
		}
	}
	return out
}

// workflowBusy (confirmIdle): the sweep's listing shows a workflow pod of the
// runner, or could not be read (then the stop waits).
func (s *stop) workflowBusy(ctx context.Context) (next, bool, error) {
	if s.p.Kubernetes.HookNamespace() == "" {
		return next{}, false, nil
	}
	if s.sw.hook.err != nil {
		s.log.Warn("cannot list the workflow pods; retrying next sweep", "error", s.sw.hook.err)
		return waitFor("the workflow pods' list"), true, nil
	}
	if pods := s.sw.workflowPods(s.rn); len(pods) > 0 {
		c := s.gh.cached(s.rn.runnerID())
		n, err := s.veto(ctx, signalWorkflowPod, c.found && !c.Busy, "its workflow pod exists", "workflowPod", pods[0].Name)
		return n, true, err
	}
	return next{}, false, nil
}

// workflowPodNow (checkNow): a workflow pod of the runner exists, read now.
func (s *stop) workflowPodNow(ctx context.Context) (next, bool, error) {
	ns := s.p.Kubernetes.HookNamespace()
	if ns == "" {
		return next{}, false, nil
	}
	sel := runnerpod.LabelHookRunnerPod + "=" + runnerpod.PodName(s.rn.name())
	pods, err := s.r.kube.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{LabelSelector: sel})
	if err != nil {
		s.log.Warn("cannot list the runner's workflow pods again; retrying next sweep", "error", err)
		return waitFor("the workflow pods, read again"), true, nil
	}
	for _, pod := range pods.Items {
		if current(pod.ObjectMeta, s.rn.pod) && !runnersOwn(pod.ObjectMeta) {
			n, err := s.veto(ctx, signalWorkflowPod, true, "its workflow pod exists", "workflowPod", pod.Name)
			return n, true, err
		}
	}
	return next{}, false, nil
}

// runnersOwn: obj shows a sign of being a runner's own object (our finalizer,
// a StatefulSet controller, the pool's runner label), which the hooks never
// put on theirs. Such an object is neither a workflow pod nor a leftover.
func runnersOwn(obj metav1.ObjectMeta) bool {
	if slices.Contains(obj.Finalizers, runnerpod.Finalizer) || obj.Labels[runnerpod.LabelRunner] != "" || obj.Labels[runnerpod.LabelPool] != "" {
		return true
	}
	ref := metav1.GetControllerOfNoCopy(&obj)
	return ref != nil && ref.Kind == "StatefulSet"
}

// finishWorkflowObjects deletes the hook namespace's leftovers of the pool's
// runners (see the top of this file).
func (r *Reconciler) finishWorkflowObjects(ctx context.Context, s *sweep) error {
	if s.p.Kubernetes.HookNamespace() == "" {
		return nil
	}
	if s.hook.err != nil {
		return s.hook.err
	}
	lookup := r.runnerLookup(ctx, s)
	var errs []error
	for i := range s.hook.pods {
		pod := &s.hook.pods[i]
		since, leftover, err := lookup(pod.ObjectMeta)
		if err != nil || !leftover || s.now.Sub(since) < r.opts.WorkflowPodGrace || pod.DeletionTimestamp != nil {
			errs = append(errs, err)
			continue
		}
		err = r.kube.CoreV1().Pods(pod.Namespace).Delete(ctx, pod.Name, metav1.DeleteOptions{
			GracePeriodSeconds: new(int64), Preconditions: &metav1.Preconditions{UID: &pod.UID}})
		if err != nil && !apierrors.IsNotFound(err) {
			errs = append(errs, fmt.Errorf("deleting leftover workflow pod %s/%s: %w", pod.Namespace, pod.Name, err))
			continue
		}
		s.stats.workflowPodsRemoved++
		s.log.Warn("workflow pod deleted: its runner's pod is gone, so the job it ran cannot go on (the hooks' cleanup never ran)",
			"workflowPod", pod.Name, "runnerPod", pod.Labels[runnerpod.LabelHookRunnerPod], "leftoverSince", since)
	}
	for i := range s.hook.secrets {
		sec := &s.hook.secrets[i]
		since, leftover, err := lookup(sec.ObjectMeta)
		if err != nil || !leftover || s.now.Sub(since) < r.opts.WorkflowPodGrace {
			errs = append(errs, err)
			continue
		}
		err = r.kube.CoreV1().Secrets(sec.Namespace).Delete(ctx, sec.Name, metav1.DeleteOptions{Preconditions: &metav1.Preconditions{UID: &sec.UID}})
		if err != nil && !apierrors.IsNotFound(err) {
			errs = append(errs, fmt.Errorf("deleting the hooks' leftover secret %s/%s: %w", sec.Namespace, sec.Name, err))
			continue
		}
		s.log.Info("the hooks' secret deleted: its runner's pod is gone", "secret", sec.Name, "runnerPod", sec.Labels[runnerpod.LabelHookRunnerPod])
	}
	return errors.Join(errs...)
}

// runnerLookup decides, for an object labelled with a runner pod's name,
// whether it is a leftover of a runner of the pool's roster and since when.
// A name the sweep's live runners do not hold is looked up on the roster (once
// a sweep each).
func (r *Reconciler) runnerLookup(ctx context.Context, s *sweep) func(metav1.ObjectMeta) (time.Time, bool, error) {
	byPod := map[string]*runner{}
	for _, rn := range append(slices.Clone(s.runners), s.orphans...) {
		if rn.pod != nil || byPod[runnerpod.PodName(rn.name())] == nil {
			byPod[runnerpod.PodName(rn.name())] = rn
		}
	}
	retired := map[string]*roster.Runner{}
	return func(obj metav1.ObjectMeta) (time.Time, bool, error) {
		podName := obj.Labels[runnerpod.LabelHookRunnerPod]
		if runnersOwn(obj) || !strings.HasSuffix(podName, runnername.Pod("")) {
			return time.Time{}, false, nil
		}
		if rn, ok := byPod[podName]; ok {
			if rn.pod == nil || current(obj, rn.pod) {
				return time.Time{}, false, nil // the runner's, or its pod is being made again
			}
			return rn.pod.CreationTimestamp.Time, true, nil
		}
		name := podName // the roster's name of a runner: its pod's, GitHub's
		if _, live := s.roster[name]; live {
			return time.Time{}, false, nil // nothing of it listed: retireEmpty retires it first
		}
		e, seen := retired[name]
		if !seen {
			found, ok, err := r.opts.Roster.Lookup(ctx, s.p.Name, name)
			if err != nil {
				return time.Time{}, false, err
			}
			if ok && !found.Retired.IsZero() {
				e = &found
			}
			retired[name] = e
		}
		if e == nil {
			return time.Time{}, false, nil // no runner of this pool's: not ours to touch
		}
		return e.Retired, true, nil
	}
}
