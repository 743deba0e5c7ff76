package runnerimage

import (
	"bytes"
	"context"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"

	"github.com/runnerscaler/runnerscaler/local/ociimage"
)

// JobRepository is the job image's name, tagged with a hash of its content: a
// service container of it is named "busybox" (the hooks name services after
// their image), apart from the job container "job".
const JobRepository = "localhost/runnerscaler/busybox"

// jobApplets are what a workflow pod's containers run: the hooks' exec
// commands (sh, tail, tar, find, stat, cp, mkdir, chmod, …; facts sheet §5),
// the alpine check (cat, grep) and a job's scripts.
var jobApplets = []string{"cat", "chmod", "cp", "dirname", "echo", "env", "find", "grep", "head", "id", "ls", "mkdir",
	"mv", "rm", "sh", "sleep", "sort", "stat", "tail", "tar", "test", "true", "false", "wc"}

// BuildJob builds the job image, the image of the local stack's container
// jobs and their services (Debian's busybox-static, as the runner image, and
// nothing else): /bin/busybox with jobApplets linked into /bin, an
// /etc/os-release naming Debian (so the hooks' alpine check says no), and
// `tail -f /dev/null` as its entrypoint, so that a service container started
// from it (whose entrypoint the hooks leave alone) keeps running as a database
// would. A separate image rather than the runner's: the runner image's
// entrypoint is the runner's, which a service container would run.
func BuildJob(ctx context.Context, opts Options) (Image, error) {
	if err := opts.defaults(); err != nil {
		return Image{}, err
	}
	work, err := os.MkdirTemp("", "jobimage-")
	if err != nil {
		return Image{}, err
	}
	defer os.RemoveAll(work)
	debs, err := fetchDebs(ctx, filepath.Join(opts.CacheDir, "debs"), []string{"busybox-static"}, opts.Log)
	if err != nil {
		return Image{}, err
	}
	dir := filepath.Join(work, "busybox-static")
	if out, err := exec.CommandContext(ctx, "dpkg-deb", "-x", debs["busybox-static"], dir).CombinedOutput(); err != nil {
		return Image{}, fmt.Errorf("dpkg-deb -x %s: %w: %s", debs["busybox-static"], err, bytes.TrimSpace(out))
	}
	busybox, err := find(dir, "bin/busybox", "usr/bin/busybox")
	if err != nil {
		return Image{}, err
	}
	layer := ociimage.Layer{
		{Path: "/bin/busybox", HostPath: busybox, Mode: 0o755},
		{Path: "/etc/os-release", Content: []byte("ID=debian\nNAME=\"runnerscaler local job image\"\n"), Mode: 0o644},
		{Path: "/etc/passwd", Content: []byte("root:x:0:0:root:/root:/bin/sh\nrunner:x:1001:1001:runner:/home/runner:/bin/sh\n"), Mode: 0o644},
		{Path: "/etc/group", Content: []byte("root:x:0:\nrunner:x:1001:\n"), Mode: 0o644},
		{Path: "/tmp", Mode: fs.ModeDir | fs.ModeSticky | 0o777},
	}
	for _, a := range jobApplets {
		layer = append(layer, ociimage.File{Path: "/bin/" + a, Mode: fs.ModeSymlink, Link: "busybox"})
	}
	cfg := ociimage.Config{
		Entrypoint: []string{"/bin/tail", "-f", "/dev/null"},
		Env:        []string{"PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"},
		Labels:     map[string]string{"org.opencontainers.image.title": "runnerscaler local job image"},
	}
	tag, err := contentHash(layer, cfg)
	if err != nil {
		return Image{}, err
	}
	img := Image{Ref: JobRepository + ":" + tag, Tarball: filepath.Join(opts.CacheDir, "images", "job-"+tag+".tar")}
	if _, err := os.Stat(img.Tarball); err == nil {
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
	opts.Log.Info("job image built", "ref", img.Ref, "tarball", img.Tarball)
	return img, nil
}
