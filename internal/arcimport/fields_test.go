package arcimport_test

import (
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"

	"github.com/runnerscaler/runnerscaler/internal/arcimport"
	"github.com/runnerscaler/runnerscaler/internal/pool"
	"github.com/runnerscaler/runnerscaler/internal/runnerpod"
)

// deployment is a RunnerDeployment of organization acme whose template spec
// has the extra lines (indented 6), with an autoscaler whose spec has hra
// (indented 2; none when empty).
func deployment(extra, hra string) string {
	out := "apiVersion: actions.summerwind.dev/v1alpha1\nkind: RunnerDeployment\nmetadata: {name: rd}\n" +
		"spec:\n  template:\n    spec:\n" + indent(extra, 6)
	if hra != "" {
		out += "---\napiVersion: actions.summerwind.dev/v1alpha1\nkind: HorizontalRunnerAutoscaler\nmetadata: {name: hra}\n" +
			"spec:\n  scaleTargetRef: {name: rd}\n" + indent(hra, 2)
	}
	return out
}

func indent(s string, n int) string {
	var b strings.Builder
	for _, line := range strings.Split(strings.TrimSpace(s), "\n") {
		b.WriteString(strings.Repeat(" ", n) + line + "\n")
	}
	return b.String()
}

// rd is deployment of organization acme.
func rd(extra, hra string) string { return deployment("organization: acme\n"+extra, hra) }

// imported converts manifest and returns its only pool, loaded and validated as
// the sweeper does, with the pod template the sweeper builds from it.
func imported(t *testing.T, manifest string, opts arcimport.Options) (*pool.Pool, corev1.PodTemplateSpec, arcimport.Result) {
	t.Helper()
	res, err := arcimport.Convert([]arcimport.Source{{Name: "in.yaml", Data: []byte(manifest)}}, opts)
	if err != nil {
		t.Fatal(err)
	}
	if res.Pools == nil {
		t.Fatalf("no pool: %v", res.Dropped)
	}
	cfg := loads(t, res.Pools)
	if len(cfg.Pools) != 1 {
		t.Fatalf("%d pools, want 1", len(cfg.Pools))
	}
	p := &cfg.Pools[0]
	tmpl, err := runnerpod.Template(p)
	if err != nil {
		t.Fatal(err)
	}
	return p, tmpl, res
}

var withImage = arcimport.Options{RunnerImage: "registry.example/runner:1"}

func container(t *testing.T, tmpl corev1.PodTemplateSpec, name string) corev1.Container {
	t.Helper()
	for _, c := range tmpl.Spec.Containers {
		if c.Name == name {
			return c
		}
	}
	t.Fatalf("no %s container in %+v", name, tmpl.Spec.Containers)
	return corev1.Container{}
}

// dockerSidecar is the template's docker sidecar, which must be a native
// sidecar (an init container with restartPolicy Always, as package runnerpod
// writes its own): a plain container would get SIGTERM with the runner and take
// a job that the graceful stop lets finish down with it.
func dockerSidecar(t *testing.T, tmpl corev1.PodTemplateSpec) corev1.Container {
	t.Helper()
	for _, c := range tmpl.Spec.Containers {
		if c.Name == runnerpod.DockerContainer {
			t.Fatalf("docker is a plain container: %+v; want a native sidecar (an init container with restartPolicy Always)", c)
		}
	}
	for _, c := range tmpl.Spec.InitContainers {
		if c.Name == runnerpod.DockerContainer {
			if c.RestartPolicy == nil || *c.RestartPolicy != corev1.ContainerRestartPolicyAlways {
				t.Fatalf("docker init container %+v: want restartPolicy Always (a native sidecar)", c)
			}
			return c
		}
	}
	t.Fatalf("no docker sidecar in %+v", tmpl.Spec.InitContainers)
	return corev1.Container{}
}

func hasEnv(c corev1.Container, name, value string) bool {
	return slices.ContainsFunc(c.Env, func(e corev1.EnvVar) bool { return e.Name == name && e.Value == value })
}

// TestFieldsRoundTrip: each field the issue lists, written in an ARC manifest,
// comes out of the pools file as the sweeper reads it (pool.Parse, then
// runnerpod.Template) with the same value, and nothing is reported dropped.
func TestFieldsRoundTrip(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name, extra, hra string
		check            func(t *testing.T, p *pool.Pool, tmpl corev1.PodTemplateSpec)
	}{
		{"organization", "", "", func(t *testing.T, p *pool.Pool, _ corev1.PodTemplateSpec) {
			if p.Organization != "acme" || p.Repository != "" || p.Enterprise != "" {
				t.Errorf("scope %+v, want organization acme", p.Scope())
			}
		}},
		{"repository", "organization: null\nrepository: acme/app", "", func(t *testing.T, p *pool.Pool, _ corev1.PodTemplateSpec) {
			if p.Repository != "acme/app" || p.Organization != "" {
				t.Errorf("scope %+v, want repository acme/app", p.Scope())
			}
		}},
		{"enterprise", "organization: \"\"\nenterprise: corp", "", func(t *testing.T, p *pool.Pool, _ corev1.PodTemplateSpec) {
			if p.Enterprise != "corp" || p.Organization != "" {
				t.Errorf("scope %+v, want enterprise corp", p.Scope())
			}
		}},
		{"group", "group: builders", "", func(t *testing.T, p *pool.Pool, _ corev1.PodTemplateSpec) {
			if p.Group != "builders" {
				t.Errorf("group %q", p.Group)
			}
		}},
		{"labels", "labels: [self-hosted, gpu, Linux, X64, large]", "", func(t *testing.T, p *pool.Pool, _ corev1.PodTemplateSpec) {
			if !slices.Equal(p.Labels, []string{"gpu", "large"}) || !p.Accepts([]string{"self-hosted", "Linux", "X64", "gpu", "large"}) {
				t.Errorf("labels %v (all %v): want gpu, large and the implied ones", p.Labels, p.AllLabels())
			}
		}},
		{"ephemeral false", "ephemeral: false", "", func(t *testing.T, p *pool.Pool, _ corev1.PodTemplateSpec) {
			if p.IsEphemeral() {
				t.Error("ephemeral, want persistent")
			}
		}},
		{"ephemeral default", "", "", func(t *testing.T, p *pool.Pool, _ corev1.PodTemplateSpec) {
			if !p.IsEphemeral() {
				t.Error("persistent, want ephemeral (ARC's default)")
			}
		}},
		{"min and max", "", "minReplicas: 2\nmaxReplicas: 7", func(t *testing.T, p *pool.Pool, _ corev1.PodTemplateSpec) {
			if p.MinReplicas != 2 || p.Max() != 7 {
				t.Errorf("min %d max %d, want 2 and 7", p.MinReplicas, p.Max())
			}
		}},
		{"min default is ARC's 1", "", "maxReplicas: 3", func(t *testing.T, p *pool.Pool, _ corev1.PodTemplateSpec) {
			if p.MinReplicas != 1 {
				t.Errorf("min %d, want ARC's default 1", p.MinReplicas)
			}
		}},
		{"fixed size without an autoscaler", "", "", func(t *testing.T, p *pool.Pool, _ corev1.PodTemplateSpec) {
			if p.MinReplicas != 1 || p.Max() != 1 {
				t.Errorf("min %d max %d, want ARC's replicas default 1 for both", p.MinReplicas, p.Max())
			}
		}},
		{"scaleDownDelaySecondsAfterScaleOut", "", "maxReplicas: 3\nscaleDownDelaySecondsAfterScaleOut: 45", func(t *testing.T, p *pool.Pool, _ corev1.PodTemplateSpec) {
			if p.ScaleDownDelay() != 45*time.Second {
				t.Errorf("scale-down delay %s", p.ScaleDownDelay())
			}
		}},
		{"workflowJob trigger", "", "maxReplicas: 3\nscaleUpTriggers:\n- githubEvent: {workflowJob: {}}\n  amount: 2\n  duration: 30m", func(t *testing.T, p *pool.Pool, _ corev1.PodTemplateSpec) {
			if a, d := p.Trigger(); a != 2 || d != 30*time.Minute {
				t.Errorf("trigger %d, %s; want 2, 30m", a, d)
			}
		}},
		{"v0.22 githubEvent {} trigger", "", "maxReplicas: 3\nscaleUpTriggers:\n- githubEvent: {}\n  duration: 1h30m", func(t *testing.T, p *pool.Pool, _ corev1.PodTemplateSpec) {
			if a, d := p.Trigger(); a != 1 || d != 90*time.Minute {
				t.Errorf("trigger %d, %s; want 1, 1h30m", a, d)
			}
		}},
		{"scheduledOverrides with rrule", "", `maxReplicas: 5
scheduledOverrides:
- startTime: "2026-01-05T08:00:00+01:00"
  endTime: "2026-01-05T18:00:00+01:00"
  recurrenceRule: {frequency: Weekly, untilTime: "2027-01-01T00:00:00Z"}
  minReplicas: 3`, func(t *testing.T, p *pool.Pool, _ corev1.PodTemplateSpec) {
			o := p.ScheduledOverrides
			if len(o) != 1 || o[0].StartTime.Format(time.RFC3339) != "2026-01-05T08:00:00+01:00" || o[0].EndTime.Hour() != 18 ||
				*o[0].MinReplicas != 3 || o[0].RecurrenceRule == nil || o[0].RecurrenceRule.Frequency != "Weekly" ||
				o[0].RecurrenceRule.UntilTime.Year() != 2027 {
				t.Errorf("overrides %+v", o)
			}
		}},
		{"image and pull policy", "image: my/arc-runner:1\nimagePullPolicy: Always", "", func(t *testing.T, _ *pool.Pool, tmpl corev1.PodTemplateSpec) {
			c := container(t, tmpl, "runner")
			if c.Image != withImage.RunnerImage || c.ImagePullPolicy != corev1.PullAlways {
				t.Errorf("image %s (%s), want -runner-image's, Always", c.Image, c.ImagePullPolicy)
			}
		}},
		{"env", "env:\n- {name: FOO, value: bar}\n- {name: N, value: 120}", "", func(t *testing.T, _ *pool.Pool, tmpl corev1.PodTemplateSpec) {
			c := container(t, tmpl, "runner")
			if !hasEnv(c, "FOO", "bar") || !hasEnv(c, "N", "120") {
				t.Errorf("env %+v", c.Env)
			}
		}},
		{"resources", "resources: {requests: {cpu: 500m}, limits: {memory: 2Gi}}", "", func(t *testing.T, _ *pool.Pool, tmpl corev1.PodTemplateSpec) {
			r := container(t, tmpl, "runner").Resources
			if !r.Requests.Cpu().Equal(resource.MustParse("500m")) || !r.Limits.Memory().Equal(resource.MustParse("2Gi")) {
				t.Errorf("resources %+v", r)
			}
		}},
		{"volumes and mounts", "volumes: [{name: tmp, emptyDir: {medium: Memory}}]\nvolumeMounts: [{name: tmp, mountPath: /tmp}]", "", func(t *testing.T, _ *pool.Pool, tmpl corev1.PodTemplateSpec) {
			c := container(t, tmpl, "runner")
			if !slices.ContainsFunc(tmpl.Spec.Volumes, func(v corev1.Volume) bool {
				return v.Name == "tmp" && v.EmptyDir != nil && v.EmptyDir.Medium == "Memory"
			}) ||
				!slices.ContainsFunc(c.VolumeMounts, func(m corev1.VolumeMount) bool { return m.Name == "tmp" && m.MountPath == "/tmp" }) {
				t.Errorf("volumes %+v mounts %+v", tmpl.Spec.Volumes, c.VolumeMounts)
			}
		}},
		{"node selection", "nodeSelector: {kubernetes.io/arch: arm64, pool: ci}\naffinity: {nodeAffinity: {requiredDuringSchedulingIgnoredDuringExecution: {nodeSelectorTerms: [{matchExpressions: [{key: zone, operator: In, values: [a]}]}]}}}", "", func(t *testing.T, p *pool.Pool, tmpl corev1.PodTemplateSpec) {
			if tmpl.Spec.NodeSelector["pool"] != "ci" || tmpl.Spec.NodeSelector["kubernetes.io/arch"] != "arm64" || p.Arch != "arm64" ||
				tmpl.Spec.Affinity == nil || tmpl.Spec.Affinity.NodeAffinity == nil {
				t.Errorf("nodeSelector %v, arch %s, affinity %+v", tmpl.Spec.NodeSelector, p.Arch, tmpl.Spec.Affinity)
			}
		}},
		{"tolerations", "tolerations: [{key: ci, operator: Equal, value: \"true\", effect: NoSchedule}]", "", func(t *testing.T, _ *pool.Pool, tmpl corev1.PodTemplateSpec) {
			if len(tmpl.Spec.Tolerations) != 1 || tmpl.Spec.Tolerations[0].Key != "ci" || tmpl.Spec.Tolerations[0].Effect != corev1.TaintEffectNoSchedule {
				t.Errorf("tolerations %+v", tmpl.Spec.Tolerations)
			}
		}},
		{"service account", "serviceAccountName: builder", "", func(t *testing.T, p *pool.Pool, tmpl corev1.PodTemplateSpec) {
			if p.Kubernetes.ServiceAccountName != "builder" || tmpl.Spec.ServiceAccountName != "builder" {
				t.Errorf("service account %q / %q", p.Kubernetes.ServiceAccountName, tmpl.Spec.ServiceAccountName)
			}
		}},
		{"security context", "securityContext: {fsGroup: 1000}", "", func(t *testing.T, _ *pool.Pool, tmpl corev1.PodTemplateSpec) {
			if sc := tmpl.Spec.SecurityContext; sc == nil || sc.FSGroup == nil || *sc.FSGroup != 1000 {
				t.Errorf("security context %+v", sc)
			}
		}},
		{"termination grace period", "terminationGracePeriodSeconds: 120", "", func(t *testing.T, _ *pool.Pool, tmpl corev1.PodTemplateSpec) {
			if g := tmpl.Spec.TerminationGracePeriodSeconds; g == nil || *g != 120 {
				t.Errorf("terminationGracePeriodSeconds %v", g)
			}
		}},
		{"dockerdWithinRunnerContainer", "dockerdWithinRunnerContainer: true", "", func(t *testing.T, p *pool.Pool, tmpl corev1.PodTemplateSpec) {
			c := container(t, tmpl, "runner")
			if !p.Kubernetes.DockerdWithinRunnerContainer || p.Kubernetes.DockerEnabled || len(tmpl.Spec.Containers) != 1 ||
				c.SecurityContext == nil || c.SecurityContext.Privileged == nil || !*c.SecurityContext.Privileged ||
				p.Kubernetes.Namespace != arcimport.DefaultDockerNamespace {
				t.Errorf("kubernetes %+v, containers %+v", p.Kubernetes, tmpl.Spec.Containers)
			}
		}},
		{"dockerEnabled, ARC's default", "", "", func(t *testing.T, p *pool.Pool, tmpl corev1.PodTemplateSpec) {
			if !p.Kubernetes.DockerEnabled || dockerSidecar(t, tmpl).Image != runnerpod.DockerImage ||
				p.Kubernetes.Namespace != arcimport.DefaultDockerNamespace {
				t.Errorf("kubernetes %+v, containers %+v", p.Kubernetes, tmpl.Spec.Containers)
			}
		}},
		{"dockerEnabled false", "dockerEnabled: false", "", func(t *testing.T, p *pool.Pool, tmpl corev1.PodTemplateSpec) {
			if p.Kubernetes.DockerEnabled || len(tmpl.Spec.Containers) != 1 || p.Kubernetes.Namespace != arcimport.DefaultNamespace {
				t.Errorf("kubernetes %+v, containers %+v", p.Kubernetes, tmpl.Spec.Containers)
			}
		}},
		{"docker sidecar settings", "dockerEnv: [{name: DOCKER_X, value: \"1\"}]\ndockerMTU: 1400\ndockerRegistryMirror: https://mirror.example\ndockerdContainerResources: {limits: {memory: 4Gi}}\ndockerVolumeMounts: [{name: cache, mountPath: /var/lib/docker}]\nvolumes: [{name: cache, emptyDir: {}}]", "", func(t *testing.T, p *pool.Pool, tmpl corev1.PodTemplateSpec) {
			d := dockerSidecar(t, tmpl)
			r := container(t, tmpl, "runner")
			if !hasEnv(d, "DOCKER_X", "1") || !slices.Contains(d.Args, "--mtu=1400") || !slices.Contains(d.Args, "--registry-mirror=https://mirror.example") ||
				!d.Resources.Limits.Memory().Equal(resource.MustParse("4Gi")) || d.Image != runnerpod.DockerImage ||
				!slices.ContainsFunc(d.VolumeMounts, func(m corev1.VolumeMount) bool { return m.Name == "cache" }) ||
				!hasEnv(r, "DOCKER_HOST", "tcp://localhost:2375") || !p.Kubernetes.DockerEnabled {
				t.Errorf("docker %+v\nrunner %+v", d, r)
			}
		}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			extra := tc.extra
			if !strings.Contains(extra, "organization:") { // a key written twice is refused
				extra = "organization: acme\n" + extra
			}
			p, tmpl, res := imported(t, deployment(extra, tc.hra), withImage)
			if len(res.Dropped) > 0 {
				t.Errorf("not carried: %v", res.Dropped)
			}
			tc.check(t, p, tmpl)
		})
	}
}

// TestRunnerSetFieldsRoundTrip: a RunnerSet's own layout — scope and docker
// settings beside a full pod template, volumeClaimTemplates, the `docker`
// container — carries the same way.
func TestRunnerSetFieldsRoundTrip(t *testing.T) {
	t.Parallel()
	p, tmpl, res := imported(t, `apiVersion: actions.summerwind.dev/v1alpha1
kind: RunnerSet
metadata: {name: rs}
spec:
  replicas: 3
  repository: acme/app
  ephemeral: false
  labels: [big]
  selector: {matchLabels: {app: rs}}
  serviceName: rs
  template:
    metadata: {labels: {app: rs}}
    spec:
      serviceAccountName: builder
      containers:
      - name: runner
        env: [{name: FOO, value: bar}]
        volumeMounts: [{name: cache, mountPath: /cache}]
      - name: docker
        volumeMounts: [{name: var-lib-docker, mountPath: /var/lib/docker}]
  volumeClaimTemplates:
  - metadata: {name: cache}
    spec: {accessModes: [ReadWriteOnce], resources: {requests: {storage: 1Gi}}}
  - metadata: {name: var-lib-docker}
    spec: {accessModes: [ReadWriteOnce], resources: {requests: {storage: 10Gi}}}
`, withImage)
	if len(res.Dropped) > 0 {
		t.Errorf("not carried: %v", res.Dropped)
	}
	if p.Repository != "acme/app" || p.IsEphemeral() || !slices.Equal(p.Labels, []string{"big"}) || p.MinReplicas != 3 || p.Max() != 3 {
		t.Errorf("pool %+v", p)
	}
	if p.Name != "rs-pool" || tmpl.Labels["app"] != "rs" || tmpl.Spec.ServiceAccountName != "builder" {
		t.Errorf("pool %s, template labels %v, service account %q", p.Name, tmpl.Labels, tmpl.Spec.ServiceAccountName)
	}
	if !hasEnv(container(t, tmpl, "runner"), "FOO", "bar") || len(dockerSidecar(t, tmpl).VolumeMounts) != 2 {
		t.Errorf("containers %+v", tmpl.Spec.Containers)
	}
	var claims []string
	for _, c := range p.Kubernetes.VolumeClaimTemplates.Content {
		for i := 0; i+1 < len(c.Content); i += 2 {
			if c.Content[i].Value == "metadata" {
				claims = append(claims, c.Content[i+1].Content[1].Value)
			}
		}
	}
	if !slices.Equal(claims, []string{"cache", "var-lib-docker"}) {
		t.Errorf("volume claim templates %v", claims)
	}
}

// TestWithoutRunnerImageTheImageIsReported: ARC's image is kept, so that the
// file loads, and reported at the path it came from.
func TestWithoutRunnerImageTheImageIsReported(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct{ extra, image, path string }{
		{"image: my/arc-runner:1", "my/arc-runner:1", "spec.template.spec.image"},
		{"", "summerwind/actions-runner:latest", "spec.template.spec.image"},
		{"dockerdWithinRunnerContainer: true", "summerwind/actions-runner-dind:latest", "spec.template.spec.image"},
		{"containers: [{name: runner, image: my/other:2}]", "my/other:2", "spec.template.spec.containers[0].image"},
	} {
		_, tmpl, res := imported(t, deployment("organization: acme\n"+tc.extra, ""), arcimport.Options{})
		if got := container(t, tmpl, "runner").Image; got != tc.image {
			t.Errorf("%q: image %s, want %s", tc.extra, got, tc.image)
		}
		if len(res.Dropped) != 1 || res.Dropped[0].Path != tc.path || !strings.Contains(res.Dropped[0].Reason, tc.image) {
			t.Errorf("%q: reported %v, want the image at %s", tc.extra, res.Dropped, tc.path)
		}
	}
}

// TestDropped: what has no counterpart is reported with its file, document,
// path and what to do instead — and the rest of the object still converts.
func TestDropped(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name, manifest, path, reason string
		doc                          int
	}{
		{"metrics", rd("", "maxReplicas: 3\nmetrics: [{type: PercentageRunnersBusy, scaleUpThreshold: '0.75'}]"), "spec.metrics[0]", "PercentageRunnersBusy", 2},
		{"check_run trigger", rd("", "maxReplicas: 3\nscaleUpTriggers: [{githubEvent: {checkRun: {types: [created]}}, amount: 1, duration: 5m}]"), "spec.scaleUpTriggers[0].githubEvent.checkRun", "not check_run", 2},
		{"push trigger", rd("", "maxReplicas: 3\nscaleUpTriggers: [{githubEvent: {push: null}, duration: 5m}]"), "spec.scaleUpTriggers[0].githubEvent.push", "not push", 2},
		{"a second trigger", rd("", "maxReplicas: 3\nscaleUpTriggers: [{githubEvent: {}}, {githubEvent: {workflowJob: {}}}]"), "spec.scaleUpTriggers[1]", "one trigger", 2},
		{"short duration", rd("", "maxReplicas: 3\nscaleUpTriggers: [{githubEvent: {}, duration: 30s}]"), "spec.scaleUpTriggers[0].duration", "at least 1m", 2},
		{"no maxReplicas", rd("", "minReplicas: 2"), "spec.maxReplicas", "requires one", 2},
		{"override over max", rd("", "maxReplicas: 3\nscheduledOverrides: [{startTime: \"2026-01-01T00:00:00Z\", endTime: \"2026-01-02T00:00:00Z\", minReplicas: 9}]"), "spec.scheduledOverrides[0].minReplicas", "over maxReplicas", 2},
		{"unknown field, a typo", rd("emphemeral: true", ""), "spec.template.spec.emphemeral", "unknown field", 1},
		{"unknown HRA field", rd("", "maxReplicas: 3\nlabels: [x]"), "spec.labels", "unknown field", 2},
		{"containerMode ARC's legacy runners do not know", rd("containerMode: dind", ""), "spec.template.spec.containerMode", "know kubernetes only", 1},
		{"containerMode kubernetes without a claim", rd("containerMode: kubernetes", ""), "spec.template.spec.containerMode", "without a work volume claim", 1},
		{"short grace period", rd("terminationGracePeriodSeconds: 30", ""), "spec.template.spec.terminationGracePeriodSeconds", "shorter than", 1},
		{"runner env runnerscaler sets", rd("env: [{name: RUNNER_LABELS, value: x}]", ""), "spec.template.spec.env[0]", "set by runnerscaler", 1},
		{"reserved template label", "apiVersion: actions.summerwind.dev/v1alpha1\nkind: RunnerDeployment\nmetadata: {name: rd}\nspec:\n  template:\n    metadata: {labels: {runnerscaler.dev/pool: x}}\n    spec: {organization: acme}\n", `spec.template.metadata.labels["runnerscaler.dev/pool"]`, "runnerscaler's own", 1},
		{"volume size", rd("volumeSizeLimit: 4Gi", ""), "spec.template.spec.volumeSizeLimit", "work volume", 1},
		{"windows", rd("nodeSelector: {kubernetes.io/os: windows}", ""), `spec.template.spec.nodeSelector["kubernetes.io/os"]`, "Windows", 1},
		{"a non-ARC object", "apiVersion: v1\nkind: ServiceAccount\nmetadata: {name: runner}\n---\n" + rd("", ""), "", "not an ARC runner resource", 1},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			_, _, res := imported(t, tc.manifest, withImage)
			var found bool
			for _, d := range res.Dropped {
				if d.File == "in.yaml" && d.Document == tc.doc && d.Path == tc.path && strings.Contains(d.Reason, tc.reason) && d.Instead != "" {
					found = true
				}
			}
			if !found {
				t.Errorf("want document %d, %s: ...%s...; reported %v", tc.doc, tc.path, tc.reason, res.Dropped)
			}
		})
	}
}

// TestNothingConvertsStillReports: a lone Runner, an autoscaler whose target
// is missing, and a deployment without a scope give no pool, and say why.
func TestNothingConvertsStillReports(t *testing.T) {
	t.Parallel()
	for _, manifest := range []string{
		"apiVersion: actions.summerwind.dev/v1alpha1\nkind: Runner\nmetadata: {name: r}\nspec: {organization: acme}\n",
		"apiVersion: actions.summerwind.dev/v1alpha1\nkind: HorizontalRunnerAutoscaler\nmetadata: {name: h}\nspec: {scaleTargetRef: {name: gone}, maxReplicas: 2}\n",
		"apiVersion: actions.summerwind.dev/v1alpha1\nkind: RunnerDeployment\nmetadata: {name: d}\nspec: {template: {spec: {group: g}}}\n",
		"apiVersion: actions.summerwind.dev/v1alpha1\nkind: RunnerDeployment\nmetadata: {name: d}\nspec: {template: {spec: {repository: <owner>/<repo>}}}\n",
	} {
		res, err := arcimport.Convert([]arcimport.Source{{Name: "in.yaml", Data: []byte(manifest)}}, withImage)
		if err != nil {
			t.Fatal(err)
		}
		if res.Pools != nil || len(res.Dropped) != 1 || res.Dropped[0].Document != 1 || res.Dropped[0].Path != "" {
			t.Errorf("%s: pools %q, reported %v; want no pool and one whole-document report", manifest, res.Pools, res.Dropped)
		}
	}
}

func ExampleConvert() {
	res, _ := arcimport.Convert([]arcimport.Source{{Name: "rd.yaml", Data: []byte(deployment("repository: acme/app\ndockerEnabled: false\nlabels: [gpu]",
		"minReplicas: 0\nmaxReplicas: 4\nscaleUpTriggers: [{githubEvent: {workflowJob: {}}, duration: 30m}]\nmetrics: [{type: PercentageRunnersBusy}]"))}},
		arcimport.Options{RunnerImage: "ghcr.io/acme/runner:1"})
	fmt.Print(string(res.Pools))
	for _, d := range res.Dropped {
		fmt.Println(d)
	}
	// Output:
	// # Pools converted from ARC manifests by runnerscaler import-arc.
	// # Review it before deploying: what could not be carried was listed by the import.
	// pools:
	//   # from rd.yaml, document 1: RunnerDeployment/rd
	//   # scaled as rd.yaml, document 2: HorizontalRunnerAutoscaler/hra
	//   - name: rd
	//     repository: acme/app
	//     labels: [gpu]
	//     minReplicas: 0
	//     maxReplicas: 4
	//     scaleUpTriggers:
	//       - duration: 30m
	//     kubernetes:
	//       namespace: actions-runners
	//       template:
	//         spec:
	//           containers:
	//             - name: runner
	//               image: ghcr.io/acme/runner:1
	// rd.yaml: document 2: spec.metrics[0]: metric PercentageRunnersBusy: runnerscaler does not poll GitHub for metrics; instead: scaling follows workflow_job deliveries (each queued job reserves a runner); keep idle capacity with minReplicas or scheduledOverrides
}
