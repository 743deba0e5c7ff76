#!/usr/bin/env bash
# Entrypoint of the runner container (runs under tini as PID 1).
#
# Credentials, in this order of preference (exactly one must be set):
#   ACTIONS_RUNNER_INPUT_JITCONFIG  just-in-time config from the sweeper (ephemeral pools):
#                                   run.sh reads it from the environment; nothing to configure
#   RUNNER_TOKEN                    registration token: config.sh registers the runner first
# With RUNNER_TOKEN:
#   RUNNER_ENTERPRISE | RUNNER_ORG | RUNNER_REPO (owner/name)  exactly one: the runner's scope
#   GITHUB_URL        https://github.com (default) or your GHES URL
#   RUNNER_NAME       default: the host (pod) name
#   RUNNER_LABELS     comma-separated extra labels
#   RUNNER_GROUP      runner group (default: Default)
#   RUNNER_WORKDIR    work directory (default: _work)
#   RUNNER_EPHEMERAL  true (default): take one job, then exit 0
# Always:
#   RUNNER_GRACEFUL_STOP_TIMEOUT  seconds a running job may take to finish after SIGTERM (default 15;
#                                 keep it under the pod's terminationGracePeriodSeconds)
#   DOCKER_ENABLED=true           wait for a docker daemon (sidecar via DOCKER_HOST) before starting
#   DOCKERD_IN_RUNNER=true        start dockerd inside this container (the dind image), then wait for it
#   DOCKER_WAIT_TIMEOUT           seconds to wait for docker (default 120)
#   RUNNER_HOME                   where config.sh and run.sh are (default: this script's runner home)
#   RUNNER_STATE_DIR              a directory that survives container restarts but not the pod (the
#                                 sweeper mounts an emptyDir there); see "Restarts" below
#
# Restarts. The kubelet restarts a StatefulSet's container whatever its exit code
# (restartPolicy Always). With RUNNER_STATE_DIR set:
#   - an ephemeral runner (JIT config, or RUNNER_EPHEMERAL=true) writes a marker there
#     before it starts run.sh; a restarted container that finds the marker exits 0 at
#     once and never runs a second time with spent credentials. The sweeper sees the
#     container terminated or restarted, asks GitHub to remove the runner (204 or
#     404), and only then deletes the pod;
#   - a persistent runner keeps its registration (.runner, .credentials*) there and
#     a restarted container resumes it instead of registering again (the token in
#     RUNNER_TOKEN may have expired since).
#
# Secrets never appear on a command line or in the output: config.sh and run.sh read
# ACTIONS_RUNNER_INPUT_TOKEN / ACTIONS_RUNNER_INPUT_JITCONFIG from the environment.
set -euo pipefail

RUNNER_HOME=${RUNNER_HOME:-/home/runner}
state_dir=${RUNNER_STATE_DIR:-}
# The files actions/runner writes into its home when it is configured.
registration_files=(.runner .credentials .credentials_rsaparams)
grace=${RUNNER_GRACEFUL_STOP_TIMEOUT:-15}
# The runner starts Runner.Worker for each job; its presence means a job is running.
worker_pattern=${RUNNER_WORKER_PATTERN:-Runner.Worker}

log() { printf 'entrypoint: %s\n' "$*" >&2; }
die() {
	log "error: $*"
	exit 1
}

validate() {
	[[ $grace =~ ^[0-9]+$ ]] || die "RUNNER_GRACEFUL_STOP_TIMEOUT must be a number of seconds, got '${grace}'"
	if [[ -n ${ACTIONS_RUNNER_INPUT_JITCONFIG:-} && -n ${RUNNER_TOKEN:-} ]]; then
		die "both ACTIONS_RUNNER_INPUT_JITCONFIG and RUNNER_TOKEN are set; set only one"
	fi
	if [[ -n ${ACTIONS_RUNNER_INPUT_JITCONFIG:-} ]]; then
		return
	fi
	[[ -n ${RUNNER_TOKEN:-} ]] || die "no credentials: set ACTIONS_RUNNER_INPUT_JITCONFIG or RUNNER_TOKEN"
	local scopes=0
	[[ -n ${RUNNER_ENTERPRISE:-} ]] && scopes=$((scopes + 1))
	[[ -n ${RUNNER_ORG:-} ]] && scopes=$((scopes + 1))
	[[ -n ${RUNNER_REPO:-} ]] && scopes=$((scopes + 1))
	((scopes == 1)) || die "set exactly one of RUNNER_ENTERPRISE, RUNNER_ORG, RUNNER_REPO (got ${scopes})"
	case ${RUNNER_EPHEMERAL:-true} in
	true | false) ;;
	*) die "RUNNER_EPHEMERAL must be true or false, got '${RUNNER_EPHEMERAL}'" ;;
	esac
}

runner_url() {
	local base=${GITHUB_URL:-https://github.com}
	base=${base%/}
	if [[ -n ${RUNNER_ENTERPRISE:-} ]]; then
		echo "${base}/enterprises/${RUNNER_ENTERPRISE}"
	elif [[ -n ${RUNNER_ORG:-} ]]; then
		echo "${base}/${RUNNER_ORG}"
	else
		echo "${base}/${RUNNER_REPO}"
	fi
}

wait_for_docker() {
	if [[ ${DOCKERD_IN_RUNNER:-false} == true ]]; then
		log "starting dockerd inside the runner container (log: /tmp/dockerd.log)"
		# shellcheck disable=SC2024 # the log belongs to the runner user on purpose
		sudo -n dockerd >/tmp/dockerd.log 2>&1 &
	elif [[ ${DOCKER_ENABLED:-false} != true ]]; then
		return
	fi
	local limit=${DOCKER_WAIT_TIMEOUT:-120} waited=0
	until docker info >/dev/null 2>&1; do
		if ((waited >= limit)); then
			die "docker did not become ready within ${limit}s (DOCKER_HOST=${DOCKER_HOST:-unix socket}); is the docker sidecar running?"
		fi
		sleep 1
		waited=$((waited + 1))
	done
	log "docker is ready after ${waited}s"
}

configure() {
	local args=(--unattended --replace --url "$(runner_url)" --name "${RUNNER_NAME:-$(hostname)}"
		--work "${RUNNER_WORKDIR:-_work}")
	[[ -n ${RUNNER_LABELS:-} ]] && args+=(--labels "${RUNNER_LABELS}")
	[[ -n ${RUNNER_GROUP:-} ]] && args+=(--runnergroup "${RUNNER_GROUP}")
	[[ ${RUNNER_EPHEMERAL:-true} == true ]] && args+=(--ephemeral)
	log "configuring runner: config.sh ${args[*]} (token from the environment)"
	ACTIONS_RUNNER_INPUT_TOKEN=${RUNNER_TOKEN} "${RUNNER_HOME}/config.sh" "${args[@]}"
}

ephemeral() { [[ -n ${ACTIONS_RUNNER_INPUT_JITCONFIG:-} || ${RUNNER_EPHEMERAL:-true} == true ]]; }

now() { printf '%(%Y-%m-%dT%H:%M:%SZ)T' -1; }

# already_ran: this pod's ephemeral runner was started before (by an earlier run of
# this container); its credentials are spent or in use by a job it may still report.
already_ran() { [[ -n $state_dir && -e $state_dir/ran ]]; }

record_start() {
	if [[ -z $state_dir ]]; then
		log "warning: RUNNER_STATE_DIR is not set: a restarted container would run the runner again"
		return
	fi
	printf 'started %s\n' "$(now)" >"$state_dir/ran" || die "cannot write the run marker in ${state_dir}"
}

record_exit() {
	[[ -n $state_dir && -e $state_dir/ran ]] || return 0
	printf 'exited %s at %s\n' "$1" "$(now)" >>"$state_dir/ran" || true
}

# restore_registration copies a registration kept in the state directory back into
# the runner's home; it fails when there is none.
restore_registration() {
	[[ -n $state_dir && -e $state_dir/.runner ]] || return 1
	local f
	for f in "${registration_files[@]}"; do
		if [[ -e $state_dir/$f ]]; then cp -p "$state_dir/$f" "$RUNNER_HOME/$f"; fi
	done
}

save_registration() {
	[[ -n $state_dir ]] || return 0
	local f
	for f in "${registration_files[@]}"; do
		if [[ -e $RUNNER_HOME/$f ]]; then
			cp -p "$RUNNER_HOME/$f" "$state_dir/$f" || die "cannot keep the registration in ${state_dir}"
			chmod 600 "$state_dir/$f"
		fi
	done
}

runner_pid=''

# on_term lets a running job finish (up to the grace period) before the runner is
# told to stop; an idle runner is told at once. The runner reports a job it has to
# cancel to GitHub, so a job cut short by an eviction is never cut short silently.
# shellcheck disable=SC2317 # invoked by the trap
on_term() {
	log "received SIGTERM"
	[[ -n $runner_pid ]] || exit 143
	local waited=0
	while pgrep -f "$worker_pattern" >/dev/null 2>&1 && ((waited < grace)); do
		((waited == 0)) && log "a job is running: waiting up to ${grace}s for it to finish"
		sleep 1
		waited=$((waited + 1))
	done
	if pgrep -f "$worker_pattern" >/dev/null 2>&1; then
		log "the job did not finish within ${grace}s: stopping the runner, which cancels the job and reports it to GitHub"
	fi
	log "forwarding SIGTERM to the runner (pid ${runner_pid})"
	kill -TERM "$runner_pid" 2>/dev/null || true
	wait "$runner_pid" 2>/dev/null || true
	exit 143
}

main() {
	validate
	if ephemeral && already_ran; then
		local ran
		ran=$(<"$state_dir/ran")
		log "this ephemeral runner already ran in this pod (${ran//$'\n'/, }): not running it again; the sweeper removes it"
		exit 0
	fi
	wait_for_docker
	if [[ -n ${ACTIONS_RUNNER_INPUT_JITCONFIG:-} ]]; then
		log "starting runner with its just-in-time config"
	elif ! ephemeral && restore_registration; then
		log "resuming the registration kept in ${state_dir}"
	else
		configure
		ephemeral || save_registration
	fi
	unset RUNNER_TOKEN
	if ephemeral; then record_start; fi
	trap on_term TERM INT
	"${RUNNER_HOME}/run.sh" &
	runner_pid=$!
	local rc=0
	wait "$runner_pid" || rc=$?
	# wait returns early (> 128) when a trapped signal arrives; on_term then exits.
	log "runner exited with code ${rc}"
	record_exit "$rc"
	exit "$rc"
}

main "$@"
