package arcimport_test

import (
	"bytes"
	"errors"
	"strings"
	"testing"

	"github.com/runnerscaler/runnerscaler/internal/arcimport"
	"github.com/runnerscaler/runnerscaler/internal/pool"
)

func named(name, org string) string {
	return "apiVersion: actions.summerwind.dev/v1alpha1\nkind: RunnerDeployment\nmetadata: {name: " + name + "}\n" +
		"spec: {template: {spec: {organization: " + org + "}}}\n"
}

// TestPoolNames: names are the ARC objects' own when they fit; otherwise they
// are derived — shortened to 40 characters, made a DNS-1123 label, made unique
// — and the pool's comment and a note say so.
func TestPoolNames(t *testing.T) {
	t.Parallel()
	long := strings.Repeat("very-long-runner-deployment-", 3)
	sources := []arcimport.Source{
		{Name: "a.yaml", Data: []byte(named("ci", "acme") + "---\n" + named(long+"a", "acme") + "---\n" + named(long+"b", "acme"))},
		{Name: "b.yaml", Data: []byte(named("ci", "other") + "---\n" + named("Build.Runners", "acme"))},
	}
	res, err := arcimport.Convert(sources, withImage)
	if err != nil {
		t.Fatal(err)
	}
	cfg, err := pool.Parse(res.Pools)
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]string{} // organization + derived-from → name
	for _, p := range cfg.Pools {
		if len(p.Name) > pool.MaxNameLength {
			t.Errorf("pool %s: over %d characters", p.Name, pool.MaxNameLength)
		}
		got[p.Name] = p.Organization
	}
	for _, want := range []string{"ci", "ci-2", "build-runners"} {
		if _, ok := got[want]; !ok {
			t.Errorf("no pool %s among %v", want, res.Names)
		}
	}
	if got["ci"] != "acme" || got["ci-2"] != "other" {
		t.Errorf("ci is %s's, ci-2 %s's: want the first input's first", got["ci"], got["ci-2"])
	}
	if len(cfg.Pools) != 5 {
		t.Fatalf("%d pools, want 5 (the two long names kept apart)", len(cfg.Pools))
	}
	for _, want := range []string{"shortened to 40 characters", `"ci" is taken`, `"Build.Runners" is not a DNS-1123 label`} {
		if !bytes.Contains(res.Pools, []byte(want)) || !strings.Contains(strings.Join(res.Notes, "\n"), want) {
			t.Errorf("neither the pools' comments nor the notes say %q:\n%s\n%v", want, res.Pools, res.Notes)
		}
	}
}

// TestOutputIsSortedAndStable: pools come sorted by name whatever the order of
// the inputs, and converting again gives the same bytes.
func TestOutputIsSortedAndStable(t *testing.T) {
	t.Parallel()
	a := arcimport.Source{Name: "a.yaml", Data: []byte(named("zeta", "acme"))}
	b := arcimport.Source{Name: "b.yaml", Data: []byte(named("alpha", "acme") + "---\n" + named("mid", "acme"))}
	first, err := arcimport.Convert([]arcimport.Source{a, b}, withImage)
	if err != nil {
		t.Fatal(err)
	}
	second, err := arcimport.Convert([]arcimport.Source{b, a}, withImage)
	if err != nil {
		t.Fatal(err)
	}
	if strings.Join(first.Names, ",") != "alpha,mid,zeta" {
		t.Errorf("names %v, want sorted", first.Names)
	}
	strip := func(p []byte) string { // the source comments name the files, whose order differs
		var out []string
		for _, l := range strings.Split(string(p), "\n") {
			if !strings.HasPrefix(strings.TrimSpace(l), "# from ") {
				out = append(out, l)
			}
		}
		return strings.Join(out, "\n")
	}
	if strip(first.Pools) != strip(second.Pools) {
		t.Errorf("the inputs' order changed the pools:\n%s\n---\n%s", first.Pools, second.Pools)
	}
	again, _ := arcimport.Convert([]arcimport.Source{a, b}, withImage)
	if !bytes.Equal(again.Pools, first.Pools) {
		t.Error("a second conversion differs")
	}
}

// TestKubectlListOutput: `kubectl get -o yaml` output — a v1 List whose items
// carry status, server-set metadata and Helm annotations — converts, pairing
// the autoscaler across items, and reports paths inside the list.
func TestKubectlListOutput(t *testing.T) {
	t.Parallel()
	list := `apiVersion: v1
kind: List
metadata: {resourceVersion: ""}
items:
- apiVersion: actions.summerwind.dev/v1alpha1
  kind: RunnerDeployment
  metadata:
    name: ci
    namespace: arc
    uid: 0b0e3c39-0d7e-4a53-9d4e-1f4c2a1e9c11
    resourceVersion: "4711"
    generation: 3
    creationTimestamp: "2024-01-02T03:04:05Z"
    annotations: {meta.helm.sh/release-name: ci}
  spec:
    effectiveTime: "2024-01-02T03:04:05Z"
    replicas: 4
    template:
      spec: {organization: acme, labels: [ci]}
  status: {availableReplicas: 4, desiredReplicas: 4}
- apiVersion: actions.summerwind.dev/v1alpha1
  kind: HorizontalRunnerAutoscaler
  metadata: {name: ci, namespace: arc}
  spec:
    scaleTargetRef: {kind: RunnerDeployment, name: ci}
    minReplicas: 0
    maxReplicas: 8
    capacityReservations: [{expirationTime: "2024-01-02T03:14:05Z", replicas: 1}]
    scaleUpTriggers: [{githubEvent: {workflowJob: {}}, duration: 3h60m}]
    metrics: [{type: TotalNumberOfQueuedAndInProgressWorkflowRuns, repositoryNames: [acme/app]}]
  status: {desiredReplicas: 1}
`
	p, _, res := imported(t, list, withImage)
	if p.Max() != 8 || p.MinReplicas != 0 {
		t.Errorf("min %d max %d: want the autoscaler's 0 and 8", p.MinReplicas, p.Max())
	}
	if _, d := p.Trigger(); d.String() != "4h0m0s" {
		t.Errorf("duration %s, want 3h60m", d)
	}
	if len(res.Dropped) != 1 || res.Dropped[0].Path != "items[1].spec.metrics[0]" || res.Dropped[0].Document != 1 {
		t.Errorf("reported %v, want only items[1].spec.metrics[0]", res.Dropped)
	}
	if !strings.Contains(strings.Join(res.Notes, "\n"), "not ARC's arc") {
		t.Errorf("notes %v: want the namespace replaced said", res.Notes)
	}
}

// TestBadInput: what is not YAML objects is refused as a whole (ErrInput),
// naming the file and document.
func TestBadInput(t *testing.T) {
	t.Parallel()
	for _, raw := range []string{"kind: RunnerDeployment\n  bad: [indent\n", "---\njust a string\n", "- a\n- list\n"} {
		_, err := arcimport.Convert([]arcimport.Source{{Name: "x.yaml", Data: []byte(raw)}}, arcimport.Options{})
		if !errors.Is(err, arcimport.ErrInput) || !strings.Contains(err.Error(), "x.yaml: document 1") {
			t.Errorf("%q: %v, want ErrInput naming x.yaml: document 1", raw, err)
		}
	}
}
