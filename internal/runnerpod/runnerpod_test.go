package runnerpod_test

import (
	"fmt"
	"strings"
	"testing"

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
