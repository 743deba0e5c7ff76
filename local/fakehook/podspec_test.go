package fakehook

import (
	"slices"
	"testing"

	"sigs.k8s.io/yaml"
)

// The template's rules, from k8s/k8s/utils.ts (both releases): what a key
// present does depends on where it is, not on its type.
func TestApplyTemplateFollowsTheHooksRules(t *testing.T) {
	h := &Hook{cfg: Config{Mode: NoVolume, RunnerPod: "r", RunnerImage: "runner:1"}}
	base, err := h.workflowPod(Job{Repository: "acme/app", Container: Container{Image: "reg/x/node:20"},
		Services: []Container{{Image: "redis:7"}}}, "", "")
	if err != nil {
		t.Fatal(err)
	}
	var tmpl map[string]any
	if err := yaml.Unmarshal([]byte(`
metadata:
  labels: {runner-pod: stolen}
spec:
  securityContext: {runAsUser: 5}
  initContainers: []
  containers:
  - name: $job
    command: [sleep]
    resources: {limits: {cpu: "1"}}
    env: [{name: A, value: "1"}]
  - name: $redis
    ports: [{containerPort: 6379}]
  - name: $unknown
    command: [nothing]
`), &tmpl); err != nil {
		t.Fatal(err)
	}
	var warnings []string
	pod, err := applyTemplate(base, tmpl, func(w string) { warnings = append(warnings, w) })
	if err != nil {
		t.Fatal(err)
	}
	if pod.Labels[RunnerPodLabel] != "stolen" || !slices.Contains(warnings, "Label runner-pod is already defined and will be overwritten") {
		t.Errorf("labels %v, warnings %v: a template label overwrites runner-pod, with a warning", pod.Labels, warnings)
	}
	if sc := pod.Spec.SecurityContext; sc == nil || sc.FSGroup != nil || sc.RunAsUser == nil || *sc.RunAsUser != 5 {
		t.Errorf("securityContext %+v: the template's replaces the hook's fsGroup", sc)
	}
	if len(pod.Spec.InitContainers) != 0 {
		t.Errorf("initContainers %v: the template's empty list removes fs-init", pod.Spec.InitContainers)
	}
	job, redis := pod.Spec.Containers[0], pod.Spec.Containers[1]
	if job.Name != "job" || job.Image != "reg/x/node:20" || !slices.Equal(job.Command, []string{"sleep"}) || job.Args == nil ||
		job.Resources.Limits.Cpu().String() != "1" || len(job.Env) != 3 || job.Env[2].Name != "A" {
		t.Errorf("job container %+v: command and resources replaced, env appended, name and image kept", job)
	}
	if redis.Name != "redis" || len(redis.Ports) != 1 || redis.Ports[0].ContainerPort != 6379 || redis.Command != nil {
		t.Errorf("service container %+v: $redis's ports appended", redis)
	}
	if len(pod.Spec.Containers) != 2 {
		t.Errorf("%d containers: a $name matching no container is ignored", len(pod.Spec.Containers))
	}
	if pod.Spec.Volumes[0].EmptyDir == nil || len(pod.Spec.Volumes) != 3 {
		t.Errorf("volumes %v: untouched without the template's volumes", pod.Spec.Volumes)
	}
}

func TestNames(t *testing.T) {
	long := "runner-" + string(slices.Repeat([]byte("x"), 60))
	if got := JobPodName(long); len(got) != 63 || got != long[:54]+"-workflow" {
		t.Errorf("JobPodName %q", got)
	}
	if got := secretName(long, "0123456789abcdef"); got != long[:47]+"-secret-01234567" {
		t.Errorf("secretName %q", got)
	}
	for image, want := range map[string]string{"redis": "redis", "redis:7": "redis", "ghcr.io/acme/db:1.2": "db", "localhost:5000/x/pg": "pg"} {
		if got, err := ContainerName(image); err != nil || got != want {
			t.Errorf("ContainerName(%q) = %q, %v; want %q", image, got, err, want)
		}
	}
	if _, err := ContainerName("reg/"); err == nil {
		t.Error("ContainerName of an image with no name: no error")
	}
}

// A template whose spec.containers is null — what a Go PodSpec with no
// containers marshals to — throws in mergePodSpecWithOptions
// (from.containers.filter), in both releases: prepare_job fails. volumes: null
// replaces the hook's volumes (the `&& value` guard sends it to the else branch).
func TestApplyTemplateNullsAsTheHook(t *testing.T) {
	h := &Hook{cfg: Config{Mode: NoVolume, RunnerPod: "r", RunnerImage: "runner:1"}}
	base, err := h.workflowPod(Job{Repository: "acme/app", Container: Container{Image: "x"}}, "", "")
	if err != nil {
		t.Fatal(err)
	}
	var tmpl map[string]any
	if err := yaml.Unmarshal([]byte(`{"spec":{"containers":null}}`), &tmpl); err != nil {
		t.Fatal(err)
	}
	if _, err := applyTemplate(base, tmpl, func(string) {}); err == nil {
		t.Error("spec.containers: null merged; the hook throws on it")
	}
	if err := yaml.Unmarshal([]byte(`{"spec":{"volumes":null}}`), &tmpl); err != nil {
		t.Fatal(err)
	}
	pod, err := applyTemplate(base, tmpl, func(string) {})
	if err != nil || len(pod.Spec.Volumes) != 0 {
		t.Errorf("volumes: null gave %v, %v; want the hook's volumes replaced by none", pod.Spec.Volumes, err)
	}
}
