package runnerpod

import (
	"fmt"
	"maps"
	"path"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"
)

// What a pool's template may not set, because the runnerscaler sets it or relies
// on it: checked on the template as the pool wrote it (see ownedByUs), before
// anything is added to it.

// reservedDomains are the key prefixes of the runnerscaler's labels, annotations
// and finalizer: the graceful stop is driven by annotations (an
// unregistration-complete timestamp set by a template would end every stop at
// once), and the sweeper finds a runner's objects by their labels.
var reservedDomains = []string{"actions-runner", "runnerscaler.dev"}

// The disruption annotations the sweeper sets on a runner pod while its runner
// runs a job, and removes when it is idle: "do not pick this node to empty" for
// Karpenter and for the cluster-autoscaler. A template may not set them: on an
// idle runner they would keep its node from being drained or consolidated.
const (
	AnnotationDoNotDisrupt = "karpenter.sh/do-not-disrupt"
	AnnotationSafeToEvict  = "cluster-autoscaler.kubernetes.io/safe-to-evict"
)

// disruptionAnnotations are the sweeper's while a job runs, and only then.
var disruptionAnnotations = []string{AnnotationDoNotDisrupt, AnnotationSafeToEvict}

// ownedEnv is the runner container's environment that the runnerscaler sets, or
// that the runner image's entrypoint reads to keep the credentials from the jobs
// and to stop without cutting a job short (runner/entrypoint.sh), each with why.
// A template's value would come after the runnerscaler's and win.
var ownedEnv = map[string]string{
	"RUNNER_TOKEN":          "the runner's credentials",
	"RUNNER_TOKEN_FILE":     "the runner's credentials",
	"RUNNER_NAME":           "set from the runner's pod name, which the sweeper looks the runner up by",
	"GITHUB_URL":            "set from the deployment",
	"RUNNER_LABELS":         "set from the pool's labels",
	"RUNNER_GROUP":          "set from the pool's group",
	"RUNNER_EPHEMERAL":      "set from the pool's ephemeral",
	"RUNNER_ENTERPRISE":     "set from the pool's scope",
	"RUNNER_ORG":            "set from the pool's scope",
	"RUNNER_REPO":           "set from the pool's scope",
	"RUNNER_STATE_DIR":      "the runner's state directory, on the runnerscaler's volume",
	"RUNNER_JOB_DIR":        "the job report's directory, which the readiness probe and the graceful stop read",
	"RUNNER_HOOKS_DIR":      "the job report's hooks, which the readiness probe and the graceful stop rely on (set it in the image)",
	"RUNNER_WORKER_PATTERN": "how the readiness probe and the graceful stop see a running job (set it in the image)",
	"RUNNER_SETPRIV":        "the command that keeps the credentials from the jobs (set it in the image)",
}

// ownedEnvPrefix: actions/runner reads its inputs, the JIT config among them,
// from ACTIONS_RUNNER_INPUT_*.
const ownedEnvPrefix = "ACTIONS_RUNNER_INPUT_"

// OwnedEnv reports whether name is a runner container variable the
// runnerscaler sets (or its image's entrypoint reads), which a pool's template
// may not set.
func OwnedEnv(name string) bool {
	_, owned := ownedEnv[name]
	return owned || strings.HasPrefix(name, ownedEnvPrefix) || slices.Contains(hookEnvNames, name)
}

// ownedByUs finds, in the template as the pool wrote it, what only the
// runnerscaler may set, and names the field by its path in the template.
func ownedByUs(tmpl corev1.PodTemplateSpec) error {
	checks := []func(corev1.PodTemplateSpec) error{ownedMetadata, ownedVolumes, ownedRunnerEnv, ownedPaths}
	for _, check := range checks {
		if err := check(tmpl); err != nil {
			return err
		}
	}
	return nil
}

func reservedKey(key string) bool {
	domain, _, ok := strings.Cut(key, "/")
	return ok && slices.ContainsFunc(reservedDomains, func(d string) bool { return domain == d || strings.HasSuffix(domain, "."+d) })
}

func ownedMetadata(tmpl corev1.PodTemplateSpec) error {
	for _, m := range []struct {
		field string
		keys  map[string]string
		why   string
	}{
		{"metadata.annotations", tmpl.Annotations, "drive the runner's graceful stop and record who made it"},
		{"metadata.labels", tmpl.Labels, "select the runner's objects"},
	} {
		for _, k := range slices.Sorted(maps.Keys(m.keys)) {
			if reservedKey(k) {
				return fmt.Errorf("%s[%q]: the %s/ keys are the runnerscaler's: they %s", m.field, k, strings.Join(reservedDomains, "/ and "), m.why)
			}
		}
	}
	for _, k := range disruptionAnnotations {
		if _, ok := tmpl.Annotations[k]; ok {
			return fmt.Errorf("metadata.annotations[%q]: the runnerscaler sets it on a runner's pod while its runner runs a job, "+
				"and removes it when the runner is idle; set in the template it would keep idle runners' nodes from being drained or consolidated", k)
		}
	}
	for i, f := range tmpl.Finalizers {
		if reservedKey(f) {
			return fmt.Errorf("metadata.finalizers[%d]: %q: the runnerscaler's finalizers are its own", i, f)
		}
	}
	return nil
}

func ownedVolumes(tmpl corev1.PodTemplateSpec) error {
	spec := tmpl.Spec
	for i, v := range spec.Volumes {
		if v.Name == StateVolume {
			return fmt.Errorf("spec.volumes[%d].name: %q is the runner's state volume, added by the runnerscaler", i, v.Name)
		}
		if v.Name == TokenVolume {
			return fmt.Errorf("spec.volumes[%d].name: %q is the runner's registration token, mounted by the runnerscaler", i, v.Name)
		}
	}
	for _, list := range []struct {
		field      string
		containers []corev1.Container
	}{{"spec.containers", spec.Containers}, {"spec.initContainers", spec.InitContainers}} {
		for i, c := range list.containers {
			for j, m := range c.VolumeMounts {
				if m.Name == StateVolume || m.Name == TokenVolume {
					return fmt.Errorf("%s[%d].volumeMounts[%d].name: %q: the runner's state volume and registration token are the runner container's alone", list.field, i, j, m.Name)
				}
			}
		}
	}
	return nil
}

func ownedRunnerEnv(tmpl corev1.PodTemplateSpec) error {
	i := runnerIndex(tmpl.Spec.Containers)
	if i < 0 {
		return nil
	}
	for j, e := range tmpl.Spec.Containers[i].Env {
		why, owned := ownedEnv[e.Name]
		if strings.HasPrefix(e.Name, ownedEnvPrefix) {
			why, owned = "the runner's credentials", true
		}
		if slices.Contains(hookEnvNames, e.Name) {
			why, owned = "the container hooks' setting, from kubernetes.containerMode and the pool's fields "+
				"(the sweeper finds and cleans up workflow pods where and as it sets them)", true
		}
		if owned {
			return fmt.Errorf("spec.containers[%d].env[%d].name: %q is the runnerscaler's to set: %s", i, j, e.Name, why)
		}
	}
	return nil
}

// ownedPaths: nothing of the template is mounted at or inside the runner
// container's state and job directories, which the entrypoint keeps root's and
// the runner user's alone.
func ownedPaths(tmpl corev1.PodTemplateSpec) error {
	i := runnerIndex(tmpl.Spec.Containers)
	if i < 0 {
		return nil
	}
	for j, m := range tmpl.Spec.Containers[i].VolumeMounts {
		for _, dir := range []string{StateDir, JobDir} {
			if p := path.Clean(m.MountPath); p == dir || strings.HasPrefix(p, dir+"/") {
				return fmt.Errorf("spec.containers[%d].volumeMounts[%d].mountPath: %q is inside %s, the runnerscaler's", i, j, m.MountPath, dir)
			}
		}
	}
	return nil
}

// ownedClaims: no volume claim template takes the state volume's or the
// token's name, or another claim's: each claim becomes a volume of that name
// in the pod, and the API server refuses two volumes of one name.
func ownedClaims(claims []corev1.PersistentVolumeClaim) error {
	seen := map[string]bool{}
	for i, c := range claims {
		switch {
		case c.Name == StateVolume || c.Name == TokenVolume:
			return fmt.Errorf("kubernetes.volumeClaimTemplates[%d].metadata.name: %q is the runner's state volume or registration token, added by the runnerscaler", i, c.Name)
		case seen[c.Name]:
			return fmt.Errorf("kubernetes.volumeClaimTemplates[%d].metadata.name: %q: duplicate volume claim template name", i, c.Name)
		}
		seen[c.Name] = true
	}
	return nil
}
