package poolcheck_test

import (
	"strings"
	"testing"

	"github.com/runnerscaler/runnerscaler/internal/poolcheck"
)

// modePool is a pool in container mode (kubernetes or kubernetes-novolume)
// with what the mode needs, and extra lines in its kubernetes block.
func modePool(mode, extra string) string {
	k := "      namespace: ns\n      serviceAccountName: hooks\n      containerMode: " + mode + "\n"
	if mode == "kubernetes" {
		k += "      workVolumeClaim: {accessModes: [ReadWriteOnce], resources: {requests: {storage: 10Gi}}}\n"
	} else {
		k += "      jobsNamespace: ns-jobs\n"
	}
	return "pools:\n  - name: c\n    organization: org\n    maxReplicas: 3\n    kubernetes:\n" + k + extra
}

// TestContainerModePoolPasses: a pool in each mode passes every check, the
// final pod's (the runner pod as the sweeper renders it) included.
func TestContainerModePoolPasses(t *testing.T) {
	t.Parallel()
	for _, mode := range []string{"kubernetes", "kubernetes-novolume"} {
		file := []byte(modePool(mode, "      image: ghcr.io/example/runner:2\n"))
		if p := poolcheck.Check(file); len(p) > 0 {
			t.Errorf("%s: %s", mode, positions(p))
		}
		if p := poolcheck.PodSecurity(file, map[string]string{"ns": "restricted"}); len(p) > 0 && !strings.Contains(positions(p), "restricted") {
			t.Errorf("%s: %s", mode, positions(p))
		}
		if p := poolcheck.PodSecurity(file, map[string]string{"ns": "baseline"}); len(p) > 0 {
			t.Errorf("%s at baseline: %s", mode, positions(p))
		}
		if w := poolcheck.Warnings(file); len(w) > 0 {
			t.Errorf("%s warns: %s", mode, positions(w))
		}
	}
}

// TestDindImageRefusedInContainerMode: a docker-in-docker image, as the pool's
// image or a template container's, is refused in container mode at its place;
// outside container mode it is the pool's business.
func TestDindImageRefusedInContainerMode(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct{ name, file, want string }{
		{"pool image", modePool("kubernetes", "      image: summerwind/actions-runner-dind:latest\n"),
			`10:7: pools[0] (c): kubernetes.image: "summerwind/actions-runner-dind:latest" is a docker-in-docker image, and containerMode kubernetes runs no docker ` +
				"(the hooks create the job's containers as pods); use a runner image without dockerd (runner/Dockerfile without DIND=true)\n"},
		{"template container", modePool("kubernetes-novolume", "      template: {spec: {containers: [{name: runner, image: r:1}, {name: d, image: \"docker:27-dind\"}]}}\n"),
			`10:76: pools[0] (c): kubernetes.template.spec.containers[1].image: "docker:27-dind" is a docker-in-docker image, and containerMode kubernetes-novolume`},
		{"init container with a digest", modePool("kubernetes", "      image: r:1\n      template: {spec: {initContainers: [{name: i, image: \"ghcr.io/x/runner-dind@sha256:00\"}]}}\n"),
			`11:52: pools[0] (c): kubernetes.template.spec.initContainers[0].image: "ghcr.io/x/runner-dind@sha256:00" is a docker-in-docker image`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			got := positions(poolcheck.Check([]byte(tc.file)))
			if !linesBegin(got, tc.want) {
				t.Fatalf("problems:\n%s\nwant one beginning %q", got, tc.want)
			}
		})
	}
	outside := "pools:\n  - name: c\n    organization: org\n    maxReplicas: 3\n    kubernetes: {namespace: ns, dockerdWithinRunnerContainer: true, image: x/runner-dind:1}\n"
	if p := poolcheck.Check([]byte(outside)); len(p) > 0 {
		t.Errorf("outside container mode: %s", positions(p))
	}
}

func TestIsDindImage(t *testing.T) {
	t.Parallel()
	for ref, want := range map[string]bool{
		"docker:dind": true, "docker:27-dind": true, "summerwind/actions-runner-dind": true, "ghcr.io/x/runner-DinD:1@sha256:ab": true,
		"ghcr.io/actions/actions-runner:2.330.0": false, "docker:27": false, "dind.example.com/runner:1": false, "x/runner@sha256:dind": false,
	} {
		if got := poolcheck.IsDindImage(ref); got != want {
			t.Errorf("IsDindImage(%q) = %v, want %v", ref, got, want)
		}
	}
}

// TestHookTemplateWarnings: each hookTemplate key that replaces what the hooks
// need is warned about at its place, in the mode it matters in; the file stays
// valid.
func TestHookTemplateWarnings(t *testing.T) {
	t.Parallel()
	tmpl := func(yaml string) string { return "      image: r:1\n      hookTemplate:\n" + yaml }
	for _, tc := range []struct{ name, file, want string }{
		{"runner-pod label", modePool("kubernetes", tmpl("        metadata: {labels: {runner-pod: x}}\n")),
			"12:29: pools[0] (c): kubernetes.hookTemplate.metadata.labels.runner-pod: replaces the hooks' runner-pod label, by which the hooks' cleanup and runnerscaler's find a runner's workflow pods: they would be left running\n"},
		{"init containers in novolume", modePool("kubernetes-novolume", tmpl("        spec: {initContainers: [{name: i, image: busybox}]}\n")),
			"12:16: pools[0] (c): kubernetes.hookTemplate.spec.initContainers: replaces the hooks' init containers, removing fs-init"},
		{"init containers in kubernetes mode", modePool("kubernetes", tmpl("        spec: {initContainers: [{name: i, image: busybox}]}\n")), ""},
		{"securityContext in novolume", modePool("kubernetes-novolume", tmpl("        spec: {securityContext: {runAsUser: 1001}}\n")),
			"12:16: pools[0] (c): kubernetes.hookTemplate.spec.securityContext: replaces the hooks' pod securityContext, dropping its fsGroup 1001"},
		{"securityContext keeping fsGroup 1001", modePool("kubernetes-novolume", tmpl("        spec: {securityContext: {runAsUser: 1001, fsGroup: 1001}}\n")), ""},
		{"securityContext in kubernetes mode", modePool("kubernetes", tmpl("        spec: {securityContext: {runAsUser: 1001}}\n")), ""},
		{"imagePullSecrets", modePool("kubernetes-novolume", tmpl("        spec: {imagePullSecrets: [{name: reg}]}\n")),
			"12:16: pools[0] (c): kubernetes.hookTemplate.spec.imagePullSecrets: replaces the hooks' imagePullSecrets, dropping the registry secret"},
		{"nodeName in kubernetes mode", modePool("kubernetes", tmpl("        spec: {nodeName: n1}\n")),
			"12:16: pools[0] (c): kubernetes.hookTemplate.spec.nodeName: replaces the hooks' pinning of the workflow pod to the runner's node"},
		{"affinity in kubernetes mode", modePool("kubernetes", tmpl("        spec: {affinity: {}}\n")),
			"12:16: pools[0] (c): kubernetes.hookTemplate.spec.affinity: replaces the hooks' pinning of the workflow pod to the runner's node"},
		{"affinity in novolume", modePool("kubernetes-novolume", tmpl("        spec: {affinity: {}, nodeName: n1}\n")), ""},
		{"job command and args", modePool("kubernetes", tmpl("        spec: {containers: [{name: sidecar, command: [a]}, {name: $job, command: [sh], args: [-c, x]}]}\n")),
			"12:73: pools[0] (c): kubernetes.hookTemplate.spec.containers[1].command: replaces the job container's, whose `tail -f /dev/null` keeps the workflow pod running\n" +
				"12:88: pools[0] (c): kubernetes.hookTemplate.spec.containers[1].args: replaces the job container's"},
		{"restartPolicy", modePool("kubernetes", tmpl("        spec: {restartPolicy: Always}\n")),
			"12:16: pools[0] (c): kubernetes.hookTemplate.spec.restartPolicy: replaces the hooks' Never"},
		{"serviceAccountName", modePool("kubernetes-novolume", tmpl("        spec: {serviceAccountName: deployer}\n")),
			"12:16: pools[0] (c): kubernetes.hookTemplate.spec.serviceAccountName: gives the workflow pod that service account's token, readable by every job step\n"},
		{"automountServiceAccountToken", modePool("kubernetes", tmpl("        spec: {automountServiceAccountToken: true}\n")),
			"12:16: pools[0] (c): kubernetes.hookTemplate.spec.automountServiceAccountToken: gives the workflow pod its service account's token, readable by every job step\n"},
		{"no token", modePool("kubernetes", tmpl("        spec: {automountServiceAccountToken: false}\n")), ""},
		{"what the hooks merge", modePool("kubernetes", tmpl("        metadata: {labels: {team: a}}\n        spec: {nodeSelector: {a: b}, tolerations: [], containers: [{name: $job, env: [], resources: {}}]}\n")), ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			file := []byte(tc.file)
			if p := poolcheck.Check(file); len(p) > 0 {
				t.Fatalf("the file is invalid:\n%s", positions(p))
			}
			if got := positions(poolcheck.Warnings(file)); !linesBegin(got, tc.want) {
				t.Fatalf("warnings:\n%s\nwant:\n%s", got, tc.want)
			}
		})
	}
}

// TestClusterProblems: with the cluster read, a kubernetes pool's claim must
// name a StorageClass it has (or, naming none, the cluster must have a default
// one), and a kubernetes-novolume pool's jobs namespace must exist.
func TestClusterProblems(t *testing.T) {
	t.Parallel()
	named := strings.Replace(modePool("kubernetes", "      image: r:1\n"), "accessModes:", "storageClassName: gp3, accessModes:", 1)
	blank := strings.Replace(modePool("kubernetes", "      image: r:1\n"), "accessModes:", `storageClassName: "", accessModes:`, 1)
	unnamed := modePool("kubernetes", "      image: r:1\n")
	novolume := modePool("kubernetes-novolume", "      image: r:1\n")
	withDefault := map[string]bool{"gp2": true, "gp3": false}
	noDefault := map[string]bool{"gp2": false}
	for _, tc := range []struct {
		name, file string
		cluster    poolcheck.Cluster
		want       string
	}{
		{"named class exists", named, poolcheck.Cluster{StorageClasses: withDefault}, ""},
		{"named class missing", named, poolcheck.Cluster{StorageClasses: noDefault},
			`9:25: pools[0] (c): kubernetes.workVolumeClaim.storageClassName: "gp3" is not a StorageClass of the cluster (it has [gp2]): ` +
				"each runner's work volume claim would stay Pending, and its pod with it\n"},
		{"no class named, a default", unnamed, poolcheck.Cluster{StorageClasses: withDefault}, ""},
		{"no class named, no default", unnamed, poolcheck.Cluster{StorageClasses: noDefault},
			"9:7: pools[0] (c): kubernetes.workVolumeClaim: names no storageClassName and the cluster has no default StorageClass: " +
				"each runner's work volume claim would stay Pending, and its pod with it; name one of [gp2]\n"},
		{"empty class", blank, poolcheck.Cluster{StorageClasses: withDefault},
			`9:25: pools[0] (c): kubernetes.workVolumeClaim.storageClassName: "" asks for a volume made beforehand, with no class`},
		{"jobs namespace exists", novolume, poolcheck.Cluster{Namespaces: map[string]bool{"ns-jobs": true}}, ""},
		{"jobs namespace missing", novolume, poolcheck.Cluster{Namespaces: map[string]bool{"ns": true}},
			`9:7: pools[0] (c): kubernetes.jobsNamespace: namespace "ns-jobs" does not exist on the cluster: the hooks could create no workflow pod; ` +
				"create it with the hooks' Role (runnerscaler hook-rbac)\n"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			got := positions(poolcheck.ClusterProblems([]byte(tc.file), tc.cluster))
			if !linesBegin(got, tc.want) {
				t.Fatalf("problems:\n%s\nwant:\n%s", got, tc.want)
			}
		})
	}
}

// linesBegin reports whether got has as many lines as want, each beginning
// with want's.
func linesBegin(got, want string) bool {
	if want == "" {
		return got == ""
	}
	g, w := strings.Split(strings.TrimSuffix(got, "\n"), "\n"), strings.Split(strings.TrimSuffix(want, "\n"), "\n")
	if len(g) != len(w) {
		return false
	}
	for i := range g {
		if !strings.HasPrefix(g[i], w[i]) {
			return false
		}
	}
	return true
}

// TestContainerModeFieldsPlaced: the sweeper's checks of the container mode
// fields are placed at their field — a misspelt hookTemplate field with the
// field it was meant to be, a claim without a size — and a field the pool's own
// checks reported is not reported again by the sweeper's.
func TestContainerModeFieldsPlaced(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct{ name, file, want string }{
		{"hook template fields", modePool("kubernetes-novolume", "      image: r:1\n      hookTemplate:\n        spec:\n          nodeSelektor: {a: b}\n"+
			"          containers: [{name: $job, resourcs: {}}]\n"),
			"13:11: pools[0] (c): kubernetes.hookTemplate.spec.nodeSelektor: unknown field; did you mean nodeSelector?\n" +
				"14:37: pools[0] (c): kubernetes.hookTemplate.spec.containers[0].resourcs: unknown field; did you mean resources?\n"},
		{"claim without a size", strings.Replace(modePool("kubernetes", "      image: r:1\n"), ", resources: {requests: {storage: 10Gi}}", "", 1),
			"9:7: pools[0] (c): kubernetes.workVolumeClaim.resources.requests.storage: required (the work volume's size)\n"},
		{"required claim said once", strings.Replace(modePool("kubernetes", "      image: r:1\n"), "      workVolumeClaim: {accessModes: [ReadWriteOnce], resources: {requests: {storage: 10Gi}}}\n", "", 1),
			"5:5: pools[0] (c): kubernetes.workVolumeClaim: required with containerMode kubernetes\n"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			if got := positions(poolcheck.Check([]byte(tc.file))); !linesBegin(got, tc.want) {
				t.Fatalf("problems:\n%s\nwant:\n%s", got, tc.want)
			}
		})
	}
}
