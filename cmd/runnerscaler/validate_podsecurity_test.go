package main

import (
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes/fake"

	"github.com/runnerscaler/runnerscaler/internal/poolcheck"
)

// TestValidateReadsTheNamespacesPodSecurity: with a cluster, validate reads
// each pool's namespace's enforce label (none: privileged), and a docker pool
// in a baseline namespace is refused; a missing namespace is an error naming it.
func TestValidateReadsTheNamespacesPodSecurity(t *testing.T) {
	t.Parallel()
	const file = `pools:
  - name: dind
    organization: acme
    maxReplicas: 2
    kubernetes: {namespace: actions-runners, dockerEnabled: true, image: runner:1}
  - name: other
    organization: acme
    maxReplicas: 2
    kubernetes: {namespace: unlabelled, dockerEnabled: true, image: runner:1}
`
	kc := fake.NewSimpleClientset(
		&corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "actions-runners", Labels: map[string]string{poolcheck.EnforceLabel: "baseline"}}},
		&corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "unlabelled"}},
	)
	levels, err := namespaceLevels(t.Context(), kc, []byte(file))
	if err != nil {
		t.Fatal(err)
	}
	if levels["actions-runners"] != "baseline" || levels["unlabelled"] != "privileged" {
		t.Fatalf("levels %v, want baseline and privileged", levels)
	}
	problems := poolcheck.PodSecurity([]byte(file), levels)
	if len(problems) != 1 || !strings.Contains(problems[0].Brief(), `pools[0] (dind): kubernetes.namespace: "actions-runners" enforces Pod Security "baseline"`) {
		t.Fatalf("problems %v, want the dind pool's", problems)
	}
	_, err = namespaceLevels(t.Context(), fake.NewSimpleClientset(), []byte(file))
	if err == nil || !strings.Contains(err.Error(), "reading namespace actions-runners (pool dind)") {
		t.Fatalf("no namespaces: %v, want an error naming the namespace", err)
	}
}
