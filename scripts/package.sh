#!/usr/bin/env bash
# Builds the Debian package dist/ipvsctl_VERSION_amd64.deb: the binary (/usr/sbin/ipvsctl, version stamped),
# both systemd units (ExecStart=/usr/sbin/ipvsctl; nothing enabled or started), bash and zsh completions and
# the man page (printed by the binary itself, from its command table), /var/lib/ipvsctl (0700). nfpm builds
# it, as a Go library (scripts/package/main.go, its own module); no tool is downloaded.
# Usage: scripts/package.sh [OUTDIR]     (default dist/); prints the path of the .deb
# Environment: SOURCE_DATE_EPOCH (file times; default the commit's time)
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
out=${1:-$root/dist}
cd "$root"
version=$(scripts/package/version.sh)
commit=$(scripts/package/version.sh --commit)
stage=$(mktemp -d "${TMPDIR:-/tmp}/ipvsctl-package.XXXXXX")
trap 'rm -rf "$stage"' EXIT
export SOURCE_DATE_EPOCH=${SOURCE_DATE_EPOCH:-$(git log -1 --format=%ct 2>/dev/null || date +%s)}

GOOS=linux GOARCH=amd64 CGO_ENABLED=1 go build -trimpath -buildvcs=false -buildmode=pie \
	-ldflags "$(scripts/package/ldflags.sh) -s -w" -o "$stage/ipvsctl" ./cmd/ipvsctl
"$stage/ipvsctl" man | gzip -9n >"$stage/ipvsctl.8.gz"
"$stage/ipvsctl" completion bash >"$stage/ipvsctl.bash"
"$stage/ipvsctl" completion zsh >"$stage/_ipvsctl"
install -m 0755 scripts/package/postinst "$stage/postinst"
mkdir -p "$stage/units"
for unit in ipvsctl.service ipvsctl-restore.service; do
	sed 's|/usr/local/sbin/ipvsctl|/usr/sbin/ipvsctl|g' "scripts/systemd/$unit" >"$stage/units/$unit"
done
cat >"$stage/copyright" <<COPYRIGHT
Format: https://www.debian.org/doc/packaging-manuals/copyright-format/1.0/
Upstream-Name: ipvsctl
Source: https://github.com/ipvsctl/ipvsctl

Files: *
Copyright: 2026 the ipvsctl authors
License: none-stated
 The repository states no licence yet; until it does, this package grants none.
COPYRIGHT
{
	echo "ipvsctl ($version) unstable; urgency=medium"
	echo
	echo "  * Built from commit $commit."
	echo
	echo " -- ipvsctl maintainers <ipvsctl@example.org>  $(date -u -R -d "@$SOURCE_DATE_EPOCH")"
} | gzip -9n >"$stage/changelog.gz"

mkdir -p "$out"
deb=$out/ipvsctl_${version}_amd64.deb
(cd scripts/package && go run . -version "$version" -binary "$stage/ipvsctl" -stage "$stage" \
	-units "$stage/units" -out "$deb")
echo "$deb"
