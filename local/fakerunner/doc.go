// Package fakerunner is a fake actions runner (actions/runner) in one static Go
// program, for the local stack's runner image: it behaves towards the GitHub
// simulator (local/githubsim, its simulator-only /_runner/ endpoints) as the real
// runner behaves towards GitHub, so that runner/entrypoint.sh runs unchanged
// around it under a real kubelet.
//
// The program is dispatched by the name it is run as (argv[0]), like the real
// runner's layout, or by its first argument:
//
//	config.sh          registers the runner (flags as actions/runner: --unattended --url --token
//	                   --name --labels --runnergroup --work --ephemeral --replace; every flag also
//	                   from ACTIONS_RUNNER_INPUT_<NAME>, the token from ACTIONS_RUNNER_INPUT_TOKEN)
//	                   and writes .runner and .credentials into the runner's root directory
//	run.sh             the listener: connects with ACTIONS_RUNNER_INPUT_JITCONFIG (or --jitconfig)
//	                   when set, else with .runner/.credentials; long-polls for jobs and runs each
//	                   in a Runner.Worker child process
//	bin/Runner.Listener  "configure" or "run", as config.sh or run.sh
//	bin/Runner.Worker  runs one job: its script, if it has one, with /bin/sh (as a job step runs,
//	                   as the worker's user, in its environment; the output and exit code go back
//	                   with the result, never to the runner's log), then sleeps for the rest of
//	                   its duration, and reports its conclusion (failure when the script failed)
//
// The root directory is the directory config.sh and run.sh are in (the parent of
// bin/ for the bin/ names), as for the real runner; the runner's whole state is
// its .runner and .credentials files there. A JIT config is, like GitHub's,
// base64 of those files; run.sh writes them into the root directory too.
//
// Behaviour, and where it departs from actions/runner:
//   - run.sh exits 0 after an ephemeral runner's job, and after SIGTERM or SIGINT:
//     idle, at once; with a job running, once the worker has cancelled the job and
//     reported it cancelled (Runner.Listener returns 0 when shutdown cancelled it).
//     The fake run.sh traps the signals itself, as the real one does with
//     RUNNER_MANUALLY_TRAP_SIG set.
//   - run.sh exits 1, with the reason on stderr, when its JIT config or credentials
//     are unknown, expired or spent, when the runner was deleted on GitHub, or when
//     it is not configured. (The real run.sh turns the listener's "terminated
//     error" exit code 1 into 0; the fake keeps it, so that a container with spent
//     credentials is seen failing.)
//   - config.sh exits 1 with a clear message for an invalid or expired token, a
//     runner name taken without --replace, an unknown runner group, or a runner
//     already configured in this directory.
//   - The runner plays actions/runner of the version runner/Dockerfile installs,
//     or FAKERUNNER_VERSION, and reports it to the simulator (config.sh's
//     registration, run.sh's session), which refuses outdated versions as GitHub
//     does; config.sh then exits 1 with GitHub's message, and run.sh, like the real
//     listener, with "An error occurred: Error: Forbidden Runner version v… is
//     deprecated and cannot receive messages." on stderr.
//   - Connection failures are retried until the simulator answers, like the real
//     listener's "Retrying until reconnected"; a session the simulator still holds
//     for this runner (a previous container killed without closing it) is retried
//     until it expires.
//   - Runner.Worker runs the job hooks as actions/runner does (`bash -e` the scripts named by
//     ACTIONS_RUNNER_HOOK_JOB_STARTED and ACTIONS_RUNNER_HOOK_JOB_COMPLETED, in the job's
//     environment, their output in the job's): the started hook before the job's script (a
//     failing one fails the job, whose script does not run), the completed hook after it,
//     whatever the job's end, a cancelled job's included (a failing one fails a job that had
//     succeeded).
//   - The listener reports a job's result once its worker has exited (the worker hands it
//     over in a file, its fd 3), as actions/runner's listener completes a job's request:
//     only then does the simulator free the runner. While the worker runs, the listener
//     holds no long-poll; it polls with wait=0 every few seconds to keep its session. (The
//     real listener's polls carry its status, busy while a worker runs, and GitHub hands a
//     job only to a poll that says idle; the simulator's polls have no status.) A signal is
//     looked at before every poll.
//   - With ACTIONS_RUNNER_CONTAINER_HOOKS set (ARC's container modes), a job with a
//     container runs as actions/runner runs it through the Kubernetes container hook
//     (local/fakehook, written from actions/runner-container-hooks v0.7.0 and v0.8.1):
//     "Initialize containers" calls prepare_job, the script is a run: step in the
//     job container (run_script_step), and the post step "Stop containers", which the
//     runner registers before prepare_job, calls cleanup_job whatever the job's end —
//     only while the worker lives, so a killed runner leaves its workflow pod behind.
//     A prepare_job that fails fails the job. A job without a container fails with the
//     runner's message when ACTIONS_RUNNER_REQUIRE_JOB_CONTAINER is "true", else runs
//     on the runner as before. The hook's identity is the pod's service account (the
//     in-cluster configuration: KUBERNETES_SERVICE_HOST/PORT and the mounted token,
//     CA and namespace), as client-node's loadFromDefault in a pod without a kubeconfig.
//   - Runner.Worker exits 100 + the job's result (0 succeeded, 2 failed, 3 cancelled), as the
//     real worker does; it cancels its job when the listener tells it to, when the
//     listener's pipe closes, or on SIGTERM, and ignores SIGINT.
//
// It never prints a token, a credential or a JIT config.
package fakerunner
