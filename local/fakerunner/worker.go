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
	out   *os.File // where the worker writes the job's result (its fd 3), unlinked
	done  chan struct{}
	code  int
	err   error
	res   result // the job's result, once done
}

// startWorker runs j in a child process whose command line names Runner.Worker
// (runner/entrypoint.sh looks for it with pgrep). A worker that cannot start
// fails the job and is returned already done.
func (l *listener) startWorker(j job) *worker {
	logf(l.env.Stdout, "Running job: %s", jobName(j))
	time.Sleep(acquireDelay)
	w := &worker{job: j, done: make(chan struct{})}
	argv0 := filepath.Join(l.root, "bin", workerName)
	exe := argv0
	if _, err := os.Stat(exe); err != nil { // a layout without bin/: this same program
		if exe, err = os.Executable(); err != nil {
			return w.failed(l, err)
		}
	}
	out, err := os.CreateTemp("", "runner-job-result-")
	if err != nil {
		return w.failed(l, err)
	}
	_ = os.Remove(out.Name())
	w.out = out
	w.cmd = &exec.Cmd{Path: exe, Args: []string{argv0, "spawnclient"}, Dir: l.root, Env: workerEnv(os.Environ()),
		Stdout: l.env.Stdout, Stderr: l.env.Stderr, ExtraFiles: []*os.File{out}}
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
		w.res = readResult(out, w.code)
		_ = out.Close()
		close(w.done)
	}()
	return w
}

// readResult is the result the worker wrote, or one made from its exit code
// when it wrote none (it crashed).
func readResult(f *os.File, code int) result {
	var res result
	if _, err := f.Seek(0, io.SeekStart); err == nil {
		if err := json.NewDecoder(f).Decode(&res); err == nil && res.Conclusion != "" {
			return res
		}
	}
	if code == workerCancelled {
		return result{Conclusion: "cancelled"}
	}
	return result{Conclusion: "failure"}
}

func (w *worker) failed(l *listener, err error) *worker {
	logf(l.env.Stderr, "Error: starting %s for job %d: %v", workerName, w.job.ID, err)
	if w.out != nil {
		_ = w.out.Close()
	}
	w.code, w.res = workerFailed, result{Conclusion: "failure"}
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
func work(env Env, root string, args []string) int {
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
	var out cappedBuffer
	// The job-started hook runs first, as actions/runner's "Set up runner"; a
	// failing one fails the job, whose steps then do not run.
	if hookOut, rc, ran := runHook(env.Getenv(hookStarted)); ran && rc != 0 {
		out.WriteString(hookOut)
		res.Conclusion, res.ExitCode, code = "failure", rc, workerFailed
	} else {
		out.WriteString(hookOut)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go func() { <-stop; cancel() }()
	var cj *containerJob
	if code == workerSucceeded {
		switch viaHook, refusal := usesHook(env, msg.Job); {
		case refusal != "":
			out.WriteString("##[error]" + refusal + "\n")
			res.Conclusion, res.ExitCode, code = "failure", 1, workerFailed
		case viaHook:
			// "Initialize containers": the post step that cleans up is
			// registered first, so it runs whatever prepare_job does.
			var err error
			if cj, err = newContainerJob(env, root, msg.Job, &out); err == nil {
				err = cj.prepare(ctx, root)
			}
			if err != nil {
				out.WriteString("##[error]" + err.Error() + "\n")
				res.Conclusion, res.ExitCode, code = preparationFailed(ctx.Err() != nil)
			}
		}
	}
	if code == workerSucceeded && msg.Job.Script != "" {
		var stopped bool
		at := time.Now()
		res.ScriptStartedAt = &at
		if cj != nil {
			var err error
			res.ExitCode, err = cj.run(ctx, msg.Job.Script, &out)
			stopped = ctx.Err() != nil
			if err != nil && !stopped {
				out.WriteString("##[error]" + err.Error() + "\n")
				res.ExitCode = 1
			}
		} else {
			var scriptOut string
			scriptOut, res.ExitCode, stopped = runScript(msg.Job.Script, stop)
			out.WriteString(scriptOut)
		}
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
	// "Stop containers", the post step of a container job: cleanup_job, while
	// this process lives (a killed runner leaves the workflow pod behind).
	if cj != nil {
		if err := cj.cleanup(); err != nil {
			out.WriteString("##[error]cleanup_job: " + err.Error() + "\n")
		}
	}
	// The job-completed hook runs last, whatever the job's end (a cancelled job's
	// too), as actions/runner's "Complete runner"; a failing one fails a job that
	// had succeeded.
	if hookOut, rc, ran := runHook(env.Getenv(hookCompleted)); ran {
		out.WriteString(hookOut)
		if rc != 0 && code == workerSucceeded {
			res.Conclusion, res.ExitCode, code = "failure", rc, workerFailed
		}
	}
	res.Output = out.String()
	if len(res.Output) > maxOutput {
		res.Output = res.Output[:maxOutput]
	}
	// The listener reports the result once this process has exited (see
	// listener.finish); fd 3 is the file it reads it from.
	f := os.NewFile(3, "result")
	if f == nil {
		fmt.Fprintf(env.Stderr, "%s: no result file (fd 3) from the listener\n", workerName)
		return 1
	}
	if err := json.NewEncoder(f).Encode(res); err != nil {
		fmt.Fprintf(env.Stderr, "%s: writing job %d's result: %v\n", workerName, msg.Job.ID, err)
		return 1
	}
	_ = f.Close()
	return code
}

// preparationFailed is how a job ends whose "Initialize containers"
// (prepare_job) failed: cancelled when the job was being cancelled meanwhile
// (its runner stopping, the listener gone) — the failure is the
// cancellation's, and actions/runner ends a job cancelled in any step as
// cancelled — and failed otherwise, with exit code 1 (the hook's).
func preparationFailed(cancelled bool) (conclusion string, exitCode, workerCode int) {
	if cancelled {
		return "cancelled", 0, workerCancelled
	}
	return "failure", 1, workerFailed
}

// The hooks' variables, as actions/runner reads them from its environment.
const (
	hookStarted   = "ACTIONS_RUNNER_HOOK_JOB_STARTED"
	hookCompleted = "ACTIONS_RUNNER_HOOK_JOB_COMPLETED"
)

// runHook runs a job hook as actions/runner does: `bash -e path`, as the
// worker's user, in its environment (the job's); ran is false when no hook is set.
// Its output goes to the job's log (the result), not the runner's.
func runHook(path string) (output string, exitCode int, ran bool) {
	if path == "" {
		return "", 0, false
	}
	var out cappedBuffer
	cmd := exec.Command("bash", "-e", path)
	cmd.Stdout, cmd.Stderr = &out, &out
	cmd.WaitDelay = 5 * time.Second
	if err := cmd.Run(); err != nil && cmd.ProcessState == nil {
		return "starting the hook " + path + ": " + err.Error() + "\n", 127, true
	}
	return out.String(), cmd.ProcessState.ExitCode(), true
}

// reportResult sends a job's result, retrying server errors a few times.
func reportResult(api *client, j job, res result) error {
	for attempt := 1; ; attempt++ {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		err := api.reportResult(ctx, j, res)
		cancel()
		if err == nil {
			return nil
		}
		if status := statusOf(err); (status != 0 && status < 500) || attempt == 5 {
			return err
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

// WriteString writes s.
func (b *cappedBuffer) WriteString(s string) { _, _ = b.Write([]byte(s)) }

func (b *cappedBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return string(b.buf)
}
