package pool_test

import (
	"strings"
	"testing"

	"github.com/runnerscaler/runnerscaler/internal/pool"
)

// TestRegistrationTokenWithDockerNeedsTheOptIn: a pool whose runners register
// with the scope's registration token (persistent, or registration: token) and
// whose jobs can use docker — root on the node, where they read the token — is
// refused, naming the pool, the docker field and the opt-in, unless it states
// allowJobsToReadRegistrationToken; a JIT pool with docker needs nothing, and may
// not state the opt-in, which would allow nothing.
func TestRegistrationTokenWithDockerNeedsTheOptIn(t *testing.T) {
	t.Parallel()
	const base = "pools:\n  - name: ci\n    organization: acme\n    maxReplicas: 3\n    kubernetes: {namespace: ns, image: runner:1%s}\n"
	for _, tc := range []struct {
		name, docker, extra, want string
	}{
		{"persistent, docker sidecar", ", dockerEnabled: true", "    ephemeral: false\n",
			"pools[0] (ci): kubernetes.dockerEnabled: a job that uses docker runs privileged containers, which are root on the node, " +
				"so the pool's jobs can read the registration token its runners register with, and with it register runners of their own " +
				"in organization acme for up to an hour"},
		{"ephemeral token pool, dockerd in the runner", ", dockerdWithinRunnerContainer: true", "    registration: token\n",
			"pools[0] (ci): kubernetes.dockerdWithinRunnerContainer: a job that uses docker"},
		{"persistent: the way out", ", dockerEnabled: true", "    ephemeral: false\n", "use ephemeral runners with JIT configs (ephemeral: true)"},
		{"ephemeral token pool: the way out", ", dockerEnabled: true", "    registration: token\n", "use registration: jit,"},
		{"the opt-in named", ", dockerEnabled: true", "    ephemeral: false\n", "or accept the risk with allowJobsToReadRegistrationToken: true"},
		{"opted in", ", dockerEnabled: true", "    ephemeral: false\n    allowJobsToReadRegistrationToken: true\n", ""},
		{"opted in, registration token", ", dockerdWithinRunnerContainer: true", "    registration: token\n    allowJobsToReadRegistrationToken: true\n", ""},
		{"JIT pool with docker", ", dockerEnabled: true", "", ""},
		{"persistent without docker", "", "    ephemeral: false\n", ""},
		{"opt-in on a JIT pool", "", "    allowJobsToReadRegistrationToken: true\n",
			"pools[0] (ci): allowJobsToReadRegistrationToken: the pool's runners register with JIT configs, not the registration token"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			cfg, err := pool.Parse([]byte(strings.Replace(base, "%s", tc.docker, 1) + tc.extra))
			switch {
			case tc.want == "" && err != nil:
				t.Fatalf("refused: %v", err)
			case tc.want != "" && (err == nil || !strings.Contains(err.Error(), tc.want)):
				t.Fatalf("error = %v\nwant it to contain %q", err, tc.want)
			case tc.want == "" && cfg.Pool("ci").AllowJobsToReadRegistrationToken != strings.Contains(tc.extra, "allowJobs"):
				t.Fatalf("allowJobsToReadRegistrationToken = %v, want what the file says", cfg.Pool("ci").AllowJobsToReadRegistrationToken)
			}
		})
	}
}

// TestTokenReadable: the words package runnerpod refuses a template's setting
// with, at the field it names; nothing for a pool without the token, or with
// the opt-in.
func TestTokenReadable(t *testing.T) {
	t.Parallel()
	cfg, err := pool.Parse([]byte(`
pools:
  - {name: jit, repository: acme/app, maxReplicas: 1, kubernetes: {namespace: ns, image: r}}
  - {name: token, repository: acme/app, ephemeral: false, maxReplicas: 1, kubernetes: {namespace: ns, image: r}}
  - {name: accepted, repository: acme/app, ephemeral: false, allowJobsToReadRegistrationToken: true, maxReplicas: 1, kubernetes: {namespace: ns, image: r}}
`))
	if err != nil {
		t.Fatal(err)
	}
	const field, how = "kubernetes.template: spec.securityContext.runAsUser", "every job step runs as the entrypoint's user"
	if err := cfg.Pool("jit").TokenReadable(field, how); err != nil {
		t.Errorf("JIT pool: %v, want nil", err)
	}
	if err := cfg.Pool("accepted").TokenReadable(field, how); err != nil {
		t.Errorf("pool that accepts the risk: %v, want nil", err)
	}
	err = cfg.Pool("token").TokenReadable(field, how)
	if err == nil || pool.FieldOf(err) != "kubernetes.template" ||
		!strings.HasPrefix(err.Error(), field+": "+how+", so the pool's jobs can read the registration token") ||
		!strings.Contains(err.Error(), "in repository acme/app for up to an hour") {
		t.Fatalf("token pool: %v", err)
	}
}
