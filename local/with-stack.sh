#!/usr/bin/env bash
# Runs a command against a fresh local stack and always stops the stack afterwards.
# The command sees RUNNERSCALER_TEST_DYNAMODB / RUNNERSCALER_TEST_KUBECONFIG /
# RUNNERSCALER_TEST_STACK_DIR (what local/testenv reads) besides the stack's own
# env (DYNAMODB_ENDPOINT, ...).
#
# usage: local/with-stack.sh CMD [ARGS...]
set -euo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$root"
dir=$(mktemp -d "${TMPDIR:-/tmp}/runnerscaler-stack.XXXXXX")
export RUNNERSCALER_STACK_DIR=$dir
stack() { go run ./local/cmd/stack "$@"; }
cleanup() {
	stack down || true
	rm -rf "$dir"
}
trap cleanup EXIT
trap 'exit 130' INT TERM
stack up >/dev/null
# shellcheck disable=SC1091
source "$dir/env"
export RUNNERSCALER_TEST_DYNAMODB=$DYNAMODB_ENDPOINT RUNNERSCALER_TEST_KUBECONFIG=$KUBECONFIG RUNNERSCALER_TEST_STACK_DIR=$dir
"$@"
