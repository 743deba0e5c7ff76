#!/usr/bin/env bash
# The webhook Lambda must stay small and fast to start: it may not link client-go,
# the Kubernetes API types or the EKS authenticator (k8s.io/utils/clock, a few
# hundred lines with no dependencies, is fine). Fails naming the offending packages.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
bad=$(GOOS=linux go list -deps -tags lambda.norpc ./functions/webhook | grep -E '^k8s\.io/(client-go|api|apimachinery|kube-openapi)(/|$)|^sigs\.k8s\.io/aws-iam-authenticator' || true)
if [ -n "$bad" ]; then
	echo "functions/webhook links Kubernetes packages it must not:" >&2
	echo "$bad" | head -20 >&2
	exit 1
fi
echo "check-deps: functions/webhook links no Kubernetes packages"
