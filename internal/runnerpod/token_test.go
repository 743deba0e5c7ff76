package runnerpod_test

import (
	"fmt"
	"path"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"

	"github.com/runnerscaler/runnerscaler/internal/pool"
	"github.com/runnerscaler/runnerscaler/internal/runnerpod"
)

// TestTokenComesAsAFile: a token runner's container gets no variable from its
// Secret — a variable would stay in /proc/1/environ for the container's life —
// but RUNNER_TOKEN_FILE, naming the token's file in its Secret, mounted
// read-only inside the state directory (which the entrypoint keeps root's),
// after the state volume. A JIT runner keeps its config in its environment and
// mounts no Secret.
func TestTokenComesAsAFile(t *testing.T) {
	t.Parallel()
	cfg := parsePool(t, `template: {spec: {containers: [{name: runner, image: r}]}}`)
	p := cfg.Pool("p")
	tmpl, err := runnerpod.Template(p)
	if err != nil {
		t.Fatal(err)
	}
	build := func(creds runnerpod.Credentials) corev1.PodSpec {
		return runnerpod.StatefulSet(runnerpod.Spec{Pool: p, Template: tmpl, Hash: "h", Name: "p-abcde", Creds: creds}).Spec.Template.Spec
	}

	spec := build(runnerpod.Credentials{Token: "AAAA"})
	c := spec.Containers[0]
	for _, e := range c.Env {
		if e.ValueFrom != nil && e.ValueFrom.SecretKeyRef != nil || e.Name == "RUNNER_TOKEN" || strings.Contains(e.Value, "AAAA") {
			t.Errorf("token runner: variable %+v: the token must not be in the environment", e)
		}
	}
	if got := envValue(c, "RUNNER_TOKEN_FILE"); got != runnerpod.TokenFile || path.Dir(path.Dir(got)) != runnerpod.StateDir {
		t.Errorf("RUNNER_TOKEN_FILE %s, want %s, in a directory of %s", got, runnerpod.TokenFile, runnerpod.StateDir)
	}
	var vol *corev1.Volume
	for i := range spec.Volumes {
		if spec.Volumes[i].Name == runnerpod.TokenVolume {
			vol = &spec.Volumes[i]
		}
	}
	if vol == nil || vol.Secret == nil || vol.Secret.SecretName != "p-abcde" || len(vol.Secret.Items) != 0 ||
		vol.Secret.Optional != nil && *vol.Secret.Optional {
		t.Fatalf("token volume %+v, want the whole of the runner's Secret (a key removed from it is a file removed)", vol)
	}
	mounts := map[string]int{}
	for i, m := range c.VolumeMounts {
		mounts[m.Name] = i
		if m.Name == runnerpod.TokenVolume && (m.MountPath != runnerpod.TokenDir || !m.ReadOnly || m.SubPath != "") {
			t.Errorf("token mount %+v, want read-only at %s, no subPath (the kubelet does not update those)", m, runnerpod.TokenDir)
		}
	}
	if s, tok := mounts[runnerpod.StateVolume], mounts[runnerpod.TokenVolume]; tok <= s {
		t.Errorf("mounts %+v: the token's must come after the state volume's, which it is inside of", c.VolumeMounts)
	}

	spec = build(runnerpod.Credentials{JITConfig: "jit", RunnerID: 7})
	c = spec.Containers[0]
	if got := envValue(c, "RUNNER_TOKEN_FILE"); got != "unset" {
		t.Errorf("JIT runner: RUNNER_TOKEN_FILE %s", got)
	}
	for _, v := range spec.Volumes {
		if v.Secret != nil {
			t.Errorf("JIT runner mounts a Secret: %+v", v)
		}
	}
	found := false
	for _, e := range c.Env {
		if e.Name == "ACTIONS_RUNNER_INPUT_JITCONFIG" && e.ValueFrom != nil && e.ValueFrom.SecretKeyRef != nil &&
			e.ValueFrom.SecretKeyRef.Name == "p-abcde" && e.ValueFrom.SecretKeyRef.Key == runnerpod.SecretJITConfig {
			found = true
		}
	}
	if !found {
		t.Errorf("JIT runner: no ACTIONS_RUNNER_INPUT_JITCONFIG from its Secret: %+v", c.Env)
	}
}

// TestTemplateThatLetsJobsReadTheTokenIsRefused: a pool that uses the
// registration token is refused, naming the pool and the field, with a template
// (or service account) that lets its jobs read the token — a job as the
// entrypoint's user, a way to root, the node's processes, a Kubernetes token —
// unless it states allowJobsToReadRegistrationToken. The same template passes for
// a JIT pool, and what keeps the token from the jobs passes everywhere.
func TestTemplateThatLetsJobsReadTheTokenIsRefused(t *testing.T) {
	t.Parallel()
	runner := func(sc string) string {
		return fmt.Sprintf(`template: {spec: {containers: [{name: runner, image: r, securityContext: %s}]}}`, sc)
	}
	cases := map[string]struct{ kubernetes, want string }{
		"container user":      {runner(`{runAsUser: 1001}`), "kubernetes.template: spec.containers[0].securityContext.runAsUser: every job step runs as the entrypoint's own user"},
		"container non-root":  {runner(`{runAsNonRoot: true}`), "kubernetes.template: spec.containers[0].securityContext.runAsNonRoot: "},
		"pod user":            {`template: {spec: {securityContext: {runAsUser: 1001}, containers: [{name: runner, image: r}]}}`, "kubernetes.template: spec.securityContext.runAsUser: "},
		"pod non-root":        {`template: {spec: {securityContext: {runAsNonRoot: true}, containers: [{name: runner, image: r}]}}`, "kubernetes.template: spec.securityContext.runAsNonRoot: "},
		"escalation":          {runner(`{allowPrivilegeEscalation: true}`), "kubernetes.template: spec.containers[0].securityContext.allowPrivilegeEscalation: a job step may become root"},
		"privileged runner":   {runner(`{privileged: true}`), "kubernetes.template: spec.containers[0].securityContext.privileged: "},
		"CAP_SYS_ADMIN":       {runner(`{capabilities: {add: [CAP_SYS_ADMIN]}}`), "kubernetes.template: spec.containers[0].securityContext.capabilities.add: "},
		"host processes":      {`template: {spec: {hostPID: true, containers: [{name: runner, image: r}]}}`, "kubernetes.template: spec.hostPID: a job step sees the node's processes"},
		"service account":     {"serviceAccountName: ci\n      image: r", "kubernetes.serviceAccountName: every job step gets the service account's Kubernetes token"},
		"template's account":  {`template: {spec: {serviceAccountName: ci, containers: [{name: runner, image: r}]}}`, "kubernetes.template: spec.serviceAccountName: "},
		"token asked for":     {`template: {spec: {automountServiceAccountToken: true, containers: [{name: runner, image: r}]}}`, "kubernetes.template: spec.automountServiceAccountToken: "},
		"account, no token":   {"serviceAccountName: ci\n      template: {spec: {automountServiceAccountToken: false, containers: [{name: runner, image: r}]}}", ""},
		"root, said":          {runner(`{runAsUser: 0}`), ""},
		"no escalation, said": {runner(`{allowPrivilegeEscalation: false, capabilities: {drop: [ALL]}}`), ""},
		"defaults":            {"image: r", ""},
	}
	for name, c := range cases {
		for _, mode := range []string{"ephemeral: false", "registration: token", "ephemeral: false\n    allowJobsToReadRegistrationToken: true", "registration: jit"} {
			t.Run(name+"/"+strings.ReplaceAll(mode, "\n    ", ", "), func(t *testing.T) {
				t.Parallel()
				cfg, err := pool.Parse([]byte(fmt.Sprintf(`
pools:
  - name: p
    organization: acme
    maxReplicas: 1
    %s
    kubernetes:
      namespace: ns
      %s
`, mode, c.kubernetes)))
				if err != nil {
					t.Fatal(err)
				}
				want := c.want
				if mode == "registration: jit" || strings.Contains(mode, "allowJobs") {
					want = ""
				}
				err = runnerpod.Validate(cfg)
				switch {
				case want == "" && err != nil:
					t.Fatalf("Validate: %v, want nil", err)
				case want != "" && (err == nil || !strings.HasPrefix(err.Error(), "pool p: "+want) ||
					!strings.Contains(err.Error(), "register runners of their own in organization acme") ||
					!strings.HasSuffix(err.Error(), "or accept the risk with allowJobsToReadRegistrationToken: true")):
					t.Fatalf("Validate: %v\nwant it to begin with pool p: %q, and name the risk and the opt-in", err, want)
				}
			})
		}
	}
}

// TestTemplateCannotTakeTheTokenFile: the token's variable, volume and
// directory are the runnerscaler's.
func TestTemplateCannotTakeTheTokenFile(t *testing.T) {
	t.Parallel()
	cases := map[string]struct{ kubernetes, want string }{
		"variable": {`template: {spec: {containers: [{name: runner, image: r, env: [{name: RUNNER_TOKEN_FILE, value: /x}]}]}}`,
			`spec.containers[0].env[0].name: "RUNNER_TOKEN_FILE" is the runnerscaler's to set`},
		"volume": {`template: {spec: {volumes: [{name: runner-registration, emptyDir: {}}], containers: [{name: runner, image: r}]}}`,
			`spec.volumes[0].name: "runner-registration" is the runner's registration token`},
		"mount": {`template: {spec: {containers: [{name: runner, image: r}, {name: side, image: s, volumeMounts: [{name: runner-registration, mountPath: /t}]}]}}`,
			`spec.containers[1].volumeMounts[0].name: "runner-registration"`},
		"claim": {"volumeClaimTemplates: [{metadata: {name: runner-registration}, spec: {accessModes: [ReadWriteOnce], resources: {requests: {storage: 1Gi}}}}]\n      image: r",
			`kubernetes.volumeClaimTemplates[0].metadata.name: "runner-registration"`},
		"directory": {"template: {spec: {volumes: [{name: v, emptyDir: {}}], containers: [{name: runner, image: r, volumeMounts: [{name: v, mountPath: /runner-state/registration}]}]}}",
			`volumeMounts[0].mountPath: "/runner-state/registration" is inside /runner-state`},
	}
	for name, c := range cases {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			err := runnerpod.Validate(parsePool(t, c.kubernetes))
			if err == nil || !strings.HasPrefix(err.Error(), "pool p: ") || !strings.Contains(err.Error(), c.want) {
				t.Fatalf("Validate: %v, want pool p and %q", err, c.want)
			}
		})
	}
}
