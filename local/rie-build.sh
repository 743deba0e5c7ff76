#!/usr/bin/env bash
# Builds the AWS Lambda Runtime Interface Emulator (aws-lambda-rie) from the Go
# module proxy into a cache directory keyed by its version, and prints the binary's
# path. A cache hit returns at once; a cold build takes about a minute.
set -euo pipefail
version=v0.0.0-20261030222936-bef5c4ba774d
export GOTOOLCHAIN=${KUBE_GOTOOLCHAIN:-go1.27.3}
cache_root=${RUNNERSCALER_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/runnerscaler}
out=$cache_root/rie-$version
if [ -x "$out/aws-lambda-rie" ]; then echo "$out/aws-lambda-rie"; exit 0; fi
mkdir -p "$cache_root"
exec 9>"$cache_root/rie-$version.lock"
flock 9
if [ -x "$out/aws-lambda-rie" ]; then echo "$out/aws-lambda-rie"; exit 0; fi
tmp=$(mktemp -d "$cache_root/.rie.XXXXXX")
trap 'rm -rf "$tmp"' EXIT
echo "rie-build: building aws-lambda-rie $version" >&2
GOBIN=$tmp CGO_ENABLED=0 go install -trimpath "github.com/aws/aws-lambda-runtime-interface-emulator/cmd/aws-lambda-rie@$version"
rm -rf "$out"
mv "$tmp" "$out"
trap - EXIT
echo "$out/aws-lambda-rie"
