#!/usr/bin/env bash
# make chaos: the chaos suite at full size (RUNNERSCALER_CHAOS_JOBS, default 300)
# on a fresh local stack. The closed loop's debug log of each test goes to a
# directory that is removed when the suite passes and kept, with its path
# printed, when it fails: the log is the evidence a failure is judged by.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
logs=$(mktemp -d "${TMPDIR:-/tmp}/runnerscaler-chaos.XXXXXX")
export RUNNERSCALER_LOOP_LOG=$logs RUNNERSCALER_CHAOS_JOBS=${RUNNERSCALER_CHAOS_JOBS:-300}
if bash local/with-stack.sh go test -count=1 -timeout 60m -run 'TestChaos' -v ./tests; then
	rm -rf "$logs"
	exit 0
fi
echo "chaos: FAILED; the loop's logs are kept in $logs:" >&2
ls -l "$logs" >&2
exit 1
