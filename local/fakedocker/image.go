package fakedocker

import (
	"bytes"
	"context"
	"crypto/sha256"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"

	"github.com/runnerscaler/runnerscaler/local/ociimage"
)

// imageRepository is the stand-in image's own name; BuildImage tags it with a
// hash of its content. The tests give it the sidecar's name too (loop.DockerImage).
const imageRepository = "localhost/runnerscaler/dockerd-standin"

// Where the program is in the stand-in image: docker:dind's paths.
const (
	daemonPath = "/usr/local/bin/dockerd"
	cliPath    = "/usr/local/bin/docker"
)

// Package is the command's import path, relative to the module's root, which a
// build names (local/runnerimage builds it into the runner image).
const Package = "./local/fakedocker/cmd/fakedocker"

// Image is a built stand-in image.
type Image struct {
	// Ref names the image, e.g. localhost/runnerscaler/dockerd-standin:3f2a0c1d9e8b7a65.
	Ref string
	// Tarball is the docker-archive to import into the node's containerd
	// (ociimage.Import).
	Tarball string
}

// BuildImage builds the stand-in image into dir: the command (go build in
// moduleDir, this Go module's root; static, for linux and this machine's
// architecture) as dockerd, run by default, and docker. It needs the go command.
func BuildImage(ctx context.Context, moduleDir, dir string) (Image, error) {
	bin := filepath.Join(dir, "fakedocker")
	if err := build(ctx, moduleDir, bin); err != nil {
		return Image{}, err
	}
	layer := ociimage.Layer{
		{Path: daemonPath, HostPath: bin, Mode: 0o755},
		{Path: cliPath, Mode: fs.ModeSymlink, Link: "dockerd"},
		{Path: "/tmp", Mode: fs.ModeDir | fs.ModeSticky | 0o777},
	}
	raw, err := os.ReadFile(bin)
	if err != nil {
		return Image{}, err
	}
	sum := sha256.Sum256(raw)
	img := Image{Ref: fmt.Sprintf("%s:%x", imageRepository, sum[:8]), Tarball: filepath.Join(dir, "dockerd-standin.tar")}
	cfg := ociimage.Config{Entrypoint: []string{daemonPath},
		Labels: map[string]string{"org.opencontainers.image.title": "runnerscaler local stand-in for docker:27-dind (local/fakedocker)"}}
	if err := ociimage.Build(img.Ref, []ociimage.Layer{layer}, cfg, img.Tarball); err != nil {
		return Image{}, err
	}
	return img, nil
}

// build builds the command into out, static, for linux and this machine's
// architecture, from moduleDir (this Go module's root).
func build(ctx context.Context, moduleDir, out string) error {
	cmd := exec.CommandContext(ctx, "go", "build", "-trimpath", "-ldflags=-s -w", "-o", out, Package)
	cmd.Dir = moduleDir
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0", "GOOS=linux", "GOARCH="+runtime.GOARCH)
	if raw, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("building the docker stand-in: %w: %s", err, bytes.TrimSpace(raw))
	}
	return nil
}
