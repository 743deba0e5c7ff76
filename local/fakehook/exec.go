package fakehook

import (
	"archive/tar"
	"bytes"
	"context"
	"encoding/base64"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/tools/remotecommand"
	utilexec "k8s.io/client-go/util/exec"
)

// exec runs command in container job of pod through pods/exec over a
// WebSocket (a GET, as @kubernetes/client-node's Exec), stdin from in, stdout
// and stderr to out. exitCode is the command's; err is set only when it could
// not run (or its stream broke).
func (h *Hook) exec(ctx context.Context, pod string, command []string, in io.Reader, out io.Writer) (exitCode int, err error) {
	req := h.kube.CoreV1().RESTClient().Post().Resource("pods").Namespace(h.cfg.Namespace).Name(pod).SubResource("exec").
		VersionedParams(&corev1.PodExecOptions{Container: JobContainerName, Command: command, Stdin: in != nil, Stdout: true, Stderr: true},
			scheme.ParameterCodec)
	ex, err := remotecommand.NewWebSocketExecutor(h.rest, "GET", req.URL().String())
	if err != nil {
		return 0, err
	}
	// stdout and stderr are copied by two goroutines: one lock keeps their
	// writes to out whole.
	w := &lockedWriter{w: out}
	err = ex.StreamWithContext(ctx, remotecommand.StreamOptions{Stdin: in, Stdout: w, Stderr: w})
	var exit utilexec.CodeExitError
	if errors.As(err, &exit) {
		return exit.ExitStatus(), nil
	}
	if err != nil {
		return 0, err
	}
	return 0, nil
}

// execOK runs command and fails unless it exits 0, with its output in the error.
func (h *Hook) execOK(ctx context.Context, pod string, command []string) (string, error) {
	var out bytes.Buffer
	code, err := h.exec(ctx, pod, command, nil, &out)
	if err == nil && code != 0 {
		err = fmt.Errorf("command terminated with non-zero exit code %d: %s", code, strings.TrimSpace(out.String()))
	}
	return out.String(), err
}

// Copy tries (H@0.8.1 k8s/k8s/index.ts execCpToPod).
const (
	copyAttempts  = 30
	checkAttempts = 15
)

// copyToPod is execCpToPod (H@0.8.1): the runner's directory packed as a tar
// stream into `tar xf - --no-same-owner -C dst` (with its chmod fix-ups) in
// container job, up to 30 tries a second apart, then checked by comparing a
// listing of both sides, up to 15 times. Unlike the hook, whose check carries
// on when the listings still differ, a copy that never matches fails: here it
// is the simulator's evidence that the workspace arrived. The listing holds
// regular files with their sizes (the hook's also lists directories, whose
// sizes depend on the file system).
func (h *Hook) copyToPod(ctx context.Context, pod, src, dst string) error {
	archive, err := tarDir(src)
	if err != nil {
		return fmt.Errorf("packing %s: %w", src, err)
	}
	q := shellQuote(dst)
	unpack := []string{"sh", "-c", "tar xf - --no-same-owner -C " + q + " 2>/dev/null; " +
		"find " + q + ` -type f -exec chmod u+rw {} \; 2>/dev/null; ` + "find " + q + ` -type d -exec chmod u+rwx {} \; 2>/dev/null`}
	for attempt := 1; ; attempt++ {
		var out bytes.Buffer
		code, err := h.exec(ctx, pod, unpack, bytes.NewReader(archive), &out)
		if err == nil && out.Len() > 0 {
			err = fmt.Errorf("Error from execCpToPod - status: %d, details: \n %s", code, out.String())
		}
		if err == nil {
			break
		}
		if attempt == copyAttempts || ctx.Err() != nil {
			return fmt.Errorf("cpToPod failed after %d attempts: %w", attempt, err)
		}
		if err := h.sleep(ctx, time.Second); err != nil {
			return err
		}
	}
	want, err := listFiles(src)
	if err != nil {
		return err
	}
	var got string
	for attempt := 1; attempt <= checkAttempts; attempt++ {
		if got, err = h.execOK(ctx, pod, []string{"sh", "-c", "cd " + q + ` && find . -type f -not -path '*/_runner_hook_responses*' -exec stat -c '%s %n' {} \;`}); err == nil &&
			sortedLines(got) == want {
			return nil
		}
		if err := h.sleep(ctx, time.Second); err != nil {
			return err
		}
	}
	return fmt.Errorf("the copy of %s into %s:%s does not match: want\n%s\ngot\n%s (%v)", src, pod, dst, want, sortedLines(got), err)
}

func (h *Hook) sleep(ctx context.Context, d time.Duration) error {
	select {
	case <-h.clock.After(d):
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// tarDir packs the tree at dir, names relative to it (tar-fs pack).
func tarDir(dir string) ([]byte, error) {
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	err := filepath.WalkDir(dir, func(p string, d os.DirEntry, err error) error {
		if err != nil || p == dir {
			return err
		}
		info, err := d.Info()
		if err != nil {
			return err
		}
		if !info.Mode().IsRegular() && !info.IsDir() {
			return nil
		}
		hdr, err := tar.FileInfoHeader(info, "")
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(dir, p)
		hdr.Name = filepath.ToSlash(rel)
		if info.IsDir() {
			hdr.Name += "/"
		}
		hdr.Uname, hdr.Gname = "", ""
		if err := tw.WriteHeader(hdr); err != nil {
			return err
		}
		if info.Mode().IsRegular() {
			raw, err := os.ReadFile(p)
			if err != nil {
				return err
			}
			_, err = tw.Write(raw)
			return err
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	if err := tw.Close(); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}

// listFiles is the runner side of the check: "<size> ./<path>" per regular
// file, sorted.
func listFiles(dir string) (string, error) {
	var lines []string
	err := filepath.WalkDir(dir, func(p string, d os.DirEntry, err error) error {
		if err != nil || !d.Type().IsRegular() || strings.Contains(p, "_runner_hook_responses") {
			return err
		}
		info, err := d.Info()
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(dir, p)
		lines = append(lines, fmt.Sprintf("%d ./%s", info.Size(), filepath.ToSlash(rel)))
		return nil
	})
	sort.Strings(lines)
	return strings.Join(lines, "\n"), err
}

func sortedLines(s string) string {
	lines := strings.Split(strings.TrimSpace(s), "\n")
	if len(lines) == 1 && lines[0] == "" {
		lines = nil
	}
	sort.Strings(lines)
	return strings.Join(lines, "\n")
}

func shellQuote(s string) string { return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'" }

func encodeBase64(s string) string { return base64.StdEncoding.EncodeToString([]byte(s)) }

// lockedWriter serialises writes to w.
type lockedWriter struct {
	mu sync.Mutex
	w  io.Writer
}

func (l *lockedWriter) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.w.Write(p)
}
