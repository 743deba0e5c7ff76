package arcimport_test

import (
	"errors"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"

	"github.com/runnerscaler/runnerscaler/internal/arcimport"
	"github.com/runnerscaler/runnerscaler/internal/runnerpod"
)

// TestKeyWrittenTwiceIsRefused: a key written twice in one mapping — a second
// tolerations that would drop the toleration the nodeSelector needs — is an
// error naming both lines, not the last value kept.
func TestKeyWrittenTwiceIsRefused(t *testing.T) {
	t.Parallel()
	manifest := rd(`nodeSelector: {pool: ci}
tolerations:
- {key: ci, operator: Exists, effect: NoSchedule}
dockerEnabled: false
tolerations:
- {key: other, operator: Exists}`, "")
	_, err := arcimport.Convert([]arcimport.Source{{Name: "in.yaml", Data: []byte(manifest)}}, withImage)
	if !errors.Is(err, arcimport.ErrInput) || !strings.Contains(err.Error(), `in.yaml: document 1: line 12: key "tolerations" repeats the key of line 9`) {
		t.Fatalf("error %v: want bad input naming both lines of tolerations", err)
	}
}

// additionalTweaks is a RunnerDeployment with the fields of ARC's "additional
// tweaks" example, made for the purpose: the cluster-autoscaler's
// safe-to-evict annotation, a work directory of its own with the default docker
// sidecar, and the sidecar's settings.
const additionalTweaks = `apiVersion: actions.summerwind.dev/v1alpha1
kind: RunnerDeployment
metadata: {name: tweaked}
spec:
  template:
    metadata:
      annotations:
        cluster-autoscaler.kubernetes.io/safe-to-evict: "true"
        team: ci
    spec:
      organization: acme
      nodeSelector: {node-role.kubernetes.io/test: ""}
      tolerations:
      - {effect: NoSchedule, key: node-role.kubernetes.io/test, operator: Exists}
      workDir: /tmp/work
      dockerEnv:
      - {name: DOCKER_OPT, value: "1"}
      dockerdContainerResources:
        limits: {cpu: "4", memory: 4Gi}
        requests: {cpu: "1", memory: 1Gi}
      dockerVolumeMounts:
      - {name: cache, mountPath: /var/lib/docker}
      volumes:
      - {name: cache, emptyDir: {}}
      dockerMTU: 1450
`

// TestAdditionalTweaks: what the sweeper reserves (safe-to-evict) is left
// out and listed, everything else is carried: the docker sidecar with ARC's
// settings, and the work volume at workDir in the runner and in the sidecar,
// so that the paths a job gives docker exist there; the default sidecar is
// said in a note (privileged, in the docker namespace).
func TestAdditionalTweaks(t *testing.T) {
	t.Parallel()
	p, tmpl, res := imported(t, additionalTweaks, withImage)
	if len(res.Dropped) != 1 || res.Dropped[0].Path != `spec.template.metadata.annotations["cluster-autoscaler.kubernetes.io/safe-to-evict"]` {
		t.Fatalf("not carried %v: want safe-to-evict only", res.Dropped)
	}
	if _, ok := tmpl.Annotations[runnerpod.AnnotationSafeToEvict]; ok || tmpl.Annotations["team"] != "ci" {
		t.Errorf("annotations %v: want team, not safe-to-evict", tmpl.Annotations)
	}
	r, d := container(t, tmpl, "runner"), dockerSidecar(t, tmpl)
	atWork := func(c corev1.Container) bool {
		return slices.ContainsFunc(c.VolumeMounts, func(m corev1.VolumeMount) bool { return m.Name == "work" && m.MountPath == "/tmp/work" })
	}
	if !hasEnv(r, "RUNNER_WORKDIR", "/tmp/work") || !atWork(r) || !atWork(d) {
		t.Errorf("runner %+v\ndocker %+v\nwant the work volume at /tmp/work in both", r, d)
	}
	if slices.ContainsFunc(d.VolumeMounts, func(m corev1.VolumeMount) bool { return m.MountPath == "/home/runner/_work" }) {
		t.Errorf("docker mounts %+v: the work volume follows workDir", d.VolumeMounts)
	}
	if !hasEnv(d, "DOCKER_OPT", "1") || !d.Resources.Limits.Memory().Equal(resource.MustParse("4Gi")) ||
		!d.Resources.Requests.Cpu().Equal(resource.MustParse("1")) || !slices.Contains(d.Args, "--mtu=1450") {
		t.Errorf("docker %+v: want ARC's dockerEnv, dockerdContainerResources and dockerMTU", d)
	}
	if len(tmpl.Spec.Tolerations) != 1 || tmpl.Spec.NodeSelector["node-role.kubernetes.io/test"] != "" {
		t.Errorf("tolerations %v, nodeSelector %v", tmpl.Spec.Tolerations, tmpl.Spec.NodeSelector)
	}
	if p.Kubernetes.Namespace != arcimport.DefaultDockerNamespace || !slices.ContainsFunc(res.Notes, func(n string) bool {
		return strings.Contains(n, "dockerEnabled not set (ARC's default): ARC's docker sidecar becomes runnerscaler's: a privileged") &&
			strings.Contains(n, "privileged namespace "+arcimport.DefaultDockerNamespace)
	}) {
		t.Errorf("namespace %s, notes %v: want the default sidecar said, privileged, in the docker namespace", p.Kubernetes.Namespace, res.Notes)
	}
}

// TestDockerSettingsWithoutASidecar: with dockerd in the runner container, or
// docker off, each docker sidecar setting is listed, with where it goes.
func TestDockerSettingsWithoutASidecar(t *testing.T) {
	t.Parallel()
	settings := "dockerEnv: [{name: DOCKER_OPT, value: \"1\"}]\ndockerdContainerResources: {limits: {memory: 4Gi}}\n" +
		"dockerVolumeMounts: [{name: cache, mountPath: /var/lib/docker}]\nvolumes: [{name: cache, emptyDir: {}}]\ndockerMTU: 1400"
	for _, tc := range []struct {
		name, docker string
		instead      map[string]string
	}{
		{"dockerd in the runner", "dockerdWithinRunnerContainer: true", map[string]string{
			"dockerEnv":                 "add the variables to the runner container's env",
			"dockerdContainerResources": "add dockerd's share to the runner container's resources",
			"dockerVolumeMounts":        "mount the volumes in the runner container",
			"dockerMTU":                 "/etc/docker/daemon.json"}},
		{"docker off", "dockerEnabled: false", map[string]string{
			"dockerEnv": "set dockerEnabled: true", "dockerdContainerResources": "set dockerEnabled: true",
			"dockerVolumeMounts": "set dockerEnabled: true", "dockerMTU": "set dockerEnabled: true"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			_, _, res := imported(t, rd(tc.docker+"\n"+settings, ""), withImage)
			for field, instead := range tc.instead {
				if !slices.ContainsFunc(res.Dropped, func(d arcimport.Dropped) bool {
					return d.Path == "spec.template.spec."+field && strings.Contains(d.Instead, instead)
				}) {
					t.Errorf("%s not listed with %q: %v", field, instead, res.Dropped)
				}
			}
		})
	}
}

// arcWorkDir is ARC's images' work directory, which runnerscaler's image does
// not have (it uses /home/runner/_work).
var arcWorkDir = regexp.MustCompile(`(^|[^a-z])/runner/_work`)

// TestHintsNameThisImagesPaths: no hint or note of the whole corpus names a
// path of ARC's images as runnerscaler's.
func TestHintsNameThisImagesPaths(t *testing.T) {
	t.Parallel()
	res := convertAll(t)
	for _, d := range res.Dropped {
		if arcWorkDir.MatchString(d.Instead) {
			t.Errorf("hint with ARC's work directory: %s", d)
		}
	}
	for _, n := range res.Notes {
		if arcWorkDir.MatchString(n) {
			t.Errorf("note with ARC's work directory: %s", n)
		}
	}
}

// convertAll converts both corpora at once, as one input.
func convertAll(t *testing.T) arcimport.Result {
	t.Helper()
	var sources []arcimport.Source
	for _, f := range corpus(t) {
		src := source(t, f)
		src.Name = corpusName(f)
		sources = append(sources, src)
	}
	res, err := arcimport.Convert(sources, corpusOptions)
	if err != nil {
		t.Fatal(err)
	}
	return res
}

// TestWholeCorporaAtOnceIntoOneFile: ARC's legacy manifests and its scale
// sets, every file at once, convert into one file that passes the sweeper's
// checks (what runnerscaler validate runs), with a pool per convertible
// deployment and scale set; every file is either in it or listed.
func TestWholeCorporaAtOnceIntoOneFile(t *testing.T) {
	t.Parallel()
	res := convertAll(t)
	out := filepath.Join(t.TempDir(), "pools.yaml")
	if err := os.WriteFile(out, res.Pools, 0o644); err != nil {
		t.Fatal(err)
	}
	raw, err := os.ReadFile(out)
	if err != nil {
		t.Fatal(err)
	}
	cfg, err := arcimport.Check(raw)
	if err != nil {
		t.Fatalf("the whole corpus does not pass the sweeper's checks: %v", err)
	}
	scaleSets := 0
	for _, p := range cfg.Pools {
		if strings.HasPrefix(p.Name, "test-runners") {
			scaleSets++
		}
	}
	if len(cfg.Pools) < 20 || scaleSets < 7 {
		t.Errorf("%d pools, %d of scale sets: %v", len(cfg.Pools), scaleSets, res.Names)
	}
	for _, f := range corpus(t) {
		name := corpusName(f)
		in := slices.ContainsFunc(res.Origins, func(o string) bool { return strings.HasPrefix(o, name+",") })
		listed := slices.ContainsFunc(res.Dropped, func(d arcimport.Dropped) bool { return d.File == name })
		if !in && !listed {
			t.Errorf("%s: neither a pool nor listed", name)
		}
	}
}

// TestImportedSidecarIsANativeSidecar: a sidecar written out in full (ARC's
// docker settings) is a native sidecar after the pool's own init containers,
// as runnerpod makes its own: the kubelet stops it only after the runner, so a
// job that the graceful stop lets finish keeps docker; the note says so.
func TestImportedSidecarIsANativeSidecar(t *testing.T) {
	t.Parallel()
	_, tmpl, res := imported(t, rd("dockerMTU: 1400\ninitContainers: [{name: setup, image: setup:1}]", ""), withImage)
	d := dockerSidecar(t, tmpl)
	inits := tmpl.Spec.InitContainers
	if len(inits) != 2 || inits[0].Name != "setup" || inits[1].Name != d.Name || !slices.Contains(d.Args, "--mtu=1400") {
		t.Errorf("init containers %+v: want setup, then the docker sidecar with --mtu=1400", inits)
	}
	if !slices.ContainsFunc(res.Notes, func(n string) bool {
		return strings.Contains(n, "native sidecar named docker") && strings.Contains(n, "stopped after the runner")
	}) {
		t.Errorf("notes %v: want the native sidecar said", res.Notes)
	}
}
