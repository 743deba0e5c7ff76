package fakedocker_test

import (
	"context"
	"net"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/runnerscaler/runnerscaler/local/fakedocker"
)

// serve runs the stand-in daemon on ln until the test ends or stop is called.
func serve(t *testing.T, ln net.Listener) (stop func() <-chan error) {
	t.Helper()
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan error, 1)
	go func() { done <- fakedocker.Serve(ctx, ln) }()
	t.Cleanup(cancel)
	return func() <-chan error { cancel(); return done }
}

// docker runs the stand-in CLI with DOCKER_HOST host.
func docker(t *testing.T, host string, args ...string) (code int, stdout, stderr string) {
	t.Helper()
	var out, errOut strings.Builder
	env := fakedocker.Env{Args: append([]string{"/usr/bin/docker"}, args...), Stdout: &out, Stderr: &errOut,
		Getenv: func(k string) string {
			if k == "DOCKER_HOST" {
				return host
			}
			return ""
		}}
	code = fakedocker.Main(t.Context(), env)
	return code, out.String(), errOut.String()
}

// TestCLIAsksTheDaemon: `docker info`, `docker version` and `docker ping`
// answer through DOCKER_HOST, over TCP and over a unix socket.
func TestCLIAsksTheDaemon(t *testing.T) {
	t.Parallel()
	tcp, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	unix, err := net.Listen("unix", filepath.Join(t.TempDir(), "docker.sock"))
	if err != nil {
		t.Fatal(err)
	}
	serve(t, tcp)
	serve(t, unix)
	for _, host := range []string{"tcp://" + tcp.Addr().String(), "unix://" + unix.Addr().String()} {
		for cmd, want := range map[string]string{"info": "Server Version: " + fakedocker.Version, "version": fakedocker.Version, "ping": "OK"} {
			code, out, errOut := docker(t, host, cmd)
			if code != 0 || !strings.Contains(out, want) {
				t.Errorf("DOCKER_HOST=%s docker %s: exit %d, %q %q; want 0 and %q", host, cmd, code, out, errOut, want)
			}
		}
	}
}

// TestDaemonStopsAtOnce: cancelled (SIGTERM, in the command), the daemon
// returns at once, a client's open connection notwithstanding, and the CLI
// then fails as the real one does without a daemon.
func TestDaemonStopsAtOnce(t *testing.T) {
	t.Parallel()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	stop := serve(t, ln)
	host := "tcp://" + ln.Addr().String()
	if code, _, errOut := docker(t, host, "info"); code != 0 {
		t.Fatalf("docker info: exit %d: %s", code, errOut)
	}
	idle, err := net.Dial("tcp", ln.Addr().String()) // a connection that never sends a request
	if err != nil {
		t.Fatal(err)
	}
	defer idle.Close()
	select {
	case err := <-stop():
		if err != nil {
			t.Fatalf("Serve: %v", err)
		}
	case <-time.After(2 * time.Second):
		t.Fatal("the daemon did not stop at once")
	}
	code, _, errOut := docker(t, host, "info")
	if code != 1 || !strings.Contains(errOut, "Cannot connect to the Docker daemon at "+host+". Is the docker daemon running?") {
		t.Fatalf("docker info after the stop: exit %d, %q; want 1 and the CLI's words", code, errOut)
	}
}

// TestCLIRefusesWhatItDoesNotKnow: another command is a usage error, not a
// success a job would misread.
func TestCLIRefusesWhatItDoesNotKnow(t *testing.T) {
	t.Parallel()
	if code, _, errOut := docker(t, "tcp://127.0.0.1:1", "run", "alpine"); code != 2 || !strings.Contains(errOut, "only info, version and ping") {
		t.Fatalf("docker run: exit %d, %q; want 2", code, errOut)
	}
}
