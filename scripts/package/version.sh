#!/usr/bin/env bash
# Prints the version of this checkout, as the package and `ipvsctl version` show it: `git describe --tags
# --dirty` without its leading v and in a form dpkg orders correctly (v1.2.0-3-gabc1234-dirty gives
# 1.2.0+3.gabc1234.dirty), or RELEASE+COMMIT[.dirty] where there is no tag, RELEASE being the latest released
# version in CHANGELOG.md (the one an untagged `go build` reports too). With --commit: the commit's short hash.
set -euo pipefail
cd "$(dirname "$0")/../.."
if [ "${1:-}" = --commit ]; then
	git rev-parse --short=12 HEAD 2>/dev/null || echo unknown
	exit 0
fi
if desc=$(git describe --tags --dirty 2>/dev/null); then
	echo "$desc" | sed -e 's/^v//' -e 's/-\([0-9][0-9]*\)-g\([0-9a-f]*\)/+\1.g\2/' -e 's/-dirty$/.dirty/'
	exit 0
fi
desc=$(git describe --always --dirty 2>/dev/null || echo unknown)
release=$(sed -n 's/^## \[\([0-9][^]]*\)\].*/\1/p' CHANGELOG.md 2>/dev/null | head -1)
echo "${release:-0.0.0}+${desc/-dirty/.dirty}"
