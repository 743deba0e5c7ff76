package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes/fake"

	"github.com/runnerscaler/runnerscaler/internal/poolcheck"
)

// TestValidateWarningsDoNotFail: a warning is printed as
// FILE:LINE:COLUMN: warning: MESSAGE, the file is still valid (exit 0, "valid,
// 1 warning"), and -o json lists it apart from the problems.
func TestValidateWarningsDoNotFail(t *testing.T) {
	t.Parallel()
	const file = "testdata/hook-template-warning.yaml"
	code, stdout, stderr := runCLI(t, "validate", file)
	want := file + ":13:11: warning: pools[0] (containers): kubernetes.hookTemplate.spec.imagePullSecrets: replaces the hooks' imagePullSecrets"
	if code != 0 || stdout != file+": valid, 1 warning\n" || !strings.HasPrefix(stderr, want) || strings.Count(stderr, "\n") != 1 {
		t.Errorf("validate: exit %d, stdout %q, stderr:\n%s\nwant exit 0 and a line beginning:\n%s", code, stdout, stderr, want)
	}
	code, stdout, _ = runCLI(t, "validate", "-o", "json", file)
	var report validation
	if err := json.Unmarshal([]byte(stdout), &report); code != 0 || err != nil || !report.Valid || len(report.Problems) != 0 ||
		len(report.Warnings) != 1 || report.Warnings[0].Line != 13 {
		t.Errorf("validate -o json: exit %d, %s (%v)", code, stdout, err)
	}
}

// TestValidateReadsTheClusterForContainerModes: with a cluster, validate lists
// the StorageClasses (which is the default) when a pool is in kubernetes mode,
// reads each kubernetes-novolume pool's jobs namespace (missing is no error
// but a problem of the pool), and the pools are checked against them.
func TestValidateReadsTheClusterForContainerModes(t *testing.T) {
	t.Parallel()
	const file = `pools:
  - name: kube
    organization: acme
    maxReplicas: 2
    kubernetes:
      namespace: actions-runners
      image: runner:1
      containerMode: kubernetes
      serviceAccountName: kube-hooks
      workVolumeClaim: {storageClassName: gp3, accessModes: [ReadWriteOnce], resources: {requests: {storage: 1Gi}}}
  - name: novolume
    organization: acme
    maxReplicas: 2
    kubernetes:
      namespace: actions-runners
      image: runner:1
      containerMode: kubernetes-novolume
      serviceAccountName: novolume-hooks
      jobsNamespace: novolume-jobs
`
	kc := fake.NewSimpleClientset(
		&storagev1.StorageClass{ObjectMeta: metav1.ObjectMeta{Name: "gp2", Annotations: map[string]string{"storageclass.kubernetes.io/is-default-class": "true"}}},
		&storagev1.StorageClass{ObjectMeta: metav1.ObjectMeta{Name: "gp3"}},
		&storagev1.StorageClass{ObjectMeta: metav1.ObjectMeta{Name: "old", Annotations: map[string]string{"storageclass.beta.kubernetes.io/is-default-class": "true"}}},
		&corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "actions-runners"}},
	)
	cluster, err := readCluster(t.Context(), kc, []byte(file))
	if err != nil {
		t.Fatal(err)
	}
	if len(cluster.StorageClasses) != 3 || !cluster.StorageClasses["gp2"] || cluster.StorageClasses["gp3"] || !cluster.StorageClasses["old"] {
		t.Errorf("storage classes %v, want gp2 and old the default, gp3 not", cluster.StorageClasses)
	}
	problems := poolcheck.ClusterProblems([]byte(file), cluster)
	if len(problems) != 1 || !strings.HasPrefix(problems[0].Brief(), `pools[1] (novolume): kubernetes.jobsNamespace: namespace "novolume-jobs" does not exist`) {
		t.Fatalf("problems %v, want the missing jobs namespace's", problems)
	}
	if _, err := kc.CoreV1().Namespaces().Create(t.Context(), &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "novolume-jobs"}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if cluster, err = readCluster(t.Context(), kc, []byte(file)); err != nil || !cluster.Namespaces["novolume-jobs"] {
		t.Fatalf("after creating it: %v, %v", cluster.Namespaces, err)
	}
	if problems := poolcheck.ClusterProblems([]byte(file), cluster); len(problems) != 0 {
		t.Errorf("problems %v, want none", problems)
	}
	noContainerMode := "pools:\n  - name: a\n    organization: acme\n    maxReplicas: 1\n    kubernetes: {namespace: actions-runners, image: r:1}\n"
	empty := fake.NewSimpleClientset()
	if _, err := readCluster(t.Context(), empty, []byte(noContainerMode)); err != nil || len(empty.Actions()) != 0 {
		t.Errorf("no container mode pool: %v, %d reads; want none", err, len(empty.Actions()))
	}
}

// TestContainerModesPageExampleValidates: the pools of docs/container-modes.md
// pass `runnerscaler validate` with no warning, and are the same as
// examples/pools/container-modes.yaml's, which the page points to.
func TestContainerModesPageExampleValidates(t *testing.T) {
	t.Parallel()
	page, err := os.ReadFile("../../docs/container-modes.md")
	if err != nil {
		t.Fatal(err)
	}
	m := regexp.MustCompile("(?s)```yaml\n(pools:\n.*?)```").FindSubmatch(page)
	if m == nil {
		t.Fatal("docs/container-modes.md has no ```yaml block of pools")
	}
	file := filepath.Join(t.TempDir(), "pools.yaml")
	if err := os.WriteFile(file, m[1], 0o600); err != nil {
		t.Fatal(err)
	}
	code, stdout, stderr := runCLI(t, "validate", file)
	if code != 0 || stdout != file+": valid\n" || stderr != "" {
		t.Errorf("validate of the page's pools: exit %d, %q, %q", code, stdout, stderr)
	}
	example, err := os.ReadFile("../../examples/pools/container-modes.yaml")
	if err != nil {
		t.Fatal(err)
	}
	if _, pools, _ := strings.Cut(string(example), "\npools:\n"); "pools:\n"+pools != string(m[1]) {
		t.Errorf("the page's pools differ from examples/pools/container-modes.yaml's:\n%s", m[1])
	}
}
