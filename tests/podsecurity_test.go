package tests

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"os"
	"reflect"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"k8s.io/client-go/kubernetes"

	"github.com/runnerscaler/runnerscaler/internal/pool"
	"github.com/runnerscaler/runnerscaler/internal/runnerpod"
	"github.com/runnerscaler/runnerscaler/local/testenv"
)

// rbacObjects decodes the Namespace, Role and RoleBinding of an infra/rbac*.yaml file.
func rbacObjects(t *testing.T, path string) (corev1.Namespace, rbacv1.Role, rbacv1.RoleBinding) {
	t.Helper()
	raw, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var ns corev1.Namespace
	var role rbacv1.Role
	var binding rbacv1.RoleBinding
	dec := utilyaml.NewYAMLOrJSONDecoder(bytes.NewReader(raw), 4096)
	for {
		var obj map[string]any
		if err := dec.Decode(&obj); errors.Is(err, io.EOF) {
			return ns, role, binding
		} else if err != nil {
			t.Fatalf("%s: %v", path, err)
		}
		doc, err := json.Marshal(obj)
		if err != nil {
			t.Fatal(err)
		}
		if obj["kind"] == "ClusterRole" || obj["kind"] == "ClusterRoleBinding" {
			continue // cluster-wide (the headroom's priority class): tests/headroom_reconcile_test.go
		}
		target := map[any]any{"Namespace": &ns, "Role": &role, "RoleBinding": &binding}[obj["kind"]]
		if target == nil {
			t.Fatalf("%s: unexpected kind %v", path, obj["kind"])
		}
		if err := json.Unmarshal(doc, target); err != nil {
			t.Fatalf("%s: %v", path, err)
		}
	}
}

// labelledNamespace creates a fresh namespace with the labels of ns (a file's),
// deleted after the test.
func labelledNamespace(t *testing.T, kube kubernetes.Interface, ns corev1.Namespace) string {
	t.Helper()
	name := testenv.Name("psa")
	_, err := kube.CoreV1().Namespaces().Create(t.Context(),
		&corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: ns.Labels}}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = kube.CoreV1().Namespaces().Delete(context.Background(), name, metav1.DeleteOptions{})
	})
	return name
}

// runnerPod is the pod the StatefulSet controller makes from a runner's
// StatefulSet as the sweeper creates it: the template, named <runner>-0, with a
// volume for each claim template.
func runnerPod(t *testing.T, p *pool.Pool, namespace string) *corev1.Pod {
	t.Helper()
	tmpl, err := runnerpod.Template(p)
	if err != nil {
		t.Fatal(err)
	}
	name := runnerpod.NewName(p.Name)
	sts := runnerpod.StatefulSet(runnerpod.Spec{Pool: p, Template: tmpl, Hash: runnerpod.Hash(p, tmpl), Name: name,
		GitHubURL: "https://github.com", Deployment: "t", Creds: runnerpod.Credentials{RunnerID: 1, JITConfig: "jit"}, Now: time.Now()})
	pod := &corev1.Pod{ObjectMeta: *sts.Spec.Template.ObjectMeta.DeepCopy(), Spec: *sts.Spec.Template.Spec.DeepCopy()}
	pod.Name, pod.Namespace = runnerpod.PodName(name), namespace
	for _, c := range sts.Spec.VolumeClaimTemplates {
		pod.Spec.Volumes = append(pod.Spec.Volumes, corev1.Volume{Name: c.Name, VolumeSource: corev1.VolumeSource{
			PersistentVolumeClaim: &corev1.PersistentVolumeClaimVolumeSource{ClaimName: c.Name + "-" + pod.Name}}})
	}
	return pod
}

// TestRunnerPodsPassTheirNamespacesPodSecurity: on a real API server (Pod
// Security admission on), in namespaces labelled as infra/rbac.yaml and
// infra/rbac-docker.yaml label theirs, the runner pods of every pool of the
// shipped and example pools files are admitted (a server-side dry run) in the
// namespace their file puts them in; infra/rbac.yaml's enforces baseline, and
// refuses the docker pools' privileged pods, which its comments send to the
// docker namespace.
func TestRunnerPodsPassTheirNamespacesPodSecurity(t *testing.T) {
	t.Parallel()
	kube, err := kubernetes.NewForConfig(testenv.RESTConfig(t))
	if err != nil {
		t.Fatal(err)
	}
	runners, _, _ := rbacObjects(t, "../infra/rbac.yaml")
	docker, _, _ := rbacObjects(t, "../infra/rbac-docker.yaml")
	if level := runners.Labels["pod-security.kubernetes.io/enforce"]; level != "baseline" {
		t.Fatalf("infra/rbac.yaml's namespace enforces Pod Security %q, want baseline", level)
	}
	onServer := map[string]string{runners.Name: labelledNamespace(t, kube, runners), docker.Name: labelledNamespace(t, kube, docker)}
	dryRun := func(pod *corev1.Pod) error {
		_, err := kube.CoreV1().Pods(pod.Namespace).Create(t.Context(), pod, metav1.CreateOptions{DryRun: []string{metav1.DryRunAll}})
		return err
	}
	for _, file := range []string{"../infra/pools.yaml", "../infra/pools.example.yaml"} {
		cfg, err := pool.Load(file)
		if err != nil {
			t.Fatal(err)
		}
		for i := range cfg.Pools {
			p := &cfg.Pools[i]
			privileged := p.Kubernetes.DockerEnabled || p.Kubernetes.DockerdWithinRunnerContainer
			want := runners.Name
			if privileged {
				want = docker.Name
			}
			if p.Kubernetes.Namespace != want {
				t.Errorf("%s: pool %s (privileged %v) is in namespace %s, want %s", file, p.Name, privileged, p.Kubernetes.Namespace, want)
				continue
			}
			if err := dryRun(runnerPod(t, p, onServer[want])); err != nil {
				t.Errorf("%s: pool %s: its runner pod is refused in %s's namespace: %v", file, p.Name, want, err)
			}
			if !privileged {
				continue
			}
			err := dryRun(runnerPod(t, p, onServer[runners.Name]))
			if !apierrors.IsForbidden(err) || !strings.Contains(err.Error(), "violates PodSecurity") {
				t.Errorf("%s: pool %s: its privileged runner pod in %s's namespace: %v, want refused by Pod Security", file, p.Name, runners.Name, err)
			}
		}
	}
}

// TestDockerNamespaceGrantsTheSameRole: infra/rbac-docker.yaml gives the
// sweeper's group the same verbs as infra/rbac.yaml, in its own namespace.
func TestDockerNamespaceGrantsTheSameRole(t *testing.T) {
	t.Parallel()
	ns, role, binding := rbacObjects(t, "../infra/rbac.yaml")
	dns, drole, dbinding := rbacObjects(t, "../infra/rbac-docker.yaml")
	if dns.Name == ns.Name || drole.Namespace != dns.Name || dbinding.Namespace != dns.Name {
		t.Errorf("infra/rbac-docker.yaml: namespace %s, Role in %s, RoleBinding in %s: want its own namespace (not %s) for all three",
			dns.Name, drole.Namespace, dbinding.Namespace, ns.Name)
	}
	if level := dns.Labels["pod-security.kubernetes.io/enforce"]; level != "privileged" {
		t.Errorf("infra/rbac-docker.yaml's namespace enforces %q, want privileged (docker pools)", level)
	}
	if !reflect.DeepEqual(drole.Rules, role.Rules) || drole.Name != role.Name {
		t.Errorf("docker Role %s %+v, want infra/rbac.yaml's %s %+v", drole.Name, drole.Rules, role.Name, role.Rules)
	}
	if !reflect.DeepEqual(dbinding.Subjects, binding.Subjects) || dbinding.RoleRef != binding.RoleRef {
		t.Errorf("docker RoleBinding %+v -> %+v, want infra/rbac.yaml's %+v -> %+v", dbinding.Subjects, dbinding.RoleRef, binding.Subjects, binding.RoleRef)
	}
}
