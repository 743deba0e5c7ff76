package poolcheck_test

import (
	"os"
	"strings"
	"testing"

	"github.com/runnerscaler/runnerscaler/internal/poolcheck"
)

// TestPodSecurityRefusesDockerInABaselineNamespace: a docker pool in a
// namespace that enforces baseline is reported at its namespace, naming the
// privileged container; in a privileged namespace, or a plain pool in a
// baseline one, nothing is; a namespace whose level is unknown is not checked.
func TestPodSecurityRefusesDockerInABaselineNamespace(t *testing.T) {
	t.Parallel()
	const file = `pools:
  - name: dind
    organization: acme
    maxReplicas: 2
    kubernetes:
      namespace: actions-runners
      dockerEnabled: true
      image: runner:1
  - name: plain
    organization: acme
    maxReplicas: 2
    kubernetes: {namespace: actions-runners, image: runner:1}
  - name: dind-ok
    organization: acme
    maxReplicas: 2
    kubernetes: {namespace: actions-runners-docker, dockerEnabled: true, image: runner:1}
  - name: elsewhere
    organization: acme
    maxReplicas: 2
    kubernetes: {namespace: unknown, dockerEnabled: true, image: runner:1}
`
	levels := map[string]string{"actions-runners": "baseline", "actions-runners-docker": "privileged"}
	problems := poolcheck.PodSecurity([]byte(file), levels)
	got := positions(problems)
	if len(problems) != 1 || !strings.HasPrefix(got, `6:7: pools[0] (dind): kubernetes.namespace: "actions-runners" enforces Pod Security "baseline", which refuses the runner pods: privileged`) ||
		!strings.Contains(got, "docker") || !strings.Contains(got, "infra/rbac-docker.yaml") {
		t.Fatalf("problems:\n%s\nwant one, the dind pool's, at its namespace", got)
	}
	if p := poolcheck.PodSecurity([]byte(file), map[string]string{"actions-runners": "privileged"}); len(p) != 0 {
		t.Errorf("in a privileged namespace: %s", positions(p))
	}
}

// TestShippedPoolsPassTheirNamespacesPodSecurity: the shipped pools files
// pass the levels infra/rbac.yaml and infra/rbac-docker.yaml give their
// namespaces.
func TestShippedPoolsPassTheirNamespacesPodSecurity(t *testing.T) {
	t.Parallel()
	levels := map[string]string{"actions-runners": "baseline", "actions-runners-docker": "privileged"}
	for _, path := range []string{"../../infra/pools.yaml", "../../infra/pools.example.yaml"} {
		raw, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		if p := poolcheck.PodSecurity(raw, levels); len(p) > 0 {
			t.Errorf("%s:\n%s", path, positions(p))
		}
	}
}
