package poolcheck_test

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/runnerscaler/runnerscaler/internal/pool"
	"github.com/runnerscaler/runnerscaler/internal/poolcheck"
)

func positions(problems []*pool.Problem) string {
	var b strings.Builder
	for _, p := range problems {
		fmt.Fprintf(&b, "%d:%d: %s\n", p.Line, p.Column, p.Brief())
	}
	return b.String()
}

// TestCheckReportsEveryProblem: an unknown field of the pool and one of its
// template are both reported, each at its line and column with the field it
// was meant to be — the template's only because the sweeper's checks run too.
func TestCheckReportsEveryProblem(t *testing.T) {
	t.Parallel()
	raw, err := os.ReadFile("testdata/two-errors.yaml")
	if err != nil {
		t.Fatal(err)
	}
	got := positions(poolcheck.Check(raw))
	want := "4:5: pools[0].lables: unknown field; did you mean labels?\n" +
		"13:15: pools[0] (linux): kubernetes.template.spec.containers[0].resource: unknown field; did you mean resources?\n"
	if got != want {
		t.Fatalf("problems:\n%s\nwant:\n%s", got, want)
	}
}

// TestCheckPlacesEachCheck: each kind of check's error is placed at its field,
// every pool is checked, and a field that failed to decode is not reported
// again by the check of its value.
func TestCheckPlacesEachCheck(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct{ name, file, want string }{
		{"pool check and template check in two pools", `pools:
  - name: a
    organization: org
    maxReplicas: 3
    minReplicas: 4
    kubernetes: {namespace: ns, image: runner:1}
  - name: b
    organization: org
    maxReplicas: 3
    kubernetes:
      namespace: ns
      template:
        spec:
          restartPolicy: Never
          containers: [{name: runner, image: runner:1}]
`, "4:5: pools[0] (a): maxReplicas: 3 must be >= 1 and >= minReplicas (4)\n" +
			"14:11: pools[1] (b): kubernetes.template.spec.restartPolicy: \"Never\": a StatefulSet's pods must restart Always\n"},
		{"a misspelt required field is reported once", `pools:
  - name: a
    organization: org
    maxReplica: 3
    kubernetes: {namespace: ns, image: runner:1}
`, "4:5: pools[0].maxReplica: unknown field; did you mean maxReplicas?\n"},
		{"a badly typed field is reported once", `pools:
  - name: a
    organization: org
    maxReplicas: lots
    kubernetes: {namespace: ns, image: runner:1}
`, "4:18: pools[0].maxReplicas: cannot unmarshal !!str `lots` into int\n"},
		{"a missing field at its pool", `pools:
  - name: a
    organization: org
    kubernetes: {namespace: ns, image: runner:1}
`, "2:5: pools[0] (a): maxReplicas: required\n"},
		{"every bad label at its place", `pools:
  - name: a
    organization: org
    maxReplicas: 3
    labels: ["", "a,b", "gpu large", self-hosted]
    kubernetes: {namespace: ns, image: runner:1}
`, "5:14: pools[0] (a): labels[0]: \"\" must be non-empty and contain no comma\n" +
			"5:18: pools[0] (a): labels[1]: \"a,b\" must be non-empty and contain no comma\n" +
			"5:25: pools[0] (a): labels[2]: \"gpu large\" must contain no space: a label is one word of runs-on\n" +
			"5:38: pools[0] (a): labels[3]: \"self-hosted\" is implied: every runner has self-hosted, linux and its arch (x64); " +
			"leave it out, jobs that ask for it still match\n"},
		{"every problem of the pod template at its place", `pools:
  - name: a
    organization: org
    maxReplicas: 3
    kubernetes:
      namespace: ns
      template:
        spec:
          containers: [{name: runner, image: r, volumeMounts: [{name: w, mountPath: /x}, {name: nope, mountPath: /y}]}]
          volumes: [{name: w, emptyDir: {}}, {name: w, emptyDir: {}}]
`, "9:91: pools[0] (a): kubernetes.template.spec.containers[0].volumeMounts[1].name: \"nope\": no such volume or volume claim template\n" +
			"10:47: pools[0] (a): kubernetes.template.spec.volumes[1].name: \"w\": duplicate volume name\n"},
		{"not YAML", "pools: [\n", "1:1: yaml: did not find expected node content\n"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			if got := positions(poolcheck.Check([]byte(tc.file))); got != tc.want {
				t.Fatalf("problems:\n%s\nwant:\n%s", got, tc.want)
			}
		})
	}
}

// TestExamplesPass: the pools files shipped with the code (the examples
// included) load and pass every check of the sweeper's start.
func TestExamplesPass(t *testing.T) {
	t.Parallel()
	examples, _ := filepath.Glob("../../examples/pools/*.yaml")
	if len(examples) < 7 {
		t.Fatalf("examples/pools has %d files, want one per common case", len(examples))
	}
	for _, path := range append(examples, "../../infra/pools.example.yaml", "../../infra/pools.yaml", "../../local/pools.yaml") {
		if _, err := pool.Load(path); err != nil {
			t.Errorf("%s: %v", path, err)
			continue
		}
		raw, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		if problems := poolcheck.Check(raw); len(problems) > 0 {
			t.Errorf("%s:\n%s", path, positions(problems))
		}
	}
}

// TestCheckPlacesTheTokenRefusals: `runnerscaler validate` refuses a pool that
// uses the registration token with a setting that lets its jobs read it — the
// pool's docker setting (package pool's check) and the template's user (the
// sweeper's check of the template) — each at its field, and names the opt-in;
// with allowJobsToReadRegistrationToken the file passes.
func TestCheckPlacesTheTokenRefusals(t *testing.T) {
	t.Parallel()
	const file = `pools:
  - name: builds
    organization: acme
    ephemeral: false
    maxReplicas: 2
    kubernetes:
      namespace: ns
      dockerEnabled: true
      template:
        spec:
          containers:
            - name: runner
              image: runner:1
              securityContext: {runAsUser: 1001}
`
	problems := poolcheck.Check([]byte(file))
	got := positions(problems)
	for _, want := range []string{
		"8:7: pools[0] (builds): kubernetes.dockerEnabled: a job that uses docker runs privileged containers, which are root on the node, " +
			"so the pool's jobs can read the registration token",
		"14:33: pools[0] (builds): kubernetes.template.spec.containers[0].securityContext.runAsUser: every job step runs as the entrypoint's own user",
	} {
		if !strings.Contains(got, want) {
			t.Errorf("problems:\n%s\nwant one beginning %q", got, want)
		}
	}
	if len(problems) != 2 || strings.Count(got, "or accept the risk with allowJobsToReadRegistrationToken: true") != 2 {
		t.Errorf("problems:\n%s\nwant two, each naming the opt-in", got)
	}
	accepted := strings.Replace(file, "    ephemeral: false\n", "    ephemeral: false\n    allowJobsToReadRegistrationToken: true\n", 1)
	if problems := poolcheck.Check([]byte(accepted)); len(problems) > 0 {
		t.Errorf("with the opt-in:\n%s", positions(problems))
	}
}
