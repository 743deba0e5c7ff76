package runnerimage

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
)

// fetchDebs returns the .deb file of each package in dir, downloading what is not
// there yet. A package's file is named by its version (apt-get download's
// <name>_<version>_<arch>.deb), so the cache holds one file per version: the
// candidate version apt-cache shows is looked for first. `apt-get update` runs only
// when a download fails; when that fails too, a cached file of another version
// is used rather than nothing (the machine may be offline).
func fetchDebs(ctx context.Context, dir string, pkgs []string, log *slog.Logger) (map[string]string, error) {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, err
	}
	out := map[string]string{}
	updated := false
	for _, pkg := range pkgs {
		version, arch := candidate(ctx, pkg)
		if version != "" {
			if p := filepath.Join(dir, debName(pkg, version, arch)); exists(p) {
				out[pkg] = p
				continue
			}
		}
		p, err := download(ctx, dir, pkg, version, log)
		if err != nil && !updated {
			log.Info("apt-get download failed: running apt-get update", "package", pkg, "err", err)
			if raw, uerr := exec.CommandContext(ctx, "apt-get", "update").CombinedOutput(); uerr != nil {
				log.Warn("apt-get update failed", "err", uerr, "output", string(bytes.TrimSpace(raw)))
			}
			updated = true
			version, _ = candidate(ctx, pkg)
			p, err = download(ctx, dir, pkg, version, log)
		}
		if err != nil {
			if cached := newestCached(dir, pkg); cached != "" {
				log.Warn("using a cached package of another version", "package", pkg, "file", cached, "err", err)
				p, err = cached, nil
			}
		}
		if err != nil {
			return nil, fmt.Errorf("fetching the Debian package %s: %w", pkg, err)
		}
		out[pkg] = p
	}
	return out, nil
}

// candidate is the version and architecture apt would install, from the local
// package lists ("" when apt knows nothing of the package).
func candidate(ctx context.Context, pkg string) (version, arch string) {
	raw, err := exec.CommandContext(ctx, "apt-cache", "show", "--no-all-versions", pkg).Output()
	if err != nil {
		return "", ""
	}
	sc := bufio.NewScanner(bytes.NewReader(raw))
	for sc.Scan() {
		if v, ok := strings.CutPrefix(sc.Text(), "Version: "); ok && version == "" {
			version = strings.TrimSpace(v)
		}
		if a, ok := strings.CutPrefix(sc.Text(), "Architecture: "); ok && arch == "" {
			arch = strings.TrimSpace(a)
		}
	}
	return version, arch
}

// download runs `apt-get download pkg[=version]` in a fresh directory under dir
// and moves the file into dir, so that concurrent builds never see half a file.
func download(ctx context.Context, dir, pkg, version string, log *slog.Logger) (string, error) {
	tmp, err := os.MkdirTemp(dir, ".download-")
	if err != nil {
		return "", err
	}
	defer os.RemoveAll(tmp)
	spec := pkg
	if version != "" {
		spec += "=" + version
	}
	log.Info("downloading a Debian package", "package", spec)
	cmd := exec.CommandContext(ctx, "apt-get", "download", spec)
	cmd.Dir = tmp
	if raw, err := cmd.CombinedOutput(); err != nil {
		return "", fmt.Errorf("apt-get download %s: %w: %s", spec, err, bytes.TrimSpace(raw))
	}
	files, _ := filepath.Glob(filepath.Join(tmp, pkg+"_*.deb"))
	if len(files) != 1 {
		return "", fmt.Errorf("apt-get download %s left %d .deb files", spec, len(files))
	}
	dst := filepath.Join(dir, filepath.Base(files[0]))
	if err := os.Rename(files[0], dst); err != nil {
		return "", err
	}
	return dst, nil
}

// debName is apt-get download's file name for a package version (an epoch's colon
// is written %3a).
func debName(pkg, version, arch string) string {
	return pkg + "_" + strings.ReplaceAll(version, ":", "%3a") + "_" + arch + ".deb"
}

func newestCached(dir, pkg string) string {
	files, _ := filepath.Glob(filepath.Join(dir, pkg+"_*.deb"))
	if len(files) == 0 {
		return ""
	}
	newest, at := "", int64(0)
	for _, f := range files {
		if fi, err := os.Stat(f); err == nil && (newest == "" || fi.ModTime().UnixNano() > at) {
			newest, at = f, fi.ModTime().UnixNano()
		}
	}
	return newest
}

func exists(p string) bool {
	_, err := os.Stat(p)
	return err == nil
}
