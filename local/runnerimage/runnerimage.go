// Package runnerimage builds the local stack's runner image: the real
// runner/entrypoint.sh around the fake actions runner of local/fakerunner, laid
// out like the image of runner/Dockerfile, with no distribution underneath.
//
// The image (one layer, for this machine's architecture):
//
//	/usr/bin/tini                   tini-static, the entrypoint: tini -- /usr/local/bin/entrypoint.sh
//	/usr/local/bin/entrypoint.sh    runner/entrypoint.sh
//	/usr/local/bin/runner-job-started.sh, runner-job-completed.sh
//	                                runner/'s job hooks, which the entrypoint names to the runner
//	/usr/local/bin/runner-job-running  runner/'s readiness probe: 0 while a job runs
//	/bin/bash, /bin/sh -> bash      bash-static
//	/bin/busybox, /bin/<applet>     busybox-static and links for the commands the entrypoint
//	/usr/bin/env -> busybox         uses (sleep, kill, hostname, cp, mkdir, ...)
//	/usr/bin/pgrep                  local/runnerimage/cmd/pgrep: Debian's busybox has no pgrep
//	/usr/bin/setpriv                local/runnerimage/cmd/setpriv: util-linux setpriv's options the
//	                                entrypoint uses (Debian's is dynamically linked, busybox's
//	                                cannot change users)
//	/usr/bin/docker                 local/fakedocker's stand-in CLI, as runner/Dockerfile installs
//	                                docker-cli: `docker info` for the entrypoint's wait for the
//	                                docker sidecar (DOCKER_ENABLED) and for jobs
//	/etc/passwd, /etc/group         root, and runner (1001:1001), whom the entrypoint runs
//	                                config.sh, run.sh and so every job step as
//	/tmp                            mode 1777
//	/home/runner                    RUNNER_HOME, owned by runner: bin/Runner.Listener (the fake
//	                                runner), bin/Runner.Worker, config.sh and run.sh linking to it,
//	                                _work, externals/ (one file: what the container hooks move or copy)
//
// As runner/Dockerfile's, the image names no user: the container starts as root,
// and the entrypoint drops to runner (see runner/README.md).
//
// Binaries come from Debian packages: `apt-get download bash-static tini
// busybox-static` into ~/.cache/runnerscaler/debs (a file per package version: the
// candidate version that apt-cache shows is fetched once; `apt-get update` runs
// only when a download fails), unpacked with `dpkg-deb -x`. The fake runner is
// built with `go build` (CGO_ENABLED=0, GOOS=linux, this machine's GOARCH), and so
// are the image's pgrep (Debian builds busybox without it, and procps's is not
// static), setpriv and docker.
//
// The image's tag is a hash of everything in it, so a changed entrypoint or fake
// runner gives a new reference (and pods naming it a new template); a built
// tarball is kept in ~/.cache/runnerscaler/images under that hash and reused.
package runnerimage

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strings"

	"github.com/runnerscaler/runnerscaler/local/fakedocker"
	"github.com/runnerscaler/runnerscaler/local/ociimage"
)

// Repository is the image's name; Build tags it with a hash of its content. A
// "localhost/" name is never pulled from anywhere: pods use the imported image
// (imagePullPolicy Never or IfNotPresent).
const Repository = "localhost/runnerscaler/runner"

// Where things are in the image, as in runner/Dockerfile.
const (
	RunnerHome = "/home/runner"
	Entrypoint = "/usr/local/bin/entrypoint.sh"
	// JobProbe is the runner container's readiness probe: it exits 0 while a job runs.
	JobProbe = "/usr/local/bin/runner-job-running"
	Tini     = "/usr/bin/tini"
	// UID and GID of the image's user, runner.
	UID = 1001
	GID = 1001
)

// applets are the busybox commands the image links into /bin: what
// runner/entrypoint.sh runs, and a few more for a shell in the container.
var applets = []string{
	"base64", "basename", "cat", "chmod", "chown", "cp", "date", "dirname", "echo", "env", "false", "grep", "head", "hostname",
	"id", "kill", "ln", "ls", "mkdir", "mktemp", "mv", "ps", "readlink", "rm", "sed", "seq", "sleep",
	"sort", "stat", "tail", "tee", "test", "timeout", "touch", "tr", "true", "uname", "wc", "whoami",
}

// Options configure Build.
type Options struct {
	// ModuleDir is this Go module's root (go.mod, runner/, local/); default: the
	// nearest directory holding runner/entrypoint.sh and go.mod, from the working
	// directory up.
	ModuleDir string
	// EntrypointPath is the entrypoint script put in the image (default
	// ModuleDir/runner/entrypoint.sh).
	EntrypointPath string
	// CacheDir holds debs/ and images/ (default ~/.cache/runnerscaler).
	CacheDir string
	// Log gets a line per step that takes time (default: discarded).
	Log *slog.Logger
}

// Image is a built runner image.
type Image struct {
	// Ref names the image, e.g. localhost/runnerscaler/runner:3f2a0c1d9e8b7a65.
	Ref string
	// Tarball is the docker-archive to import into the node's containerd
	// (ociimage.Import, stack.Stack.ImportImage).
	Tarball string
}

// Build builds the runner image, or finds it in the cache when an image of the
// same content was built before. It needs the go command, apt-get and dpkg-deb.
func Build(ctx context.Context, opts Options) (Image, error) {
	if err := opts.defaults(); err != nil {
		return Image{}, err
	}
	work, err := os.MkdirTemp("", "runnerimage-")
	if err != nil {
		return Image{}, err
	}
	defer os.RemoveAll(work)

	opts.Log.Info("building the fake runner, pgrep, setpriv and docker", "goarch", runtime.GOARCH)
	if err := buildCommands(ctx, opts.ModuleDir, work); err != nil {
		return Image{}, err
	}
	debs, err := fetchDebs(ctx, filepath.Join(opts.CacheDir, "debs"), []string{"bash-static", "tini", "busybox-static"}, opts.Log)
	if err != nil {
		return Image{}, err
	}
	unpacked := map[string]string{}
	for pkg, deb := range debs {
		dir := filepath.Join(work, pkg)
		if out, err := exec.CommandContext(ctx, "dpkg-deb", "-x", deb, dir).CombinedOutput(); err != nil {
			return Image{}, fmt.Errorf("dpkg-deb -x %s: %w: %s", deb, err, bytes.TrimSpace(out))
		}
		unpacked[pkg] = dir
	}
	bash, err := find(unpacked["bash-static"], "bin/bash-static", "usr/bin/bash-static")
	if err != nil {
		return Image{}, err
	}
	tini, err := find(unpacked["tini"], "usr/bin/tini-static", "bin/tini-static")
	if err != nil {
		return Image{}, err
	}
	busybox, err := find(unpacked["busybox-static"], "bin/busybox", "usr/bin/busybox")
	if err != nil {
		return Image{}, err
	}
	links, err := busyboxApplets(ctx, busybox)
	if err != nil {
		return Image{}, err
	}
	layer := layout(binaries{Bash: bash, Tini: tini, Busybox: busybox, Pgrep: filepath.Join(work, "pgrep"),
		Setpriv: filepath.Join(work, "setpriv"), Docker: filepath.Join(work, "fakedocker"), FakeRunner: filepath.Join(work, "fakerunner"),
		Entrypoint: opts.EntrypointPath, Scripts: filepath.Join(opts.ModuleDir, "runner")}, links)
	cfg := imageConfig()
	tag, err := contentHash(layer, cfg)
	if err != nil {
		return Image{}, err
	}
	img := Image{Ref: Repository + ":" + tag, Tarball: filepath.Join(opts.CacheDir, "images", "runner-"+tag+".tar")}
	if _, err := os.Stat(img.Tarball); err == nil {
		opts.Log.Info("runner image cached", "ref", img.Ref, "tarball", img.Tarball)
		return img, nil
	}
	if err := os.MkdirAll(filepath.Dir(img.Tarball), 0o755); err != nil {
		return Image{}, err
	}
	tmp := filepath.Join(work, "image.tar")
	if err := ociimage.Build(img.Ref, []ociimage.Layer{layer}, cfg, tmp); err != nil {
		return Image{}, err
	}
	if err := moveFile(tmp, img.Tarball); err != nil {
		return Image{}, err
	}
	opts.Log.Info("runner image built", "ref", img.Ref, "tarball", img.Tarball)
	return img, nil
}

// binaries are the host files the image is made of.
type binaries struct {
	Bash, Tini, Busybox string // the static binaries unpacked from Debian packages
	Pgrep               string // local/runnerimage/cmd/pgrep built for linux
	Setpriv             string // local/runnerimage/cmd/setpriv built for linux
	Docker              string // local/fakedocker/cmd/fakedocker built for linux
	FakeRunner          string // local/fakerunner/cmd/fakerunner built for linux
	Entrypoint          string // runner/entrypoint.sh
	Scripts             string // runner/, where the job hooks and the probe are
}

// jobScripts are the job hooks and the probe, from runner/ into /usr/local/bin.
var jobScripts = []string{"runner-job-started.sh", "runner-job-completed.sh", "runner-job-running"}

// layout is the image's one layer, made of b, with busybox linked as applets.
// Links are relative, so that the tree also works unpacked anywhere.
func layout(b binaries, applets []string) ociimage.Layer {
	const exe = 0o755
	passwd := "root:x:0:0:root:/root:/bin/bash\nrunner:x:1001:1001:runner:/home/runner:/bin/bash\n"
	group := "root:x:0:\nrunner:x:1001:\n"
	layer := ociimage.Layer{
		{Path: "/bin/bash", HostPath: b.Bash, Mode: exe},
		{Path: "/bin/sh", Mode: fs.ModeSymlink, Link: "bash"},
		{Path: "/bin/busybox", HostPath: b.Busybox, Mode: exe},
	}
	for _, a := range applets {
		if a != "env" {
			layer = append(layer, ociimage.File{Path: "/bin/" + a, Mode: fs.ModeSymlink, Link: "busybox"})
		}
	}
	layer = append(layer,
		ociimage.File{Path: "/usr/bin/env", Mode: fs.ModeSymlink, Link: "../../bin/busybox"}, // #!/usr/bin/env bash
		ociimage.File{Path: "/usr/bin/pgrep", HostPath: b.Pgrep, Mode: exe},
		ociimage.File{Path: "/usr/bin/setpriv", HostPath: b.Setpriv, Mode: exe},
		ociimage.File{Path: "/usr/bin/docker", HostPath: b.Docker, Mode: exe},
		ociimage.File{Path: Tini, HostPath: b.Tini, Mode: exe},
		ociimage.File{Path: Entrypoint, HostPath: b.Entrypoint, Mode: exe},
		ociimage.File{Path: "/etc/passwd", Content: []byte(passwd), Mode: 0o644},
		ociimage.File{Path: "/etc/group", Content: []byte(group), Mode: 0o644},
		ociimage.File{Path: "/root", Mode: fs.ModeDir | 0o700},
		ociimage.File{Path: "/tmp", Mode: fs.ModeDir | fs.ModeSticky | 0o777},
		ociimage.File{Path: "/home", Mode: fs.ModeDir | 0o755},
	)
	for _, name := range jobScripts {
		layer = append(layer, ociimage.File{Path: "/usr/local/bin/" + name, HostPath: filepath.Join(b.Scripts, name), Mode: exe})
	}
	home := func(p string) string { return RunnerHome + "/" + p }
	for _, f := range []ociimage.File{
		{Path: RunnerHome, Mode: fs.ModeDir | 0o755},
		{Path: home("bin"), Mode: fs.ModeDir | 0o755},
		{Path: home("bin/Runner.Listener"), HostPath: b.FakeRunner, Mode: exe},
		{Path: home("bin/Runner.Worker"), Mode: fs.ModeSymlink, Link: "Runner.Listener"},
		{Path: home("config.sh"), Mode: fs.ModeSymlink, Link: "bin/Runner.Listener"},
		{Path: home("run.sh"), Mode: fs.ModeSymlink, Link: "bin/Runner.Listener"},
		{Path: home("_work"), Mode: fs.ModeDir | 0o755},
		// The runner's externals (node and the rest, in actions/runner's image):
		// hooks v0.8.1's fs-init moves them into the workflow pod, v0.7.0's
		// prepare_job copies them into the work volume.
		{Path: home("externals"), Mode: fs.ModeDir | 0o755},
		{Path: home("externals/README"), Content: []byte("the fake runner's externals (actions/runner ships node here)\n"), Mode: 0o644},
	} {
		f.UID, f.GID = UID, GID
		layer = append(layer, f)
	}
	return layer
}

// imageConfig is the image's run configuration, as runner/Dockerfile's: no user,
// so root (the entrypoint drops to runner).
func imageConfig() ociimage.Config {
	return ociimage.Config{
		Entrypoint: []string{Tini, "--", Entrypoint},
		Env: []string{"PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin", "HOME=" + RunnerHome,
			"RUNNER_HOME=" + RunnerHome, "RUNNER_ALLOW_RUNASROOT=0"},
		WorkingDir: RunnerHome,
		Labels:     map[string]string{"org.opencontainers.image.title": "runnerscaler local runner (fake actions runner)"},
	}
}

// contentHash hashes every entry of the layer (content included) and the config.
func contentHash(layer ociimage.Layer, cfg ociimage.Config) (string, error) {
	h := sha256.New()
	for _, f := range layer {
		fmt.Fprintf(h, "%s\x00%o\x00%d:%d\x00%s\x00", f.Path, uint32(f.Mode), f.UID, f.GID, f.Link)
		content := f.Content
		if f.HostPath != "" {
			raw, err := os.ReadFile(f.HostPath)
			if err != nil {
				return "", fmt.Errorf("hashing %s: %w", f.Path, err)
			}
			content = raw
		}
		sum := sha256.Sum256(content)
		h.Write(sum[:])
	}
	raw, err := json.Marshal(cfg)
	if err != nil {
		return "", err
	}
	h.Write(raw)
	return hex.EncodeToString(h.Sum(nil))[:16], nil
}

// buildCommands builds local/fakerunner/cmd/fakerunner, local/runnerimage/cmd/pgrep,
// local/runnerimage/cmd/setpriv and local/fakedocker/cmd/fakedocker into dir,
// static, for linux and this machine's architecture.
func buildCommands(ctx context.Context, moduleDir, dir string) error {
	cmd := exec.CommandContext(ctx, goCommand(), "build", "-trimpath", "-ldflags=-s -w", "-o", dir+string(filepath.Separator),
		"./local/fakerunner/cmd/fakerunner", "./local/runnerimage/cmd/pgrep", "./local/runnerimage/cmd/setpriv", fakedocker.Package)
	cmd.Dir = moduleDir
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0", "GOOS=linux", "GOARCH="+runtime.GOARCH)
	if raw, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("building the fake runner, pgrep, setpriv and docker: %w: %s", err, bytes.TrimSpace(raw))
	}
	return nil
}

// goCommand is the go command on PATH, else the one of the toolchain that built
// this program.
func goCommand() string {
	if p, err := exec.LookPath("go"); err == nil {
		return p
	}
	if p := filepath.Join(runtime.GOROOT(), "bin", "go"); runtime.GOROOT() != "" {
		if _, err := os.Stat(p); err == nil {
			return p
		}
	}
	return "go"
}

// busyboxApplets is applets, less those this busybox does not have.
func busyboxApplets(ctx context.Context, busybox string) ([]string, error) {
	list, err := exec.CommandContext(ctx, busybox, "--list").Output()
	if err != nil {
		return nil, fmt.Errorf("%s --list: %w", busybox, err)
	}
	have := strings.Fields(string(list))
	var out []string
	for _, a := range applets {
		if slices.Contains(have, a) {
			out = append(out, a)
		}
	}
	for _, needed := range []string{"env", "sleep", "kill", "cp", "mkdir", "hostname", "base64", "cat", "chmod", "chown", "rm"} {
		if !slices.Contains(out, needed) {
			return nil, fmt.Errorf("%s has no %s applet, which runner/entrypoint.sh needs", busybox, needed)
		}
	}
	return out, nil
}

// find is the first of paths that exists under dir.
func find(dir string, paths ...string) (string, error) {
	for _, p := range paths {
		if _, err := os.Stat(filepath.Join(dir, p)); err == nil {
			return filepath.Join(dir, p), nil
		}
	}
	return "", fmt.Errorf("none of %v in the unpacked package %s", paths, filepath.Base(dir))
}

func (o *Options) defaults() error {
	if o.Log == nil {
		o.Log = slog.New(slog.DiscardHandler)
	}
	if o.ModuleDir == "" {
		dir, err := ModuleDir()
		if err != nil {
			return err
		}
		o.ModuleDir = dir
	}
	if o.EntrypointPath == "" {
		o.EntrypointPath = filepath.Join(o.ModuleDir, "runner", "entrypoint.sh")
	}
	if o.CacheDir == "" {
		home, err := os.UserHomeDir()
		if err != nil {
			return fmt.Errorf("runner image cache: %w", err)
		}
		o.CacheDir = filepath.Join(home, ".cache", "runnerscaler")
	}
	return nil
}

// ModuleDir is this Go module's root: the nearest directory, from the working
// directory up, with go.mod and runner/entrypoint.sh.
func ModuleDir() (string, error) {
	dir, err := os.Getwd()
	if err != nil {
		return "", err
	}
	for {
		_, errMod := os.Stat(filepath.Join(dir, "go.mod"))
		_, errEntry := os.Stat(filepath.Join(dir, "runner", "entrypoint.sh"))
		if errMod == nil && errEntry == nil {
			return dir, nil
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return "", errors.New("runner image: no go.mod with runner/entrypoint.sh above the working directory; set Options.ModuleDir")
		}
		dir = parent
	}
}

// moveFile renames src to dst, copying when they are on different file systems.
func moveFile(src, dst string) error {
	if err := os.Rename(src, dst); err == nil {
		return nil
	}
	in, err := os.Open(src)
	if err != nil {
		return err
	}
	defer in.Close()
	tmp, err := os.CreateTemp(filepath.Dir(dst), ".tmp-"+filepath.Base(dst))
	if err != nil {
		return err
	}
	if _, err := io.Copy(tmp, in); err != nil {
		tmp.Close()
		os.Remove(tmp.Name())
		return err
	}
	if err := tmp.Close(); err != nil {
		os.Remove(tmp.Name())
		return err
	}
	return os.Rename(tmp.Name(), dst)
}
