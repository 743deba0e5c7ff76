package runnerpod_test

import (
	"fmt"
	"slices"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/utils/ptr"

	"github.com/runnerscaler/runnerscaler/internal/pool"
	"github.com/runnerscaler/runnerscaler/internal/runnerpod"
)

// TestShippedPoolsAreAdmissible: the pools files we ship pass the checks.
func TestShippedPoolsAreAdmissible(t *testing.T) {
	t.Parallel()
	for _, path := range []string{"../../infra/pools.example.yaml", "../../infra/pools.yaml", "../../local/pools.yaml"} {
		cfg, err := pool.Load(path)
		if err != nil {
			t.Fatal(err)
		}
		if err := runnerpod.Validate(cfg); err != nil {
			t.Errorf("%s: %v", path, err)
		}
	}
}

// TestValidateNamesPoolAndField: a template the API server would refuse in a
// StatefulSet fails Validate with the pool and the field's path. (That the server
// refuses each one is checked against a real API server in package reconcile.)
func TestValidateNamesPoolAndField(t *testing.T) {
	t.Parallel()
	cases := map[string]struct{ spec, want string }{
		"restart policy":    {`{restartPolicy: OnFailure, containers: [{name: runner, image: r}]}`, `kubernetes.template: spec.restartPolicy: "OnFailure"`},
		"no image":          {`{containers: [{name: runner, image: r}, {name: side}]}`, "spec.containers[1].image: required"},
		"claim is a volume": {`{containers: [{name: runner, image: r, volumeMounts: [{name: work, mountPath: /w}]}]}`, ""},
		"docker sidecar":    {`{containers: [{name: runner, image: r}]}`, ""},
		"runner readiness probe": {`{containers: [{name: runner, image: r, readinessProbe: {exec: {command: ["true"]}}}]}`,
			"kubernetes.template: the runner container's readinessProbe"},
	}
	for name, c := range cases {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			raw := fmt.Sprintf(`
pools:
  - name: p
    organization: acme
    maxReplicas: 1
    kubernetes:
      namespace: ns
      dockerEnabled: true
      template: {spec: %s}
      volumeClaimTemplates: [{metadata: {name: work}, spec: {accessModes: [ReadWriteOnce], resources: {requests: {storage: 1Gi}}}}]
`, c.spec)
			cfg, err := pool.Parse([]byte(raw))
			if err != nil {
				t.Fatal(err)
			}
			err = runnerpod.Validate(cfg)
			switch {
			case c.want == "" && err != nil:
				t.Fatalf("Validate: %v, want nil", err)
			case c.want != "" && (err == nil || !strings.HasPrefix(err.Error(), "pool p: ") || !strings.Contains(err.Error(), c.want)):
				t.Fatalf("Validate: %v, want pool p and %q", err, c.want)
			}
		})
	}
}

// TestCredentialsProtectedByDefault: the runner container starts as root (so that
// its entrypoint keeps the credentials from the jobs) unless the template chooses
// a user, and no service account token is mounted unless the template asks for
// one or names a service account.
func TestCredentialsProtectedByDefault(t *testing.T) {
	t.Parallel()
	root, user := ptr.To[int64](0), ptr.To[int64](1001)
	cases := []struct {
		name       string
		kubernetes string // lines under kubernetes:
		wantUser   *int64
		wantMount  *bool
		privileged bool
	}{
		{"defaults", `template: {spec: {containers: [{name: runner, image: r}]}}`, root, ptr.To(false), false},
		{"container securityContext without a user",
			`template: {spec: {containers: [{name: runner, image: r, securityContext: {capabilities: {drop: [NET_RAW]}}}]}}`, root, ptr.To(false), false},
		{"container user", `template: {spec: {containers: [{name: runner, image: r, securityContext: {runAsUser: 1001}}]}}`, user, ptr.To(false), false},
		{"container non-root", `template: {spec: {containers: [{name: runner, image: r, securityContext: {runAsNonRoot: true}}]}}`, nil, ptr.To(false), false},
		{"pod user", `template: {spec: {securityContext: {runAsUser: 1001}, containers: [{name: runner, image: r}]}}`, nil, ptr.To(false), false},
		{"pod non-root", `template: {spec: {securityContext: {runAsNonRoot: true}, containers: [{name: runner, image: r}]}}`, nil, ptr.To(false), false},
		{"service account", "serviceAccountName: ci\n      image: r", root, nil, false},
		{"token asked for", `template: {spec: {automountServiceAccountToken: true, containers: [{name: runner, image: r}]}}`, root, ptr.To(true), false},
		{"dockerd in the runner, user kept",
			"dockerdWithinRunnerContainer: true\n      template: {spec: {containers: [{name: runner, image: r, securityContext: {runAsUser: 1001}}]}}", user, ptr.To(false), true},
		{"dockerd in the runner", "dockerdWithinRunnerContainer: true\n      image: r", root, ptr.To(false), true},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			cfg, err := pool.Parse([]byte(fmt.Sprintf(`
pools:
  - name: p
    organization: acme
    maxReplicas: 1
    kubernetes:
      namespace: ns
      %s
`, tc.kubernetes)))
			if err != nil {
				t.Fatal(err)
			}
			p := cfg.Pool("p")
			tmpl, err := runnerpod.Template(p)
			if err != nil {
				t.Fatal(err)
			}
			sts := runnerpod.StatefulSet(runnerpod.Spec{Pool: p, Template: tmpl, Hash: "h", Name: "p-abcde",
				Creds: runnerpod.Credentials{JITConfig: "jit"}})
			spec := sts.Spec.Template.Spec
			c := spec.Containers[0]
			var gotUser *int64
			var privileged bool
			if c.SecurityContext != nil {
				gotUser, privileged = c.SecurityContext.RunAsUser, ptr.Deref(c.SecurityContext.Privileged, false)
			}
			if !equalPtr(gotUser, tc.wantUser) || !equalPtr(spec.AutomountServiceAccountToken, tc.wantMount) || privileged != tc.privileged {
				t.Fatalf("runAsUser %v, automountServiceAccountToken %v, privileged %v; want %v, %v, %v",
					str(gotUser), str(spec.AutomountServiceAccountToken), privileged, str(tc.wantUser), str(tc.wantMount), tc.privileged)
			}
			if tc.name == "container securityContext without a user" && (c.SecurityContext.Capabilities == nil || len(c.SecurityContext.Capabilities.Drop) != 1) {
				t.Fatalf("the template's securityContext was replaced: %+v", c.SecurityContext)
			}
		})
	}
}

func equalPtr[T comparable](a, b *T) bool { return (a == nil) == (b == nil) && (a == nil || *a == *b) }

func str[T any](p *T) string {
	if p == nil {
		return "unset"
	}
	return fmt.Sprint(*p)
}

// parsePool parses a one-pool file whose kubernetes mapping has the given lines
// (after namespace), failing the test on a parse error.
func parsePool(t *testing.T, kubernetes string) *pool.Config {
	t.Helper()
	cfg, err := pool.Parse([]byte(fmt.Sprintf(`
pools:
  - name: p
    organization: acme
    maxReplicas: 1
    kubernetes:
      namespace: ns
      %s
`, kubernetes)))
	if err != nil {
		t.Fatal(err)
	}
	return cfg
}

// TestTemplateCannotSetWhatTheRunnerscalerOwns: a template that sets the control
// annotations, the labels that select the runner's objects, the credentials or
// the environment the entrypoint keeps them and stops safely with, or that
// collides with the state volume or the state and job directories, fails
// Validate naming the pool and the field. What a pool may tune still passes.
func TestTemplateCannotSetWhatTheRunnerscalerOwns(t *testing.T) {
	t.Parallel()
	runnerWith := func(field string) string {
		return fmt.Sprintf(`template: {spec: {containers: [{name: runner, image: r, %s}]}}`, field)
	}
	env := func(name string) string {
		return runnerWith(fmt.Sprintf(`env: [{name: USER_SETTING, value: x}, {name: %s, value: "1"}]`, name))
	}
	cases := map[string]struct{ kubernetes, want string }{
		"stop-complete annotation": {`template: {metadata: {annotations: {actions-runner/unregistration-complete-timestamp: "2026-01-01T00:00:00Z"}}, spec: {containers: [{name: runner, image: r}]}}`,
			`kubernetes.template: metadata.annotations["actions-runner/unregistration-complete-timestamp"]`},
		"runner id annotation": {`template: {metadata: {annotations: {actions-runner/id: "7"}}, spec: {containers: [{name: runner, image: r}]}}`,
			`metadata.annotations["actions-runner/id"]`},
		"jit runner id annotation": {`template: {metadata: {annotations: {runnerscaler.dev/jit-runner-id: "7"}}, spec: {containers: [{name: runner, image: r}]}}`,
			`metadata.annotations["runnerscaler.dev/jit-runner-id"]`},
		"deployment annotation": {`template: {metadata: {annotations: {runnerscaler.dev/deployment: other}}, spec: {containers: [{name: runner, image: r}]}}`,
			`metadata.annotations["runnerscaler.dev/deployment"]`},
		"karpenter do-not-disrupt": {`template: {metadata: {annotations: {karpenter.sh/do-not-disrupt: "true"}}, spec: {containers: [{name: runner, image: r}]}}`,
			`metadata.annotations["karpenter.sh/do-not-disrupt"]`},
		"cluster-autoscaler safe-to-evict": {`template: {metadata: {annotations: {cluster-autoscaler.kubernetes.io/safe-to-evict: "false"}}, spec: {containers: [{name: runner, image: r}]}}`,
			`metadata.annotations["cluster-autoscaler.kubernetes.io/safe-to-evict"]`},
		"pool label": {`template: {metadata: {labels: {runnerscaler.dev/pool: other}}, spec: {containers: [{name: runner, image: r}]}}`,
			`metadata.labels["runnerscaler.dev/pool"]`},
		"template-hash label": {`template: {metadata: {labels: {runnerscaler.dev/template-hash: x}}, spec: {containers: [{name: runner, image: r}]}}`,
			`metadata.labels["runnerscaler.dev/template-hash"]`},
		"finalizer": {`template: {metadata: {finalizers: [runnerscaler.dev/unregister]}, spec: {containers: [{name: runner, image: r}]}}`,
			`metadata.finalizers[0]: "runnerscaler.dev/unregister"`},
		"JIT config":          {env("ACTIONS_RUNNER_INPUT_JITCONFIG"), `spec.containers[0].env[1].name: "ACTIONS_RUNNER_INPUT_JITCONFIG"`},
		"runner input":        {env("ACTIONS_RUNNER_INPUT_TOKEN"), `spec.containers[0].env[1].name: "ACTIONS_RUNNER_INPUT_TOKEN"`},
		"token":               {env("RUNNER_TOKEN"), `spec.containers[0].env[1].name: "RUNNER_TOKEN"`},
		"state dir":           {env("RUNNER_STATE_DIR"), `env[1].name: "RUNNER_STATE_DIR"`},
		"job dir":             {env("RUNNER_JOB_DIR"), `env[1].name: "RUNNER_JOB_DIR"`},
		"name":                {env("RUNNER_NAME"), `env[1].name: "RUNNER_NAME"`},
		"labels":              {env("RUNNER_LABELS"), `env[1].name: "RUNNER_LABELS"`},
		"ephemeral":           {env("RUNNER_EPHEMERAL"), `env[1].name: "RUNNER_EPHEMERAL"`},
		"scope":               {env("RUNNER_ORG"), `env[1].name: "RUNNER_ORG"`},
		"github url":          {env("GITHUB_URL"), `env[1].name: "GITHUB_URL"`},
		"privilege drop":      {env("RUNNER_SETPRIV"), `env[1].name: "RUNNER_SETPRIV"`},
		"hooks dir":           {env("RUNNER_HOOKS_DIR"), `env[1].name: "RUNNER_HOOKS_DIR"`},
		"worker pattern":      {env("RUNNER_WORKER_PATTERN"), `env[1].name: "RUNNER_WORKER_PATTERN"`},
		"state volume":        {`template: {spec: {volumes: [{name: runner-state, emptyDir: {}}], containers: [{name: runner, image: r}]}}`, `spec.volumes[0].name: "runner-state"`},
		"state volume mount":  {`template: {spec: {containers: [{name: runner, image: r}, {name: side, image: s, volumeMounts: [{name: runner-state, mountPath: /s}]}]}}`, `spec.containers[1].volumeMounts[0].name: "runner-state"`},
		"state volume claim":  {"volumeClaimTemplates: [{metadata: {name: runner-state}, spec: {accessModes: [ReadWriteOnce], resources: {requests: {storage: 1Gi}}}}]\n      image: r", `kubernetes.volumeClaimTemplates[0].metadata.name: "runner-state"`},
		"state dir mount":     {"template: {spec: {volumes: [{name: v, emptyDir: {}}], containers: [{name: runner, image: r, volumeMounts: [{name: v, mountPath: /runner-state}]}]}}", `spec.containers[0].volumeMounts[0].mountPath: "/runner-state"`},
		"inside the state":    {"template: {spec: {volumes: [{name: v, emptyDir: {}}], containers: [{name: runner, image: r, volumeMounts: [{name: v, mountPath: /runner-state/ran/}]}]}}", `volumeMounts[0].mountPath: "/runner-state/ran/"`},
		"job dir mount":       {"template: {spec: {volumes: [{name: v, emptyDir: {}}], containers: [{name: runner, image: r, volumeMounts: [{name: v, mountPath: /run/runner-job}]}]}}", `volumeMounts[0].mountPath: "/run/runner-job"`},
		"init container user": {"template: {spec: {volumes: [{name: v, emptyDir: {}}], initContainers: [{name: init, image: i, volumeMounts: [{name: runner-state, mountPath: /s}]}], containers: [{name: runner, image: r}]}}", `spec.initContainers[0].volumeMounts[0].name: "runner-state"`},
		"pool may tune": {"template: {metadata: {annotations: {example.com/team: ci}, labels: {app: ci}}, spec: {volumes: [{name: run, emptyDir: {}}], " +
			"containers: [{name: runner, image: r, volumeMounts: [{name: run, mountPath: /run}], env: [{name: RUNNER_GRACEFUL_STOP_TIMEOUT, value: \"60\"}, " +
			"{name: RUNNER_STOP_SETTLE_MS, value: \"500\"}, {name: RUNNER_USER, value: ci}, {name: RUNNER_WORKDIR, value: /w}, {name: DOCKER_HOST, value: tcp://d:2375}, " +
			"{name: ACTIONS_RUNNER_HOOK_JOB_STARTED, value: /h.sh}]}]}}", ""},
	}
	for name, c := range cases {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			err := runnerpod.Validate(parsePool(t, c.kubernetes))
			switch {
			case c.want == "" && err != nil:
				t.Fatalf("Validate: %v, want nil", err)
			case c.want != "" && (err == nil || !strings.HasPrefix(err.Error(), "pool p: ") || !strings.Contains(err.Error(), c.want)):
				t.Fatalf("Validate: %v, want pool p and %q", err, c.want)
			}
		})
	}
}

// runnerPod builds the pod template of the pool's runner StatefulSet.
func runnerPod(t *testing.T, cfg *pool.Config) corev1.PodSpec {
	t.Helper()
	p := cfg.Pool("p")
	tmpl, err := runnerpod.Template(p)
	if err != nil {
		t.Fatal(err)
	}
	return runnerpod.StatefulSet(runnerpod.Spec{Pool: p, Template: tmpl, Hash: "h", Name: "p-abcde",
		Creds: runnerpod.Credentials{JITConfig: "jit"}}).Spec.Template.Spec
}

func envValue(c corev1.Container, name string) string {
	v := "unset"
	for _, e := range c.Env {
		if e.Name == name {
			v = e.Value
		}
	}
	return v
}

// TestTerminationGracePeriodCoversTheGracefulStop: the pod's grace period is at
// least the entrypoint's wait for a job (RUNNER_GRACEFUL_STOP_TIMEOUT), twice its
// settling time (RUNNER_STOP_SETTLE_MS, rounded up to seconds) and 15 s for the
// runner to cancel and report the job: derived when the template leaves it
// unset, refused when the template makes it shorter. The wait and the settling
// time the period was derived from are written into the runner's environment.
func TestTerminationGracePeriodCoversTheGracefulStop(t *testing.T) {
	t.Parallel()
	runner := func(fields, container string) string {
		return fmt.Sprintf(`template: {spec: {%s containers: [{name: runner, image: r, %s}]}}`, fields, container)
	}
	grace := func(v string) string { return fmt.Sprintf(`env: [{name: RUNNER_GRACEFUL_STOP_TIMEOUT, value: %q}]`, v) }
	cases := map[string]struct {
		kubernetes string
		want       int64  // the pod's terminationGracePeriodSeconds
		wantGrace  string // the runner's RUNNER_GRACEFUL_STOP_TIMEOUT
		err        string
	}{
		"defaults":                {kubernetes: "image: r", want: 32, wantGrace: "15"},
		"longer wait":             {kubernetes: runner("", grace("60")), want: 77, wantGrace: "60"},
		"longer settle":           {kubernetes: runner("", `env: [{name: RUNNER_STOP_SETTLE_MS, value: "2500"}]`), want: 36, wantGrace: "15"},
		"no settle":               {kubernetes: runner("", `env: [{name: RUNNER_STOP_SETTLE_MS, value: "0"}]`), want: 30, wantGrace: "15"},
		"last value counts":       {kubernetes: runner("", `env: [{name: RUNNER_GRACEFUL_STOP_TIMEOUT, value: "90"}, {name: RUNNER_GRACEFUL_STOP_TIMEOUT, value: "5"}]`), want: 22, wantGrace: "5"},
		"template's, long enough": {kubernetes: runner("terminationGracePeriodSeconds: 32,", ""), want: 32, wantGrace: "15"},
		"template's, longer":      {kubernetes: runner("terminationGracePeriodSeconds: 3600,", grace("60")), want: 3600, wantGrace: "60"},
		"dockerd in the runner":   {kubernetes: "dockerdWithinRunnerContainer: true\n      image: r", want: 32, wantGrace: "15"},
		"docker sidecar":          {kubernetes: "dockerEnabled: true\n      image: r", want: 32, wantGrace: "15"},
		"too short": {kubernetes: runner("terminationGracePeriodSeconds: 31,", ""),
			err: "kubernetes.template: spec.terminationGracePeriodSeconds: 31 is too short"},
		"too short for the wait": {kubernetes: runner("terminationGracePeriodSeconds: 60,", grace("50")),
			err: "spec.terminationGracePeriodSeconds: 60 is too short"},
		"not a number": {kubernetes: runner("", grace("15s")), err: `spec.containers[0].env[0].value: "15s"`},
		"from a secret": {kubernetes: runner("", `env: [{name: RUNNER_STOP_SETTLE_MS, valueFrom: {secretKeyRef: {name: s, key: k}}}]`),
			err: "spec.containers[0].env[0].valueFrom"},
		"short liveness grace": {kubernetes: runner("", `livenessProbe: {exec: {command: ["true"]}, terminationGracePeriodSeconds: 5}`),
			err: "spec.containers[0].livenessProbe.terminationGracePeriodSeconds: 5 is too short"},
	}
	for name, c := range cases {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			cfg := parsePool(t, c.kubernetes)
			err := runnerpod.Validate(cfg)
			if c.err != "" {
				if err == nil || !strings.HasPrefix(err.Error(), "pool p: ") || !strings.Contains(err.Error(), c.err) {
					t.Fatalf("Validate: %v, want pool p and %q", err, c.err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			spec := runnerPod(t, cfg)
			if got := spec.TerminationGracePeriodSeconds; got == nil || *got != c.want {
				t.Fatalf("terminationGracePeriodSeconds %v, want %d", str(got), c.want)
			}
			if got := envValue(spec.Containers[0], "RUNNER_GRACEFUL_STOP_TIMEOUT"); got != c.wantGrace {
				t.Fatalf("RUNNER_GRACEFUL_STOP_TIMEOUT %s, want %s", got, c.wantGrace)
			}
		})
	}
}

// TestNoPrivilegeEscalationByDefault: the runner container gets
// allowPrivilegeEscalation false unless the template sets it or the container is
// privileged (dockerd in the runner) or adds CAP_SYS_ADMIN, which the API server
// refuses together with it; the docker sidecar is left as it is.
func TestNoPrivilegeEscalationByDefault(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name, kubernetes string
		want             *bool
	}{
		{"defaults", "image: r", ptr.To(false)},
		{"a user chosen", `template: {spec: {containers: [{name: runner, image: r, securityContext: {runAsUser: 1001}}]}}`, ptr.To(false)},
		{"template allows it", `template: {spec: {containers: [{name: runner, image: r, securityContext: {allowPrivilegeEscalation: true}}]}}`, ptr.To(true)},
		{"template forbids it", `template: {spec: {containers: [{name: runner, image: r, securityContext: {allowPrivilegeEscalation: false}}]}}`, ptr.To(false)},
		{"docker sidecar", "dockerEnabled: true\n      image: r", ptr.To(false)},
		{"dockerd in the runner", "dockerdWithinRunnerContainer: true\n      image: r", nil},
		{"privileged template", `template: {spec: {containers: [{name: runner, image: r, securityContext: {privileged: true}}]}}`, nil},
		{"CAP_SYS_ADMIN", `template: {spec: {containers: [{name: runner, image: r, securityContext: {capabilities: {add: [CAP_SYS_ADMIN]}}}]}}`, nil},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			cfg := parsePool(t, tc.kubernetes)
			if err := runnerpod.Validate(cfg); err != nil {
				t.Fatal(err)
			}
			spec := runnerPod(t, cfg)
			var got *bool
			if sc := spec.Containers[0].SecurityContext; sc != nil {
				got = sc.AllowPrivilegeEscalation
			}
			if !equalPtr(got, tc.want) {
				t.Fatalf("allowPrivilegeEscalation %s, want %s", str(got), str(tc.want))
			}
			for _, c := range slices.Concat(spec.Containers[1:], spec.InitContainers) {
				if sc := c.SecurityContext; c.Name == "docker" && (sc == nil || sc.AllowPrivilegeEscalation != nil || !ptr.Deref(sc.Privileged, false)) {
					t.Fatalf("docker sidecar's securityContext changed: %+v", sc)
				}
			}
		})
	}
}

// TestStateAndJobDirsAreSet: the runner's state and job directories are in its
// environment, last, so that they are the values the kubelet gives it.
func TestStateAndJobDirsAreSet(t *testing.T) {
	t.Parallel()
	c := runnerPod(t, parsePool(t, `template: {spec: {containers: [{name: runner, image: r, env: [{name: A, value: b}]}]}}`)).Containers[0]
	if got := envValue(c, "RUNNER_JOB_DIR"); got != runnerpod.JobDir {
		t.Fatalf("RUNNER_JOB_DIR %s, want %s", got, runnerpod.JobDir)
	}
	if got := envValue(c, "RUNNER_STATE_DIR"); got != runnerpod.StateDir {
		t.Fatalf("RUNNER_STATE_DIR %s, want %s", got, runnerpod.StateDir)
	}
}

// TestDockerSidecarIsANativeSidecar: with dockerEnabled, dockerd runs as a
// native sidecar — the last init container, restartPolicy Always — so that the
// kubelet stops it only after the runner container has exited and a job the
// graceful stop lets finish keeps its docker daemon; no container of the pod is
// named docker. The sidecar keeps what it had as a container (image, privilege,
// TLS off, the work volume shared with the runner) and has no startup probe:
// the runner's entrypoint waits for docker (see the package doc).
func TestDockerSidecarIsANativeSidecar(t *testing.T) {
	t.Parallel()
	cfg := parsePool(t, "dockerEnabled: true\n      template: {spec: {initContainers: [{name: setup, image: s}], containers: [{name: runner, image: r}]}}")
	if err := runnerpod.Validate(cfg); err != nil {
		t.Fatal(err)
	}
	spec := runnerPod(t, cfg)
	for _, c := range spec.Containers {
		if c.Name == "docker" {
			t.Fatalf("a container named docker: %+v; want the sidecar among the init containers only", c)
		}
	}
	if len(spec.InitContainers) != 2 || spec.InitContainers[0].Name != "setup" {
		t.Fatalf("init containers %+v: want the template's setup, then docker", spec.InitContainers)
	}
	d := spec.InitContainers[1]
	if d.Name != runnerpod.DockerContainer || d.Image != runnerpod.DockerImage || d.RestartPolicy == nil || *d.RestartPolicy != corev1.ContainerRestartPolicyAlways {
		t.Fatalf("sidecar %s image %s restartPolicy %v: want %s, %s, Always", d.Name, d.Image, str(d.RestartPolicy), runnerpod.DockerContainer, runnerpod.DockerImage)
	}
	if d.SecurityContext == nil || !ptr.Deref(d.SecurityContext.Privileged, false) || envValue(d, "DOCKER_TLS_CERTDIR") != "" || d.StartupProbe != nil {
		t.Errorf("sidecar %+v: want privileged, DOCKER_TLS_CERTDIR empty, no startup probe", d)
	}
	work := func(c corev1.Container) bool {
		return slices.ContainsFunc(c.VolumeMounts, func(m corev1.VolumeMount) bool { return m.Name == "work" && m.MountPath == "/home/runner/_work" })
	}
	r := spec.Containers[0]
	if !work(d) || !work(r) || !slices.ContainsFunc(spec.Volumes, func(v corev1.Volume) bool { return v.Name == "work" && v.EmptyDir != nil }) {
		t.Errorf("sidecar mounts %+v, runner mounts %+v, volumes %+v: want the work emptyDir in both", d.VolumeMounts, r.VolumeMounts, spec.Volumes)
	}
	if envValue(r, "DOCKER_ENABLED") != "true" || envValue(r, "DOCKER_HOST") != runnerpod.DockerHost {
		t.Errorf("runner env %+v: want DOCKER_ENABLED and DOCKER_HOST %s", r.Env, runnerpod.DockerHost)
	}
}

// TestTemplatesOwnDockerIsKept: a template that has its own container or init
// container named docker keeps it as written, where it is — a plain container
// stays one — and dockerEnabled adds nothing next to it: no second docker
// (which the API server would refuse), no docker settings in the runner.
func TestTemplatesOwnDockerIsKept(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name, spec string
		init       bool // where the template's docker is
	}{
		{"container", `{containers: [{name: runner, image: r}, {name: docker, image: my/dind, args: [--mtu=1400]}]}`, false},
		{"native sidecar", `{initContainers: [{name: docker, image: my/dind, restartPolicy: Always}], containers: [{name: runner, image: r}]}`, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			cfg := parsePool(t, "dockerEnabled: true\n      template: {spec: "+tc.spec+"}")
			if err := runnerpod.Validate(cfg); err != nil {
				t.Fatal(err)
			}
			spec := runnerPod(t, cfg)
			var dockers []corev1.Container
			inInit := false
			for _, c := range slices.Concat(spec.Containers, spec.InitContainers) {
				if c.Name == "docker" {
					dockers = append(dockers, c)
				}
			}
			for _, c := range spec.InitContainers {
				inInit = inInit || c.Name == "docker"
			}
			if len(dockers) != 1 || dockers[0].Image != "my/dind" || inInit != tc.init {
				t.Fatalf("docker containers %+v (among init containers: %v): want the template's only, where it was (init: %v)", dockers, inInit, tc.init)
			}
			if tc.name == "container" && (dockers[0].RestartPolicy != nil || !slices.Equal(dockers[0].Args, []string{"--mtu=1400"})) {
				t.Errorf("docker %+v: want it as written", dockers[0])
			}
			r := spec.Containers[0]
			if envValue(r, "DOCKER_ENABLED") != "unset" || envValue(r, "DOCKER_HOST") != "unset" || len(spec.Volumes) != 1 {
				t.Errorf("runner env %+v, volumes %+v: want no docker settings, the state volume only", r.Env, spec.Volumes)
			}
		})
	}
}

// TestDockerReusesTheTemplatesWorkVolume: a dockerEnabled pool whose template
// has a volume named work (ARC's dind-with-extra-volumes values convert to
// that) or a volume claim template of that name gets no second work volume,
// which the API server would refuse as a duplicate: that volume is the one the
// runner container and the sidecar share at the work directory. A runner
// container that mounts work there already keeps its one mount.
func TestDockerReusesTheTemplatesWorkVolume(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct{ name, kubernetes string }{
		{"template volume", "dockerEnabled: true\n      template: {spec: {containers: [{name: runner, image: r, volumeMounts: [{name: work, mountPath: /runner/_work}]}], " +
			"volumes: [{name: work, hostPath: {path: /data, type: Directory}}]}}"},
		{"mounted at the work directory already", "dockerEnabled: true\n      template: {spec: {containers: [{name: runner, image: r, volumeMounts: [{name: work, mountPath: /home/runner/_work/}]}], " +
			"volumes: [{name: work, ephemeral: {volumeClaimTemplate: {spec: {accessModes: [ReadWriteOnce], resources: {requests: {storage: 1Gi}}}}}}]}}"},
		{"volume claim template", "dockerEnabled: true\n      image: r\n      volumeClaimTemplates: [{metadata: {name: work}, spec: {accessModes: [ReadWriteOnce], resources: {requests: {storage: 1Gi}}}}]"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			cfg := parsePool(t, tc.kubernetes)
			if err := runnerpod.Validate(cfg); err != nil {
				t.Fatal(err)
			}
			spec := runnerPod(t, cfg)
			var works []corev1.Volume
			for _, v := range spec.Volumes {
				if v.Name == runnerpod.WorkVolume {
					works = append(works, v)
				}
			}
			claim := strings.Contains(tc.name, "claim")
			if claim && len(works) != 0 || !claim && (len(works) != 1 || works[0].EmptyDir != nil) {
				t.Fatalf("work volumes %+v: want the template's own, once", works)
			}
			atWorkDir := func(c corev1.Container) int {
				n := 0
				for _, m := range c.VolumeMounts {
					if m.Name == runnerpod.WorkVolume && strings.TrimSuffix(m.MountPath, "/") == "/home/runner/_work" {
						n++
					}
				}
				return n
			}
			if atWorkDir(spec.Containers[0]) != 1 || atWorkDir(spec.InitContainers[len(spec.InitContainers)-1]) != 1 {
				t.Errorf("runner mounts %+v, sidecar mounts %+v: want work at the work directory once in each",
					spec.Containers[0].VolumeMounts, spec.InitContainers[len(spec.InitContainers)-1].VolumeMounts)
			}
		})
	}
}

// TestDockerRefusesAnotherVolumeAtTheWorkDirectory: with dockerEnabled, the
// runner container cannot mount another volume than work at the directory it
// shares with the sidecar: the sidecar would see other files than the runner.
func TestDockerRefusesAnotherVolumeAtTheWorkDirectory(t *testing.T) {
	t.Parallel()
	cfg := parsePool(t, "dockerEnabled: true\n      template: {spec: {containers: [{name: runner, image: r, volumeMounts: [{name: cache, mountPath: /home/runner/_work}]}], "+
		"volumes: [{name: cache, emptyDir: {}}]}}")
	err := runnerpod.Validate(cfg)
	if err == nil || !strings.Contains(err.Error(), `pool p: kubernetes.template: spec.containers[0].volumeMounts[0].name: "cache": dockerEnabled shares the volume "work"`) {
		t.Fatalf("Validate: %v, want the runner's mount of cache refused", err)
	}
}

// TestValidateReportsEveryProblemOfThePod: every refusal of the final pod is
// reported, each with its field — duplicate volume names, a mount path used
// twice, a volume that is not there — not only the first.
func TestValidateReportsEveryProblemOfThePod(t *testing.T) {
	t.Parallel()
	cfg := parsePool(t, "template: {spec: {containers: [{name: runner, image: r, volumeMounts: [{name: a, mountPath: /x}, {name: b, mountPath: /x}, {name: nope, mountPath: /y}]}], "+
		"volumes: [{name: a, emptyDir: {}}, {name: b, emptyDir: {}}, {name: a, emptyDir: {}}]}}")
	err := runnerpod.Validate(cfg)
	if err == nil {
		t.Fatal("Validate: nil")
	}
	for _, want := range []string{
		`pool p: kubernetes.template: spec.volumes[2].name: "a": duplicate volume name`,
		`pool p: kubernetes.template: spec.containers[0].volumeMounts[1].mountPath: "/x": another volume is mounted there`,
		`pool p: kubernetes.template: spec.containers[0].volumeMounts[2].name: "nope": no such volume or volume claim template`,
	} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("Validate:\n%v\nwant a line %q", err, want)
		}
	}
}

// TestValidateRefusesTwoClaimsOfOneName: two volume claim templates of one
// name would give the pod two volumes of that name, which the API server
// refuses: Validate names the second.
func TestValidateRefusesTwoClaimsOfOneName(t *testing.T) {
	t.Parallel()
	cfg := parsePool(t, "image: r\n      volumeClaimTemplates: [{metadata: {name: cache}, spec: {accessModes: [ReadWriteOnce], resources: {requests: {storage: 1Gi}}}}, "+
		"{metadata: {name: cache}, spec: {accessModes: [ReadWriteOnce], resources: {requests: {storage: 2Gi}}}}]")
	err := runnerpod.Validate(cfg)
	if err == nil || !strings.Contains(err.Error(), `pool p: kubernetes.volumeClaimTemplates[1].metadata.name: "cache": duplicate volume claim template name`) {
		t.Fatalf("Validate: %v, want the second claim refused", err)
	}
}
