package runnerpod_test

import (
	"encoding/json"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"

	"github.com/runnerscaler/runnerscaler/internal/pool"
	"github.com/runnerscaler/runnerscaler/internal/runnerpod"
)

// containerModePool parses one pool of containerMode mode with extra YAML under
// its kubernetes key (indented by six spaces).
func containerModePool(t *testing.T, mode, extra string) *pool.Pool {
	t.Helper()
	raw := `
pools:
  - name: cm
    organization: acme
    maxReplicas: 2
    kubernetes:
      namespace: runners
      image: runner:1
      serviceAccountName: cm-hooks
      containerMode: ` + mode + "\n" + extra
	cfg, _, problems := pool.ParseAll([]byte(raw))
	if len(problems) > 0 {
		t.Fatalf("pool does not parse: %v", problems)
	}
	return &cfg.Pools[0]
}

func envOf(c corev1.Container) map[string]corev1.EnvVar {
	out := map[string]corev1.EnvVar{}
	for _, e := range c.Env {
		out[e.Name] = e
	}
	return out
}

func runnerContainer(t *testing.T, spec corev1.PodSpec) corev1.Container {
	t.Helper()
	for _, c := range spec.Containers {
		if c.Name == runnerpod.ContainerName {
			return c
		}
	}
	t.Fatal("no runner container")
	return corev1.Container{}
}

// TestContainerModeRunnerGetsTheHooksSetting: each mode's runner container
// gets its hook, its pod's name, the hook namespace, the job-container rule and
// the hook template file, whose content (from the pod's annotation) carries the
// pool's template plus the workflow label, the do-not-disrupt annotations and no
// token; kubernetes mode adds the ephemeral work volume, novolume the image the
// workflow pod copies the runner's externals from.
func TestContainerModeRunnerGetsTheHooksSetting(t *testing.T) {
	t.Parallel()
	claim := "      workVolumeClaim: {storageClassName: gp3, resources: {requests: {storage: 5Gi}}}\n"
	hookTmpl := "      hookTemplate: {metadata: {labels: {team: a}}, spec: {nodeSelector: {pool: jobs}, containers: [{name: $job, resources: {requests: {cpu: '1'}}}]}}\n"
	cases := []struct {
		mode, extra, hook, namespace string
		work                         bool
	}{
		{pool.ContainerModeKubernetes, claim + hookTmpl, runnerpod.HookKubernetes, "runners", true},
		{pool.ContainerModeNoVolume, "      jobsNamespace: runner-jobs\n      requireJobContainer: false\n" + hookTmpl, runnerpod.HookNoVolume, "runner-jobs", false},
	}
	for _, c := range cases {
		t.Run(c.mode, func(t *testing.T) {
			t.Parallel()
			p := containerModePool(t, c.mode, c.extra)
			if err := runnerpod.ValidatePool(p); err != nil {
				t.Fatalf("ValidatePool: %v", err)
			}
			tmpl, err := runnerpod.FinalPod(p)
			if err != nil {
				t.Fatal(err)
			}
			rc := runnerContainer(t, tmpl.Spec)
			env := envOf(rc)
			want := map[string]string{
				"ACTIONS_RUNNER_CONTAINER_HOOKS":         c.hook,
				"ACTIONS_RUNNER_KUBERNETES_NAMESPACE":    c.namespace,
				"ACTIONS_RUNNER_CONTAINER_HOOK_TEMPLATE": runnerpod.HookTemplateFile,
				"ACTIONS_RUNNER_REQUIRE_JOB_CONTAINER":   map[bool]string{true: "true", false: "false"}[c.work],
			}
			for k, v := range want {
				if env[k].Value != v {
					t.Errorf("%s = %q, want %q", k, env[k].Value, v)
				}
			}
			if f := env["ACTIONS_RUNNER_POD_NAME"].ValueFrom; f == nil || f.FieldRef == nil || f.FieldRef.FieldPath != "metadata.name" {
				t.Errorf("ACTIONS_RUNNER_POD_NAME not from the pod's name: %+v", env["ACTIONS_RUNNER_POD_NAME"])
			}
			if img, ok := env["ACTIONS_RUNNER_IMAGE"]; ok != !c.work || (ok && img.Value != "runner:1") {
				t.Errorf("ACTIONS_RUNNER_IMAGE = %+v (set: %v), want the runner image in novolume mode only", img, ok)
			}
			if tmpl.Spec.ServiceAccountName != "cm-hooks" || tmpl.Spec.AutomountServiceAccountToken != nil && !*tmpl.Spec.AutomountServiceAccountToken {
				t.Errorf("service account %q automount %v: the hooks need the pool's service account's token", tmpl.Spec.ServiceAccountName, tmpl.Spec.AutomountServiceAccountToken)
			}
			checkHookTemplate(t, tmpl)
			checkWorkVolume(t, tmpl.Spec, rc, c.work)
		})
	}
}

func checkHookTemplate(t *testing.T, tmpl corev1.PodTemplateSpec) {
	t.Helper()
	var file corev1.PodTemplateSpec
	if err := json.Unmarshal([]byte(tmpl.Annotations[runnerpod.AnnotationHookTemplate]), &file); err != nil {
		t.Fatalf("hook template annotation: %v", err)
	}
	if file.Labels["team"] != "a" || file.Labels[runnerpod.LabelWorkflowPool] != "cm" {
		t.Errorf("hook template labels %v: want the pool's and %s=cm", file.Labels, runnerpod.LabelWorkflowPool)
	}
	if file.Annotations[runnerpod.AnnotationDoNotDisrupt] != "true" || file.Annotations[runnerpod.AnnotationSafeToEvict] != "false" {
		t.Errorf("hook template annotations %v: want do-not-disrupt", file.Annotations)
	}
	if a := file.Spec.AutomountServiceAccountToken; a == nil || *a {
		t.Errorf("workflow pods' automountServiceAccountToken = %v, want false", a)
	}
	if file.Spec.NodeSelector["pool"] != "jobs" || len(file.Spec.Containers) != 1 || file.Spec.Containers[0].Name != "$job" {
		t.Errorf("the pool's hookTemplate spec is not carried: %+v", file.Spec)
	}
	rc := runnerContainer(t, tmpl.Spec)
	var mounted bool
	for _, m := range rc.VolumeMounts {
		for _, v := range tmpl.Spec.Volumes {
			if v.Name == m.Name && v.DownwardAPI != nil && m.MountPath+"/template.yaml" == runnerpod.HookTemplateFile &&
				strings.Contains(v.DownwardAPI.Items[0].FieldRef.FieldPath, runnerpod.AnnotationHookTemplate) {
				mounted = true
			}
		}
	}
	if !mounted {
		t.Errorf("the hook template file is not mounted from the annotation")
	}
}

func checkWorkVolume(t *testing.T, spec corev1.PodSpec, rc corev1.Container, want bool) {
	t.Helper()
	var got *corev1.Volume
	for i := range spec.Volumes {
		if spec.Volumes[i].Name == runnerpod.WorkVolume {
			got = &spec.Volumes[i]
		}
	}
	if !want {
		if got != nil {
			t.Errorf("novolume pod has a work volume: %+v", got)
		}
		return
	}
	if got == nil || got.Ephemeral == nil {
		t.Fatalf("no ephemeral work volume: %+v", got)
	}
	c := got.Ephemeral.VolumeClaimTemplate.Spec
	if ptrStr(c.StorageClassName) != "gp3" || c.Resources.Requests.Storage().String() != "5Gi" || len(c.AccessModes) != 1 || c.AccessModes[0] != corev1.ReadWriteOnce {
		t.Errorf("work claim %+v: want gp3, 5Gi, ReadWriteOnce (the default)", c)
	}
	for _, m := range rc.VolumeMounts {
		if m.Name == runnerpod.WorkVolume && m.MountPath == "/home/runner/_work" {
			return
		}
	}
	t.Errorf("the runner container does not mount the work volume at /home/runner/_work: %+v", rc.VolumeMounts)
}

func ptrStr(p *string) string {
	if p == nil {
		return ""
	}
	return *p
}

// TestContainerModeRefusesWhatWouldBreakTheHooks: a template that sets a hook
// variable, or brings its own work volume or mount in kubernetes mode, and a
// claim without a size or with an unknown field, are refused naming the field.
func TestContainerModeRefusesWhatWouldBreakTheHooks(t *testing.T) {
	t.Parallel()
	claim := "      workVolumeClaim: {resources: {requests: {storage: 1Gi}}}\n"
	cases := map[string]struct{ extra, want string }{
		"hook variable": {claim + "      template: {spec: {containers: [{name: runner, env: [{name: ACTIONS_RUNNER_KUBERNETES_NAMESPACE, value: x}]}]}}\n",
			`"ACTIONS_RUNNER_KUBERNETES_NAMESPACE" is the runnerscaler's to set`},
		"own work volume": {claim + "      template: {spec: {containers: [{name: runner}], volumes: [{name: work, emptyDir: {}}]}}\n",
			`a volume named "work"`},
		"mount on the work directory": {claim + "      template: {spec: {containers: [{name: runner, volumeMounts: [{name: w, mountPath: /home/runner/_work}]}], volumes: [{name: w, emptyDir: {}}]}}\n",
			"/home/runner/_work is the work volume's"},
		"claim without size":      {"      workVolumeClaim: {storageClassName: gp3}\n", "workVolumeClaim.resources.requests.storage: required"},
		"claim with a typo":       {"      workVolumeClaim: {storageClass: gp3, resources: {requests: {storage: 1Gi}}}\n", `unknown field "storageClass"`},
		"hook template with typo": {claim + "      hookTemplate: {spec: {nodeSelectr: {a: b}}}\n", "kubernetes.hookTemplate"},
		"hook template with our label": {claim + "      hookTemplate: {metadata: {labels: {runnerscaler.dev/workflow-pool: other}}}\n",
			`kubernetes.hookTemplate: metadata.labels["runnerscaler.dev/workflow-pool"]: the runnerscaler's`},
		"hook template evictable": {claim + "      hookTemplate: {metadata: {annotations: {cluster-autoscaler.kubernetes.io/safe-to-evict: \"true\"}}}\n",
			`metadata.annotations["cluster-autoscaler.kubernetes.io/safe-to-evict"]: the runnerscaler's`},
	}
	for name, c := range cases {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			p := containerModePool(t, pool.ContainerModeKubernetes, c.extra)
			err := runnerpod.ValidatePool(p)
			if err == nil || !strings.Contains(err.Error(), c.want) {
				t.Fatalf("ValidatePool = %v, want an error with %q", err, c.want)
			}
		})
	}
}

// TestWorkflowPodNameIsTheHooks: the hooks keep 54 characters of the runner
// pod's name and add "-workflow".
func TestWorkflowPodNameIsTheHooks(t *testing.T) {
	t.Parallel()
	if got := runnerpod.WorkflowPodName("p-abcde-0"); got != "p-abcde-0-workflow" {
		t.Errorf("short name: %s", got)
	}
	long := strings.Repeat("a", 60)
	if got := runnerpod.WorkflowPodName(long); got != strings.Repeat("a", 54)+"-workflow" || len(got) != 63 {
		t.Errorf("long name: %s (%d)", got, len(got))
	}
}

// TestContainerModeLeavesTheTokenReadableByTheHooks: in container mode the
// runner container's user is left to the image (a runAsUser set on every
// container makes the kubelet write the service account token 0600 for that
// user, and the hooks run as the runner user), and the hook template file holds
// no null value (the hooks throw on a null `containers` and would take a null
// `volumes` for theirs) — with no hookTemplate, and with one.
func TestContainerModeLeavesTheTokenReadableByTheHooks(t *testing.T) {
	t.Parallel()
	for name, extra := range map[string]string{
		"no hookTemplate":   "",
		"with hookTemplate": "      hookTemplate: {spec: {nodeSelector: {a: b}}}\n",
	} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			p := containerModePool(t, pool.ContainerModeNoVolume, "      jobsNamespace: runner-jobs\n"+extra)
			tmpl, err := runnerpod.FinalPod(p)
			if err != nil {
				t.Fatal(err)
			}
			if sc := runnerContainer(t, tmpl.Spec).SecurityContext; sc != nil && sc.RunAsUser != nil {
				t.Errorf("runner container runAsUser %d: the hooks could not read the token", *sc.RunAsUser)
			}
			file := tmpl.Annotations[runnerpod.AnnotationHookTemplate]
			if strings.Contains(file, "null") {
				t.Errorf("hook template file has a null: %s", file)
			}
			var doc map[string]map[string]any
			if err := json.Unmarshal([]byte(file), &doc); err != nil {
				t.Fatal(err)
			}
			if _, ok := doc["spec"]["containers"]; ok {
				t.Errorf("hook template spec has containers though the pool set none: %s", file)
			}
		})
	}
}
