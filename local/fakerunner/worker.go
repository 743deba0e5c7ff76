package fakerunner

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"
)

// Runner.Worker's exit codes: 100 + the job's TaskResult, as actions/runner's worker.
const (
	workerSucceeded = 100
	workerFailed    = 102
	workerCancelled = 103
)

// workerMessage is what the listener writes on the worker's stdin (the real
// runner uses a pipe too): one JSON line; then "cancel" lines. Closing the pipe
// also cancels: the listener is gone.
type workerMessage struct {
	ServerURL string `json:"server_url"`
	Job       job    `json:"job"`
}

// worker is a running Runner.Worker child process, seen from the listener.
type worker struct {
	job   job
	cmd   *exec.Cmd
	stdin io.WriteCloser
	done  chan struct{}
	code  int
	err   error
}

// startWorker runs j in a child process whose command line names Runner.Worker
// (runner/entrypoint.sh looks for it with pgrep). A worker that cannot start
// fails the job and is returned already done.
func (l *listener) startWorker(j job) *worker {
	logf(l.env.Stdout, "Running job: %s", jobName(j))
	w := &worker{job: j, done: make(chan struct{})}
	argv0 := filepath.Join(l.root, "bin", workerName)
	exe := argv0
	if _, err := os.Stat(exe); err != nil { // a layout without bin/: this same program
		if exe, err = os.Executable(); err != nil {
			return w.failed(l, err)
		}
	}
	w.cmd = &exec.Cmd{Path: exe, Args: []string{argv0, "spawnclient"}, Dir: l.root, Env: workerEnv(os.Environ()),
		Stdout: l.env.Stdout, Stderr: l.env.Stderr}
	stdin, err := w.cmd.StdinPipe()
	if err != nil {
		return w.failed(l, err)
	}
	w.stdin = stdin
	if err := w.cmd.Start(); err != nil {
		return w.failed(l, err)
	}
	msg, _ := json.Marshal(workerMessage{ServerURL: l.settings.ServerURL, Job: j})
	_, _ = stdin.Write(append(msg, '\n'))
	go func() {
		err := w.cmd.Wait()
		w.code = w.cmd.ProcessState.ExitCode()
		if w.code < 0 {
			w.err = err
		}
		close(w.done)
	}()
	return w
}

func (w *worker) failed(l *listener, err error) *worker {
	logf(l.env.Stderr, "Error: starting %s for job %d: %v", workerName, w.job.ID, err)
	l.report(w.job, "failure")
	w.code = workerFailed
	close(w.done)
	return w
}

// cancel asks the worker to cancel its job.
func (w *worker) cancel() {
	if w.stdin != nil {
		_, _ = io.WriteString(w.stdin, "cancel\n")
	}
}

// wait waits up to d for the worker to exit.
func (w *worker) wait(d time.Duration) bool {
	select {
	case <-w.done:
		return true
	case <-time.After(d):
		return false
	}
}

func (w *worker) kill() {
	if w.cmd != nil && w.cmd.Process != nil {
		_ = w.cmd.Process.Kill()
	}
}

func (w *worker) name() string { return jobName(w.job) }

// result names the job's result from the worker's exit code, as the listener logs it.
func (w *worker) result() string {
	switch w.code {
	case workerSucceeded:
		return "Succeeded"
	case workerFailed:
		return "Failed"
	case workerCancelled:
		return "Canceled"
	}
	if w.err != nil {
		return "Failed (worker: " + w.err.Error() + ")"
	}
	return "Failed (worker exit code " + strconv.Itoa(w.code) + ")"
}

func jobName(j job) string {
	return fmt.Sprintf("job-%d (run %d of %s)", j.ID, j.RunID, j.Repository)
}

// workerEnv is the listener's environment without the runner's inputs (the JIT
// config and tokens): a job never needs them.
func workerEnv(env []string) []string {
	out := env[:0:0]
	for _, kv := range env {
		if !strings.HasPrefix(kv, "ACTIONS_RUNNER_INPUT_") {
			out = append(out, kv)
		}
	}
	return out
}

// work is Runner.Worker: run the job the listener sends — its script if it has
// one (see runScript), then sleep for the rest of its duration — and report its
// conclusion: success, failure (the script exited non-zero) or cancelled.
func work(env Env, args []string) int {
	signal.Ignore(syscall.SIGINT) // a Ctrl-C to the process group is the listener's to handle
	terms := make(chan os.Signal, 1)
	signal.Notify(terms, syscall.SIGTERM)
	in := bufio.NewReader(env.Stdin)
	line, err := in.ReadBytes('\n')
	var msg workerMessage
	if err == nil {
		err = json.Unmarshal(line, &msg)
	}
	if err != nil {
		fmt.Fprintf(env.Stderr, "%s: reading the job from the listener: %v (args %q)\n", workerName, err, args)
		return 1
	}
	d, err := time.ParseDuration(msg.Job.Duration)
	if err != nil {
		d = 0
	}
	// stop closes when the listener cancels the job (or is gone) or on SIGTERM.
	stop := make(chan struct{})
	var stopOnce sync.Once
	stopNow := func() { stopOnce.Do(func() { close(stop) }) }
	go func() {
		for {
			l, err := in.ReadString('\n')
			if err != nil || strings.TrimSpace(l) == "cancel" {
				stopNow()
				return
			}
		}
	}()
	go func() { <-terms; stopNow() }()
	started := time.Now()
	res, code := result{Conclusion: "success"}, workerSucceeded
	if msg.Job.Script != "" {
		var stopped bool
		res.Output, res.ExitCode, stopped = runScript(msg.Job.Script, stop)
		switch {
		case stopped:
			res.Conclusion, code = "cancelled", workerCancelled
		case res.ExitCode != 0:
			res.Conclusion, code = "failure", workerFailed
		}
	}
	if code == workerSucceeded {
		timer := time.NewTimer(max(d-time.Since(started), 0))
		select {
		case <-timer.C:
		case <-stop:
			res.Conclusion, code = "cancelled", workerCancelled
		}
		timer.Stop()
	}
	api := newClient(msg.ServerURL)
	for attempt := 1; ; attempt++ {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		err = api.reportResult(ctx, msg.Job, res)
		cancel()
		if err == nil {
			return code
		}
		if status := statusOf(err); (status != 0 && status < 500) || attempt == 5 {
			fmt.Fprintf(env.Stderr, "%s: reporting job %d %s: %v\n", workerName, msg.Job.ID, res.Conclusion, err)
			return 1
		}
		time.Sleep(time.Second)
	}
}

// maxOutput bounds what a job's script output the worker keeps and reports.
const maxOutput = 1 << 20

// runScript runs a job's script as a job step does: `/bin/sh -c script`, as the
// worker's user, in its environment and directory, stdin empty. It returns the
// output (stdout and stderr together, at most maxOutput bytes) and the exit code
// (128 + the signal when one killed it); stopped when stop closed first, which
// kills the script's process group. The output is reported with the result only,
// never printed: it is the job's, not the runner's log.
func runScript(script string, stop <-chan struct{}) (output string, exitCode int, stopped bool) {
	var out cappedBuffer
	cmd := exec.Command("/bin/sh", "-c", script)
	cmd.Stdout, cmd.Stderr = &out, &out
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	cmd.WaitDelay = 5 * time.Second // a background process keeping the output open
	if err := cmd.Start(); err != nil {
		return "starting /bin/sh: " + err.Error(), 127, false
	}
	done := make(chan struct{})
	go func() { _ = cmd.Wait(); close(done) }()
	select {
	case <-done:
	case <-stop:
		_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
		<-done
		stopped = true
	}
	exitCode = cmd.ProcessState.ExitCode()
	if ws, ok := cmd.ProcessState.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
		exitCode = 128 + int(ws.Signal())
	}
	return out.String(), exitCode, stopped
}

// cappedBuffer keeps the first maxOutput bytes written to it.
type cappedBuffer struct {
	mu  sync.Mutex
	buf []byte
}

func (b *cappedBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if room := maxOutput - len(b.buf); room > 0 {
		b.buf = append(b.buf, p[:min(len(p), room)]...)
	}
	return len(p), nil
}

func (b *cappedBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return string(b.buf)
}
