package pool_test

import (
	"strings"
	"testing"

	"github.com/runnerscaler/runnerscaler/internal/pool"
)

// containerPool is a valid pool in container mode whose kubernetes block is k.
func containerPool(k string) string {
	return "pools:\n  - name: a\n    organization: org\n    maxReplicas: 3\n    kubernetes:\n" + k
}

const (
	kubeMode = "      namespace: ns\n      image: runner:1\n      serviceAccountName: hooks\n      containerMode: kubernetes\n" +
		"      workVolumeClaim: {accessModes: [ReadWriteOnce], storageClassName: gp3, resources: {requests: {storage: 10Gi}}}\n"
	noVolumeMode = "      namespace: ns\n      image: runner:1\n      serviceAccountName: hooks\n      containerMode: kubernetes-novolume\n" +
		"      jobsNamespace: ns-jobs\n"
)

// TestContainerModeAccepted: a pool in each mode with what it needs loads, with
// the hook namespace and the job container requirement its fields say.
func TestContainerModeAccepted(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name, k, hookNamespace string
		required               bool
	}{
		{"kubernetes", kubeMode, "ns", true},
		{"novolume", noVolumeMode, "ns-jobs", true},
		{"job container optional, with a hook template", noVolumeMode + "      requireJobContainer: false\n" +
			"      hookTemplate: {spec: {containers: [{name: $job, resources: {requests: {cpu: \"1\"}}}]}}\n", "ns-jobs", false},
		{"no container mode", "      namespace: ns\n      image: runner:1\n", "", true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			cfg, err := pool.Parse([]byte(containerPool(tc.k)))
			if err != nil {
				t.Fatal(err)
			}
			k := cfg.Pool("a").Kubernetes
			if k.HookNamespace() != tc.hookNamespace || k.JobContainerRequired() != tc.required || k.InContainerMode() != (tc.hookNamespace != "") {
				t.Errorf("hook namespace %q, job container required %v, in container mode %v", k.HookNamespace(), k.JobContainerRequired(), k.InContainerMode())
			}
		})
	}
}

// TestContainerModeValidation: each rule of the container mode fields, its
// error naming the field (and placed at it).
func TestContainerModeValidation(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name, k, want, path string
	}{
		{"unknown mode", strings.Replace(noVolumeMode, "kubernetes-novolume", "docker", 1),
			`kubernetes.containerMode: "docker" must be one of [kubernetes kubernetes-novolume]`, "kubernetes.containerMode"},
		{"with the docker sidecar", kubeMode + "      dockerEnabled: true\n",
			"kubernetes.dockerEnabled: not with containerMode kubernetes: container mode exists to run container jobs without privileged docker", "kubernetes.dockerEnabled"},
		{"with dockerd in the runner", noVolumeMode + "      dockerdWithinRunnerContainer: true\n",
			"kubernetes.dockerdWithinRunnerContainer: not with containerMode kubernetes-novolume: container mode exists", "kubernetes.dockerdWithinRunnerContainer"},
		{"no service account", strings.Replace(kubeMode, "      serviceAccountName: hooks\n", "", 1),
			"kubernetes.serviceAccountName: required with containerMode kubernetes: the hooks create workflow pods as the runner's service account, " +
				"whose Role (runnerscaler hook-rbac) holds their rights in namespace ns", "kubernetes.serviceAccountName"},
		{"novolume without a jobs namespace", strings.Replace(noVolumeMode, "      jobsNamespace: ns-jobs\n", "", 1),
			"kubernetes.jobsNamespace: required with containerMode kubernetes-novolume", "kubernetes.jobsNamespace"},
		{"jobs namespace not a label", strings.Replace(noVolumeMode, "ns-jobs", "Jobs_NS", 1),
			`kubernetes.jobsNamespace: "Jobs_NS" must be a DNS-1123 label`, "kubernetes.jobsNamespace"},
		{"jobs namespace too long", strings.Replace(noVolumeMode, "ns-jobs", strings.Repeat("j", 64), 1),
			`kubernetes.jobsNamespace: "` + strings.Repeat("j", 64) + `" must be a DNS-1123 label (lower-case letters, digits, '-') of at most 63 characters`, "kubernetes.jobsNamespace"},
		{"jobs namespace is the runners'", strings.Replace(noVolumeMode, "ns-jobs", "ns", 1),
			`kubernetes.jobsNamespace: "ns" is the runners' namespace: workflow pods need one of their own`, "kubernetes.jobsNamespace"},
		{"jobs namespace in kubernetes mode", kubeMode + "      jobsNamespace: ns-jobs\n",
			"kubernetes.jobsNamespace: only with containerMode kubernetes-novolume: in kubernetes mode workflow pods run in the runners' namespace", "kubernetes.jobsNamespace"},
		{"kubernetes mode without a work volume claim", strings.Split(kubeMode, "      workVolumeClaim")[0],
			"kubernetes.workVolumeClaim: required with containerMode kubernetes", "kubernetes.workVolumeClaim"},
		{"work volume claim in novolume", noVolumeMode + "      workVolumeClaim: {accessModes: [ReadWriteOnce]}\n",
			"kubernetes.workVolumeClaim: only with containerMode kubernetes: in kubernetes-novolume mode", "kubernetes.workVolumeClaim"},
		{"jobs namespace without a mode", "      namespace: ns\n      image: runner:1\n      jobsNamespace: ns-jobs\n",
			"kubernetes.jobsNamespace: only with a containerMode", "kubernetes.jobsNamespace"},
		{"work volume claim without a mode", "      namespace: ns\n      image: runner:1\n      workVolumeClaim: {accessModes: [ReadWriteOnce]}\n",
			"kubernetes.workVolumeClaim: only with a containerMode", "kubernetes.workVolumeClaim"},
		{"job container optional in kubernetes mode", kubeMode + "      requireJobContainer: false\n",
			"kubernetes.requireJobContainer: false is refused with containerMode kubernetes: a job without a container runs its steps in the runner container",
			"kubernetes.requireJobContainer"},
		{"requireJobContainer without a mode", "      namespace: ns\n      image: runner:1\n      requireJobContainer: true\n",
			"kubernetes.requireJobContainer: only with a containerMode", "kubernetes.requireJobContainer"},
		{"hookTemplate without a mode", "      namespace: ns\n      image: runner:1\n      hookTemplate: {spec: {}}\n",
			"kubernetes.hookTemplate: only with a containerMode", "kubernetes.hookTemplate"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			_, err := pool.Parse([]byte(containerPool(tc.k)))
			problems := pool.Problems(err)
			if len(problems) != 1 || !strings.HasPrefix(problems[0].Error(), "pools[0] (a): "+tc.want) {
				t.Fatalf("problems = %v\nwant one beginning %q", err, "pools[0] (a): "+tc.want)
			}
			if got := problems[0].Path(); got != "pools[0]."+tc.path {
				t.Errorf("path = %s, want pools[0].%s", got, tc.path)
			}
		})
	}
}
