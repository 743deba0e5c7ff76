package headroom_test

import (
	"bytes"
	"os"
	"testing"

	corev1 "k8s.io/api/core/v1"
	schedulingv1 "k8s.io/api/scheduling/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/api/resource"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"

	"github.com/runnerscaler/runnerscaler/internal/headroom"
	"github.com/runnerscaler/runnerscaler/internal/pool"
	"github.com/runnerscaler/runnerscaler/internal/runnerpod"
)

const pools = `
pools:
  - name: big
    organization: org
    maxReplicas: 4
    headroom: {replicas: 2}
    kubernetes:
      namespace: ns
      dockerEnabled: true
      template:
        spec:
          nodeSelector: {pool: big}
          tolerations: [{key: runners, operator: Exists, effect: NoSchedule}]
          affinity:
            nodeAffinity:
              requiredDuringSchedulingIgnoredDuringExecution:
                nodeSelectorTerms: [{matchExpressions: [{key: arch, operator: In, values: [amd64]}]}]
          initContainers:
            - {name: proxy, image: proxy:1, restartPolicy: Always, resources: {requests: {cpu: 100m}}}
            - {name: setup, image: setup:1, resources: {requests: {cpu: "8"}}}
          containers:
            - name: runner
              image: runner:1
              resources: {requests: {cpu: "2", memory: 4Gi}, limits: {memory: 4Gi}}
`

// TestPlaceholderIsTheRunnersSize: the placeholder pod asks for what the
// runner pod asks for — each container's requests and limits, the docker
// sidecar's and a sidecar init container's included — on the nodes the runner
// may use, at the headroom priority class, and carries no runner label.
func TestPlaceholderIsTheRunnersSize(t *testing.T) {
	t.Parallel()
	cfg, err := pool.Parse([]byte(pools))
	if err != nil {
		t.Fatal(err)
	}
	p := cfg.Pool("big")
	runner, err := runnerpod.Template(p)
	if err != nil {
		t.Fatal(err)
	}
	sts := headroom.StatefulSet(p, runner, 2, "table-1")
	if sts.Name != "big-headroom" || sts.Namespace != "ns" || *sts.Spec.Replicas != 2 {
		t.Fatalf("statefulset %s/%s replicas %d", sts.Namespace, sts.Name, *sts.Spec.Replicas)
	}
	pod := sts.Spec.Template
	for _, labels := range []map[string]string{sts.Labels, pod.Labels} {
		if _, ok := labels[runnerpod.LabelPool]; ok || labels[headroom.LabelPool] != "big" {
			t.Errorf("labels %v: want %s=big and no %s", labels, headroom.LabelPool, runnerpod.LabelPool)
		}
	}
	if sts.Annotations[runnerpod.AnnotationDeployment] != "table-1" || pod.Annotations[runnerpod.AnnotationDeployment] != "table-1" {
		t.Errorf("deployment not recorded: %v, %v", sts.Annotations, pod.Annotations)
	}
	want := map[string]corev1.ResourceRequirements{"proxy": {}, "runner": {}, "docker": {}}
	want["proxy"] = runner.Spec.InitContainers[0].Resources
	for _, c := range runner.Spec.Containers {
		want[c.Name] = c.Resources
	}
	if len(pod.Spec.Containers) != len(want) || len(pod.Spec.InitContainers) != 0 {
		t.Fatalf("containers %d, init containers %d: want %d and 0", len(pod.Spec.Containers), len(pod.Spec.InitContainers), len(want))
	}
	for _, c := range pod.Spec.Containers {
		if !equality.Semantic.DeepEqual(c.Resources, want[c.Name]) {
			t.Errorf("container %s resources %+v, want %+v", c.Name, c.Resources, want[c.Name])
		}
		if c.Image != pool.DefaultHeadroomImage || *c.SecurityContext.AllowPrivilegeEscalation || c.SecurityContext.Privileged != nil {
			t.Errorf("container %s: image %s, security %+v", c.Name, c.Image, c.SecurityContext)
		}
	}
	if got := pod.Spec.Containers[0].Resources.Requests[corev1.ResourceCPU]; got.Cmp(resource.MustParse("100m")) != 0 {
		t.Errorf("sidecar cpu %s, want 100m", got.String())
	}
	s := pod.Spec
	if !equality.Semantic.DeepEqual(s.NodeSelector, runner.Spec.NodeSelector) || !equality.Semantic.DeepEqual(s.Tolerations, runner.Spec.Tolerations) ||
		!equality.Semantic.DeepEqual(s.Affinity, runner.Spec.Affinity) || s.NodeSelector["pool"] != "big" {
		t.Errorf("node selection differs from the runner's: %v %v %v", s.NodeSelector, s.Tolerations, s.Affinity)
	}
	if s.PriorityClassName != headroom.PriorityClassName || *s.TerminationGracePeriodSeconds != 0 || *s.AutomountServiceAccountToken ||
		!*s.SecurityContext.RunAsNonRoot || len(s.Volumes) != 0 {
		t.Errorf("pod spec %+v", s)
	}
}

// TestPlaceholderHashFollowsTheRunner: a changed runner size makes another
// placeholder template (Current false); replicas and a rebuilt identical
// template do not.
func TestPlaceholderHashFollowsTheRunner(t *testing.T) {
	t.Parallel()
	cfg, err := pool.Parse([]byte(pools))
	if err != nil {
		t.Fatal(err)
	}
	p := cfg.Pool("big")
	runner, err := runnerpod.Template(p)
	if err != nil {
		t.Fatal(err)
	}
	a := headroom.StatefulSet(p, runner, 1, "d")
	if !headroom.Current(a, headroom.StatefulSet(p, runner, 3, "d")) {
		t.Error("replicas changed the template hash")
	}
	bigger := *runner.DeepCopy()
	bigger.Spec.Containers[0].Resources.Requests[corev1.ResourceCPU] = resource.MustParse("3")
	if headroom.Current(a, headroom.StatefulSet(p, bigger, 1, "d")) {
		t.Error("a bigger runner kept the placeholder template")
	}
}

// TestPriorityClass: below a runner pod's default priority, never preempting,
// nobody's default.
func TestPriorityClass(t *testing.T) {
	t.Parallel()
	pc := headroom.PriorityClass()
	if pc.Value >= 0 || pc.GlobalDefault || *pc.PreemptionPolicy != corev1.PreemptNever || pc.Name != headroom.PriorityClassName {
		t.Fatalf("priority class %+v", pc)
	}
}

// TestPriorityClassManifest: the class the operator applies
// (infra/priorityclass.yaml; the sweeper may only read it) is the one the
// placeholders name, as PriorityClass describes it.
func TestPriorityClassManifest(t *testing.T) {
	t.Parallel()
	raw, err := os.ReadFile("../../infra/priorityclass.yaml")
	if err != nil {
		t.Fatal(err)
	}
	var got schedulingv1.PriorityClass
	if err := utilyaml.NewYAMLOrJSONDecoder(bytes.NewReader(raw), 4096).Decode(&got); err != nil {
		t.Fatalf("infra/priorityclass.yaml: %v", err)
	}
	if got.APIVersion != "scheduling.k8s.io/v1" || got.Kind != "PriorityClass" {
		t.Fatalf("infra/priorityclass.yaml is a %s %s, want a scheduling.k8s.io/v1 PriorityClass", got.APIVersion, got.Kind)
	}
	got.TypeMeta = headroom.PriorityClass().TypeMeta
	if want := headroom.PriorityClass(); !equality.Semantic.DeepEqual(&got, want) {
		t.Fatalf("infra/priorityclass.yaml is\n%+v\nwant\n%+v", got, want)
	}
}

// TestPlaceholderKeepsRoomForTheWorkflowPod: in container mode, a placeholder
// also asks for what the hookTemplate says the workflow pod's containers ask
// for (`$job` and an added container), and nothing for a container it does not
// size; outside container mode, nothing of the kind.
func TestPlaceholderKeepsRoomForTheWorkflowPod(t *testing.T) {
	t.Parallel()
	cfg, err := pool.Parse([]byte(`
pools:
  - name: cm
    organization: org
    maxReplicas: 4
    headroom: {replicas: 1}
    kubernetes:
      namespace: ns
      image: runner:1
      serviceAccountName: cm-hooks
      containerMode: kubernetes
      workVolumeClaim: {resources: {requests: {storage: 1Gi}}}
      hookTemplate:
        spec:
          containers:
            - {name: $job, resources: {requests: {cpu: "3", memory: 6Gi}}}
            - {name: $redis}
            - {name: logs, image: logs:1, resources: {requests: {cpu: 200m}}}
`))
	if err != nil {
		t.Fatal(err)
	}
	p := cfg.Pool("cm")
	runner, err := runnerpod.Template(p)
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]corev1.ResourceList{}
	for _, c := range headroom.StatefulSet(p, runner, 1, "").Spec.Template.Spec.Containers {
		got[c.Name] = c.Resources.Requests
	}
	if _, ok := got["runner"]; len(got) != 3 || !ok {
		t.Fatalf("placeholder containers %v, want runner, workflow-job and workflow-logs", got)
	}
	if job := got["workflow-job"]; !job.Cpu().Equal(resource.MustParse("3")) || !job.Memory().Equal(resource.MustParse("6Gi")) {
		t.Errorf("workflow-job asks for %v, want the $job container's 3 CPU, 6Gi", got["workflow-job"])
	}
	if logs := got["workflow-logs"]; !logs.Cpu().Equal(resource.MustParse("200m")) {
		t.Errorf("workflow-logs asks for %v, want 200m", got["workflow-logs"])
	}
	plain := *p
	plain.Kubernetes.ContainerMode = ""
	for _, c := range headroom.StatefulSet(&plain, runner, 1, "").Spec.Template.Spec.Containers {
		if c.Name != "runner" {
			t.Errorf("outside container mode the placeholder has %s", c.Name)
		}
	}
}
