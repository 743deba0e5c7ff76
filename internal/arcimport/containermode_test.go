package arcimport_test

import (
	"encoding/json"
	"regexp"
	"slices"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"

	"github.com/runnerscaler/runnerscaler/internal/arcimport"
	"github.com/runnerscaler/runnerscaler/internal/pool"
	"github.com/runnerscaler/runnerscaler/internal/poolcheck"
)

// hookTemplate decodes the pool's hookTemplate, for its checks.
func hookTemplateOf(t *testing.T, p *pool.Pool) map[string]any {
	t.Helper()
	var m map[string]any
	if err := p.Kubernetes.HookTemplate.Decode(&m); err != nil {
		t.Fatal(err)
	}
	return m
}

// written is the pool's template as the import wrote it (before the sweeper
// adds its own: the hooks' environment, the work volume).
func written(t *testing.T, p *pool.Pool) corev1.PodTemplateSpec {
	t.Helper()
	var m any
	if err := p.Kubernetes.Template.Decode(&m); err != nil {
		t.Fatal(err)
	}
	raw, err := json.Marshal(m)
	if err != nil {
		t.Fatal(err)
	}
	var tmpl corev1.PodTemplateSpec
	if err := json.Unmarshal(raw, &tmpl); err != nil {
		t.Fatal(err)
	}
	return tmpl
}

func envNames(c corev1.Container) []string {
	var out []string
	for _, e := range c.Env {
		out = append(out, e.Name)
	}
	return out
}

// TestContainerModesConvert: each way ARC users run container mode becomes a
// pool in that mode, which passes validate with no warning, runs no docker,
// goes in the runner namespace, names its hooks' service account after itself
// and keeps nothing in its template that runnerscaler renders itself (the
// hooks' variables, the work volume).
func TestContainerModesConvert(t *testing.T) {
	t.Parallel()
	const configMap = "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: hook-template}\ndata:\n  default.yaml: |\n    spec:\n      containers:\n        - name: $job\n          resources: {requests: {cpu: \"2\"}}\n"
	hookTemplateValues := `githubConfigUrl: https://github.com/acme
runnerScaleSetName: k8s
maxRunners: 3
containerMode:
  type: kubernetes
  kubernetesModeWorkVolumeClaim: {accessModes: [ReadWriteOnce], storageClassName: gp3, resources: {requests: {storage: 5Gi}}}
template:
  spec:
    containers:
    - name: runner
      env:
      - {name: ACTIONS_RUNNER_CONTAINER_HOOK_TEMPLATE, value: /home/runner/pod-templates/default.yaml}
      - {name: ACTIONS_RUNNER_REQUIRE_JOB_CONTAINER, value: "false"}
      - {name: KEEP, value: me}
      volumeMounts:
      - {name: pod-templates, mountPath: /home/runner/pod-templates, readOnly: true}
    volumes:
    - name: pod-templates
      configMap: {name: hook-template}
`
	for _, tc := range []struct {
		name, manifest, mode string
		check                func(t *testing.T, p *pool.Pool, tmpl corev1.PodTemplateSpec, res arcimport.Result)
	}{
		{"legacy RunnerDeployment", rd("containerMode: kubernetes\nserviceAccountName: arc-k8s\ndockerEnabled: true\ndockerMTU: 1400\n"+
			"workVolumeClaimTemplate: {storageClassName: gp3, accessModes: [ReadWriteOnce], resources: {requests: {storage: 10Gi}}}", "maxReplicas: 3"),
			pool.ContainerModeKubernetes, func(t *testing.T, p *pool.Pool, _ corev1.PodTemplateSpec, res arcimport.Result) {
				var claim struct {
					StorageClassName string `yaml:"storageClassName"`
				}
				if err := p.Kubernetes.WorkVolumeClaim.Decode(&claim); err != nil || claim.StorageClassName != "gp3" {
					t.Errorf("work volume claim %+v (%v), want the workVolumeClaimTemplate's", claim, err)
				}
				if !noted(res, "serviceAccountName rd-hooks (ARC's arc-k8s is not used", "runnerscaler hook-rbac") {
					t.Errorf("notes %v: want the service account and hook-rbac said", res.Notes)
				}
				if !noted(res, "containerMode kubernetes runs no docker: the pool's dockerEnabled and dockerdWithinRunnerContainer are left out") {
					t.Errorf("notes %v: want docker's leaving said", res.Notes)
				}
				if !listedAt(res, "spec.template.spec.dockerMTU") {
					t.Errorf("not carried %v: want dockerMTU listed (no docker in container mode)", res.Dropped)
				}
			}},
		{"scale set, kubernetes-novolume", "githubConfigUrl: https://github.com/acme\nrunnerScaleSetName: nv\nmaxRunners: 2\ncontainerMode: {type: kubernetes-novolume}",
			pool.ContainerModeNoVolume, func(t *testing.T, p *pool.Pool, _ corev1.PodTemplateSpec, res arcimport.Result) {
				if p.Kubernetes.JobsNamespace != arcimport.DefaultNamespace+"-jobs" || p.Kubernetes.WorkVolumeClaim.Kind != 0 {
					t.Errorf("kubernetes %+v: want jobs namespace %s-jobs, no claim", p.Kubernetes, arcimport.DefaultNamespace)
				}
				if !noted(res, "jobs namespace actions-runners-jobs", "kubectl create namespace actions-runners-jobs") ||
					!noted(res, "serviceAccountName nv-hooks", "namespace actions-runners-jobs", "runnerscaler hook-rbac") {
					t.Errorf("notes %v: want the jobs namespace and the service account said", res.Notes)
				}
			}},
		{"scale set, the Role's extras and the account's annotations", "githubConfigUrl: https://github.com/acme\nrunnerScaleSetName: k\nmaxRunners: 2\ncontainerMode:\n  type: kubernetes\n" +
			"  kubernetesModeWorkVolumeClaim: {accessModes: [ReadWriteOnce], resources: {requests: {storage: 1Gi}}}\n" +
			"  kubernetesModeAdditionalRoleRules: [{apiGroups: [apps], resources: [deployments], verbs: [get]}]\n" +
			"  kubernetesModeServiceAccount: {annotations: {eks.amazonaws.com/role-arn: arn}}",
			pool.ContainerModeKubernetes, func(t *testing.T, _ *pool.Pool, _ corev1.PodTemplateSpec, res arcimport.Result) {
				if !listedAt(res, "containerMode.kubernetesModeAdditionalRoleRules") || !listedAt(res, "containerMode.kubernetesModeServiceAccount") {
					t.Errorf("not carried %v: want the Role's extra rules and the account's annotations listed", res.Dropped)
				}
			}},
		{"hook template from a ConfigMap of the input", configMap + "---\n" + hookTemplateValues,
			pool.ContainerModeKubernetes, func(t *testing.T, p *pool.Pool, tmpl corev1.PodTemplateSpec, res arcimport.Result) {
				spec, _ := hookTemplateOf(t, p)["spec"].(map[string]any)
				if c, _ := spec["containers"].([]any); len(c) != 1 {
					t.Errorf("hookTemplate %v: want the ConfigMap's", hookTemplateOf(t, p))
				}
				if !p.Kubernetes.JobContainerRequired() || !noted(res, "ACTIONS_RUNNER_REQUIRE_JOB_CONTAINER=false not carried", "kubernetes-novolume") {
					t.Errorf("requireJobContainer %v, notes %v: want false not carried in kubernetes mode, and why", p.Kubernetes.RequireJobContainer, res.Notes)
				}
				w := written(t, p)
				r := container(t, w, "runner")
				if len(r.VolumeMounts) != 0 || len(w.Spec.Volumes) != 0 || !hasEnv(r, "KEEP", "me") {
					t.Errorf("runner %+v, volumes %+v: want the template's volume and mount left out, KEEP kept", r, w.Spec.Volumes)
				}
				if slices.ContainsFunc(res.Dropped, func(d arcimport.Dropped) bool { return d.Document == 1 }) {
					t.Errorf("not carried %v: the ConfigMap was used", res.Dropped)
				}
			}},
		{"hook template not in the input", hookTemplateValues, pool.ContainerModeKubernetes,
			func(t *testing.T, p *pool.Pool, _ corev1.PodTemplateSpec, res arcimport.Result) {
				if p.Kubernetes.HookTemplate.Kind != 0 || !noted(res, "paste ConfigMap hook-template's key default.yaml", "kubernetes.hookTemplate") {
					t.Errorf("hookTemplate %v, notes %v: want none, and where to paste it from", p.Kubernetes.HookTemplate.Kind, res.Notes)
				}
			}},
		{"the experimental chart's extension", "githubConfigUrl: https://github.com/acme\nrunnerScaleSetName: x\nmaxRunners: 2\ncontainerMode: {type: kubernetes-novolume}\n" +
			"runner:\n  kubernetesMode:\n    extension:\n      yaml: |\n        metadata: {labels: {team: ci}}\n",
			pool.ContainerModeNoVolume, func(t *testing.T, p *pool.Pool, _ corev1.PodTemplateSpec, _ arcimport.Result) {
				md, _ := hookTemplateOf(t, p)["metadata"].(map[string]any)
				if labels, _ := md["labels"].(map[string]any); labels["team"] != "ci" {
					t.Errorf("hookTemplate %v: want the extension's", hookTemplateOf(t, p))
				}
			}},
		{"mode from the hooks' variable, in the template only", "githubConfigUrl: https://github.com/acme\nrunnerScaleSetName: t\nmaxRunners: 2\ntemplate:\n  spec:\n    containers:\n" +
			"    - name: runner\n      env:\n      - {name: ACTIONS_RUNNER_CONTAINER_HOOKS, value: /home/runner/k8s-novolume/index.js}\n" +
			"      - name: ACTIONS_RUNNER_POD_NAME\n        valueFrom: {fieldRef: {fieldPath: metadata.name}}\n",
			pool.ContainerModeNoVolume, func(t *testing.T, _ *pool.Pool, tmpl corev1.PodTemplateSpec, res arcimport.Result) {
				if !noted(res, "ACTIONS_RUNNER_CONTAINER_HOOKS is set", "containerMode kubernetes-novolume") || !noted(res, "ACTIONS_RUNNER_POD_NAME left out of the template") {
					t.Errorf("notes %v: want the inferred mode and the left-out variables said", res.Notes)
				}
			}},
		{"a rendered AutoscalingRunnerSet: its work volume's claim", `apiVersion: actions.github.com/v1alpha1
kind: AutoscalingRunnerSet
metadata: {name: rendered}
spec:
  githubConfigUrl: https://github.com/acme
  maxRunners: 2
  template:
    spec:
      containers:
      - name: runner
        env:
        - {name: ACTIONS_RUNNER_CONTAINER_HOOKS, value: /home/runner/k8s/index.js}
        volumeMounts:
        - {name: work, mountPath: /home/runner/_work}
      volumes:
      - name: work
        ephemeral:
          volumeClaimTemplate:
            spec: {accessModes: [ReadWriteOnce], storageClassName: fast, resources: {requests: {storage: 2Gi}}}
`, pool.ContainerModeKubernetes, func(t *testing.T, p *pool.Pool, tmpl corev1.PodTemplateSpec, res arcimport.Result) {
			var claim struct {
				StorageClassName string `yaml:"storageClassName"`
			}
			if err := p.Kubernetes.WorkVolumeClaim.Decode(&claim); err != nil || claim.StorageClassName != "fast" {
				t.Errorf("work volume claim %+v (%v), want the work volume's claim template", claim, err)
			}
			if w := written(t, p); len(w.Spec.Volumes) != 0 || len(container(t, w, "runner").VolumeMounts) != 0 {
				t.Errorf("template %+v: want the work volume and mount left out (runnerscaler renders them)", w.Spec)
			}
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			p, tmpl, res := imported(t, tc.manifest, withImage)
			k := p.Kubernetes
			if k.ContainerMode != tc.mode || k.DockerEnabled || k.DockerdWithinRunnerContainer || k.Namespace != arcimport.DefaultNamespace ||
				k.ServiceAccountName != p.Name+"-hooks" {
				t.Errorf("kubernetes %+v: want containerMode %s, no docker, namespace %s, serviceAccountName %s-hooks", k, tc.mode, arcimport.DefaultNamespace, p.Name)
			}
			if r := container(t, written(t, p), "runner"); slices.ContainsFunc(envNames(r), func(n string) bool { return strings.HasPrefix(n, "ACTIONS_RUNNER_") }) {
				t.Errorf("runner env %v: want no hook variable in the template (runnerscaler sets them)", envNames(r))
			}
			raw := res.Pools
			if problems := poolcheck.Check(raw); len(problems) > 0 {
				t.Errorf("validate refuses it: %v\n%s", problems, raw)
			}
			if w := poolcheck.Warnings(raw); len(w) > 0 {
				t.Errorf("validate warns: %v", w)
			}
			tc.check(t, p, tmpl, res)
		})
	}
}

// TestHookVariablesWithoutContainerMode: without the hooks (no
// ACTIONS_RUNNER_CONTAINER_HOOKS, no containerMode) a hook variable is listed
// and left out: the sweeper sets them in a container mode only.
func TestHookVariablesWithoutContainerMode(t *testing.T) {
	t.Parallel()
	p, _, res := imported(t, rd("dockerEnabled: false\nenv: [{name: ACTIONS_RUNNER_REQUIRE_JOB_CONTAINER, value: \"true\"}]", "maxReplicas: 2"), withImage)
	if p.Kubernetes.InContainerMode() || len(envNames(container(t, written(t, p), "runner"))) != 0 || !listedAt(res, "spec.template.spec.env[0]") {
		t.Errorf("kubernetes %+v, not carried %v: want no container mode, the variable listed and left out", p.Kubernetes, res.Dropped)
	}
}

// TestWorkVolumeClaimWithoutSize: ARC's claim without a size gets 10Gi, listed.
func TestWorkVolumeClaimWithoutSize(t *testing.T) {
	t.Parallel()
	p, _, res := imported(t, "githubConfigUrl: https://github.com/acme\nrunnerScaleSetName: s\nmaxRunners: 2\n"+
		"containerMode: {type: kubernetes, kubernetesModeWorkVolumeClaim: {accessModes: [ReadWriteOnce], storageClassName: gp3}}", withImage)
	var claim struct {
		StorageClassName string `yaml:"storageClassName"`
		Resources        struct {
			Requests map[string]string `yaml:"requests"`
		} `yaml:"resources"`
	}
	if err := p.Kubernetes.WorkVolumeClaim.Decode(&claim); err != nil || claim.StorageClassName != "gp3" || claim.Resources.Requests["storage"] != "10Gi" {
		t.Errorf("claim %+v (%v): want gp3 kept, 10Gi", claim, err)
	}
	if !listedAt(res, "containerMode.kubernetesModeWorkVolumeClaim") {
		t.Errorf("not carried %v: want the missing size listed", res.Dropped)
	}
}

// containerModeLine: a line, not a comment, that sets a container mode or the
// hooks (or an envsubst placeholder of the mode).
var containerModeLine = regexp.MustCompile(`(?m)^[^#\n]*(containerMode: (kubernetes|\$)|type: kubernetes|ACTIONS_RUNNER_CONTAINER_HOOKS)`)

// TestContainerModeCorpus: every example of ARC's corpus that runs container
// mode converts into a pool in that mode that validate accepts without a
// warning, but two that are no pool by design: a lone Runner (13), and the
// acceptance manifest whose fields are envsubst placeholders.
func TestContainerModeCorpus(t *testing.T) {
	t.Parallel()
	want := map[string]string{
		"examples/07-acceptance-v027-org-runnerdeploy-k8s-mode-hra.yaml":      pool.ContainerModeKubernetes,
		"arc-scale-sets/values/values_k8s_extra_role_rules.yaml":              pool.ContainerModeKubernetes,
		"arc-scale-sets/values/values_k8s_extra_volumes.yaml":                 pool.ContainerModeKubernetes,
		"arc-scale-sets/values/values_k8s_merge_spec.yaml":                    pool.ContainerModeKubernetes,
		"arc-scale-sets/values/values_k8s_novolume_custom_volume_mounts.yaml": pool.ContainerModeNoVolume,
		"examples/13-runner-k8s-container-mode.yaml":                          "",
		"acceptance/v0.27.6/runnerdeploy.envsubst.yaml":                       "",
	}
	seen := 0
	for _, file := range corpus(t) {
		src := source(t, file)
		if !containerModeLine.Match(src.Data) {
			continue
		}
		mode, ok := want[corpusName(file)]
		if !ok {
			t.Errorf("%s runs container mode: add it here", corpusName(file))
			continue
		}
		seen++
		res, err := arcimport.Convert([]arcimport.Source{src}, corpusOptions)
		if err != nil {
			t.Fatal(err)
		}
		if mode == "" {
			if res.Pools != nil {
				t.Errorf("%s: a pool, want none", corpusName(file))
			}
			continue
		}
		cfg := loads(t, res.Pools)
		if len(cfg.Pools) != 1 || cfg.Pools[0].Kubernetes.ContainerMode != mode {
			t.Errorf("%s: pools %+v, want one in containerMode %s", corpusName(file), cfg.Pools, mode)
		}
		if problems := poolcheck.Check(res.Pools); len(problems) > 0 {
			t.Errorf("%s: validate refuses it: %v", corpusName(file), problems)
		}
		if w := poolcheck.Warnings(res.Pools); len(w) > 0 {
			t.Errorf("%s: validate warns: %v", corpusName(file), w)
		}
	}
	if seen != len(want) {
		t.Errorf("%d container mode files in the corpus, want %d", seen, len(want))
	}
}
