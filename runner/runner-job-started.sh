#!/usr/bin/env bash
# runner-job-started.sh: actions/runner's job-started hook in the runner image
# (ACTIONS_RUNNER_HOOK_JOB_STARTED, set by entrypoint.sh). actions/runner runs it
# with `bash -e`, as the runner user, inside the job, before the job's steps.
#
# It records that a job runs (the marker RUNNER_JOB_DIR/job, which
# runner-job-running reads), then runs the pool's own job-started hook when the
# pool's template set one (the entrypoint keeps it in
# RUNNER_USER_HOOK_JOB_STARTED), whose exit code is the hook's: a failing hook of
# the pool's fails the job, as it would without us. Failing to record never fails
# the job: the pod's report then rests on Runner.Worker alone.
dir=${RUNNER_JOB_DIR:-/run/runner-job}
if ! { printf 'started %(%Y-%m-%dT%H:%M:%SZ)T by worker %s\n' -1 "$PPID" >"$dir/job"; } 2>/dev/null; then
	echo "runner-job-started: warning: cannot record the job in ${dir}; the pod reports it from Runner.Worker alone" >&2
fi
hook=${RUNNER_USER_HOOK_JOB_STARTED:-}
[[ -n $hook ]] || exit 0
case $hook in
*.ps1) exec pwsh -command ". '${hook}'" ;;
*) exec bash -e "$hook" ;;
esac
