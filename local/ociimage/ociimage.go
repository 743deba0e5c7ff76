// Package ociimage builds container images without a Docker engine or a registry,
// neither of which the local stack has: files given in memory or taken from this
// machine become image layers, written as a docker-archive tarball that
// `ctr images import` loads into the stack's containerd (Import), where pods use it
// with `imagePullPolicy: Never` or `IfNotPresent`.
//
// Images are reproducible: every entry has the Unix epoch as its time, so the same
// files and config give the same image digest.
package ociimage

import (
	"archive/tar"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"os/exec"
	"path"
	"runtime"
	"strings"
	"time"

	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
)

// Namespace is the containerd namespace of the Kubernetes CRI: images imported
// anywhere else are invisible to the kubelet.
const Namespace = "k8s.io"

// File is one entry of a layer: a regular file, a directory or a symbolic link.
type File struct {
	// Path is where the entry is in the image, e.g. "/usr/bin/tini". Missing parent
	// directories are added (mode 0755, owned by root).
	Path string
	// Mode holds the permission bits (setuid, setgid and sticky included), plus
	// fs.ModeDir for a directory or fs.ModeSymlink for a symbolic link. Zero means
	// 0644 for a regular file (the host file's bits when HostPath is set), 0755 for
	// a directory.
	Mode fs.FileMode
	// Content is a regular file's content, unless HostPath is set.
	Content []byte
	// HostPath names a file on this machine whose content the regular file gets.
	HostPath string
	// Link is a symbolic link's target.
	Link string
	// UID and GID own the entry; zero is root.
	UID, GID int
}

// Layer is one image layer; a later layer's entry replaces an earlier one's.
type Layer []File

// Config is the image's run configuration: what a container of it runs by default.
type Config struct {
	Entrypoint []string
	Cmd        []string
	// Env holds KEY=value entries.
	Env []string
	// User is a user (and group) id, e.g. "1001" or "1001:1001"; a name needs an
	// /etc/passwd in the image.
	User       string
	WorkingDir string
	Labels     map[string]string
}

// Build writes to out a docker-archive tarball of a linux image for this machine's
// architecture, tagged ref (e.g. "localhost/runnerscaler/runner:test"; a
// "localhost/" name can never be pulled from anywhere but this machine), made of
// layers in order and configured by cfg.
func Build(ref string, layers []Layer, cfg Config, out string) error {
	tag, err := name.NewTag(ref)
	if err != nil {
		return fmt.Errorf("image reference %q: %w", ref, err)
	}
	img := empty.Image
	for i, files := range layers {
		raw, err := layerTar(files)
		if err != nil {
			return fmt.Errorf("layer %d of %s: %w", i, ref, err)
		}
		layer, err := tarball.LayerFromOpener(func() (io.ReadCloser, error) {
			return io.NopCloser(bytes.NewReader(raw)), nil
		})
		if err != nil {
			return fmt.Errorf("layer %d of %s: %w", i, ref, err)
		}
		if img, err = mutate.AppendLayers(img, layer); err != nil {
			return fmt.Errorf("appending layer %d of %s: %w", i, ref, err)
		}
	}
	cf, err := img.ConfigFile()
	if err != nil {
		return fmt.Errorf("config of %s: %w", ref, err)
	}
	cf = cf.DeepCopy()
	// ctr imports (and the kubelet runs) only images of its own platform.
	cf.OS, cf.Architecture = "linux", runtime.GOARCH
	cf.Created = v1.Time{Time: time.Unix(0, 0).UTC()}
	cf.Config = v1.Config{
		Entrypoint: cfg.Entrypoint, Cmd: cfg.Cmd, Env: cfg.Env,
		User: cfg.User, WorkingDir: cfg.WorkingDir, Labels: cfg.Labels,
	}
	if img, err = mutate.ConfigFile(img, cf); err != nil {
		return fmt.Errorf("configuring %s: %w", ref, err)
	}
	if err := tarball.WriteToFile(out, tag, img); err != nil {
		return fmt.Errorf("writing %s to %s: %w", ref, out, err)
	}
	return nil
}

// Import loads a tarball written by Build into the containerd listening on the
// unix socket address, in the CRI's namespace, with the `ctr` client that comes
// with containerd; an image of the same name is replaced.
func Import(ctx context.Context, address, tarball string) error {
	if address == "" {
		return errors.New("importing an image: no containerd address (is the stack's node running?)")
	}
	cmd := exec.CommandContext(ctx, "ctr", "--address", address, "--namespace", Namespace, "images", "import", tarball)
	out, err := cmd.CombinedOutput()
	if err != nil {
		return fmt.Errorf("ctr images import %s: %w: %s", tarball, err, bytes.TrimSpace(out))
	}
	return nil
}

// layerTar renders files as an uncompressed tar stream, parents before children.
func layerTar(files []File) ([]byte, error) {
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	written := map[string]bool{} // entry name → listed in files (rather than an implied parent)
	epoch := time.Unix(0, 0)
	for _, f := range files {
		p, err := cleanPath(f.Path)
		if err != nil {
			return nil, err
		}
		if written[p] {
			return nil, fmt.Errorf("%s: listed twice", f.Path)
		}
		for _, dir := range parents(p) {
			if _, ok := written[dir]; ok {
				continue
			}
			hdr := &tar.Header{Typeflag: tar.TypeDir, Name: dir + "/", Mode: 0o755, ModTime: epoch}
			if err := tw.WriteHeader(hdr); err != nil {
				return nil, fmt.Errorf("%s: %w", dir, err)
			}
			written[dir] = false
		}
		hdr, content, err := header(f, p)
		if err != nil {
			return nil, err
		}
		hdr.ModTime, hdr.Uid, hdr.Gid = epoch, f.UID, f.GID
		if err := tw.WriteHeader(hdr); err != nil {
			return nil, fmt.Errorf("%s: %w", f.Path, err)
		}
		if _, err := tw.Write(content); err != nil {
			return nil, fmt.Errorf("%s: %w", f.Path, err)
		}
		written[p] = true
	}
	if err := tw.Close(); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}

func header(f File, p string) (*tar.Header, []byte, error) {
	mode := tarMode(f.Mode)
	switch {
	case f.Mode&fs.ModeDir != 0:
		if mode == 0 {
			mode = 0o755
		}
		return &tar.Header{Typeflag: tar.TypeDir, Name: p + "/", Mode: mode}, nil, nil
	case f.Mode&fs.ModeSymlink != 0:
		if f.Link == "" {
			return nil, nil, fmt.Errorf("%s: a symbolic link needs a Link target", f.Path)
		}
		return &tar.Header{Typeflag: tar.TypeSymlink, Name: p, Linkname: f.Link, Mode: 0o777}, nil, nil
	case f.Mode.Type() != 0:
		return nil, nil, fmt.Errorf("%s: mode %s: only regular files, directories and symbolic links", f.Path, f.Mode)
	}
	content := f.Content
	if f.HostPath != "" {
		raw, err := os.ReadFile(f.HostPath)
		if err != nil {
			return nil, nil, fmt.Errorf("%s: %w", f.Path, err)
		}
		content = raw
		if mode == 0 {
			st, err := os.Stat(f.HostPath)
			if err != nil {
				return nil, nil, fmt.Errorf("%s: %w", f.Path, err)
			}
			mode = tarMode(st.Mode())
		}
	}
	if mode == 0 {
		mode = 0o644
	}
	return &tar.Header{Typeflag: tar.TypeReg, Name: p, Mode: mode, Size: int64(len(content))}, content, nil
}

// tarMode is the tar header's mode field of m: permission and special bits.
func tarMode(m fs.FileMode) int64 {
	mode := int64(m.Perm())
	if m&fs.ModeSetuid != 0 {
		mode |= 0o4000
	}
	if m&fs.ModeSetgid != 0 {
		mode |= 0o2000
	}
	if m&fs.ModeSticky != 0 {
		mode |= 0o1000
	}
	return mode
}

// cleanPath turns an image path into a tar entry name: relative, clean, not the root.
func cleanPath(p string) (string, error) {
	c := strings.TrimPrefix(path.Clean("/"+p), "/")
	if c == "" || p == "" {
		return "", fmt.Errorf("%q: not a file path in the image", p)
	}
	return c, nil
}

// parents lists the directories above p, outermost first.
func parents(p string) []string {
	var dirs []string
	for d := path.Dir(p); d != "."; d = path.Dir(d) {
		dirs = append([]string{d}, dirs...)
	}
	return dirs
}
