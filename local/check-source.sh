#!/usr/bin/env bash
# The repository holds source, not build output. Fails naming every tracked file
# that is a compiled executable (ELF or Mach-O, whatever its mode), has the
# executable bit without being a script (no "#!" first line), or is over 1 MiB
# outside a testdata/ directory. It looks at the index: what the next commit holds.
#
# usage: local/check-source.sh [DIR]   (DIR: in the work tree to check; default this one)
set -euo pipefail
cd "${1:-$(dirname "${BASH_SOURCE[0]}")/..}"
limit=$((1 << 20))

# Tracked regular files (not symlinks or submodules): mode, blob and path.
modes=() blobs=() paths=()
while IFS= read -r -d '' entry; do
	read -r mode blob _ <<<"${entry%%$'\t'*}"
	if [[ $mode == 100644 || $mode == 100755 ]]; then
		modes+=("$mode") blobs+=("$blob") paths+=("${entry#*$'\t'}")
	fi
done < <(git ls-files --stage -z)
# Files git takes for binary (a NUL byte near the start), the only ones that can
# be compiled executables.
declare -A binary=()
while IFS= read -r -d '' entry; do
	if [[ $entry == i/-text* ]]; then
		binary[${entry#*$'\t'}]=1
	fi
done < <(git ls-files --eol -z)
sizes=()
if ((${#blobs[@]} > 0)); then
	mapfile -t sizes < <(printf '%s\n' "${blobs[@]}" | git cat-file --batch-check='%(objectsize)')
fi

# start prints the first n bytes of blob as hex.
start() { od -An -tx1 -N"$2" < <(git cat-file blob "$1") | tr -d ' \n'; }

bad=0
fail() {
	echo "check-source: $1" >&2
	bad=$((bad + 1))
}
for i in "${!paths[@]}"; do
	path=${paths[$i]}
	if [[ -n ${binary[$path]:-} ]]; then
		case $(start "${blobs[$i]}" 4) in
		7f454c46) fail "$path: an ELF executable (build output)" ;;
		feedface | feedfacf | cefaedfe | cffaedfe | cafebabe) fail "$path: a Mach-O executable (build output)" ;;
		esac
	fi
	if [[ ${modes[$i]} == 100755 && $(start "${blobs[$i]}" 2) != 2321 ]]; then
		fail "$path: executable but not a script (no #! line); git update-index --chmod=-x it, or remove it"
	fi
	if ((sizes[i] > limit)) && [[ $path != testdata/* && $path != */testdata/* ]]; then
		fail "$path: ${sizes[$i]} bytes, over 1 MiB outside a testdata/ directory"
	fi
done
if ((bad > 0)); then
	echo "check-source: $bad tracked files above are build output or too big: the repository holds source" >&2
	exit 1
fi
echo "check-source: ${#paths[@]} tracked files, none of them build output"
