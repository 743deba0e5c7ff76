package loop

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"os"
	"os/exec"
	"strings"

	corev1 "k8s.io/api/core/v1"

	"github.com/runnerscaler/runnerscaler/internal/runnerpod"
	"github.com/runnerscaler/runnerscaler/local/fakedocker"
	"github.com/runnerscaler/runnerscaler/local/ociimage"
	"github.com/runnerscaler/runnerscaler/local/runnerimage"
)

// RunnerImage builds the runner image (local/runnerimage: runner/entrypoint.sh
// under tini around the fake actions runner) and imports it into the node's
// containerd at address. It returns the image's reference, whose tag is a hash
// of its content. A build takes seconds (the go build of the fake runner; the
// image is cached on disk by content): call it once per process.
func RunnerImage(ctx context.Context, containerdAddress string, log *slog.Logger) (string, error) {
	img, err := runnerimage.Build(ctx, runnerimage.Options{Log: log})
	if err != nil {
		return "", fmt.Errorf("building the runner image: %w", err)
	}
	if err := ociimage.Import(ctx, containerdAddress, img.Tarball); err != nil {
		return "", err
	}
	return img.Ref, nil
}

// JobImage builds the job image (runnerimage.BuildJob: busybox, `tail -f
// /dev/null`), the image of container jobs and their services on the stack,
// and imports it into the node's containerd at address. It returns its reference.
func JobImage(ctx context.Context, containerdAddress string, log *slog.Logger) (string, error) {
	img, err := runnerimage.BuildJob(ctx, runnerimage.Options{Log: log})
	if err != nil {
		return "", fmt.Errorf("building the job image: %w", err)
	}
	if err := ociimage.Import(ctx, containerdAddress, img.Tarball); err != nil {
		return "", err
	}
	return img.Ref, nil
}

// DockerImage builds local/fakedocker's stand-in for dockerd and imports it
// into the node's containerd at address under the docker sidecar's image name
// (runnerpod.DockerImage, as containerd names it: docker.io/library/...), so
// that a pool with dockerEnabled runs there: the real docker:27-dind cannot be
// pulled (no registry is reachable), and the kubelet, whose pull policy for it
// is IfNotPresent, finds the stand-in. It replaces an image of that name; the
// node is the tests' own. A build takes seconds: call it once per process.
func DockerImage(ctx context.Context, containerdAddress string) error {
	if strings.ContainsAny(runnerpod.DockerImage, "/@") {
		return fmt.Errorf("the docker sidecar's image %s is not an official Docker Hub name: normalize it here", runnerpod.DockerImage)
	}
	dir, err := os.MkdirTemp("", "dockerd-standin-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	module, err := runnerimage.ModuleDir()
	if err != nil {
		return err
	}
	img, err := fakedocker.BuildImage(ctx, module, dir)
	if err != nil {
		return err
	}
	if err := ociimage.Import(ctx, containerdAddress, img.Tarball); err != nil {
		return err
	}
	return TagImage(ctx, containerdAddress, img.Ref, "docker.io/library/"+runnerpod.DockerImage)
}

// TagImage gives the image src, already in the node's containerd at address, the
// further reference dst (replacing an image of that name): a "new image" for a
// deploy, with no build.
func TagImage(ctx context.Context, containerdAddress, src, dst string) error {
	out, err := exec.CommandContext(ctx, "ctr", "--address", containerdAddress, "--namespace", ociimage.Namespace,
		"images", "tag", "--force", src, dst).CombinedOutput()
	if err != nil {
		return fmt.Errorf("ctr images tag %s %s: %w: %s", src, dst, err, bytes.TrimSpace(out))
	}
	return nil
}

// GracefulStop is the entrypoint's RUNNER_GRACEFUL_STOP_TIMEOUT in RunnerTemplate
// (seconds a running job may take to finish after SIGTERM). The pods'
// terminationGracePeriodSeconds is left to the sweeper, which derives it from
// this (runnerpod.StopSeconds), so that the runner has time to cancel and report
// a job that did not finish before the kubelet kills it.
const GracefulStop = 10

// Template is a runner pod template for the local stack's node; Spec renders it.
type Template struct {
	// Image is the runner image (RunnerImage).
	Image string
	// PullPolicy is the runner container's imagePullPolicy (default Never: no
	// registry is reachable; an image missing from the node fails with
	// ErrImageNeverPull, IfNotPresent makes the kubelet try a pull, which fails).
	PullPolicy string
	// MemoryLimit, e.g. "96Mi", limits the runner container's memory (OOM kills).
	MemoryLimit string
	// Unschedulable gives the pods a node selector no node matches: they stay
	// Pending (tests that count StatefulSets only).
	Unschedulable bool
	// Env, Volumes and VolumeMounts are added to the runner container and the
	// pod: what a test's runners need besides the product's own (on the
	// stack, the in-cluster access of container-mode runners, testenv.InClusterAccess).
	Env          []corev1.EnvVar
	Volumes      []corev1.Volume
	VolumeMounts []corev1.VolumeMount
}

// RunnerTemplate is Template{Image: image}.Spec().
func RunnerTemplate(image string) string { return Template{Image: image}.Spec() }

// Spec renders the template as a pool's `kubernetes.template` (JSON, which is
// YAML too, so it fits in a flow mapping): host network, so that runners reach
// the GitHub simulator on 127.0.0.1 and no traffic leaves the machine; the host's
// DNS settings (the node's resolv.conf, on loopback); small requests; a shorter
// graceful-stop timeout, and so a shorter termination grace period.
func (t Template) Spec() string {
	pull := t.PullPolicy
	if pull == "" {
		pull = "Never"
	}
	resources := map[string]any{"requests": map[string]string{"cpu": "10m", "memory": "24Mi"}}
	if t.MemoryLimit != "" {
		resources["limits"] = map[string]string{"memory": t.MemoryLimit}
	}
	env := []any{map[string]string{"name": "RUNNER_GRACEFUL_STOP_TIMEOUT", "value": fmt.Sprint(GracefulStop)}}
	for _, e := range t.Env {
		env = append(env, e)
	}
	runner := map[string]any{"name": "runner", "image": t.Image, "imagePullPolicy": pull, "resources": resources, "env": env}
	if len(t.VolumeMounts) > 0 {
		runner["volumeMounts"] = t.VolumeMounts
	}
	spec := map[string]any{
		"hostNetwork": true,
		"dnsPolicy":   "Default",
		"containers":  []any{runner},
	}
	if len(t.Volumes) > 0 {
		spec["volumes"] = t.Volumes
	}
	if t.Unschedulable {
		spec["nodeSelector"] = map[string]string{"runnerscaler.dev/no-such-node": "true"}
	}
	raw, _ := json.Marshal(map[string]any{"spec": spec})
	return string(raw)
}
