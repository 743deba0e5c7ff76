// Package headroom builds a pool's placeholder pods: one StatefulSet per pool
// whose pods do nothing (a pause image) but ask for what a runner pod asks for —
// the requests and limits of its containers and sidecars (the docker sidecar
// included) and, in container mode, of the workflow pod its job makes, as far
// as the pool's hookTemplate sizes it (workflowPlaceholders), on the nodes it may run on (its nodeSelector, affinity,
// tolerations, scheduler, runtime class and host network). They run at a
// PriorityClass below every runner's and never preempt anything, so a new
// runner pod that finds no room preempts one and starts on a node that is
// already up; the StatefulSet controller recreates the placeholder, which
// stays Pending until a cluster autoscaler adds a node for it.
//
// Placeholders carry LabelPool and never runnerpod.LabelPool: whatever selects
// a pool's runners (the reconciler, the inventory, `runnerscaler status`, the
// cleanup of orphans) never sees them, and they never register with GitHub.
package headroom

import (
	"encoding/json"
	"fmt"
	"hash/fnv"
	"strings"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	schedulingv1 "k8s.io/api/scheduling/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	"github.com/runnerscaler/runnerscaler/internal/pool"
	"github.com/runnerscaler/runnerscaler/internal/runnerpod"
)

const (
	// PriorityClassName is the placeholders' PriorityClass (cluster-scoped).
	PriorityClassName = "runnerscaler-headroom"
	// Priority is its value: below a runner pod's, which is 0 when neither its
	// template nor a global default class says otherwise.
	Priority int32 = -10
	// LabelPool names the pool on its placeholder StatefulSet and pods.
	LabelPool = "runnerscaler.dev/headroom"
	// AnnotationHash identifies the placeholder pod template a StatefulSet was
	// built with; another one means the runner's template changed.
	AnnotationHash = "runnerscaler.dev/headroom-hash"
	// User is the placeholders' user and group (the pause image's own).
	User int64 = 65535
)

// Name is the pool's placeholder StatefulSet: <pool>-headroom, its pods
// <pool>-headroom-<ordinal>. A runner's name has a 5-character suffix
// (package runnername), so the two never meet.
func Name(poolName string) string { return poolName + "-headroom" }

// PriorityClass is the placeholders' class: below every runner pod, never
// preempting anything itself, and nobody's default.
func PriorityClass() *schedulingv1.PriorityClass {
	never := corev1.PreemptNever
	return &schedulingv1.PriorityClass{
		ObjectMeta:       metav1.ObjectMeta{Name: PriorityClassName},
		Value:            Priority,
		GlobalDefault:    false,
		PreemptionPolicy: &never,
		Description:      "runnerscaler's headroom placeholders: any runner pod preempts them",
	}
}

// StatefulSet returns the pool's placeholder StatefulSet with replicas pods,
// sized from runner (the runner's pod template, runnerpod.Template), recording
// deployment as its maker. Its pods are created and deleted in parallel, and a
// changed template reaches them only when the StatefulSet is replaced
// (OnDelete): a rolling update would wait for placeholders that may never be
// scheduled.
func StatefulSet(p *pool.Pool, runner corev1.PodTemplateSpec, replicas int, deployment string) *appsv1.StatefulSet {
	labels := map[string]string{LabelPool: p.Name}
	annotations := map[string]string{}
	if deployment != "" {
		annotations[runnerpod.AnnotationDeployment] = deployment
	}
	tmpl := corev1.PodTemplateSpec{
		ObjectMeta: metav1.ObjectMeta{Labels: labels, Annotations: annotations},
		Spec:       podSpec(runner.Spec, p.Headroom.HeadroomImage()),
	}
	tmpl.Spec.Containers = append(tmpl.Spec.Containers, workflowPlaceholders(p, p.Headroom.HeadroomImage())...)
	stsAnnotations := map[string]string{AnnotationHash: hash(tmpl)}
	if deployment != "" {
		stsAnnotations[runnerpod.AnnotationDeployment] = deployment
	}
	return &appsv1.StatefulSet{
		ObjectMeta: metav1.ObjectMeta{Name: Name(p.Name), Namespace: p.Kubernetes.Namespace,
			Labels: map[string]string{LabelPool: p.Name}, Annotations: stsAnnotations},
		Spec: appsv1.StatefulSetSpec{
			Replicas:            ptr.To(int32(replicas)),
			Selector:            &metav1.LabelSelector{MatchLabels: map[string]string{LabelPool: p.Name}},
			Template:            tmpl,
			PodManagementPolicy: appsv1.ParallelPodManagement,
			UpdateStrategy:      appsv1.StatefulSetUpdateStrategy{Type: appsv1.OnDeleteStatefulSetStrategyType},
		},
	}
}

// podSpec is a placeholder pod: a pause container for each of the runner's
// containers and sidecars (restartable init containers), with its resources;
// the runner pod's node selection; no credentials, no privilege, no grace
// period (a preempted placeholder goes at once).
func podSpec(runner corev1.PodSpec, image string) corev1.PodSpec {
	var cs []corev1.Container
	for _, c := range runner.InitContainers {
		if c.RestartPolicy != nil && *c.RestartPolicy == corev1.ContainerRestartPolicyAlways {
			cs = append(cs, placeholder(c, image))
		}
	}
	for _, c := range runner.Containers {
		cs = append(cs, placeholder(c, image))
	}
	var podResources *corev1.ResourceRequirements
	if runner.Resources != nil {
		podResources = &corev1.ResourceRequirements{Requests: runner.Resources.Requests, Limits: runner.Resources.Limits}
	}
	return corev1.PodSpec{
		Containers:                    cs,
		Resources:                     podResources,
		NodeSelector:                  runner.NodeSelector,
		Affinity:                      runner.Affinity,
		Tolerations:                   runner.Tolerations,
		SchedulerName:                 runner.SchedulerName,
		RuntimeClassName:              runner.RuntimeClassName,
		HostNetwork:                   runner.HostNetwork,
		PriorityClassName:             PriorityClassName,
		RestartPolicy:                 corev1.RestartPolicyAlways,
		TerminationGracePeriodSeconds: ptr.To[int64](0),
		AutomountServiceAccountToken:  ptr.To(false),
		EnableServiceLinks:            ptr.To(false),
		SecurityContext: &corev1.PodSecurityContext{
			RunAsNonRoot: ptr.To(true), RunAsUser: ptr.To(User), RunAsGroup: ptr.To(User),
			SeccompProfile: &corev1.SeccompProfile{Type: corev1.SeccompProfileTypeRuntimeDefault},
		},
	}
}

func placeholder(c corev1.Container, image string) corev1.Container {
	return corev1.Container{
		Name:            c.Name,
		Image:           image,
		ImagePullPolicy: corev1.PullIfNotPresent,
		Resources:       corev1.ResourceRequirements{Requests: c.Resources.Requests, Limits: c.Resources.Limits},
		SecurityContext: &corev1.SecurityContext{
			AllowPrivilegeEscalation: ptr.To(false),
			ReadOnlyRootFilesystem:   ptr.To(true),
			Capabilities:             &corev1.Capabilities{Drop: []corev1.Capability{"ALL"}},
		},
	}
}

// workflowPlaceholders (container mode) are a placeholder container for each
// container of the pool's hookTemplate that asks for resources (`$job`, a
// `$<service>`, or one the hooks add to every workflow pod), named
// workflow-<name>: a placeholder then keeps room for the runner and the
// workflow pod of its job, which kubernetes mode runs on the runner's node. A
// pool whose hookTemplate says nothing of their size reserves none.
func workflowPlaceholders(p *pool.Pool, image string) []corev1.Container {
	if !p.Kubernetes.InContainerMode() {
		return nil
	}
	tmpl, err := runnerpod.HookTemplate(p) // checked when the sweeper starts (runnerpod.ValidatePool)
	if err != nil {
		return nil
	}
	var out []corev1.Container
	for _, c := range tmpl.Spec.Containers {
		if len(c.Resources.Requests) == 0 && len(c.Resources.Limits) == 0 {
			continue
		}
		c.Name = "workflow-" + strings.TrimPrefix(c.Name, "$")
		out = append(out, placeholder(c, image))
	}
	return out
}

// hash identifies a placeholder pod template.
func hash(tmpl corev1.PodTemplateSpec) string {
	h := fnv.New64a()
	_ = json.NewEncoder(h).Encode(tmpl)
	return fmt.Sprintf("%016x", h.Sum64())
}

// Current reports whether sts was built from the same placeholder pod template
// as want.
func Current(sts, want *appsv1.StatefulSet) bool {
	return sts.Annotations[AnnotationHash] == want.Annotations[AnnotationHash]
}
