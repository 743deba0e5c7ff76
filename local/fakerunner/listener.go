package fakerunner

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"time"

	"github.com/runnerscaler/runnerscaler/local/runnerfiles"
)

// Timings of the listener (not knobs: the simulator's session timeout is).
const (
	pollWait        = 10 * time.Second // one long-poll; the simulator keeps the session alive meanwhile
	conflictRetries = 3 * time.Minute  // how long a session held by a previous agent is waited for
	maxBackoff      = 5 * time.Second
	cancelWait      = 30 * time.Second // a cancelled worker's time to report before it is killed
	// keepaliveEvery: while its worker runs, the listener polls only to keep its
	// session alive (wait=0), never holding a poll the simulator could hand a job.
	keepaliveEvery = 5 * time.Second
)

// listener is run.sh: one runner's connection to the simulator.
type listener struct {
	env       Env
	root      string
	settings  runnerfiles.Settings
	cred      string
	jit       string // the JIT config until a session was opened with it
	api       *client
	sigs      chan os.Signal
	sess      session
	ephemeral bool
}

type pollResult struct {
	job job
	ok  bool
	err error
}

// listen is run.sh: connect with the JIT config or .runner/.credentials, take
// jobs until an ephemeral runner's first one ends or a signal comes.
func listen(env Env, root string, args []string) int {
	jit := env.Getenv("ACTIONS_RUNNER_INPUT_JITCONFIG")
	for i := 0; i < len(args); i++ {
		switch a := args[i]; {
		case a == "--jitconfig" && i+1 < len(args):
			i++
			jit = args[i]
		case strings.HasPrefix(a, "--jitconfig="):
			jit = strings.TrimPrefix(a, "--jitconfig=")
		case a == "--once":
		case a == "--startuptype" && i+1 < len(args):
			i++
		default:
			fmt.Fprintf(env.Stderr, "Unrecognized command-line input arguments: '%s'.\n", a)
		}
	}
	fail := func(format string, a ...any) int {
		logf(env.Stderr, "Error: "+format, a...)
		return 1
	}
	var st runnerfiles.Settings
	var cr runnerfiles.Credentials
	var err error
	if jit != "" {
		if st, cr, err = runnerfiles.DecodeJIT(jit); err != nil {
			return fail("%v", err)
		}
		if err := writeConfig(root, st, cr); err != nil { // the real runner keeps them too
			return fail("%v", err)
		}
	} else if st, cr, err = readConfig(root); errors.Is(err, errNotConfigured) {
		return fail("Not configured. Run config.(sh/cmd) to configure the runner.")
	} else if err != nil {
		return fail("%v", err)
	}
	l := &listener{env: env, root: root, settings: st, cred: cr.Token(), jit: jit, api: newClient(st.ServerURL),
		sigs: make(chan os.Signal, 1)}
	signal.Notify(l.sigs, syscall.SIGTERM, syscall.SIGINT)
	defer signal.Stop(l.sigs)
	return l.run()
}

func (l *listener) run() int {
	if code, ok := l.connect(); !ok {
		return code
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var (
		polls     chan pollResult // a poll in flight
		w         *worker         // the job running
		pollErr   error           // a poll failed while the job ran: looked at once it ends
		retry     <-chan time.Time
		backoff   time.Duration
		keepalive <-chan time.Time // while a job runs: when to poll, only to keep the session
	)
	for {
		// A signal goes first: a listener told to stop polls no more.
		select {
		case sig := <-l.sigs:
			return l.shutdown(sig, polls, w)
		default:
		}
		if polls == nil && retry == nil && pollErr == nil && (w == nil || keepalive == nil) {
			// The real listener's polls carry its status, and GitHub hands a job only
			// to a poll that says idle. The simulator has no status: while the worker
			// runs, the listener only polls with wait=0 (the simulator keeps the
			// runner busy until the listener reports the job's result, see finish).
			wait := pollWait
			if w != nil {
				wait, keepalive = 0, time.After(keepaliveEvery)
			}
			polls = make(chan pollResult, 1)
			go func(ch chan<- pollResult, id string) {
				pctx, cancel := context.WithTimeout(ctx, pollWait+30*time.Second)
				defer cancel()
				j, ok, err := l.api.pollJob(pctx, l.cred, id, wait)
				ch <- pollResult{j, ok, err}
			}(polls, l.sess.ID)
		}
		var workerDone <-chan struct{}
		if w != nil {
			workerDone = w.done
		}
		select {
		case sig := <-l.sigs:
			return l.shutdown(sig, polls, w)
		case <-retry:
			retry = nil
		case <-keepalive:
			keepalive = nil
		case <-workerDone:
			if polls != nil {
				// A keep-alive poll in flight would be handed the next job the
				// moment finish frees the runner, before a pending stop is seen:
				// let it return first (wait=0: at once).
				if res := <-polls; res.err != nil {
					pollErr = res.err
				}
				polls = nil
			}
			// A SIGTERM sent with the SIGCONT that resumes a held listener reaches
			// l.sigs a moment after the worker's exit is seen: look for it first.
			select {
			case sig := <-l.sigs:
				l.finish(w)
				return l.shutdown(sig, nil, nil)
			case <-time.After(signalSettle):
			}
			l.finish(w)
			w, keepalive = nil, nil
			if l.ephemeral {
				l.closeSession() // GitHub deleted the runner with its job: this is a formality
				return 0
			}
			err := pollErr
			pollErr = nil
			if err != nil {
				if code, stop := l.pollFailed(err, &retry, &backoff); stop {
					return code
				}
			}
		case res := <-polls:
			polls = nil
			if w != nil && keepalive == nil {
				keepalive = time.After(keepaliveEvery)
			}
			switch {
			case res.err != nil && w != nil:
				pollErr = res.err // the job's end says more (an ephemeral runner is deleted then)
			case res.err != nil:
				if code, stop := l.pollFailed(res.err, &retry, &backoff); stop {
					return code
				}
			case res.ok && w != nil:
				// The simulator gives a job only to an idle runner, and this one is busy
				// until finish reports its job: this does not happen. Should it, run the
				// job next.
				if !w.wait(cancelWait) {
					logf(l.env.Stderr, "Error: got job %d while %s still runs; reporting it cancelled", res.job.ID, w.name())
					l.report(res.job, "cancelled")
					break
				}
				l.finish(w)
				w = l.startWorker(res.job)
			case res.ok:
				backoff = 0
				w = l.startWorker(res.job)
			default:
				backoff = 0
			}
		}
	}
}

// signalSettle is how long, after a job's worker exits, the listener looks for
// a stop signal before it reports the job and becomes free for another.
const signalSettle = 50 * time.Millisecond

// acquireDelay is how long after a job is handed over (and "Running job" is
// printed) its worker starts: the real listener first acquires the job from
// GitHub and then starts Runner.Worker. A stop that comes in between cancels the
// job.
const acquireDelay = 100 * time.Millisecond

// finish reports the result of a job whose worker has exited, as the real
// listener completes a job's request once its worker is gone: only then does
// GitHub (the simulator) free the runner for another job.
func (l *listener) finish(w *worker) {
	if w.cmd != nil {
		if err := reportResult(l.api, w.job, w.res); err != nil {
			logf(l.env.Stderr, "Error: reporting job %d %s: %v", w.job.ID, w.res.Conclusion, err)
		}
	} else {
		l.report(w.job, w.res.Conclusion) // the worker never started
	}
	logf(l.env.Stdout, "Job %s completed with result: %s", w.name(), w.result())
}

// pollFailed decides what a failed poll means: stop with an exit code, reconnect,
// or retry later.
func (l *listener) pollFailed(err error, retry *<-chan time.Time, backoff *time.Duration) (int, bool) {
	switch statusOf(err) {
	case http.StatusGone:
		logf(l.env.Stderr, "Error: The runner registration has been deleted from the server, please re-configure. (%v)", err)
		return 1, true
	case http.StatusUnauthorized:
		logf(l.env.Stderr, "Error: the runner's credentials are no longer valid, please re-configure. (%v)", err)
		return 1, true
	case http.StatusForbidden: // GitHub refuses this version: the real listener stops, as here
		var ae *apiError
		errors.As(err, &ae)
		fmt.Fprintf(l.env.Stderr, "An error occurred: Error: %s\nRunner listener exit with terminated error, stop the service, no retry needed.\n", ae.message)
		l.closeSession()
		return 1, true
	case http.StatusNotFound: // the session expired (the simulator did not hear from us in time)
		logf(l.env.Stdout, "Session expired, reconnecting")
		if code, ok := l.connect(); !ok {
			return code, true
		}
		return 0, false
	}
	*backoff = min(max(2**backoff, time.Second), maxBackoff)
	logf(l.env.Stderr, "Runner connect error: %v. Retrying until reconnected.", err)
	*retry = time.After(*backoff)
	return 0, false
}

// connect opens a session: the runner is online from now on. It returns false
// with the exit code when the listener must stop.
func (l *listener) connect() (int, bool) {
	giveUp := time.Now().Add(conflictRetries)
	backoff := time.Duration(0)
	for {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		s, err := l.api.openSession(ctx, l.cred, l.jit, version(l.env))
		cancel()
		if err == nil {
			l.sess, l.jit = s, ""
			l.ephemeral = s.Ephemeral || l.settings.Ephemeral
			fmt.Fprintln(l.env.Stdout, "√ Connected to GitHub")
			fmt.Fprintf(l.env.Stdout, "Current runner version: '%s'\n", version(l.env))
			logf(l.env.Stdout, "Runner %s (id %d) listening for Jobs", s.Name, s.RunnerID)
			return 0, true
		}
		var delay time.Duration
		switch status := statusOf(err); {
		case status == http.StatusGone:
			logf(l.env.Stderr, "Error: Failed to create a session. The runner registration has been deleted from the server, please re-configure. (%v)", err)
			return 1, false
		case status == http.StatusUnauthorized && l.jit != "":
			logf(l.env.Stderr, "Error: Failed to create a session. The JIT config is invalid, expired or was already used. (%v)", err)
			return 1, false
		case status == http.StatusUnauthorized:
			logf(l.env.Stderr, "Error: Failed to create a session. The runner's credentials are invalid, please re-configure. (%v)", err)
			return 1, false
		case status == http.StatusConflict:
			var ae *apiError
			errors.As(err, &ae)
			delay = min(max(ae.retryAfter, time.Second), maxBackoff)
			if time.Now().After(giveUp) {
				logf(l.env.Stderr, "Error: A session for this runner already exists, for more than %s. (%v)", conflictRetries, err)
				return 1, false
			}
			logf(l.env.Stderr, "A session for this runner already exists. Retrying in %s.", delay)
		case status == 0 || status >= 500:
			backoff = min(max(2*backoff, time.Second), maxBackoff)
			delay = backoff
			logf(l.env.Stderr, "Runner connect error: %v. Retrying until reconnected.", err)
		default:
			logf(l.env.Stderr, "Error: Failed to create a session: %v", err)
			return 1, false
		}
		select {
		case sig := <-l.sigs:
			logf(l.env.Stdout, "Received %s before connecting, exiting", sigName(sig))
			return 0, false
		case <-time.After(delay):
		}
	}
}

// shutdown is the listener's answer to SIGTERM/SIGINT: take no more jobs, cancel
// the running one (the worker reports it cancelled), disconnect, exit 0.
func (l *listener) shutdown(sig os.Signal, polls <-chan pollResult, w *worker) int {
	logf(l.env.Stdout, "Received %s, shutting down", sigName(sig))
	if w != nil {
		logf(l.env.Stdout, "Cancelling job %s", w.name())
		w.cancel()
	}
	l.closeSession() // ends the long-poll in flight at once
	if polls != nil {
		select {
		case res := <-polls:
			if res.ok { // taken just before the session closed
				logf(l.env.Stdout, "Job %d arrived while shutting down: reporting it cancelled", res.job.ID)
				l.report(res.job, "cancelled")
			}
		case <-time.After(pollWait):
		}
	}
	if w != nil {
		select {
		case <-w.done:
		case <-time.After(cancelWait):
			logf(l.env.Stderr, "Error: job %s did not stop within %s: killing its worker", w.name(), cancelWait)
			w.kill()
			<-w.done
		}
		l.finish(w)
	}
	return 0
}

func (l *listener) closeSession() {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := l.api.closeSession(ctx, l.cred, l.sess.ID); err != nil && statusOf(err) != http.StatusNotFound && statusOf(err) != http.StatusGone {
		logf(l.env.Stderr, "Closing the session: %v", err)
	}
}

// report sends a job's conclusion on the worker's behalf (a job it never ran).
func (l *listener) report(j job, conclusion string) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := l.api.reportResult(ctx, j, result{Conclusion: conclusion}); err != nil {
		logf(l.env.Stderr, "Error: reporting job %d %s: %v", j.ID, conclusion, err)
	}
}

func sigName(sig os.Signal) string {
	switch sig {
	case syscall.SIGTERM:
		return "SIGTERM"
	case syscall.SIGINT:
		return "SIGINT"
	}
	return sig.String()
}
