#!/usr/bin/env bash
# Entrypoint of the runner container (runs under tini as PID 1, as root: see
# "Credentials" below and runner/README.md).
#
# Credentials, in this order of preference (exactly one must be set):
#   ACTIONS_RUNNER_INPUT_JITCONFIG  just-in-time config from the sweeper (ephemeral pools): written
#                                   into the runner's files (.runner, .credentials*), as run.sh would
#                                   do itself, before run.sh starts; nothing to configure
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
#   RUNNER_HOME                   where config.sh and run.sh are (default: /home/runner)
#   RUNNER_STATE_DIR              a directory that survives container restarts but not the pod (the
#                                 sweeper mounts an emptyDir there); see "Restarts" below
#   RUNNER_USER                   who config.sh, run.sh and so every job step run as, when the
#                                 entrypoint starts as root: a user of /etc/passwd, or UID:GID
#                                 (default: runner)
#   RUNNER_SETPRIV                the command that drops privileges, with util-linux setpriv's
#                                 options (default: setpriv; the local image has a static one)
#
# Credentials. Job steps run as the user run.sh runs as. Started as root, the
# entrypoint (and tini) keep root, and config.sh and run.sh run as RUNNER_USER: a
# job step cannot read a root process's /proc/PID/environ or memory, so the
# registration token and the JIT config in this container's environment stay out
# of its reach. The token is given to config.sh alone, which exits before any job
# can start; run.sh's environment has neither credential. The JIT config is turned
# into the runner's files, which grant this runner's own identity and nothing
# more — every actions/runner job can read its runner's .credentials. The state
# directory (the run-once marker, a kept registration) is root's alone, so a job
# can neither read it nor delete the marker to make the container run again.
# Started as another user (a pool template that sets runAsUser), the entrypoint
# cannot do any of this and says so loudly at start.
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
# Secrets never appear on a command line or in the output.
set -euo pipefail

RUNNER_HOME=${RUNNER_HOME:-/home/runner}
state_dir=${RUNNER_STATE_DIR:-}
# The files actions/runner keeps in its home once configured (or given a JIT config).
registration_files=(.runner .credentials .credentials_rsaparams)
grace=${RUNNER_GRACEFUL_STOP_TIMEOUT:-15}
# The runner starts Runner.Worker for each job; its presence means a job is running.
worker_pattern=${RUNNER_WORKER_PATTERN:-Runner.Worker}
setpriv=${RUNNER_SETPRIV:-setpriv}

# The credentials live in these unexported variables from here on: a child process
# gets one only where it is passed explicitly (config.sh's token).
jit_config=${ACTIONS_RUNNER_INPUT_JITCONFIG:-}
token=${RUNNER_TOKEN:-}
unset RUNNER_TOKEN
for var in "${!ACTIONS_RUNNER_INPUT_@}"; do unset "$var"; done

# as_root: the entrypoint can keep the credentials from the jobs (see "Credentials").
as_root=false
((EUID == 0)) && as_root=true
# drop prefixes a command to run it as the runner user (empty when not root).
drop=()
runner_uid='' runner_gid=''

log() { printf 'entrypoint: %s\n' "$*" >&2; }
die() {
	log "error: $*"
	exit 1
}

validate() {
	[[ $grace =~ ^[0-9]+$ ]] || die "RUNNER_GRACEFUL_STOP_TIMEOUT must be a number of seconds, got '${grace}'"
	if [[ -n $jit_config && -n $token ]]; then
		die "both ACTIONS_RUNNER_INPUT_JITCONFIG and RUNNER_TOKEN are set; set only one"
	fi
	if [[ -n $jit_config ]]; then
		return
	fi
	[[ -n $token ]] || die "no credentials: set ACTIONS_RUNNER_INPUT_JITCONFIG or RUNNER_TOKEN"
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

# setup_user decides who the runner runs as. As root: RUNNER_USER, through
# setpriv, with HOME, USER and LOGNAME of that user. Otherwise: this user, with a
# warning, since every job step can then read the credentials.
setup_user() {
	if ! $as_root; then
		log "WARNING: the container runs as uid ${EUID}, not root: config.sh, run.sh and every job step run as this same user and can read the runner's credentials (the registration token or JIT config, in /proc/1/environ). Let the runner container start as root (the sweeper sets runAsUser: 0 unless the pool's template sets a user) and the entrypoint keeps them from the jobs."
		return
	fi
	local user=${RUNNER_USER:-runner} name='' uid='' gid='' home='' groups=--clear-groups _pw _gecos _shell
	if [[ $user =~ ^([0-9]+):([0-9]+)$ ]]; then
		uid=${BASH_REMATCH[1]} gid=${BASH_REMATCH[2]} home=$RUNNER_HOME name=$user
	else
		while IFS=: read -r name _pw uid gid _gecos home _shell || [[ -n $name ]]; do
			[[ $name == "$user" ]] && break
			name=''
		done </etc/passwd
		[[ -n $name ]] || die "RUNNER_USER: no user '${user}' in /etc/passwd (name a user, or give UID:GID)"
		groups=--init-groups
	fi
	((uid != 0)) || die "RUNNER_USER must not be root: job steps run as that user"
	command -v "$setpriv" >/dev/null || die "cannot drop privileges: no '${setpriv}' (util-linux setpriv; or set RUNNER_SETPRIV)"
	runner_uid=$uid runner_gid=$gid
	drop=("$setpriv" "--reuid=${uid}" "--regid=${gid}" "$groups" --)
	export HOME=$home USER=${name%%:*} LOGNAME=${name%%:*}
}

# protect_state_dir makes the state directory root's alone (an emptyDir is created
# writable by everyone): no job may read a kept registration or remove the marker.
protect_state_dir() {
	[[ -n $state_dir ]] && $as_root || return 0
	{ chown 0:0 "$state_dir" && chmod 0700 "$state_dir"; } || die "cannot make ${state_dir} root's alone"
}

# own gives a file in the runner's home to the runner user.
own() {
	$as_root || return 0
	chown "${runner_uid}:${runner_gid}" "$1" || die "cannot give $1 to the runner user"
}

# put_file writes stdin into path, readable by its owner only, replacing what was there.
put_file() {
	rm -f -- "$1"
	(umask 077 && set -C && cat >"$1")
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
		local dockerd_log=${DOCKERD_LOG:-/tmp/dockerd.log}
		log "starting dockerd inside the runner container (log: ${dockerd_log})"
		if $as_root; then
			dockerd >"$dockerd_log" 2>&1 &
		else
			# shellcheck disable=SC2024 # the log belongs to the runner user on purpose
			sudo -n dockerd >"$dockerd_log" 2>&1 &
		fi
	elif [[ ${DOCKER_ENABLED:-false} != true ]]; then
		return
	fi
	log "warning: jobs on this runner can use docker, and so run privileged containers, which are root on the node: the runner's credentials are not protected from them"
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
	# The token is in config.sh's environment only; config.sh exits before run.sh starts.
	ACTIONS_RUNNER_INPUT_TOKEN=$token "${drop[@]}" "${RUNNER_HOME}/config.sh" "${args[@]}"
}

# install_jit_config writes the JIT config's files into the runner's home, as
# run.sh would from ACTIONS_RUNNER_INPUT_JITCONFIG (actions/runner's format: base64
# of a JSON object mapping each file name to base64 of its content), so that run.sh
# starts as a configured runner with no credential in its environment. A config
# run.sh could not read either is refused here, naming no secret.
install_jit_config() {
	local bad="ACTIONS_RUNNER_INPUT_JITCONFIG is not a runner JIT config (base64 of a JSON object of base64 files)"
	local json body key value seen=false
	local object='^[[:space:]]*[{](.*)[}][[:space:]]*$'
	local pair='^[[:space:]]*"([^"\\]*)"[[:space:]]*:[[:space:]]*"([^"]*)"[[:space:]]*(,|$)'
	local file_name='^[.][A-Za-z0-9_-][A-Za-z0-9_.-]*$'
	json=$(printf '%s' "$jit_config" | base64 -d 2>/dev/null) || die "$bad"
	[[ $json =~ $object ]] || die "$bad"
	body=${BASH_REMATCH[1]}
	while [[ $body =~ $pair ]]; do
		key=${BASH_REMATCH[1]} value=${BASH_REMATCH[2]}
		body=${body:${#BASH_REMATCH[0]}}
		[[ $key =~ $file_name ]] || die "the JIT config has a file named '${key}'; want names like .runner"
		# JSON may escape base64's / and + and =.
		value=${value//\\\//\/}
		value=${value//\\u002[Ff]/\/}
		value=${value//\\u002[Bb]/+}
		value=${value//\\u003[Dd]/=}
		[[ $value =~ ^[A-Za-z0-9+/]*=*$ ]] || die "$bad"
		printf '%s' "$value" | base64 -d | put_file "${RUNNER_HOME}/${key}" || die "cannot write ${key} into ${RUNNER_HOME}"
		own "${RUNNER_HOME}/${key}"
		[[ $key == .runner ]] && seen=true
	done
	[[ -z ${body//[[:space:]]/} ]] || die "$bad"
	$seen || die "the JIT config has no .runner"
}

ephemeral() { [[ -n $jit_config || ${RUNNER_EPHEMERAL:-true} == true ]]; }

now() { printf '%(%Y-%m-%dT%H:%M:%SZ)T' -1; }

# already_ran: this pod's ephemeral runner was started before (by an earlier run of
# this container); its credentials are spent or in use by a job it may still report.
already_ran() { [[ -n $state_dir && -e $state_dir/ran ]]; }

record_start() {
	if [[ -z $state_dir ]]; then
		log "warning: RUNNER_STATE_DIR is not set: a restarted container would run the runner again"
		return
	fi
	printf 'started %s\n' "$(now)" | put_file "$state_dir/ran" || die "cannot write the run marker in ${state_dir}"
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
		if [[ -e $state_dir/$f ]]; then
			put_file "$RUNNER_HOME/$f" <"$state_dir/$f" || die "cannot restore ${f} into ${RUNNER_HOME}"
			own "$RUNNER_HOME/$f"
		fi
	done
}

save_registration() {
	[[ -n $state_dir ]] || return 0
	local f
	for f in "${registration_files[@]}"; do
		if [[ -f $RUNNER_HOME/$f && ! -L $RUNNER_HOME/$f ]]; then
			put_file "$state_dir/$f" <"$RUNNER_HOME/$f" || die "cannot keep the registration in ${state_dir}"
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
	setup_user
	protect_state_dir
	if ephemeral && already_ran; then
		local ran
		ran=$(<"$state_dir/ran")
		log "this ephemeral runner already ran in this pod (${ran//$'\n'/, }): not running it again; the sweeper removes it"
		exit 0
	fi
	wait_for_docker
	if [[ -n $jit_config ]]; then
		install_jit_config
		log "starting runner with its just-in-time config"
	elif ! ephemeral && restore_registration; then
		log "resuming the registration kept in ${state_dir}"
	else
		configure
		ephemeral || save_registration
	fi
	if ephemeral; then record_start; fi
	trap on_term TERM INT
	"${drop[@]}" "${RUNNER_HOME}/run.sh" &
	runner_pid=$!
	local rc=0
	wait "$runner_pid" || rc=$?
	# wait returns early (> 128) when a trapped signal arrives; on_term then exits.
	log "runner exited with code ${rc}"
	record_exit "$rc"
	exit "$rc"
}

main "$@"
