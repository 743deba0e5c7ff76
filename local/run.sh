#!/usr/bin/env bash
# make run: the local stack with its node (which needs root: containerd, runc and
# a kubelet), the runner image built and imported into the node, and the closed
# loop with the webhook on http://127.0.0.1:8080/webhook; runners are real pods.
# Extra arguments go to local/cmd/run (see `go run ./local/cmd/run -h`).
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
if ((EUID != 0)); then
	echo "run: the local stack's node needs root; run: sudo -E env PATH=\"\$PATH\" make run" >&2
	exit 1
fi
exec go run ./local/cmd/run "$@"
