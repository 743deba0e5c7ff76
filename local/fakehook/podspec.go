package fakehook

import (
	"encoding/json"
	"fmt"
	"os"
	"path"
	"strings"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/yaml"
)

// Names and labels (H@0.7.0 and H@0.8.1 `packages/k8s/src/hooks/constants.ts`).
const (
	maxPodNameLength   = 63
	stepSuffixLength   = 8
	JobContainerName   = "job"
	RunnerPodLabel     = "runner-pod"
	extensionPrefix    = "$"
	workVolume         = "work"      // POD_VOLUME_NAME (v0.7.0), WORK_VOLUME (v0.8.1)
	externalsVolume    = "externals" // EXTERNALS_VOLUME_NAME (v0.8.1)
	githubVolume       = "github"    // GITHUB_VOLUME_NAME (v0.8.1)
	defaultRegistryURL = "https://index.docker.io/v1/"
)

// JobPodName is the workflow pod's name: R[0:54] + "-workflow" (getJobPodName).
func JobPodName(runnerPod string) string {
	return truncate(runnerPod, maxPodNameLength-len("-workflow")) + "-workflow"
}

// secretName is R[0:47] + "-secret-" + 8 random characters (getSecretName).
func secretName(runnerPod, random string) string {
	return truncate(runnerPod, maxPodNameLength-len("-secret-")-stepSuffixLength) + "-secret-" + random[:stepSuffixLength]
}

func truncate(s string, n int) string {
	if len(s) > n {
		return s[:n]
	}
	return s
}

// ContainerName is a service container's name: the image's last path element
// without its tag (k8s/k8s/utils.ts generateContainerName); not sanitised, and
// two services of one image collide, as in v0.7.0 and v0.8.1.
func ContainerName(image string) (string, error) {
	last := image[strings.LastIndex(image, "/")+1:]
	name, _, _ := strings.Cut(last, ":")
	if name == "" {
		return "", fmt.Errorf("Image definition '%s' is invalid", image)
	}
	return name, nil
}

// Job is what the runner hands prepare_job of a job: its containers and where
// its workspace is.
type Job struct {
	Container Container
	Services  []Container
	// Repository is owner/name: GITHUB_WORKSPACE is _work/<name>/<name>.
	Repository string
}

// Container is a job or service container (hooklib's JobContainerInfo /
// ServiceContainerInfo, the fields the simulator carries).
type Container struct {
	Image              string
	Username, Password string // registry credentials ("" for none)
}

func (j Job) repoName() string { return path.Base(j.Repository) }

// containerWorkspace is GITHUB_WORKSPACE in the job container: /__w/<name>/<name>.
func (j Job) containerWorkspace() string { return "/__w/" + j.repoName() + "/" + j.repoName() }

// podObject is the pod as the hook builds it, before the template: a JSON
// object, so that the template merges into it with the hook's JavaScript
// semantics (a key present replaces, whatever it is).
type podObject = map[string]any

// containerSpec is createContainerSpec (prepare-job.ts, both releases): the job
// container runs `tail -f /dev/null` (the runner gives it no entry point), a
// service its image's own; env GITHUB_ACTIONS and CI; the mode's mounts.
func (h *Hook) containerSpec(c Container, name string, job bool, j Job) corev1.Container {
	out := corev1.Container{Name: name, Image: c.Image,
		Env: []corev1.EnvVar{{Name: "GITHUB_ACTIONS", Value: "true"}, {Name: "CI", Value: "true"}}}
	if job {
		out.Command, out.Args = []string{"tail"}, []string{"-f", "/dev/null"} // DEFAULT_CONTAINER_ENTRY_POINT(_ARGS)
		out.WorkingDir = j.containerWorkspace()                               // the runner's container working directory
	}
	switch h.cfg.Mode {
	case Kubernetes: // H@0.7.0 k8s/k8s/utils.ts containerVolumes
		out.VolumeMounts = []corev1.VolumeMount{{Name: workVolume, MountPath: "/__w"}}
		if job {
			out.VolumeMounts = append(out.VolumeMounts,
				corev1.VolumeMount{Name: workVolume, MountPath: "/__e", SubPath: "externals"},
				corev1.VolumeMount{Name: workVolume, MountPath: "/github/home", SubPath: "_temp/_github_home"},
				corev1.VolumeMount{Name: workVolume, MountPath: "/github/workflow", SubPath: "_temp/_github_workflow"})
		}
	case NoVolume: // H@0.8.1 k8s/k8s/utils.ts CONTAINER_VOLUMES, for every container
		out.VolumeMounts = []corev1.VolumeMount{{Name: externalsVolume, MountPath: "/__e"},
			{Name: workVolume, MountPath: "/__w"}, {Name: githubVolume, MountPath: "/github"}}
	}
	return out
}

// workflowPod is createPod (H@0.7.0 k8s/k8s/index.ts) or createJobPod (H@0.8.1
// k8s/k8s/index.ts) without the template: containers job then services,
// restartPolicy Never, the one label runner-pod=<R>, and the mode's volumes,
// node pinning and init container.
func (h *Hook) workflowPod(j Job, nodeName, pullSecret string) (*corev1.Pod, error) {
	containers := []corev1.Container{h.containerSpec(j.Container, JobContainerName, true, j)}
	for _, s := range j.Services {
		name, err := ContainerName(s.Image)
		if err != nil {
			return nil, err
		}
		containers = append(containers, h.containerSpec(s, name, false, j))
	}
	pod := &corev1.Pod{
		TypeMeta: metav1.TypeMeta{APIVersion: "v1", Kind: "Pod"},
		ObjectMeta: metav1.ObjectMeta{Name: JobPodName(h.cfg.RunnerPod),
			Labels: map[string]string{RunnerPodLabel: h.cfg.RunnerPod}, Annotations: map[string]string{}},
		Spec: corev1.PodSpec{Containers: containers, RestartPolicy: corev1.RestartPolicyNever},
	}
	switch h.cfg.Mode {
	case Kubernetes:
		if h.cfg.UseKubeScheduler { // getPodAffinity
			pod.Spec.Affinity = &corev1.Affinity{NodeAffinity: &corev1.NodeAffinity{
				RequiredDuringSchedulingIgnoredDuringExecution: &corev1.NodeSelector{NodeSelectorTerms: []corev1.NodeSelectorTerm{{
					MatchExpressions: []corev1.NodeSelectorRequirement{{Key: "kubernetes.io/hostname", Operator: corev1.NodeSelectorOpIn, Values: []string{nodeName}}},
				}}}}}
		} else {
			pod.Spec.NodeName = nodeName
		}
		pod.Spec.Volumes = []corev1.Volume{{Name: workVolume,
			VolumeSource: corev1.VolumeSource{PersistentVolumeClaim: &corev1.PersistentVolumeClaimVolumeSource{ClaimName: h.cfg.ClaimName}}}}
	case NoVolume:
		fsGroup, runner := int64(1001), int64(1001)
		pod.Spec.SecurityContext = &corev1.PodSecurityContext{FSGroup: &fsGroup}
		init := []string{"mkdir -p /mnt/externals", "mkdir -p /mnt/work", "mkdir -p /mnt/github", "mv /home/runner/externals/* /mnt/externals/"}
		init = append(init, "mkdir -p /mnt/work/"+j.repoName()+"/"+j.repoName())
		pod.Spec.InitContainers = []corev1.Container{{Name: "fs-init", Image: h.cfg.RunnerImage,
			Command:         []string{"sh", "-c", strings.Join(init, " && ")},
			SecurityContext: &corev1.SecurityContext{RunAsGroup: &runner, RunAsUser: &runner},
			VolumeMounts: []corev1.VolumeMount{{Name: externalsVolume, MountPath: "/mnt/externals"},
				{Name: workVolume, MountPath: "/mnt/work"}, {Name: githubVolume, MountPath: "/mnt/github"}}}}
		pod.Spec.Volumes = []corev1.Volume{{Name: externalsVolume, VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{}}},
			{Name: githubVolume, VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{}}},
			{Name: workVolume, VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{}}}}
	}
	if pullSecret != "" {
		pod.Spec.ImagePullSecrets = []corev1.LocalObjectReference{{Name: pullSecret}}
	}
	return pod, nil
}

// readTemplate is readExtensionFromFile (k8s/k8s/utils.ts): the file at
// ACTIONS_RUNNER_CONTAINER_HOOK_TEMPLATE as a YAML object (nil when unset); a
// file that cannot be read or is no object fails the command.
func (h *Hook) readTemplate() (map[string]any, error) {
	if h.cfg.TemplatePath == "" {
		return nil, nil
	}
	raw, err := os.ReadFile(h.cfg.TemplatePath)
	if err != nil {
		return nil, err
	}
	var doc map[string]any
	if err := yaml.Unmarshal(raw, &doc); err != nil || doc == nil {
		return nil, fmt.Errorf("Failed to parse %s", h.cfg.TemplatePath)
	}
	return doc, nil
}

// applyTemplate merges the template into the pod as both releases do
// (k8s/k8s/utils.ts mergeObjectMeta, mergePodSpecWithOptions,
// mergeContainerWithOptions; the containers' "$" entries in
// prepare-job.ts createContainerSpec). It works on JSON objects, as the hook's
// JavaScript does, so that "a key present replaces" means the same here.
func applyTemplate(pod *corev1.Pod, tmpl map[string]any, warn func(string)) (*corev1.Pod, error) {
	if tmpl == nil {
		return pod, nil
	}
	raw, err := json.Marshal(pod)
	if err != nil {
		return nil, err
	}
	var obj podObject
	if err := json.Unmarshal(raw, &obj); err != nil {
		return nil, err
	}
	spec := obj["spec"].(map[string]any)
	tspec, _ := tmpl["spec"].(map[string]any)
	// The "$name" containers first: createContainerSpec merges them while building
	// each container, before createPod merges the pod spec.
	if tspec != nil {
		exts, _ := tspec["containers"].([]any)
		for _, c := range spec["containers"].([]any) {
			base := c.(map[string]any)
			for _, e := range exts {
				if from, ok := e.(map[string]any); ok && from["name"] == extensionPrefix+base["name"].(string) {
					mergeContainer(base, from, warn)
					break
				}
			}
		}
	}
	if meta, ok := tmpl["metadata"].(map[string]any); ok {
		m := obj["metadata"].(map[string]any)
		for _, field := range []string{"labels", "annotations"} {
			from, _ := meta[field].(map[string]any)
			base, _ := m[field].(map[string]any)
			if base == nil {
				base = map[string]any{}
				m[field] = base
			}
			for k, v := range from {
				if _, ok := base[k]; ok {
					warn(fmt.Sprintf("%s %s is already defined and will be overwritten", map[string]string{"labels": "Label", "annotations": "Annotation"}[field], k))
				}
				base[k] = v
			}
		}
	}
	for k, v := range tspec {
		switch {
		case k == "containers":
			// from.containers.filter(…): a key that is no list (null) throws.
			list, ok := v.([]any)
			if !ok {
				return nil, fmt.Errorf("TypeError: Cannot read properties of %s (reading 'filter'): the template's spec.containers is not a list", jsType(v))
			}
			for _, c := range list {
				if m, ok := c.(map[string]any); ok {
					if name, _ := m["name"].(string); strings.HasPrefix(name, extensionPrefix) {
						continue
					}
				}
				spec["containers"] = append(spec["containers"].([]any), c)
			}
		case k == "volumes" && truthy(v):
			spec["volumes"] = appendList(spec["volumes"], v)
		default: // volumes: null too, which replaces the hook's volumes
			spec[k] = v
		}
	}
	raw, err = json.Marshal(obj)
	if err != nil {
		return nil, err
	}
	var out corev1.Pod
	if err := json.Unmarshal(raw, &out); err != nil {
		return nil, fmt.Errorf("the template makes no valid pod: %w", err)
	}
	return &out, nil
}

// mergeContainer is mergeContainerWithOptions: name and image are kept (with a
// warning), env, volumeMounts and ports appended, every other key replaces.
func mergeContainer(base, from map[string]any, warn func(string)) {
	for k, v := range from {
		switch k {
		case "name":
			if v != extensionPrefix+base["name"].(string) {
				warn("Skipping name override: name can't be overwritten")
			}
		case "image":
			warn("Skipping image override: image can't be overwritten")
		case "env":
			base[k] = appendList(base[k], v)
		case "volumeMounts", "ports":
			if truthy(v) {
				base[k] = appendList(base[k], v)
			} else { // `key === 'volumeMounts' && value` is false: the else branch replaces
				base[k] = v
			}
		default:
			base[k] = v
		}
	}
}

// appendList is mergeLists: base (or none) with from's entries after it.
func appendList(base, from any) any {
	b, _ := base.([]any)
	f, _ := from.([]any)
	if len(f) == 0 {
		if b == nil {
			return []any{}
		}
		return b
	}
	return append(b, f...)
}

// truthy is JavaScript's truthiness of a JSON value.
func truthy(v any) bool {
	switch x := v.(type) {
	case nil:
		return false
	case bool:
		return x
	case string:
		return x != ""
	case float64:
		return x != 0
	}
	return true
}

// jsType names v as JavaScript's errors do.
func jsType(v any) string {
	if v == nil {
		return "null"
	}
	return fmt.Sprintf("%T", v)
}
