package ociimage_test

import (
	"archive/tar"
	"errors"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"testing"

	"github.com/google/go-containerregistry/pkg/name"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/tarball"

	"github.com/runnerscaler/runnerscaler/local/ociimage"
)

// TestBuild reads a built archive back (mutate.Extract flattens the layers and
// drops directory names' trailing slash): the tag, the platform ctr needs, the run
// configuration, and every entry of the flattened file system with its type, mode,
// owner and content — later layers replacing earlier ones.
func TestBuild(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	host := filepath.Join(dir, "tool")
	if err := os.WriteFile(host, []byte("#!/bin/sh\n"), 0o750); err != nil {
		t.Fatal(err)
	}
	layers := []ociimage.Layer{
		{
			{Path: "/usr/bin/tool", HostPath: host},
			{Path: "/etc/motd", Content: []byte("old")},
			{Path: "/bin/sh", Mode: fs.ModeSymlink, Link: "/usr/bin/tool"},
			{Path: "/home/runner", Mode: fs.ModeDir | 0o700, UID: 1001, GID: 1001},
			{Path: "/usr/bin/su", Content: []byte("x"), Mode: fs.ModeSetuid | 0o755},
		},
		{{Path: "etc/motd", Content: []byte("new")}},
	}
	cfg := ociimage.Config{Entrypoint: []string{"/bin/sh"}, Cmd: []string{"-c", "true"}, Env: []string{"A=b"},
		User: "1001", WorkingDir: "/home/runner", Labels: map[string]string{"k": "v"}}
	out := filepath.Join(dir, "img.tar")
	if err := ociimage.Build("localhost/runnerscaler/test:1", layers, cfg, out); err != nil {
		t.Fatalf("Build: %v", err)
	}

	tag, _ := name.NewTag("localhost/runnerscaler/test:1")
	img, err := tarball.ImageFromPath(out, &tag)
	if err != nil {
		t.Fatalf("reading archive back: %v", err)
	}
	cf, err := img.ConfigFile()
	if err != nil {
		t.Fatal(err)
	}
	if cf.OS != "linux" || cf.Architecture != runtime.GOARCH {
		t.Errorf("platform = %s/%s, want linux/%s", cf.OS, cf.Architecture, runtime.GOARCH)
	}
	c := cf.Config
	if !slices.Equal(c.Entrypoint, cfg.Entrypoint) || !slices.Equal(c.Cmd, cfg.Cmd) || !slices.Equal(c.Env, cfg.Env) ||
		c.User != "1001" || c.WorkingDir != "/home/runner" || c.Labels["k"] != "v" {
		t.Errorf("config = %+v, want %+v", c, cfg)
	}
	if layers, _ := img.Layers(); len(layers) != 2 {
		t.Errorf("image has %d layers, want 2", len(layers))
	}

	type entry struct {
		typ      byte
		mode     int64
		uid      int
		link     string
		contents string
	}
	got := map[string]entry{}
	tr := tar.NewReader(mutate.Extract(img))
	for {
		hdr, err := tr.Next()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		body, err := io.ReadAll(tr)
		if err != nil {
			t.Fatal(err)
		}
		got[strings.TrimSuffix(hdr.Name, "/")] = entry{hdr.Typeflag, hdr.Mode, hdr.Uid, hdr.Linkname, string(body)}
	}
	want := map[string]entry{
		"usr":          {tar.TypeDir, 0o755, 0, "", ""},
		"usr/bin":      {tar.TypeDir, 0o755, 0, "", ""},
		"usr/bin/tool": {tar.TypeReg, 0o750, 0, "", "#!/bin/sh\n"},
		"usr/bin/su":   {tar.TypeReg, 0o4755, 0, "", "x"},
		"etc":          {tar.TypeDir, 0o755, 0, "", ""},
		"etc/motd":     {tar.TypeReg, 0o644, 0, "", "new"},
		"bin":          {tar.TypeDir, 0o755, 0, "", ""},
		"bin/sh":       {tar.TypeSymlink, 0o777, 0, "/usr/bin/tool", ""},
		"home":         {tar.TypeDir, 0o755, 0, "", ""},
		"home/runner":  {tar.TypeDir, 0o700, 1001, "", ""},
	}
	for n, w := range want {
		if g, ok := got[n]; !ok || g != w {
			t.Errorf("entry %s = %+v (present %v), want %+v", n, g, ok, w)
		}
	}
	if len(got) != len(want) {
		t.Errorf("entries = %v, want exactly %d", got, len(want))
	}

	// The same inputs give the same image.
	again := filepath.Join(dir, "again.tar")
	if err := ociimage.Build("localhost/runnerscaler/test:1", layers, cfg, again); err != nil {
		t.Fatal(err)
	}
	img2, err := tarball.ImageFromPath(again, &tag)
	if err != nil {
		t.Fatal(err)
	}
	d1, err := img.Digest()
	if err != nil {
		t.Fatal(err)
	}
	d2, err := img2.Digest()
	if err != nil {
		t.Fatal(err)
	}
	if d1 != d2 {
		t.Errorf("rebuilt image digest %s, want %s (reproducible)", d2, d1)
	}
}

func TestBuildRejects(t *testing.T) {
	t.Parallel()
	out := filepath.Join(t.TempDir(), "img.tar")
	for name, layer := range map[string]ociimage.Layer{
		"root path":         {{Path: "/", Content: []byte("x")}},
		"empty path":        {{Path: "", Content: []byte("x")}},
		"duplicate":         {{Path: "/a"}, {Path: "a"}},
		"link without dest": {{Path: "/a", Mode: fs.ModeSymlink}},
		"device":            {{Path: "/dev/null", Mode: fs.ModeDevice}},
		"missing host file": {{Path: "/a", HostPath: "/nonexistent/file"}},
	} {
		if err := ociimage.Build("localhost/x:1", []ociimage.Layer{layer}, ociimage.Config{}, out); err == nil {
			t.Errorf("%s: Build succeeded, want an error", name)
		}
	}
	if err := ociimage.Build("Not A Ref", nil, ociimage.Config{}, out); err == nil {
		t.Errorf("Build with an invalid reference succeeded")
	}
}
