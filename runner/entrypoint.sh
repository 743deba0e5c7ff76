#!/usr/bin/env bash
# Entrypoint of the runner container (runs under tini as PID 1, as root: see
# "Credentials" below and runner/README.md).
#
# Credentials, in this order of preference (exactly one must be set):
#   ACTIONS_RUNNER_INPUT_JITCONFIG  just-in-time config from the sweeper (ephemeral pools): written
#                                   into the runner's files (.runner, .credentials*), as run.sh would
#                                   do itself, before run.sh starts; nothing to configure
#   RUNNER_TOKEN_FILE               a file holding the registration token (the sweeper mounts the
#                                   runner's Secret inside RUNNER_STATE_DIR): config.sh registers the
#                                   runner first. Read only when config.sh runs, and only by the
#                                   process that becomes config.sh; the file may be gone later (see
#                                   "Restarts")
#   RUNNER_TOKEN                    the registration token itself, for running the image by hand: a
#                                   variable the container starts with stays in /proc/1/environ for
#                                   its life, readable by root and by the container's user
# With RUNNER_TOKEN_FILE or RUNNER_TOKEN:
#   RUNNER_ENTERPRISE | RUNNER_ORG | RUNNER_REPO (owner/name)  exactly one: the runner's scope
#   GITHUB_URL        https://github.com (default) or your GHES URL
#   RUNNER_NAME       default: the host (pod) name
#   RUNNER_LABELS     comma-separated extra labels
#   RUNNER_GROUP      runner group (default: Default)
#   RUNNER_WORKDIR    work directory (default: _work)
#   RUNNER_EPHEMERAL  true (default): take one job, then exit 0
# Always:
#   RUNNER_STOP_SETTLE_MS         an idle runner told to stop first looks this long for a job GitHub
#                                 handed it at that moment, and lets such a job finish (default 1000)
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
#   RUNNER_HOOKS_DIR              where runner-job-started.sh, runner-job-completed.sh and
#                                 runner-job-running are (default: /usr/local/bin)
#   RUNNER_JOB_DIR                the job hooks' directory, made here for the runner user
#                                 (default: /run/runner-job); see "Jobs" below
#   ACTIONS_RUNNER_HOOK_JOB_STARTED, ACTIONS_RUNNER_HOOK_JOB_COMPLETED
#                                 the pool's own hooks, if any: they run after ours (kept in
#                                 RUNNER_USER_HOOK_JOB_STARTED / _COMPLETED)
#   ACTIONS_RUNNER_VERSION        the actions/runner version of the image (runner/Dockerfile sets
#                                 it), named when GitHub refuses the runner
#   RUNNER_TERMINATION_LOG        the container's termination message: whether its runner
#                                 started, and why it died or GitHub refused it (default:
#                                 /dev/termination-log, the kubelet's; see say_not_started)
#
# Credentials. Job steps run as the user run.sh runs as. Started as root, the
# entrypoint (and tini) keep root, and config.sh and run.sh run as RUNNER_USER: a
# job step cannot read a root process's /proc/PID/environ or memory, so the JIT
# config in this container's environment stays out of its reach. The registration
# token is in no process's environment but config.sh's: read from
# RUNNER_TOKEN_FILE by the subshell that then becomes config.sh, which exits
# before any job can start; the file is in the state directory, root's alone; and
# the sweeper removes it from the runner's Secret once GitHub lists the runner.
# run.sh's environment has neither credential. The JIT config is turned
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
#     before it starts run.sh; a restarted container that finds the marker exits at
#     once, with the run's outcome (see exit_again), and never runs a second time
#     with spent credentials. The sweeper sees the
#     container terminated or restarted, asks GitHub to remove the runner (204 or
#     404), and only then deletes the pod;
#   - a persistent runner keeps its registration (.runner, .credentials*) there and
#     a restarted container resumes it instead of registering again (the token may
#     have expired since, or been removed: the sweeper removes it from the runner's
#     Secret once the runner registered, and RUNNER_TOKEN_FILE is then gone).
# Neither needs the token again; only a container with no run to remember and no
# registration to resume does.
#
# Jobs. run.sh gets ACTIONS_RUNNER_HOOK_JOB_STARTED and _COMPLETED naming our hooks,
# which actions/runner runs inside each job, as the runner user: the started hook
# writes the marker RUNNER_JOB_DIR/job, the completed hook removes it. The
# container's readiness probe, runner-job-running, answers "a job runs" while the
# marker exists or a Runner.Worker process does: the pod is ready exactly while it
# runs a job, which the sweeper reads as the pod's own report. A job step can fake
# either way for its own runner (it is the hooks' user); the sweeper never removes
# a runner on this report alone.
#
# Stopping (SIGTERM). An idle runner is stopped at once. With a job running, the
# entrypoint marks the stop (RUNNER_JOB_DIR/stopping) and waits up to
# RUNNER_GRACEFUL_STOP_TIMEOUT. The job's completed hook then names its worker
# (RUNNER_JOB_DIR/ending) and the entrypoint stops that worker's parent, the
# listener, with SIGSTOP before the job's result is reported: GitHub frees the
# runner when the result arrives, and a listener still polling would be handed the
# next queued job. Once the worker has exited, the held listener gets SIGTERM and
# SIGCONT and disconnects without having taken another job. Without the hooks'
# help (no hooks, or a SIGTERM after the completed hook ran) the entrypoint polls
# for the worker's exit every 20 ms and logs how long the listener was free; a job
# the listener took meanwhile is logged ("a job started after this runner's stop
# began") and may finish within the grace period.
#
# Secrets never appear on a command line or in the output.
#
# shellcheck disable=SC2317 # on_term and what it calls run from the SIGTERM trap
set -euo pipefail

RUNNER_HOME=${RUNNER_HOME:-/home/runner}
state_dir=${RUNNER_STATE_DIR:-}
# The files actions/runner keeps in its home once configured (or given a JIT config).
registration_files=(.runner .credentials .credentials_rsaparams)
grace=${RUNNER_GRACEFUL_STOP_TIMEOUT:-15}
settle_ms=${RUNNER_STOP_SETTLE_MS:-1000}
# The runner starts Runner.Worker for each job; its presence means a job is running.
worker_pattern=${RUNNER_WORKER_PATTERN:-Runner.Worker}
setpriv=${RUNNER_SETPRIV:-setpriv}
# The job hooks and the probe (runner-job-started.sh, runner-job-completed.sh,
# runner-job-running), and the directory where the hooks keep their marker.
hooks_dir=${RUNNER_HOOKS_DIR:-/usr/local/bin}
job_dir=${RUNNER_JOB_DIR:-/run/runner-job}
job_dir_ready=false
# count_dir: where watch_output counts the jobs the listener took and finished.
count_dir=$(mktemp -d 2>/dev/null) || count_dir=''
held_worker=''

# The credentials live in these unexported variables from here on: a child process
# gets one only where it is passed explicitly (config.sh's token). The token's file
# is read only by configure.
jit_config=${ACTIONS_RUNNER_INPUT_JITCONFIG:-}
token=${RUNNER_TOKEN:-}
token_file=${RUNNER_TOKEN_FILE:-}
unset RUNNER_TOKEN RUNNER_TOKEN_FILE
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
	exit_why=$*
	exit 1
}

# The termination message says, at every instant, whether this container has
# started its runner, so that a container killed at any point (SIGKILL, an OOM
# kill: nothing runs then) leaves the truth behind for the sweeper
# (internal/reconcile, finished and spent):
#   - from the entrypoint's first line: "runner not started: ..." (say_not_started);
#     an exit before the runner starts writes its reason there (not_started);
#   - once the runner is about to start (an ephemeral one's run marker written
#     first): "runner ran: ..." (say_ran), or later "runner refused by GitHub: ..."
#     (record_refusal); a restarted ephemeral container that finds its run marker
#     writes "runner ran: ..." or "runner died: ..." (exit_again).
# So "runner not started" means the kubelet's next start runs the runner like a
# first start, and a "runner ran"/"runner died"/"runner refused" end means no
# later start of this pod runs it again. As root, the entrypoint makes the file
# root's (0644) before any job can run: a job step cannot write it. Where that
# fails (another runtime), it says so; a job that writes the file can only make
# its own runner look not started, which holds the runner longer, never less.
term_log=${RUNNER_TERMINATION_LOG:-/dev/termination-log}
runner_started=false exit_why=''
say_not_started() { printf 'runner not started: %s\n' "$1" >"$term_log" 2>/dev/null || true; }
say_ran() { printf 'runner ran: %s\n' "$1" >"$term_log" 2>/dev/null || true; }
not_started() {
	local rc=$? said=''
	said=$(head -c 64 "$term_log" 2>/dev/null) || true
	if $runner_started || ((rc == 0)) || [[ -n $said && $said != "runner not started:"* ]]; then
		return 0 # running, or another message was written (exit_again, record_refusal)
	fi
	say_not_started "${exit_why:-the entrypoint exited with code ${rc} before it started the runner}"
}

# protect_term_log makes the termination log root's alone to write.
protect_term_log() {
	$as_root || return 0
	if ! { chown 0:0 "$term_log" && chmod 0644 "$term_log"; } 2>/dev/null; then
		log "warning: cannot make the termination log ${term_log} root's: a job could write its own runner's termination message"
	fi
}

validate() {
	[[ $grace =~ ^[0-9]+$ ]] || die "RUNNER_GRACEFUL_STOP_TIMEOUT must be a number of seconds, got '${grace}'"
	[[ $settle_ms =~ ^[0-9]+$ ]] || die "RUNNER_STOP_SETTLE_MS must be a number of milliseconds, got '${settle_ms}'"
	local given=0 var
	for var in jit_config token token_file; do
		[[ -n ${!var} ]] && given=$((given + 1))
	done
	((given <= 1)) || die "more than one of ACTIONS_RUNNER_INPUT_JITCONFIG, RUNNER_TOKEN_FILE and RUNNER_TOKEN is set; set only one"
	((given == 1)) || die "no credentials: set ACTIONS_RUNNER_INPUT_JITCONFIG, RUNNER_TOKEN_FILE or RUNNER_TOKEN"
	if [[ -n $jit_config ]]; then
		return
	fi
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
		log "WARNING: the container runs as uid ${EUID}, not root: config.sh, run.sh and every job step run as this same user and can read the runner's credentials (the registration token's file until the sweeper removes it, a JIT config in /proc/1/environ). Let the runner container start as root (the sweeper sets runAsUser: 0 unless the pool's template sets a user) and the entrypoint keeps them from the jobs."
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
	if [[ -n $token_file && ! -s $token_file ]]; then
		die "no registration token in ${token_file}, and no registration to resume${state_dir:+ in ${state_dir}}: the sweeper removes the token from the runner's Secret once GitHub lists the runner, after which only a container that kept its registration (or its run marker) starts again"
	fi
	log "configuring runner: config.sh ${args[*]} (token from ${token_file:-the environment})"
	# The token is in config.sh's environment only; config.sh exits before run.sh
	# starts. From a file, it is read by this subshell, which then becomes config.sh
	# (exec): the entrypoint, which lives on, never holds it.
	local rc=0
	watch_refusals
	(
		[[ -z $token_file ]] || token=$(<"$token_file")
		ACTIONS_RUNNER_INPUT_TOKEN=$token exec "${drop[@]}" "${RUNNER_HOME}/config.sh" "${args[@]}"
	) 2>&"$refusal_fd" || rc=$?
	token=''
	refusals_read
	return "$rc"
}

# watch_refusals starts watch_refusal on a descriptor of its own (refusal_fd), to
# give the runner as its error output; refusals_read, once the runner has exited,
# waits until the watcher has read all of it: up to 2 s, since a process a job
# left behind may hold the descriptor open.
refusal_fd='' refusal_pid=''
watch_refusals() {
	exec {refusal_fd}> >(watch_refusal)
	refusal_pid=$!
}
refusals_read() {
	exec {refusal_fd}>&-
	local i
	for ((i = 0; i < 100; i++)); do
		kill -0 "$refusal_pid" 2>/dev/null || return 0
		sleep 0.02
	done
}

# watch_refusal passes the runner's error output through; a line saying GitHub
# refuses the runner's version (config.sh: "can no longer register with GitHub";
# the listener: "is deprecated and cannot receive messages") becomes the
# container's termination message, which the kubelet shows as the container's
# last state and the sweeper as the runner's reason, and is kept in the state
# directory for exit_again.
watch_refusal() {
	local line
	while IFS= read -r line || [[ -n $line ]]; do
		printf '%s\n' "$line" >&2
		case $line in
		*"can no longer register with GitHub"* | *"is deprecated and cannot receive messages"*)
			record_refusal "$line"
			;;
		esac
	done
}

record_refusal() {
	local why="runner refused by GitHub: ${1}" version=${ACTIONS_RUNNER_VERSION:-}
	if [[ -n $version && $1 != *"v${version} "* ]]; then
		why+=" (this image runs actions/runner ${version})"
	fi
	printf '%s\n' "$why" >"$term_log" 2>/dev/null || true
	if [[ -n $state_dir ]]; then printf '%s\n' "$why" | put_file "$state_dir/refused" 2>/dev/null || true; fi
	log "GitHub refuses this runner's actions/runner version: upgrade the image (its RUNNER_VERSION)"
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

# exit_again ends a restarted container whose ephemeral runner already ran in this
# pod, with the same outcome as the run: 0 after a runner that exited 0; the
# runner's code when it exited otherwise; 137 (as for SIGKILL) when the run left
# no exit at all, because its container was killed under it (an OOM kill, a
# crash). The kubelet shows that code, and the message written to the
# container's termination log, as the container's last state on every restart,
# so the sweeper still sees that the runner died, not only that it ran
# (internal/reconcile, deaths).
exit_again() {
	local ran rc=137
	ran=$(<"$state_dir/ran")
	if [[ $ran =~ exited\ ([0-9]+) ]]; then
		rc=${BASH_REMATCH[1]}
	fi
	log "this ephemeral runner already ran in this pod (${ran//$'\n'/, }): not running it again; the sweeper removes it"
	if [[ -s $state_dir/refused ]]; then
		cat -- "$state_dir/refused" >"$term_log" 2>/dev/null || true
	elif ((rc != 0)); then
		local why="its runner exited with code ${rc}"
		((rc == 137)) && [[ ! $ran =~ exited ]] && why="its container was killed before its runner exited"
		printf 'runner died: %s\n' "$why" >"$term_log" 2>/dev/null || true
	else
		say_ran "its runner exited 0 in an earlier start of this container: not run again"
	fi
	exit "$rc"
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
# held: the listener process stopped (SIGSTOP) at the end of a job, while a stop is pending.
held=''

# usec: the time now, in microseconds.
usec() { printf '%s' "${EPOCHREALTIME/./}"; }

# setup_job_report installs the job hooks (see "Jobs" above): the job directory,
# the runner user's, and ACTIONS_RUNNER_HOOK_JOB_* naming our hooks, the pool's
# own hooks kept in RUNNER_USER_HOOK_JOB_*. Without them the pod reports a job from
# Runner.Worker alone, and a stopping runner may take one more job.
setup_job_report() {
	local started=$hooks_dir/runner-job-started.sh completed=$hooks_dir/runner-job-completed.sh var pool
	if [[ ! -r $started || ! -r $completed ]]; then
		log "warning: no job hooks in ${hooks_dir}: the pod reports a job from Runner.Worker alone, and a stopping runner may take another job"
		return
	fi
	[[ $job_dir == /?* && $job_dir != *..* ]] || die "RUNNER_JOB_DIR must be an absolute path, got '${job_dir}'"
	if ! { rm -rf -- "$job_dir" && mkdir -p -- "$job_dir" && chmod 0755 "$job_dir"; } 2>/dev/null ||
		{ $as_root && ! chown "${runner_uid}:${runner_gid}" "$job_dir"; }; then
		log "warning: cannot create ${job_dir} for the job hooks: the pod reports a job from Runner.Worker alone, and a stopping runner may take another job"
		return
	fi
	for var in STARTED COMPLETED; do
		pool=ACTIONS_RUNNER_HOOK_JOB_${var}
		if [[ -n ${!pool:-} ]]; then
			export "RUNNER_USER_HOOK_JOB_${var}=${!pool}"
			log "the pool's job-${var,,} hook (${!pool}) runs after ours"
		fi
	done
	export RUNNER_JOB_DIR=$job_dir ACTIONS_RUNNER_HOOK_JOB_STARTED=$started ACTIONS_RUNNER_HOOK_JOB_COMPLETED=$completed
	job_dir_ready=true
}

# job_running: the job hooks' marker, a Runner.Worker process (runner-job-running's
# test), or a job the listener said it took ("Running job: ") and has not said it
# finished ("completed with result"): the listener prints that line when the job
# is handed over, before its worker starts (see watch_output).
job_running() {
	$job_dir_ready && [[ -e $job_dir/job ]] && return 0
	pgrep -f "$worker_pattern" >/dev/null 2>&1 && return 0
	local taken=0 finished=0
	[[ -n $count_dir && -r $count_dir/taken ]] && read -r taken <"$count_dir/taken"
	[[ -n $count_dir && -r $count_dir/finished ]] && read -r finished <"$count_dir/finished"
	[[ $taken =~ ^[0-9]+$ && $finished =~ ^[0-9]+$ ]] && ((taken > finished))
}

# watch_output passes the runner's output through, counting the jobs the listener
# says it took and finished (taken and finished in count_dir, the entrypoint's
# own: with or without the job hooks, and out of the job directory, which the
# job's user may write).
watch_output() {
	local line taken=0 finished=0
	while IFS= read -r line || [[ -n $line ]]; do
		printf '%s\n' "$line"
		[[ -n $count_dir ]] || continue
		case $line in
		*"Running job: "*)
			taken=$((taken + 1))
			printf '%d\n' "$taken" >"$count_dir/taken" 2>/dev/null || true
			;;
		*" completed with result: "*)
			finished=$((finished + 1))
			printf '%d\n' "$finished" >"$count_dir/finished" 2>/dev/null || true
			;;
		esac
	done
}

# alive: the process exists and is not a zombie (a worker whose held listener
# has not reaped it yet has exited).
alive() {
	local stat
	read -r stat <"/proc/$1/stat" 2>/dev/null || return 1
	stat=${stat##*) }
	[[ ${stat%% *} != Z ]]
}

# parent_of prints the parent process id of pid.
parent_of() {
	local stat fields
	read -r stat <"/proc/$1/stat" 2>/dev/null || return 1
	read -ra fields <<<"${stat##*) }"
	printf '%s' "${fields[1]}"
}

# hold_listener: once the job-completed hook said the job is ending (RUNNER_JOB_DIR/ending:
# its worker's pid), stop that worker's parent, the listener (SIGSTOP), and tell the
# hook (RUNNER_JOB_DIR/held). The worker then reports the job's result and exits
# while the listener can take no other job; stop_runner lets it go with SIGTERM.
hold_listener() {
	$job_dir_ready && [[ -s $job_dir/ending ]] || return 1
	local worker listener
	read -r worker <"$job_dir/ending" 2>/dev/null || return 1
	[[ $worker =~ ^[0-9]+$ ]] && listener=$(parent_of "$worker") || return 1
	if [[ ! $listener =~ ^[0-9]+$ ]] || ((listener <= 1 || listener == $$)); then
		return 1
	fi
	kill -STOP "$listener" 2>/dev/null || return 1
	held=$listener
	: >"$job_dir/held" 2>/dev/null || true
	held_worker=$worker
	log "the job is ending (its job-completed hook ran): holding the listener (pid ${listener}) until its worker (pid ${worker}) exits, so that it takes no other job"
}

# wait_for_job waits, up to the grace period, for the running job to end; it
# fails when the grace period ran out. A job that starts meanwhile (the listener
# took it before it could be stopped) is said loudly, and waited for too: by its
# worker's pid, or, for one that ran between two looks, by the listener's count
# of jobs taken (taken_since).
wait_for_job() {
	log "a job is running: waiting up to ${grace}s for it to finish; the listener is stopped the moment its worker exits, so that it takes no other job"
	local deadline=$((SECONDS + grace)) known=' ' pid pids seen first held_at=0 last_seen before warned=0
	held_worker='' last_seen=$(usec) before=$(jobs_taken_before)
	while ((SECONDS < deadline)); do
		if [[ -z $held ]] && hold_listener; then
			held_at=$(usec)
		fi
		if [[ -n $held ]]; then
			if ! alive "$held_worker"; then
				log "the job's worker exited $((($(usec) - held_at) / 1000)) ms after its listener was held: stopping the runner; the listener took no other job (remaining window: 0 ms, it was held)"
				return 0
			fi
		else
			pids=$(pgrep -f "$worker_pattern" 2>/dev/null) || pids=''
			seen=false first=false
			[[ $known == ' ' ]] && first=true
			for pid in $pids; do
				seen=true
				[[ $known == *" $pid "* ]] && continue
				# The first look's workers are the job waited for; a process a known
				# worker forked (a step, before its exec) carries the worker's command
				# line for a moment: it is that job's, not a new one.
				if ! $first && [[ $known != *" $(parent_of "$pid") "* ]]; then
					log "WARNING: a job started after this runner's stop began (worker pid ${pid}): the listener took it before it could be stopped; letting it finish within the grace period (${grace}s since SIGTERM)"
					warned=$((warned + 1))
				fi
				known+="$pid "
			done
			if $seen; then
				last_seen=$(usec)
			elif ! job_running && ! job_starting; then
				# job_starting: a job the free listener took meanwhile is run, not cancelled.
				taken_since "$before" "$warned"
				log "the job's worker exited: stopping the runner; the listener was free for $((($(usec) - last_seen) / 1000)) ms after the worker's exit (${settle_ms} ms of them looking for a job it took)"
				return 0
			fi
		fi
		sleep 0.02
	done
	return 1
}

# jobs_taken_before: how many jobs the listener had taken when the wait began,
# the one waited for included (its "Running job" line may not be counted yet).
jobs_taken_before() {
	local taken=0 finished=0
	[[ -n $count_dir && -r $count_dir/taken ]] && read -r taken <"$count_dir/taken"
	[[ -n $count_dir && -r $count_dir/finished ]] && read -r finished <"$count_dir/finished"
	[[ $taken =~ ^[0-9]+$ && $finished =~ ^[0-9]+$ ]] || { echo 1; return; }
	echo $((taken > finished ? taken : finished + 1))
}

# taken_since says loudly how many jobs the listener took after the wait began
# (before: jobs_taken_before's count) beyond the warned ones seen by their
# worker: without job hooks, a short job can start and end between two looks.
taken_since() {
	local taken=0 extra
	[[ -n $count_dir && -r $count_dir/taken ]] && read -r taken <"$count_dir/taken"
	[[ $taken =~ ^[0-9]+$ ]] || return 0
	extra=$((taken - $1 - $2))
	if ((extra > 0)); then
		log "WARNING: a job started after this runner's stop began (${extra} seen only in the listener's output, between two looks for its worker): the listener took it before it could be stopped; it ran within the grace period (${grace}s since SIGTERM)"
	fi
}

# job_starting: an idle runner may be taking a job at this very moment (GitHub
# handed it one just before SIGTERM, and the worker starts a moment later; the
# sweeper stops a runner that every signal says is idle by deleting its pod, and
# cannot see a job that young). It looks for a job for up to RUNNER_STOP_SETTLE_MS
# before the listener is stopped, which would cancel that job.
job_starting() {
	local deadline=$(($(usec) + settle_ms * 1000))
	while (($(usec) < deadline)); do
		job_running && return 0
		sleep 0.02
	done
	return 1
}

# on_term lets a running job finish (up to the grace period) before the runner is
# told to stop; an idle runner is told once no job has started within the
# settling time (job_starting). The runner takes no job after the
# one running (see "Stopping" above). The runner reports a job it has to cancel to
# GitHub, so a job cut short by an eviction is never cut short silently.
on_term() {
	log "received SIGTERM"
	if [[ -z $runner_pid ]]; then
		log "the runner has not started: not starting it"
		exit 143
	fi
	if $job_dir_ready; then : >"$job_dir/stopping" 2>/dev/null || true; fi
	if ! job_running && job_starting; then
		log "WARNING: a job started as this idle runner's stop began (GitHub handed it over at that moment): letting it finish within the grace period (${grace}s since SIGTERM)"
	fi
	if job_running && ! wait_for_job; then
		log "the job did not finish within ${grace}s: stopping the runner, which cancels the job and reports it to GitHub"
	fi
	stop_runner
}

# stop_runner tells the runner to stop (and a held listener first, then lets it
# run: the signal is pending when it resumes), waits for it and exits.
stop_runner() {
	if [[ -n $held ]]; then
		kill -TERM "$held" 2>/dev/null || true
		kill -CONT "$held" 2>/dev/null || true
	fi
	log "forwarding SIGTERM to the runner (pid ${runner_pid})"
	kill -TERM "$runner_pid" 2>/dev/null || true
	wait "$runner_pid" 2>/dev/null || true
	exit 143
}

main() {
	# From the first line on: as a container's PID 1, the entrypoint would
	# otherwise ignore a SIGTERM that comes before the runner starts (a pod
	# evicted as it starts), start the runner anyway, and let it take a job that
	# the end of the grace period then kills. Before the runner starts, on_term
	# exits at once.
	trap on_term TERM INT
	say_not_started "the container ended before the entrypoint started the runner (killed, or the entrypoint failed)"
	trap not_started EXIT
	validate
	setup_user
	protect_term_log
	protect_state_dir
	if ephemeral && already_ran; then
		exit_again
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
	runner_started=true
	say_ran "started at $(now)"
	setup_job_report
	watch_refusals
	"${drop[@]}" "${RUNNER_HOME}/run.sh" > >(watch_output) 2>&"$refusal_fd" &
	runner_pid=$!
	local rc=0
	wait "$runner_pid" || rc=$?
	refusals_read
	# wait returns early (> 128) when a trapped signal arrives; on_term then exits.
	log "runner exited with code ${rc}"
	record_exit "$rc"
	exit "$rc"
}

main "$@"
