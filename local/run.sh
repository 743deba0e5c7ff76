#!/usr/bin/env bash
# make run: the local stack plus the webhook on http://127.0.0.1:8080/webhook.
# Extra arguments go to local/cmd/run (see `go run ./local/cmd/run -h`).
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
exec go run ./local/cmd/run "$@"
