#!/usr/bin/env bash
# Prints the -ldflags that stamp the version and commit (scripts/package/version.sh) into ipvsctl:
#   go build -ldflags "$(scripts/package/ldflags.sh)" ./cmd/ipvsctl
set -euo pipefail
here=$(dirname "$0")
echo "-X main.version=$("$here/version.sh") -X main.commit=$("$here/version.sh" --commit)"
