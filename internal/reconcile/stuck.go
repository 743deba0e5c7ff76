package reconcile

import (
	"context"
	"fmt"
	"sort"
	"strings"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"

	"github.com/runnerscaler/runnerscaler/internal/runnerpod"
)

// stuckReason says why a runner that is not running is held up, from what the
// sweep already read: the pod's scheduling condition, an init container that
// waits (the docker sidecar's image pull), the runner container's waiting or
// last termination state. A runner with no pod gets its reason from
// the StatefulSet controller's events (one list call, only for such runners).
// "" when nothing is wrong that the status shows (the pod is simply starting).
func (r *Reconciler) stuckReason(ctx context.Context, rn *runner) string {
	pod := rn.pod
	if pod == nil {
		return r.controllerEvent(ctx, rn)
	}
	for _, c := range pod.Status.Conditions {
		if c.Type == corev1.PodScheduled && c.Status == corev1.ConditionFalse && c.Reason != "" {
			return join(c.Reason, c.Message)
		}
	}
	if ic := runnerpod.InitWaiting(pod); ic != nil {
		// An init container (the docker sidecar's image pull, say) holds the
		// runner container back: it reports only PodInitializing.
		return join(ic.State.Waiting.Reason, ic.Name+": "+ic.State.Waiting.Message)
	}
	cs := runnerStatus(pod)
	if cs == nil {
		return ""
	}
	if w := cs.State.Waiting; w != nil && w.Reason != "" && w.Reason != "ContainerCreating" && w.Reason != "PodInitializing" {
		if t := cs.LastTerminationState.Terminated; w.Reason == "CrashLoopBackOff" && t != nil {
			return join(w.Reason, fmt.Sprintf("last exit code %d (%s), %d restarts", t.ExitCode, t.Reason, cs.RestartCount)+said(t))
		}
		return join(w.Reason, w.Message)
	}
	if t := cs.State.Terminated; t != nil && t.ExitCode != 0 {
		return join("Exited", fmt.Sprintf("exit code %d (%s)", t.ExitCode, t.Reason)+said(t))
	}
	return ""
}

// controllerEvent returns the newest warning the StatefulSet controller recorded
// for the runner's StatefulSet (e.g. FailedCreate: a missing service account, a
// PodSecurity or quota rejection).
func (r *Reconciler) controllerEvent(ctx context.Context, rn *runner) string {
	sel := fields.Set{"involvedObject.kind": "StatefulSet", "involvedObject.name": rn.name()}.AsSelector().String()
	list, err := r.kube.CoreV1().Events(rn.sts.Namespace).List(ctx, metav1.ListOptions{FieldSelector: sel})
	if err != nil {
		return "no pod (its events cannot be read: " + err.Error() + ")"
	}
	evs := list.Items
	sort.Slice(evs, func(i, j int) bool { return evs[i].LastTimestamp.Before(&evs[j].LastTimestamp) })
	for i := len(evs) - 1; i >= 0; i-- {
		if evs[i].Type == corev1.EventTypeWarning {
			return join(evs[i].Reason, evs[i].Message)
		}
	}
	return "no pod yet"
}

// said is what the container said of its end (its termination message, e.g.
// the entrypoint's "runner refused by GitHub: …"), "" when nothing.
func said(t *corev1.ContainerStateTerminated) string {
	if msg := firstLine(strings.TrimSpace(t.Message)); msg != "" {
		return ": " + msg
	}
	return ""
}

func join(reason, message string) string {
	if message == "" {
		return reason
	}
	return reason + ": " + message
}
