#!/usr/bin/env bash
# runner-job-completed.sh: actions/runner's job-completed hook in the runner image
# (ACTIONS_RUNNER_HOOK_JOB_COMPLETED, set by entrypoint.sh). actions/runner runs it
# with `bash -e`, as the runner user, inside the job, after the job's steps (a
# cancelled job's too), before the job's result is reported.
#
# It records that the job ended (removes RUNNER_JOB_DIR/job), runs the pool's own
# job-completed hook when the pool's template set one (kept in
# RUNNER_USER_HOOK_JOB_COMPLETED; its exit code is the hook's), and then, when the
# container is stopping (the entrypoint received SIGTERM: RUNNER_JOB_DIR/stopping),
# tells the entrypoint that the job is ending (RUNNER_JOB_DIR/ending, the worker's
# pid) and waits, briefly, until the entrypoint has held the listener: the listener
# then cannot take another job between this job's result and its own stop.
# Nothing of ours fails the job.
dir=${RUNNER_JOB_DIR:-/run/runner-job}
if ! rm -f "$dir/job" 2>/dev/null; then
	echo "runner-job-completed: warning: cannot record the job's end in ${dir}" >&2
fi
rc=0
hook=${RUNNER_USER_HOOK_JOB_COMPLETED:-}
if [[ -n $hook ]]; then
	case $hook in
	*.ps1) pwsh -command ". '${hook}'" || rc=$? ;;
	*) bash -e "$hook" || rc=$? ;;
	esac
fi
if [[ -e $dir/stopping ]] && { printf '%s\n' "$PPID" >"$dir/ending"; } 2>/dev/null; then
	for _ in {1..100}; do
		[[ -e $dir/held ]] && break
		sleep 0.02 || break
	done
fi
exit "$rc"
