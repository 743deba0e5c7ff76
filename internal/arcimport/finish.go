package arcimport

import (
	"fmt"
	"strconv"
	"strings"

	"go.yaml.in/yaml/v3"

	"github.com/runnerscaler/runnerscaler/internal/runnerpod"
)

// finish settles what depends on several fields: labels, docker, namespace,
// image and the termination grace period.
func (c *converter) finish(d *object, dr *draft) {
	dr.labels = c.labels(d, dr)
	c.docker(d, dr)
	c.namespace(d, dr)
	c.runnerImage(d, dr)
	c.terminationGrace(d, dr)
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

// docker: ARC runs a docker sidecar unless dockerEnabled is false or dockerd
// runs in the runner container. A sidecar with ARC's docker settings is
// written out in full, as runnerscaler's own would be.
func (c *converter) docker(d *object, dr *draft) {
	sidecar, dind := dr.docker()
	if dind && dr.dockerEnabled != nil && *dr.dockerEnabled {
		c.note(d, "dockerEnabled and dockerdWithinRunnerContainer: dockerd runs in the runner container, as in ARC")
	}
	if !sidecar {
		c.noSidecar(d, dr, dind)
		return
	}
	if dr.dockerMTU != nil {
		dr.sidecar.appendSeq("args", str("--mtu="+scalar(dr.dockerMTU)))
	}
	if dr.dockerMirror != nil {
		dr.sidecar.appendSeq("args", str("--registry-mirror="+scalar(dr.dockerMirror)))
	}
	if !dr.sidecar.empty() {
		c.fullSidecar(dr)
	}
}

func (c *converter) noSidecar(d *object, dr *draft, dind bool) {
	why := "dockerEnabled is false: there is no docker sidecar"
	if dind {
		why = "dockerd runs in the runner container: there is no docker sidecar"
	}
	if !dr.sidecar.empty() {
		c.drop(d, dr.sidecarPath, why, "leave the sidecar's settings out, or use dockerEnabled")
	}
	for _, f := range []struct {
		name string
		v    *yaml.Node
	}{{"dockerMTU", dr.dockerMTU}, {"dockerRegistryMirror", dr.dockerMirror}} {
		if f.v == nil {
			continue
		}
		reason := why
		if dind {
			reason = "runnerscaler's entrypoint starts dockerd in the runner container without it"
		}
		c.drop(d, specPath(d, f.name), reason, "set it in the image's dockerd configuration (/etc/docker/daemon.json)")
	}
}

func specPath(d *object, field string) string {
	if d.kind == kindDeployment {
		return "spec.template.spec." + field
	}
	return "spec." + field
}

// fullSidecar writes runnerscaler's docker sidecar (package runnerpod) with
// ARC's settings laid over it.
func (c *converter) fullSidecar(dr *draft) {
	base := &omap{}
	base.set("name", str("docker"))
	base.set("image", str(runnerpod.DockerImage))
	base.set("env", seq(envVar("DOCKER_TLS_CERTDIR", "")))
	sc := &omap{}
	sc.set("privileged", boolean(true))
	base.set("securityContext", sc.node())
	base.set("volumeMounts", seq(mount("work", "/home/runner/_work")))
	for _, k := range dr.sidecar.keys {
		v := dr.sidecar.get(k)
		if k == "env" || k == "volumeMounts" {
			base.appendSeq(k, v.Content...)
			continue
		}
		base.set(k, v)
	}
	dr.sidecar = *base
	dr.runner.appendSeq("env", envVar("DOCKER_ENABLED", "true"), envVar("DOCKER_HOST", "tcp://localhost:2375"))
	dr.runner.appendSeq("volumeMounts", mount("work", "/home/runner/_work"))
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
	if img == "" {
		img, path = defaultARCImage, specPath(d, "image")
		if dr.dind != nil && *dr.dind {
			img = defaultARCDind
		}
		dr.image = img
	}
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
