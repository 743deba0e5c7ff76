// Package invoke runs a Lambda bootstrap under the AWS Lambda Runtime Interface
// Emulator (aws-lambda-rie, built by local/rie-build.sh) and invokes it with event
// files — how the repository proves its Lambda packaging works without Docker.
// The emulator serves one invocation at a time.
package invoke

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"
)

// FunctionNameEnv is the variable from which the emulator makes each invocation's
// function ARN (arn:aws:lambda:us-east-1:012345678912:function:<value>, in the
// function's Lambda context): NAME:ALIAS in Start's env makes every invocation
// one through that alias.
const FunctionNameEnv = "AWS_LAMBDA_FUNCTION_NAME"

// Emulator is a running aws-lambda-rie with one bootstrap.
type Emulator struct {
	cmd  *exec.Cmd
	url  string
	logs *lockedBuffer
	mu   sync.Mutex // one invocation at a time: the emulator fails on overlap
}

// Start runs bootstrap under the emulator at rie with env (KEY=VALUE) and waits
// until it accepts invocations.
func Start(ctx context.Context, rie, bootstrap string, env []string) (*Emulator, error) {
	api, emu := freePort(), freePort()
	cmd := exec.Command(rie, "--runtime-interface-emulator-address", emu, "--runtime-api-address", api, bootstrap)
	cmd.Dir = filepath.Dir(bootstrap)
	cmd.Env = env
	e := &Emulator{cmd: cmd, url: "http://" + emu + "/2015-03-31/functions/function/invocations", logs: &lockedBuffer{}}
	cmd.Stdout, cmd.Stderr = e.logs, e.logs
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("starting %s: %w", rie, err)
	}
	deadline := time.Now().Add(10 * time.Second)
	for {
		c, err := net.DialTimeout("tcp", emu, 200*time.Millisecond)
		if err == nil {
			c.Close()
			return e, nil
		}
		if time.Now().After(deadline) || ctx.Err() != nil {
			e.Stop()
			return nil, fmt.Errorf("emulator did not listen on %s: %w\n%s", emu, err, e.logs.String())
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// Invoke sends one event and returns the function's response payload.
func (e *Emulator) Invoke(ctx context.Context, event []byte) ([]byte, error) {
	e.mu.Lock()
	defer e.mu.Unlock()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, e.url, bytes.NewReader(event))
	if err != nil {
		return nil, err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return nil, fmt.Errorf("invoking: %w\n%s", err, e.logs.String())
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		return nil, err
	}
	if resp.StatusCode != http.StatusOK {
		return body, fmt.Errorf("emulator answered %s: %s", resp.Status, body)
	}
	return body, nil
}

var initReport = regexp.MustCompile(`INIT REPORT\(durationMs: ([0-9.]+)\)`)

// InitDuration is the function's init duration as the emulator reported it (a
// proxy for its cold start); false before the first invocation.
func (e *Emulator) InitDuration() (time.Duration, bool) {
	m := initReport.FindStringSubmatch(e.logs.String())
	if m == nil {
		return 0, false
	}
	ms, _ := strconv.ParseFloat(m[1], 64)
	return time.Duration(ms * float64(time.Millisecond)), true
}

// Logs is everything the emulator and the function printed.
func (e *Emulator) Logs() string { return e.logs.String() }

// Stop ends the emulator and the function.
func (e *Emulator) Stop() {
	_ = e.cmd.Process.Signal(syscall.SIGTERM)
	done := make(chan struct{})
	go func() { _ = e.cmd.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(5 * time.Second):
		_ = e.cmd.Process.Kill()
		<-done
	}
}

func freePort() string {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		panic(err)
	}
	defer l.Close()
	return l.Addr().String()
}

type lockedBuffer struct {
	mu sync.Mutex
	b  strings.Builder
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}
