package runnerimage_test

import (
	"archive/tar"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/tarball"

	"github.com/runnerscaler/runnerscaler/local/githubsim"
	"github.com/runnerscaler/runnerscaler/local/runnerimage"
)

// build is shared by the tests: one image build per test binary.
var build = sync.OnceValues(func() (runnerimage.Image, error) {
	return runnerimage.Build(context.Background(), runnerimage.Options{})
})

type entry struct {
	typ  byte
	mode int64
	uid  int
	gid  int
	link string
	body []byte
}

func readImage(t *testing.T, img runnerimage.Image) (*v1.ConfigFile, map[string]entry) {
	t.Helper()
	tag, err := name.NewTag(img.Ref)
	if err != nil {
		t.Fatal(err)
	}
	im, err := tarball.ImageFromPath(img.Tarball, &tag)
	if err != nil {
		t.Fatalf("reading %s as %s: %v", img.Tarball, img.Ref, err)
	}
	cf, err := im.ConfigFile()
	if err != nil {
		t.Fatal(err)
	}
	files := map[string]entry{}
	tr := tar.NewReader(mutate.Extract(im))
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
		files["/"+strings.TrimSuffix(hdr.Name, "/")] = entry{hdr.Typeflag, hdr.Mode, hdr.Uid, hdr.Gid, hdr.Linkname, body}
	}
	return cf, files
}

func TestImageContent(t *testing.T) {
	t.Parallel()
	img, err := build()
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(img.Ref, runnerimage.Repository+":") || len(img.Ref) != len(runnerimage.Repository)+1+16 {
		t.Fatalf("ref %q: want %s:<content hash>", img.Ref, runnerimage.Repository)
	}
	cf, files := readImage(t, img)
	if cf.OS != "linux" || cf.Architecture != runtime.GOARCH {
		t.Errorf("platform %s/%s", cf.OS, cf.Architecture)
	}
	c := cf.Config
	if !slices.Equal(c.Entrypoint, []string{"/usr/bin/tini", "--", "/usr/local/bin/entrypoint.sh"}) || c.User != "" ||
		c.WorkingDir != "/home/runner" || !slices.Contains(c.Env, "RUNNER_HOME=/home/runner") {
		t.Errorf("config %+v: want runner/Dockerfile's entrypoint, workdir and RUNNER_HOME, and no user (root: the entrypoint drops to runner)", c)
	}
	entrypoint, err := os.ReadFile("../../runner/entrypoint.sh")
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]entry{
		"/usr/local/bin/entrypoint.sh":     {typ: tar.TypeReg, mode: 0o755, body: entrypoint},
		"/usr/bin/tini":                    {typ: tar.TypeReg, mode: 0o755},
		"/bin/bash":                        {typ: tar.TypeReg, mode: 0o755},
		"/bin/sh":                          {typ: tar.TypeSymlink, mode: 0o777, link: "bash"},
		"/bin/busybox":                     {typ: tar.TypeReg, mode: 0o755},
		"/usr/bin/env":                     {typ: tar.TypeSymlink, mode: 0o777, link: "../../bin/busybox"},
		"/tmp":                             {typ: tar.TypeDir, mode: 0o1777},
		"/home/runner":                     {typ: tar.TypeDir, mode: 0o755, uid: 1001, gid: 1001},
		"/home/runner/_work":               {typ: tar.TypeDir, mode: 0o755, uid: 1001, gid: 1001},
		"/home/runner/externals":           {typ: tar.TypeDir, mode: 0o755, uid: 1001, gid: 1001},
		"/home/runner/externals/README":    {typ: tar.TypeReg, mode: 0o644, uid: 1001, gid: 1001},
		"/home/runner/bin/Runner.Listener": {typ: tar.TypeReg, mode: 0o755, uid: 1001, gid: 1001},
		"/home/runner/bin/Runner.Worker":   {typ: tar.TypeSymlink, mode: 0o777, uid: 1001, gid: 1001, link: "Runner.Listener"},
		"/home/runner/config.sh":           {typ: tar.TypeSymlink, mode: 0o777, uid: 1001, gid: 1001, link: "bin/Runner.Listener"},
		"/home/runner/run.sh":              {typ: tar.TypeSymlink, mode: 0o777, uid: 1001, gid: 1001, link: "bin/Runner.Listener"},
	}
	for _, name := range []string{"runner-job-started.sh", "runner-job-completed.sh", "runner-job-running"} {
		body, err := os.ReadFile("../../runner/" + name)
		if err != nil {
			t.Fatal(err)
		}
		want["/usr/local/bin/"+name] = entry{typ: tar.TypeReg, mode: 0o755, body: body}
	}
	want["/usr/bin/pgrep"] = entry{typ: tar.TypeReg, mode: 0o755}
	want["/usr/bin/setpriv"] = entry{typ: tar.TypeReg, mode: 0o755}
	want["/usr/bin/docker"] = entry{typ: tar.TypeReg, mode: 0o755} // local/fakedocker's CLI
	for _, a := range []string{"sleep", "kill", "hostname", "cat", "rm", "mkdir", "cp", "ls", "id", "chmod", "chown", "base64", "mv"} {
		want["/bin/"+a] = entry{typ: tar.TypeSymlink, mode: 0o777, link: "busybox"}
	}
	for p, w := range want {
		g, ok := files[p]
		if !ok || g.typ != w.typ || g.mode != w.mode || g.uid != w.uid || g.gid != w.gid || g.link != w.link ||
			(w.body != nil && !bytes.Equal(g.body, w.body)) {
			t.Errorf("%s: %v %+v, want %+v", p, ok, g, w)
		}
		if w.typ == tar.TypeReg && len(g.body) == 0 {
			t.Errorf("%s is empty", p)
		}
	}
	if p := string(files["/etc/passwd"].body); !strings.Contains(p, "runner:x:1001:1001:runner:/home/runner:/bin/bash") || !strings.HasPrefix(p, "root:x:0:0:") {
		t.Errorf("/etc/passwd:\n%s", p)
	}
	if g := string(files["/etc/group"].body); !strings.Contains(g, "runner:x:1001:") {
		t.Errorf("/etc/group:\n%s", g)
	}
}

// TestCachedByContent: the same content is not built twice; a changed
// entrypoint gives another image.
func TestCachedByContent(t *testing.T) {
	t.Parallel()
	img, err := build()
	if err != nil {
		t.Fatal(err)
	}
	before, err := os.Stat(img.Tarball)
	if err != nil {
		t.Fatal(err)
	}
	again, err := runnerimage.Build(context.Background(), runnerimage.Options{})
	if err != nil {
		t.Fatal(err)
	}
	after, err := os.Stat(again.Tarball)
	if err != nil {
		t.Fatal(err)
	}
	if again != img || !after.ModTime().Equal(before.ModTime()) {
		t.Fatalf("second build %+v (modified %s), want %+v from the cache", again, after.ModTime(), img)
	}
	changed := filepath.Join(t.TempDir(), "entrypoint.sh")
	raw, err := os.ReadFile("../../runner/entrypoint.sh")
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(changed, append(raw, []byte("# changed\n")...), 0o755); err != nil {
		t.Fatal(err)
	}
	// Built into a cache of its own (sharing the packages), not to leave it in the user's.
	home, err := os.UserHomeDir()
	if err != nil {
		t.Fatal(err)
	}
	cache := t.TempDir()
	if err := os.Symlink(filepath.Join(home, ".cache", "runnerscaler", "debs"), filepath.Join(cache, "debs")); err != nil {
		t.Fatal(err)
	}
	other, err := runnerimage.Build(context.Background(), runnerimage.Options{EntrypointPath: changed, CacheDir: cache})
	if err != nil {
		t.Fatal(err)
	}
	if other.Ref == img.Ref || other.Tarball == img.Tarball {
		t.Fatalf("a changed entrypoint gave %+v, the same as %+v", other, img)
	}
	if _, files := readImage(t, other); !bytes.HasSuffix(files["/usr/local/bin/entrypoint.sh"].body, []byte("# changed\n")) {
		t.Fatal("the changed entrypoint is not in the image")
	}
}

// TestImageRunsAJob unpacks the image and runs its own tini, bash, busybox,
// entrypoint, setpriv and fake runner on the host (no container: paths are
// prefixed with the unpacked root) as root, as in a pod, against a GitHub
// simulator: the runner runs as nobody (see below); an ephemeral runner whose container gets SIGTERM
// mid-job lets the job finish (pgrep finds Runner.Worker), then exits.
func TestImageRunsAJob(t *testing.T) {
	t.Parallel()
	img, err := build()
	if err != nil {
		t.Fatal(err)
	}
	root := unpack(t, img)
	sim := githubsim.New(githubsim.Options{PATs: []string{"ghp_image"}})
	srv := httptest.NewServer(sim.Handler())
	t.Cleanup(srv.Close)
	req, err := http.NewRequestWithContext(t.Context(), "POST", srv.URL+"/orgs/acme/actions/runners/generate-jitconfig",
		strings.NewReader(`{"name":"img-1","runner_group_id":1,"labels":["big"]}`))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Authorization", "token ghp_image")
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	var jit struct {
		Runner  struct{ ID int64 }
		Encoded string `json:"encoded_jit_config"`
	}
	err = json.NewDecoder(resp.Body).Decode(&jit)
	resp.Body.Close()
	if err != nil || resp.StatusCode != http.StatusCreated || jit.Encoded == "" {
		t.Fatalf("generate-jitconfig: %d %+v, %v", resp.StatusCode, jit, err)
	}
	job := sim.QueueJob(githubsim.JobSpec{Repository: "acme/app", Organization: "acme", Labels: []string{"big"}, Duration: 1500 * time.Millisecond,
		Script: "id -u; id -g"})

	home := filepath.Join(root, "home/runner")
	// The runner runs as nobody (65534): the image's static bash, which runs the
	// job hooks, crashes for a user missing from /etc/passwd, and this host's has
	// no uid 1001 (the image's has, as runner).
	if err := filepath.Walk(home, func(p string, _ os.FileInfo, err error) error {
		if err != nil {
			return err
		}
		return os.Lchown(p, nobody, nobody)
	}); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(filepath.Join(root, "usr/bin/tini"), "-s", "--", filepath.Join(root, "bin/bash"), filepath.Join(root, "usr/local/bin/entrypoint.sh"))
	cmd.Env = []string{"PATH=" + filepath.Join(root, "usr/bin") + ":" + filepath.Join(root, "bin"), "HOME=" + home, "RUNNER_HOME=" + home,
		"RUNNER_STATE_DIR=" + t.TempDir(), "ACTIONS_RUNNER_INPUT_JITCONFIG=" + jit.Encoded, "RUNNER_GRACEFUL_STOP_TIMEOUT=20",
		fmt.Sprintf("RUNNER_USER=%d:%d", nobody, nobody), "RUNNER_HOOKS_DIR=" + filepath.Join(root, "usr/local/bin"), "RUNNER_JOB_DIR=" + filepath.Join(root, "run/runner-job"),
		"RUNNER_WORKER_PATTERN=" + filepath.Join(home, "bin/Runner.Worker")}
	var out syncBuffer
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	t.Cleanup(func() { _ = cmd.Process.Kill() })
	deadline := time.Now().Add(15 * time.Second)
	for {
		if _, ok := sim.RunningJob(jit.Runner.ID); ok {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the job never started; jobs %+v, output:\n%s", sim.Jobs(), out.String())
		}
		time.Sleep(20 * time.Millisecond)
	}
	_ = cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-done:
	case <-time.After(25 * time.Second):
		t.Fatalf("the container did not stop; output:\n%s", out.String())
	}
	if got := sim.Jobs()[job.ID-1]; got.State != githubsim.JobCompleted || got.Conclusion != githubsim.JobSuccess || got.Output != "65534\n65534\n" {
		t.Fatalf("job %+v; output:\n%s\nwant it run to success as the runner user", got, out.String())
	}
	if !strings.Contains(out.String(), "waiting up to 20s") {
		t.Fatalf("the entrypoint did not wait for the job (busybox pgrep); output:\n%s", out.String())
	}
	if !strings.Contains(out.String(), "holding the listener") || !strings.Contains(out.String(), "remaining window: 0 ms") {
		t.Fatalf("the image's job hooks did not let the entrypoint hold the listener at the job's end; output:\n%s", out.String())
	}
}

// nobody is the user TestImageRunsAJob runs the runner as.
const nobody = 65534

// unpack writes the image's file system, owners included, under a temporary
// directory that the image's runner user can reach (t.TempDir's are root's alone).
func unpack(t *testing.T, img runnerimage.Image) string {
	t.Helper()
	tag, _ := name.NewTag(img.Ref)
	im, err := tarball.ImageFromPath(img.Tarball, &tag)
	if err != nil {
		t.Fatal(err)
	}
	root, err := os.MkdirTemp("", "runnerimage-root-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = os.RemoveAll(root) })
	if err := os.Chmod(root, 0o755); err != nil {
		t.Fatal(err)
	}
	tr := tar.NewReader(mutate.Extract(im))
	for {
		hdr, err := tr.Next()
		if errors.Is(err, io.EOF) {
			return root
		}
		if err != nil {
			t.Fatal(err)
		}
		p := filepath.Join(root, hdr.Name)
		switch hdr.Typeflag {
		case tar.TypeDir:
			err = os.MkdirAll(p, 0o755)
		case tar.TypeSymlink:
			err = os.Symlink(hdr.Linkname, p)
		case tar.TypeReg:
			var body []byte
			if body, err = io.ReadAll(tr); err == nil {
				err = os.WriteFile(p, body, os.FileMode(hdr.Mode).Perm())
			}
		}
		if err == nil {
			err = os.Lchown(p, hdr.Uid, hdr.Gid)
		}
		if err != nil {
			t.Fatal(err)
		}
	}
}

type syncBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *syncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

// The job image: what the container hooks run in a workflow pod's containers
// (sh, tail, tar, find, stat, cp, mkdir), an entrypoint that keeps a service
// container running, and no alpine release file.
func TestJobImageContent(t *testing.T) {
	img, err := runnerimage.BuildJob(context.Background(), runnerimage.Options{})
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(img.Ref, runnerimage.JobRepository+":") {
		t.Errorf("ref %s", img.Ref)
	}
	cf, files := readImage(t, img)
	if !slices.Equal(cf.Config.Entrypoint, []string{"/bin/tail", "-f", "/dev/null"}) {
		t.Errorf("entrypoint %v, want tail -f /dev/null", cf.Config.Entrypoint)
	}
	for _, a := range []string{"sh", "tail", "tar", "find", "stat", "cp", "mkdir", "chmod", "cat", "grep", "sort", "rm", "dirname"} {
		if f, ok := files["/bin/"+a]; !ok || f.typ != tar.TypeSymlink || f.link != "busybox" {
			t.Errorf("/bin/%s: %v %+v, want a link to busybox", a, ok, f)
		}
	}
	if rel := string(files["/etc/os-release"].body); !strings.Contains(rel, "ID=debian") {
		t.Errorf("/etc/os-release %q", rel)
	}
}
