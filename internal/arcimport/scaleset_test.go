package arcimport_test

import (
	"context"
	"slices"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"

	"github.com/runnerscaler/runnerscaler/internal/arcimport"
	"github.com/runnerscaler/runnerscaler/internal/githubapi"
	"github.com/runnerscaler/runnerscaler/internal/pool"
	"github.com/runnerscaler/runnerscaler/internal/runnername"
	"github.com/runnerscaler/runnerscaler/internal/scope"
	"github.com/runnerscaler/runnerscaler/internal/teardown"
)

func noted(res arcimport.Result, parts ...string) bool {
	return slices.ContainsFunc(res.Notes, func(n string) bool {
		for _, p := range parts {
			if !strings.Contains(n, p) {
				return false
			}
		}
		return true
	})
}

func listedAt(res arcimport.Result, path string) bool {
	return slices.ContainsFunc(res.Dropped, func(d arcimport.Dropped) bool { return d.Path == path })
}

// TestScaleSetValues: a gha-runner-scale-set values file's settings, each
// carried into the pool or listed.
func TestScaleSetValues(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name, values string
		check        func(t *testing.T, p *pool.Pool, tmpl corev1.PodTemplateSpec, res arcimport.Result)
	}{
		{"organization", "githubConfigUrl: https://github.com/acme", func(t *testing.T, p *pool.Pool, _ corev1.PodTemplateSpec, res arcimport.Result) {
			if p.Name != "arc-runner-set" || p.Organization != "acme" || !slices.Equal(p.Labels, []string{"arc-runner-set"}) || p.IsEphemeral() == false {
				t.Errorf("pool %+v: want arc-runner-set of acme, labelled arc-runner-set, ephemeral", p)
			}
			if !noted(res, "runs-on: arc-runner-set keeps working", "self-hosted, linux, x64", "label of their own") {
				t.Errorf("notes %v: want the runs-on label and self-hosted said", res.Notes)
			}
		}},
		{"repository", "githubConfigUrl: https://github.com/acme/app/", func(t *testing.T, p *pool.Pool, _ corev1.PodTemplateSpec, _ arcimport.Result) {
			if p.Repository != "acme/app" {
				t.Errorf("pool %+v: want repository acme/app", p)
			}
		}},
		{"enterprise", "githubConfigUrl: https://github.com/enterprises/corp", func(t *testing.T, p *pool.Pool, _ corev1.PodTemplateSpec, _ arcimport.Result) {
			if p.Enterprise != "corp" {
				t.Errorf("pool %+v: want enterprise corp", p)
			}
		}},
		{"GitHub Enterprise Server", "githubConfigUrl: https://ghes.example.com/acme", func(t *testing.T, p *pool.Pool, _ corev1.PodTemplateSpec, res arcimport.Result) {
			if p.Organization != "acme" || !noted(res, "githubConfigUrl is on ghes.example.com", "GitHubApiUrl https://ghes.example.com/api/v3/") {
				t.Errorf("pool %+v, notes %v: want acme, the stack's GitHub URL said", p, res.Notes)
			}
		}},
		{"labels, group, sizes", "githubConfigUrl: https://github.com/acme\nscaleSetLabels: [gpu, self-hosted]\nrunnerGroup: builders\nminRunners: 2\nmaxRunners: 8",
			func(t *testing.T, p *pool.Pool, _ corev1.PodTemplateSpec, res arcimport.Result) {
				if !slices.Equal(p.Labels, []string{"arc-runner-set", "gpu"}) || p.Group != "builders" || p.MinReplicas != 2 || p.Max() != 8 {
					t.Errorf("pool %+v: want labels arc-runner-set and gpu, group builders, min 2, max 8", p)
				}
				if !noted(res, "minRunners 2 → minReplicas 2", "idle runners on top of one per waiting job") {
					t.Errorf("notes %v: want how minRunners maps", res.Notes)
				}
			}},
		{"the default group", "githubConfigUrl: https://github.com/acme\nrunnerGroup: default", func(t *testing.T, p *pool.Pool, _ corev1.PodTemplateSpec, _ arcimport.Result) {
			if p.Group != "" {
				t.Errorf("group %q, want the default group (none)", p.Group)
			}
		}},
		{"containerMode dind", "githubConfigUrl: https://github.com/acme\ncontainerMode: {type: dind}", func(t *testing.T, p *pool.Pool, tmpl corev1.PodTemplateSpec, res arcimport.Result) {
			if !p.Kubernetes.DockerEnabled || p.Kubernetes.Namespace != arcimport.DefaultDockerNamespace || dockerSidecar(t, tmpl).Image == "" {
				t.Errorf("kubernetes %+v: want the docker sidecar in the docker namespace", p.Kubernetes)
			}
			if !noted(res, "containerMode dind: ARC's docker sidecar becomes runnerscaler's", "privileged namespace") {
				t.Errorf("notes %v", res.Notes)
			}
		}},
		{"no containerMode: no docker", "githubConfigUrl: https://github.com/acme", func(t *testing.T, p *pool.Pool, tmpl corev1.PodTemplateSpec, _ arcimport.Result) {
			if p.Kubernetes.DockerEnabled || p.Kubernetes.Namespace != arcimport.DefaultNamespace || len(tmpl.Spec.Containers) != 1 {
				t.Errorf("kubernetes %+v: want no docker, ARC's scale-set default", p.Kubernetes)
			}
		}},
		{"containerMode kubernetes", "githubConfigUrl: https://github.com/acme\ncontainerMode:\n  type: kubernetes\n  kubernetesModeWorkVolumeClaim: {accessModes: [ReadWriteOnce], resources: {requests: {storage: 1Gi}}}",
			func(t *testing.T, p *pool.Pool, _ corev1.PodTemplateSpec, res arcimport.Result) {
				if k := p.Kubernetes; k.ContainerMode != pool.ContainerModeKubernetes || k.WorkVolumeClaim.Kind == 0 || k.DockerEnabled || len(res.Dropped) != 0 {
					t.Errorf("kubernetes %+v, not carried %v: want the container mode and its claim carried", k, res.Dropped)
				}
			}},
		{"what a pool is not", `githubConfigUrl: https://github.com/acme
githubConfigSecret: {github_token: ghp_x}
listenerTemplate: {spec: {containers: [{name: listener}]}}
controllerServiceAccount: {name: arc, namespace: arc-system}
proxy: {https: {url: "http://proxy:3128"}}
githubServerTLS: {certificateFrom: {configMapKeyRef: {name: ca, key: ca.crt}}}`, func(t *testing.T, _ *pool.Pool, _ corev1.PodTemplateSpec, res arcimport.Result) {
			for _, f := range []string{"githubConfigSecret", "listenerTemplate", "controllerServiceAccount", "proxy", "githubServerTLS"} {
				if !listedAt(res, f) {
					t.Errorf("%s not listed: %v", f, res.Dropped)
				}
			}
		}},
		{"the chart's template", `githubConfigUrl: https://github.com/acme
template:
  metadata: {annotations: {team: ci}}
  spec:
    nodeSelector: {pool: ci}
    containers:
    - name: runner
      image: ghcr.io/actions/actions-runner:latest
      command: ["/home/runner/run.sh"]
      env: [{name: FOO, value: bar}]`, func(t *testing.T, p *pool.Pool, tmpl corev1.PodTemplateSpec, res arcimport.Result) {
			r := container(t, tmpl, "runner")
			if r.Image != withImage.RunnerImage || len(r.Command) != 0 || !hasEnv(r, "FOO", "bar") || tmpl.Spec.NodeSelector["pool"] != "ci" || tmpl.Annotations["team"] != "ci" {
				t.Errorf("template %+v", tmpl)
			}
			if !noted(res, "ARC's /home/runner/run.sh left out") {
				t.Errorf("notes %v: want ARC's command said", res.Notes)
			}
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			values := tc.values
			if !strings.Contains(values, "maxRunners") {
				values += "\nmaxRunners: 4"
			}
			p, tmpl, res := imported(t, "runnerScaleSetName: arc-runner-set\n"+values, withImage)
			tc.check(t, p, tmpl, res)
		})
	}
}

// autoscalingRunnerSets is `kubectl get autoscalingrunnersets -A -o yaml` of
// two scale sets, as ARC's chart renders them: a plain one, and one with
// containerMode dind (the dind native sidecar and what goes with it).
const autoscalingRunnerSets = `apiVersion: v1
kind: List
items:
- apiVersion: actions.github.com/v1alpha1
  kind: AutoscalingRunnerSet
  metadata:
    name: arc-runner-set
    namespace: arc-runners
    annotations: {actions.github.com/values-hash: abc, runner-scale-set-id: "1"}
    labels: {app.kubernetes.io/managed-by: Helm}
  spec:
    githubConfigUrl: https://github.com/acme
    githubConfigSecret: arc-runner-set-gha-rs-github-secret
    runnerScaleSetName: arc-runner-set
    minRunners: 1
    maxRunners: 5
    template:
      spec:
        restartPolicy: Never
        serviceAccountName: arc-runner-set-gha-rs-no-permission
        containers:
        - name: runner
          image: ghcr.io/actions/actions-runner:latest
          command: ["/home/runner/run.sh"]
  status: {currentRunners: 1}
- apiVersion: actions.github.com/v1alpha1
  kind: AutoscalingRunnerSet
  metadata: {name: docker-set, namespace: arc-runners}
  spec:
    githubConfigUrl: https://github.com/acme/app
    githubConfigSecret: docker-set-gha-rs-github-secret
    runnerScaleSetName: docker-set
    runnerScaleSetLabels: [docker]
    maxRunners: 3
    template:
      spec:
        restartPolicy: Never
        initContainers:
        - name: init-dind-externals
          image: ghcr.io/actions/actions-runner:latest
          command: ["cp", "-r", "/home/runner/externals/.", "/home/runner/tmpDir/"]
          volumeMounts: [{name: dind-externals, mountPath: /home/runner/tmpDir}]
        - name: dind
          image: docker:dind
          restartPolicy: Always
          securityContext: {privileged: true}
          volumeMounts: [{name: work, mountPath: /home/runner/_work}, {name: dind-sock, mountPath: /var/run}]
        containers:
        - name: runner
          image: ghcr.io/actions/actions-runner:latest
          command: ["/home/runner/run.sh"]
          env:
          - {name: DOCKER_HOST, value: unix:///var/run/docker.sock}
          - {name: RUNNER_WAIT_FOR_DOCKER_IN_SECONDS, value: "120"}
          - {name: KEEP, value: "1"}
          volumeMounts: [{name: work, mountPath: /home/runner/_work}, {name: dind-sock, mountPath: /var/run}]
        volumes:
        - {name: work, emptyDir: {}}
        - {name: dind-sock, emptyDir: {}}
        - {name: dind-externals, emptyDir: {}}
`

// TestAutoscalingRunnerSets: ARC's objects, as kubectl lists them, become
// pools: ARC's rendering of containerMode dind becomes runnerscaler's docker
// sidecar (nothing of ARC's dind left), the chart's restartPolicy and the
// service account it makes are not carried as the runner's.
func TestAutoscalingRunnerSets(t *testing.T) {
	t.Parallel()
	res, err := arcimport.Convert([]arcimport.Source{{Name: "ars.yaml", Data: []byte(autoscalingRunnerSets)}}, withImage)
	if err != nil {
		t.Fatal(err)
	}
	cfg := loads(t, res.Pools)
	plain, docker := cfg.Pool("arc-runner-set"), cfg.Pool("docker-set")
	if plain == nil || docker == nil {
		t.Fatalf("pools %v: want arc-runner-set and docker-set", res.Names)
	}
	if plain.Organization != "acme" || plain.MinReplicas != 1 || plain.Max() != 5 || plain.Kubernetes.DockerEnabled || plain.Kubernetes.ServiceAccountName != "" {
		t.Errorf("arc-runner-set %+v", plain)
	}
	if docker.Repository != "acme/app" || !slices.Equal(docker.Labels, []string{"docker-set", "docker"}) || !docker.Kubernetes.DockerEnabled ||
		docker.Kubernetes.Namespace != arcimport.DefaultDockerNamespace {
		t.Errorf("docker-set %+v", docker)
	}
	if !listedAt(res, "items[0].spec.githubConfigSecret") {
		t.Errorf("not carried %v: want the secret listed", res.Dropped)
	}
	for _, d := range res.Dropped {
		if strings.Contains(d.Path, "restartPolicy") || strings.Contains(d.Path, "dind") || strings.Contains(d.Path, "DOCKER_HOST") {
			t.Errorf("ARC's own rendering listed as not carried: %s", d)
		}
	}
	p, tmpl, _ := imported(t, strings.Replace(autoscalingRunnerSets, "- apiVersion: actions.github.com/v1alpha1\n  kind: AutoscalingRunnerSet\n  metadata:\n    name: arc-runner-set", "- apiVersion: v1\n  kind: ConfigMap\n  metadata:\n    name: skip", 1), withImage)
	if p.Name != "docker-set" {
		t.Fatalf("pool %s", p.Name)
	}
	r := container(t, tmpl, "runner")
	if !hasEnv(r, "KEEP", "1") || hasEnv(r, "DOCKER_HOST", "unix:///var/run/docker.sock") || !hasEnv(r, "DOCKER_HOST", "tcp://localhost:2375") {
		t.Errorf("runner env %+v: want KEEP, and DOCKER_HOST the sidecar's", r.Env)
	}
	for _, c := range slices.Concat(tmpl.Spec.Containers, tmpl.Spec.InitContainers) {
		if c.Name == "dind" || c.Name == "init-dind-externals" {
			t.Errorf("ARC's %s container carried", c.Name)
		}
	}
	for _, v := range tmpl.Spec.Volumes {
		if strings.HasPrefix(v.Name, "dind") {
			t.Errorf("ARC's %s volume carried", v.Name)
		}
	}
}

// TestScaleSetNotConvertible: a values file without githubConfigUrl, or
// without a name, is no pool, and says why.
func TestScaleSetNotConvertible(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct{ values, why string }{
		{"runnerScaleSetName: x\nmaxRunners: 2\ngithubConfigUrl: \"\"", "githubConfigUrl: empty"},
		{"runnerScaleSetName: x\ngithubConfigUrl: https://github.com/", "names no organization, repository or enterprise"},
		{"githubConfigUrl: https://github.com/acme", "runnerScaleSetName is not set"},
	} {
		res, err := arcimport.Convert([]arcimport.Source{{Name: "values.yaml", Data: []byte(tc.values)}}, arcimport.Options{})
		if err != nil {
			t.Fatal(err)
		}
		if res.Pools != nil || !slices.ContainsFunc(res.Dropped, func(d arcimport.Dropped) bool { return strings.Contains(d.Reason, tc.why) }) {
			t.Errorf("%q: pools %s, not carried %v: want none, saying %q", tc.values, res.Pools, res.Dropped, tc.why)
		}
	}
}

// orgRunners lists fixed runners for every scope (teardown.RunnerLister).
type orgRunners []githubapi.Runner

func (r orgRunners) Runners(context.Context, scope.Scope) ([]githubapi.Runner, error) { return r, nil }

// TestScaleSetRunnersAreNotThePools: a pool imported from a scale set has the
// scale set's name, yet ARC's scale-set runners — `<scale set>-<random>-runner-<random>`,
// labelled with the scale set's name — are never named like the pool's
// (`<pool>-xxxxx-0`), which is how the webhook, the sweeper's cleanup and the
// teardown tell runnerscaler's runners: the teardown's look for runners left on
// GitHub finds the pool's own only. (tests/arc_test.go's
// TestARCScaleSetRunnersSideBySide runs sweeps and a teardown beside them.)
func TestScaleSetRunnersAreNotThePools(t *testing.T) {
	t.Parallel()
	res, err := arcimport.Convert([]arcimport.Source{{Name: "values.yaml", Data: []byte(
		"githubConfigUrl: https://github.com/acme\nrunnerScaleSetName: arc-runner-set\nmaxRunners: 2\n")}}, withImage)
	if err != nil {
		t.Fatal(err)
	}
	cfg := loads(t, res.Pools)
	arc := []string{"arc-runner-set-abcde-runner-xyz12", "arc-runner-set-7xk2p-runner-bq4zd", "arc-runner-set-abcde-0x"}
	ours := runnername.Pod(runnername.New("arc-runner-set"))
	var listed orgRunners
	for i, name := range append(arc, ours) {
		listed = append(listed, githubapi.Runner{ID: int64(i + 1), Name: name, Status: "online", Labels: []string{"arc-runner-set"}})
		if mine := runnername.IsPodOf("arc-runner-set", name); mine != (name == ours) {
			t.Errorf("%s taken for the pool's: %v", name, mine)
		}
	}
	left, err := teardown.NewRegistrations(listed, cfg).Left(t.Context())
	if err != nil || len(left) != 1 || !strings.Contains(left[0], ours) {
		t.Errorf("left on GitHub %v (%v), want only %s", left, err, ours)
	}
}
