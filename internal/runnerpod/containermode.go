package runnerpod

import (
	"bytes"
	"encoding/json"
	"fmt"
	"maps"
	"path"
	"slices"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	"github.com/runnerscaler/runnerscaler/internal/pool"
)

// Container mode (kubernetes.containerMode). The runner runs a job's containers
// through actions/runner-container-hooks, which runner/Dockerfile installs where
// actions/runner's own image has them: the hooks create one workflow pod per
// job (named `<runner pod>-workflow`, labelled LabelHookRunnerPod with the runner
// pod's name) in the hook namespace (pool.Kubernetes.HookNamespace) and run each
// step in it through pods/exec. The runner container gets:
//   - the hooks' environment (hookEnv): which hook runs, the runner pod's name,
//     the hook namespace, whether a job must have a container, and the hook
//     template;
//   - the hook template (WorkflowTemplate: the pool's hookTemplate, plus the
//     pool's workflow label and the do-not-disrupt annotations) as a file, from
//     the pod's AnnotationHookTemplate through a downwardAPI volume: no object
//     besides the runner's own;
//   - in kubernetes mode, the work volume: a generic ephemeral volume named
//     WorkVolume from the pool's workVolumeClaim, mounted at the runner's work
//     directory. Kubernetes names its claim `<pod>-work`, the hooks' default
//     claim name, and makes the runner pod its owner, so the claim goes with
//     the pod.
//
// The runner's service account (kubernetes.serviceAccountName, required in
// container mode) is what the hooks act as; its token is mounted. Its Role is
// package hookrbac's.

// Hook paths in runner/Dockerfile's image (as in actions/runner's image): the
// hooks' release that each mode runs.
const (
	HookKubernetes = "/home/runner/k8s/index.js"
	HookNoVolume   = "/home/runner/k8s-novolume/index.js"
)

// Where the hook template reaches the runner container.
const (
	// AnnotationHookTemplate, on a container-mode runner pod, holds its
	// workflow pods' template (JSON).
	AnnotationHookTemplate = "runnerscaler.dev/hook-template"
	hookTemplateVolume     = "runnerscaler-hook-template"
	hookTemplateDir        = "/etc/runnerscaler/hooks"
	// HookTemplateFile is ACTIONS_RUNNER_CONTAINER_HOOK_TEMPLATE.
	HookTemplateFile = hookTemplateDir + "/template.yaml"
)

// Labels of the objects the hooks create.
const (
	// LabelHookRunnerPod is the hooks' one label on every pod, Job and Secret
	// they create: the name of the runner pod that created it.
	LabelHookRunnerPod = "runner-pod"
	// LabelWorkflowPool, on a workflow pod (from the hook template), names its
	// runner's pool: the pool's workflow disruption budget selects by it. Like
	// any label it says nothing of whose the pod is (package reconcile ties
	// workflow pods to runners).
	LabelWorkflowPool = "runnerscaler.dev/workflow-pool"
)

// workDir is the runner's work directory in runner/Dockerfile's image.
const workDir = "/home/runner/_work"

// hookEnvNames are the hooks' variables that the runnerscaler sets in container
// mode; a template may set none of them (ownedEnv).
var hookEnvNames = []string{"ACTIONS_RUNNER_CONTAINER_HOOKS", "ACTIONS_RUNNER_POD_NAME", "ACTIONS_RUNNER_KUBERNETES_NAMESPACE",
	"ACTIONS_RUNNER_REQUIRE_JOB_CONTAINER", "ACTIONS_RUNNER_IMAGE", "ACTIONS_RUNNER_CONTAINER_HOOK_TEMPLATE", "ACTIONS_RUNNER_CLAIM_NAME"}

// WorkVolumeClaim decodes the pool's workVolumeClaim strictly (an unknown
// field is an error naming it).
func WorkVolumeClaim(p *pool.Pool) (corev1.PersistentVolumeClaimSpec, error) {
	var spec corev1.PersistentVolumeClaimSpec
	if p.Kubernetes.WorkVolumeClaim.Kind == 0 {
		return spec, fmt.Errorf("pool %s: kubernetes.workVolumeClaim: required in containerMode %s", p.Name, pool.ContainerModeKubernetes)
	}
	raw, err := nodeJSON(&p.Kubernetes.WorkVolumeClaim)
	if err != nil {
		return spec, fmt.Errorf("pool %s: kubernetes.workVolumeClaim: %w", p.Name, err)
	}
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&spec); err != nil {
		return spec, fmt.Errorf("pool %s: kubernetes.workVolumeClaim: %w", p.Name, err)
	}
	if len(spec.AccessModes) == 0 {
		spec.AccessModes = []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce}
	}
	if _, ok := spec.Resources.Requests[corev1.ResourceStorage]; !ok {
		return spec, fmt.Errorf("pool %s: kubernetes.workVolumeClaim.resources.requests.storage: required (the work volume's size)", p.Name)
	}
	return spec, nil
}

// HookTemplate decodes the pool's hookTemplate strictly, as the pool wrote it
// (empty when it has none).
func HookTemplate(p *pool.Pool) (corev1.PodTemplateSpec, error) {
	var tmpl corev1.PodTemplateSpec
	if p.Kubernetes.HookTemplate.Kind == 0 {
		return tmpl, nil
	}
	if err := decodeStrict(&p.Kubernetes.HookTemplate, &tmpl); err != nil {
		return tmpl, fmt.Errorf("pool %s: kubernetes.hookTemplate: %w", p.Name, err)
	}
	if err := ownedWorkflowMetadata(tmpl); err != nil {
		return tmpl, fmt.Errorf("pool %s: kubernetes.hookTemplate: %w", p.Name, err)
	}
	return tmpl, nil
}

// ownedWorkflowMetadata refuses, in a hookTemplate, the keys the runnerscaler
// sets on workflow pods (WorkflowTemplate) or keeps for its own objects.
func ownedWorkflowMetadata(tmpl corev1.PodTemplateSpec) error {
	for _, m := range []struct {
		field string
		keys  map[string]string
	}{{"metadata.labels", tmpl.Labels}, {"metadata.annotations", tmpl.Annotations}} {
		for _, k := range slices.Sorted(maps.Keys(m.keys)) {
			if reservedKey(k) || slices.Contains(disruptionAnnotations, k) {
				return fmt.Errorf("%s[%q]: the runnerscaler's: it sets %s and the do-not-disrupt annotations on every workflow pod "+
					"(the workflow pods' disruption budget selects by it; a workflow pod runs only while its job does)", m.field, k, LabelWorkflowPool)
			}
		}
	}
	return nil
}

// WorkflowTemplate is the template the hooks extend the pool's workflow pods
// with: the pool's hookTemplate, plus LabelWorkflowPool and the do-not-disrupt
// annotations (a workflow pod exists only while its job runs), and no service
// account token unless the template asks for one (every step of a container
// job runs in the workflow pod).
func WorkflowTemplate(p *pool.Pool) (corev1.PodTemplateSpec, error) {
	tmpl, err := HookTemplate(p)
	if err != nil {
		return tmpl, err
	}
	tmpl.Labels = merge(tmpl.Labels, map[string]string{LabelWorkflowPool: p.Name})
	tmpl.Annotations = merge(tmpl.Annotations, map[string]string{AnnotationDoNotDisrupt: "true", AnnotationSafeToEvict: "false"})
	if tmpl.Spec.AutomountServiceAccountToken == nil && tmpl.Spec.ServiceAccountName == "" {
		tmpl.Spec.AutomountServiceAccountToken = ptr.To(false)
	}
	return tmpl, nil
}

// hookTemplateJSON is the hook template's file: its metadata and spec, the
// only keys the hooks read, without the null values the API types marshal
// for fields left unset. The hooks take a key that is present as given — a
// null `containers` throws in their merge, a null `volumes` would replace
// their own — so only what the template sets is written.
func hookTemplateJSON(tmpl corev1.PodTemplateSpec) (string, error) {
	raw, err := json.Marshal(map[string]any{"metadata": tmpl.ObjectMeta, "spec": tmpl.Spec})
	if err != nil {
		return "", err
	}
	var doc any
	if err := json.Unmarshal(raw, &doc); err != nil {
		return "", err
	}
	raw, err = json.Marshal(withoutNulls(doc))
	return string(raw), err
}

// withoutNulls drops, from a decoded JSON document, every object key whose
// value is null, at any depth.
func withoutNulls(v any) any {
	switch v := v.(type) {
	case map[string]any:
		for k, e := range v {
			if e == nil {
				delete(v, k)
				continue
			}
			v[k] = withoutNulls(e)
		}
	case []any:
		for i, e := range v {
			v[i] = withoutNulls(e)
		}
	}
	return v
}

// addContainerMode gives the runner container of a container-mode pool what
// the hooks need (see the comment at the top of this file).
func addContainerMode(p *pool.Pool, tmpl *corev1.PodTemplateSpec) error {
	k := p.Kubernetes
	if !k.InContainerMode() {
		return nil
	}
	workflow, err := WorkflowTemplate(p)
	if err != nil {
		return err
	}
	content, err := hookTemplateJSON(workflow)
	if err != nil {
		return fmt.Errorf("pool %s: kubernetes.hookTemplate: %w", p.Name, err)
	}
	tmpl.Annotations = merge(tmpl.Annotations, map[string]string{AnnotationHookTemplate: content})
	spec := &tmpl.Spec
	i := runnerIndex(spec.Containers)
	c := &spec.Containers[i]
	c.Env = append(hookEnv(p, c.Image), c.Env...)
	spec.Volumes = append(spec.Volumes, corev1.Volume{Name: hookTemplateVolume, VolumeSource: corev1.VolumeSource{
		DownwardAPI: &corev1.DownwardAPIVolumeSource{Items: []corev1.DownwardAPIVolumeFile{{
			Path:     path.Base(HookTemplateFile),
			FieldRef: &corev1.ObjectFieldSelector{FieldPath: fmt.Sprintf("metadata.annotations['%s']", AnnotationHookTemplate)},
		}}},
	}})
	c.VolumeMounts = append(c.VolumeMounts, corev1.VolumeMount{Name: hookTemplateVolume, MountPath: hookTemplateDir, ReadOnly: true})
	if k.ContainerMode != pool.ContainerModeKubernetes {
		return nil
	}
	return addWorkVolume(p, spec, i)
}

// addWorkVolume adds kubernetes mode's work volume to the runner container.
func addWorkVolume(p *pool.Pool, spec *corev1.PodSpec, runner int) error {
	claim, err := WorkVolumeClaim(p)
	if err != nil {
		return err
	}
	if slices.ContainsFunc(spec.Volumes, func(v corev1.Volume) bool { return v.Name == WorkVolume }) {
		return fmt.Errorf("pool %s: kubernetes.template: a volume named %q: in containerMode %s the work volume is the runnerscaler's, "+
			"from kubernetes.workVolumeClaim", p.Name, WorkVolume, pool.ContainerModeKubernetes)
	}
	c := &spec.Containers[runner]
	if j := slices.IndexFunc(c.VolumeMounts, func(m corev1.VolumeMount) bool { return path.Clean(m.MountPath) == workDir }); j >= 0 {
		return fmt.Errorf("pool %s: kubernetes.template: spec.containers[%d].volumeMounts[%d]: %s is the work volume's, "+
			"shared with the workflow pods in containerMode %s", p.Name, runner, j, workDir, pool.ContainerModeKubernetes)
	}
	spec.Volumes = append(spec.Volumes, corev1.Volume{Name: WorkVolume, VolumeSource: corev1.VolumeSource{
		Ephemeral: &corev1.EphemeralVolumeSource{VolumeClaimTemplate: &corev1.PersistentVolumeClaimTemplate{
			ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{LabelPool: p.Name}},
			Spec:       claim,
		}},
	}})
	c.VolumeMounts = append(c.VolumeMounts, corev1.VolumeMount{Name: WorkVolume, MountPath: workDir})
	return nil
}

// hookEnv is the hooks' environment for a runner of p whose container runs
// image.
func hookEnv(p *pool.Pool, image string) []corev1.EnvVar {
	k := p.Kubernetes
	hook := HookKubernetes
	if k.ContainerMode == pool.ContainerModeNoVolume {
		hook = HookNoVolume
	}
	env := []corev1.EnvVar{
		{Name: "ACTIONS_RUNNER_CONTAINER_HOOKS", Value: hook},
		{Name: "ACTIONS_RUNNER_POD_NAME", ValueFrom: &corev1.EnvVarSource{FieldRef: &corev1.ObjectFieldSelector{FieldPath: "metadata.name"}}},
		{Name: "ACTIONS_RUNNER_KUBERNETES_NAMESPACE", Value: k.HookNamespace()},
		{Name: "ACTIONS_RUNNER_REQUIRE_JOB_CONTAINER", Value: fmt.Sprint(k.JobContainerRequired())},
		{Name: "ACTIONS_RUNNER_CONTAINER_HOOK_TEMPLATE", Value: HookTemplateFile},
	}
	if k.ContainerMode == pool.ContainerModeNoVolume {
		// The workflow pod's init container copies the runner's externals
		// from this image.
		env = append(env, corev1.EnvVar{Name: "ACTIONS_RUNNER_IMAGE", Value: image})
	}
	return env
}

// WorkflowPodName is the name the hooks give the workflow pod of the runner pod
// named runnerPod: its first 54 characters and "-workflow".
func WorkflowPodName(runnerPod string) string {
	const keep = 63 - len("-workflow")
	if len(runnerPod) > keep {
		runnerPod = runnerPod[:keep]
	}
	return runnerPod + "-workflow"
}
