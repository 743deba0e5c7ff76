package arcimport

import (
	"fmt"
	"slices"
	"strconv"
	"strings"

	"go.yaml.in/yaml/v3"
	corev1 "k8s.io/api/core/v1"

	"github.com/runnerscaler/runnerscaler/internal/runnerpod"
)

// finish settles what depends on several fields: labels, docker, namespace,
// image and the termination grace period.
func (c *converter) finish(d *object, dr *draft) {
	dr.labels = c.labels(d, dr)
	c.settleContainerMode(d, dr)
	c.docker(d, dr)
	c.registrationToken(d, dr)
	c.namespace(d, dr)
	c.runnerImage(d, dr)
	c.terminationGrace(d, dr)
	c.danglingMounts(d, dr)
}

// danglingMounts: a mount of the runner container that names no volume of the
// template (nor a claim template) makes the API server refuse the pod; ARC's
// own test values have one. The work volume is runnerscaler's to add.
func (c *converter) danglingMounts(d *object, dr *draft) {
	known := []string{workVolumeName}
	for _, v := range slices.Concat(contentOf(dr.pod.get("volumes")), dr.claims) {
		known = append(known, scalar(get(v, "name")), scalar(get(get(v, "metadata"), "name")))
	}
	var dangling []string
	for _, m := range contentOf(dr.runner.get("volumeMounts")) {
		if name := scalar(get(m, "name")); !slices.Contains(known, name) {
			dangling = append(dangling, name)
		}
	}
	if len(dangling) == 0 {
		return
	}
	dr.runner.without("volumeMounts", dangling...)
	p := specPath(d, "volumeMounts")
	if dr.scaleSet {
		p = scaleSetPath(d, "template.spec.containers")
	}
	c.drop(d, p, fmt.Sprintf("the runner container's mounts of %s name no volume of the template: the API server would refuse the pod", strings.Join(dangling, ", ")),
		"add the volume to the template, or leave the mount out")
}

// labels drops the labels every runner has (self-hosted, linux, the arch):
// a pool implies them.
func (c *converter) labels(d *object, dr *draft) []string {
	var out []string
	seen := map[string]bool{}
	for i, l := range dr.labels {
		low := strings.ToLower(strings.TrimSpace(l))
		switch {
		case low == "self-hosted" || low == "linux" || low == dr.arch || seen[low]:
		case low == "" || strings.Contains(l, ","):
			c.drop(d, fmt.Sprintf("%s[%d]", labelsPath(d), i), fmt.Sprintf("%q: a label is non-empty and has no comma", l), "fix the label")
		default:
			seen[low] = true
			out = append(out, l)
		}
	}
	return out
}

func labelsPath(d *object) string {
	if d.kind == kindDeployment {
		return "spec.template.spec.labels"
	}
	return "spec.labels"
}

// defaultWorkDir is the runner's work directory in runnerscaler's image
// (runner/Dockerfile: RUNNER_HOME /home/runner, config.sh --work _work); ARC's
// images use /runner/_work.
const defaultWorkDir = "/home/runner/_work"

// sidecarField is one of ARC's docker sidecar settings: its name (dockerEnv,
// dockerdContainerResources, dockerVolumeMounts, or docker for a `docker`
// container of the template) and its path.
type sidecarField struct{ name, path string }

// docker: ARC runs a docker sidecar unless dockerEnabled is false or dockerd
// runs in the runner container. The sidecar is runnerscaler's (a privileged
// docker:dind over TCP), so the pool goes in the privileged namespace: said in
// a note. A sidecar with ARC's docker settings, or a work directory of its
// own, is written out in full.
func (c *converter) docker(d *object, dr *draft) {
	sidecar, dind := dr.docker()
	if dind && dr.dockerEnabled != nil && *dr.dockerEnabled {
		c.note(d, "dockerEnabled and dockerdWithinRunnerContainer: dockerd runs in the runner container, as in ARC")
	}
	c.workDir(d, dr, sidecar)
	if !sidecar {
		c.noSidecar(d, dr, dind)
		return
	}
	why, without := "dockerEnabled: true", "set dockerEnabled: false in ARC's spec"
	switch {
	case dr.scaleSet:
		why, without = "containerMode dind", "leave containerMode dind out"
	case dr.dockerEnabled == nil:
		why = "dockerEnabled not set (ARC's default)"
	}
	c.note(d, "%s: ARC's docker sidecar becomes runnerscaler's: a privileged %s native sidecar named docker (an init container with "+
		"restartPolicy Always, stopped after the runner, so a job finishing in the graceful stop keeps docker; DOCKER_HOST %s, "+
		"the work volume shared at %s), so the pool's runners go in the privileged namespace %s; if its jobs do not use docker, "+
		"%s and import again (the pool then goes in %s)",
		why, runnerpod.DockerImage, runnerpod.DockerHost, dr.workPath(), c.opts.DockerNamespace, without, c.opts.Namespace)
	if dr.dockerMTU != nil {
		dr.sidecar.appendSeq("args", str("--mtu="+scalar(dr.dockerMTU)))
	}
	if dr.dockerMirror != nil {
		dr.sidecar.appendSeq("args", str("--registry-mirror="+scalar(dr.dockerMirror)))
	}
	if !dr.sidecar.empty() || dr.workDir != "" {
		c.fullSidecar(dr)
	}
}

// workPath is the runner's work directory: ARC's workDir, or the image's.
func (dr *draft) workPath() string {
	if dr.workDir != "" {
		return dr.workDir
	}
	return defaultWorkDir
}

// workDir carries ARC's workDir as ARC lays it out: the runner's work
// directory (RUNNER_WORKDIR) on a `work` emptyDir mounted there, which the
// docker sidecar shares at the same path (a job's bind mounts name paths in
// it). Without docker the volume is there too: the directory need not exist
// in the image, and an emptyDir is writable by the runner user.
func (c *converter) workDir(d *object, dr *draft, sidecar bool) {
	if dr.workDir == "" {
		return
	}
	dr.runner.appendSeq("env", envVar("RUNNER_WORKDIR", dr.workDir))
	if !sidecar { // fullSidecar mounts it in both containers
		dr.runner.appendSeq("volumeMounts", mount("work", dr.workDir))
		dr.workVolume()
	}
	shared := ""
	if sidecar {
		shared = ", shared with the docker sidecar at the same path"
	}
	c.note(d, "workDir %s: the runner's work directory (RUNNER_WORKDIR) on a work emptyDir volume mounted there%s; runnerscaler's image's default is %s",
		dr.workDir, shared, defaultWorkDir)
}

// workVolume adds the `work` emptyDir volume unless the template has one.
func (dr *draft) workVolume() {
	for _, v := range contentOf(dr.pod.get("volumes")) {
		if scalar(get(v, "name")) == "work" {
			return
		}
	}
	vol := &omap{}
	vol.set("name", str("work"))
	vol.set("emptyDir", &yaml.Node{Kind: yaml.MappingNode, Style: yaml.FlowStyle})
	dr.pod.appendSeq("volumes", vol.node())
}

// noSidecar lists each docker sidecar setting of a pool without a sidecar,
// with where it goes instead.
func (c *converter) noSidecar(d *object, dr *draft, dind bool) {
	noDocker, orDocker := "dockerEnabled is false", ", or set dockerEnabled: true"
	if dr.containerMode != "" {
		noDocker, orDocker = "containerMode "+dr.containerMode+" runs no docker", ""
	}
	for _, f := range dr.sidecarFields {
		if !dind {
			c.drop(d, f.path, noDocker+": there is no docker sidecar to carry it", "leave it out"+orDocker)
			continue
		}
		const why = "dockerd runs in the runner container (dockerdWithinRunnerContainer), started by runnerscaler's entrypoint: there is no docker sidecar"
		switch f.name {
		case "dockerdContainerResources":
			c.drop(d, f.path, why, "add dockerd's share to the runner container's resources (resources)")
		case "dockerEnv":
			c.drop(d, f.path, why+"; dockerd gets the runner container's environment", "add the variables to the runner container's env (jobs see them too)")
		case "dockerVolumeMounts":
			c.drop(d, f.path, why, "mount the volumes in the runner container (volumeMounts)")
		default:
			c.drop(d, f.path, why, "leave the docker container out")
		}
	}
	for _, f := range []struct {
		name string
		v    *yaml.Node
	}{{"dockerMTU", dr.dockerMTU}, {"dockerRegistryMirror", dr.dockerMirror}} {
		if f.v == nil {
			continue
		}
		if !dind {
			c.drop(d, specPath(d, f.name), noDocker+": there is no docker daemon to carry it", "leave it out"+orDocker)
			continue
		}
		c.drop(d, specPath(d, f.name), "runnerscaler's entrypoint starts dockerd in the runner container without flags",
			"set it in the runner image's dockerd configuration, /etc/docker/daemon.json (\"mtu\", \"registry-mirrors\")")
	}
}

// scaleSetPath is the path of a scale set's field: under spec in an
// AutoscalingRunnerSet, at the top of a values file.
func scaleSetPath(d *object, field string) string {
	if d.kind == kindScaleSet {
		return "spec." + field
	}
	return field
}

func specPath(d *object, field string) string {
	if d.kind == kindDeployment {
		return "spec.template.spec." + field
	}
	return "spec." + field
}

// fullSidecar writes runnerscaler's docker sidecar (package runnerpod) with
// ARC's settings laid over it, the work volume mounted at the work directory
// in both containers. Like runnerpod's, it is a native sidecar (restartPolicy
// Always; the template puts it among the init containers), which the kubelet
// stops after the runner: a pool's own `docker` container is kept as written,
// so the import writes it where it outlives the runner's graceful stop.
func (c *converter) fullSidecar(dr *draft) {
	base := &omap{}
	base.set("name", str(runnerpod.DockerContainer))
	base.set("image", str(runnerpod.DockerImage))
	base.set("restartPolicy", str(string(corev1.ContainerRestartPolicyAlways)))
	base.set("env", seq(envVar("DOCKER_TLS_CERTDIR", "")))
	sc := &omap{}
	sc.set("privileged", boolean(true))
	base.set("securityContext", sc.node())
	base.set("volumeMounts", seq(mount("work", dr.workPath())))
	for _, k := range dr.sidecar.keys {
		v := dr.sidecar.get(k)
		if k == "env" || k == "volumeMounts" {
			base.appendSeq(k, v.Content...)
			continue
		}
		base.set(k, v)
	}
	base.set("restartPolicy", str(string(corev1.ContainerRestartPolicyAlways))) // whatever ARC's container said
	dr.sidecar = *base
	dr.runner.appendSeq("env", envVar("DOCKER_ENABLED", "true"), envVar("DOCKER_HOST", runnerpod.DockerHost))
	dr.runner.appendSeq("volumeMounts", mount("work", dr.workPath()))
	dr.workVolume()
}

func mount(name, path string) *yaml.Node {
	m := &omap{}
	m.set("name", str(name))
	m.set("mountPath", str(path))
	return m.node()
}

// runnerImage: ARC's runner images lack runnerscaler's entrypoint; the image is
// kept so that the file loads, and reported, unless Options.RunnerImage
// replaces it.
func (c *converter) runnerImage(d *object, dr *draft) {
	if c.opts.RunnerImage != "" {
		dr.image = c.opts.RunnerImage
		return
	}
	img, path := dr.image, dr.imagePath
	switch {
	case img != "":
	case dr.scaleSet:
		img, path = defaultScaleSetImage, scaleSetPath(d, "template.spec.containers")
	case dr.dind != nil && *dr.dind:
		img, path = defaultARCDind, specPath(d, "image")
	default:
		img, path = defaultARCImage, specPath(d, "image")
	}
	dr.image = img
	c.drop(d, path, fmt.Sprintf("%s is ARC's runner image (or one built on it): runnerscaler's runners need runnerscaler's entrypoint (JIT config, job report, graceful stop)", img),
		"build runner/Dockerfile (--build-arg DIND=true for dockerd in the runner) with your image's tools, then import with --runner-image or edit kubernetes.template")
}

// terminationGrace carries terminationGracePeriodSeconds when it covers
// runnerscaler's graceful stop (package runnerpod); a shorter one would let
// the kubelet kill a job silently.
func (c *converter) terminationGrace(d *object, dr *draft) {
	if dr.grace == nil {
		return
	}
	grace, err := strconv.ParseInt(scalar(dr.grace), 10, 64)
	stop, settle := int64(runnerpod.DefaultGracefulStop), int64(runnerpod.DefaultStopSettleMS)
	for _, e := range contentOf(dr.runner.get("env")) {
		v, perr := strconv.ParseInt(scalar(get(e, "value")), 10, 64)
		switch name := scalar(get(e, "name")); {
		case perr != nil:
		case name == runnerpod.EnvGracefulStop:
			stop = v
		case name == runnerpod.EnvStopSettle:
			settle = v
		}
	}
	need := runnerpod.StopSeconds(stop, settle)
	if err != nil || grace < need {
		c.drop(d, dr.gracePath, fmt.Sprintf("%s s is shorter than the %d s runnerscaler's graceful stop needs (%s %d s)", scalar(dr.grace), need, runnerpod.EnvGracefulStop, stop),
			fmt.Sprintf("left out: runnerscaler sets %d s", need))
		return
	}
	dr.pod.set("terminationGracePeriodSeconds", clean(dr.grace))
}

// namespace: pools with docker (a privileged container) go in the docker
// namespace, the others in the runner namespace; ARC's namespace is not used.
func (c *converter) namespace(d *object, dr *draft) {
	dr.namespace = c.opts.Namespace
	if sidecar, dind := dr.docker(); sidecar || dind {
		dr.namespace = c.opts.DockerNamespace
	}
	if d.namespace != "" && d.namespace != dr.namespace {
		c.note(d, "runners go in namespace %s, not ARC's %s (a runner namespace holds runnerscaler's runners only)", dr.namespace, d.namespace)
	}
}
