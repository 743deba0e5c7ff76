package main

import (
	"context"
	"encoding/json"
	"fmt"
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
	"github.com/runnerscaler/runnerscaler/local/testenv"
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

// TestValidateContainerModesOnTheCluster: `validate --kubeconfig` on a real API
// server (the local stack's) reads the StorageClasses and the jobs namespace
// with the caller's credentials: a pool whose class and jobs namespace exist
// is valid; naming a missing class and a missing namespace fails (exit 1) at
// each field.
func TestValidateContainerModesOnTheCluster(t *testing.T) {
	t.Parallel()
	kube, ns := testenv.Namespace(t)
	_, jobs := testenv.Namespace(t)
	class := testenv.Name("sc")
	if _, err := kube.StorageV1().StorageClasses().Create(t.Context(),
		&storagev1.StorageClass{ObjectMeta: metav1.ObjectMeta{Name: class}, Provisioner: "example.com/none"}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = kube.StorageV1().StorageClasses().Delete(context.Background(), class, metav1.DeleteOptions{})
	})
	pools := func(class, jobs string) string {
		file := filepath.Join(t.TempDir(), "pools.yaml")
		raw := fmt.Sprintf(`pools:
  - name: kube
    organization: acme
    maxReplicas: 2
    kubernetes:
      namespace: %[1]s
      image: runner:1
      serviceAccountName: kube-hooks
      containerMode: kubernetes
      workVolumeClaim: {storageClassName: %[2]s, resources: {requests: {storage: 1Gi}}}
  - name: novolume
    organization: acme
    maxReplicas: 2
    kubernetes:
      namespace: %[1]s
      image: runner:1
      serviceAccountName: novolume-hooks
      containerMode: kubernetes-novolume
      jobsNamespace: %[3]s
`, ns, class, jobs)
		if err := os.WriteFile(file, []byte(raw), 0o600); err != nil {
			t.Fatal(err)
		}
		return file
	}
	kubeconfig := testenv.Kubeconfig(t)
	file := pools(class, jobs)
	if code, stdout, stderr := runCLI(t, "validate", "--kubeconfig", kubeconfig, file); code != 0 || stdout != file+": valid\n" {
		t.Errorf("validate: exit %d, %q, %q; want valid", code, stdout, stderr)
	}
	file = pools(class+"-missing", jobs+"-missing")
	code, _, stderr := runCLI(t, "validate", "--kubeconfig", kubeconfig, file)
	want := []string{
		file + ":10:25: pools[0] (kube): kubernetes.workVolumeClaim.storageClassName: \"" + class + "-missing\" is not a StorageClass of the cluster",
		file + ":19:7: pools[1] (novolume): kubernetes.jobsNamespace: namespace \"" + jobs + "-missing\" does not exist on the cluster",
	}
	if code != 1 || strings.Count(stderr, "\n") != 2 || !strings.HasPrefix(stderr, want[0]) || !strings.Contains(stderr, "\n"+want[1]) {
		t.Errorf("validate: exit %d, stderr:\n%s\nwant exit 1 and lines beginning:\n%s", code, stderr, strings.Join(want, "\n"))
	}
}
