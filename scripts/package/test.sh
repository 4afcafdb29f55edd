#!/usr/bin/env bash
# Tests the Debian package: builds it (scripts/package.sh), checks its contents (paths, modes, owners), its
# control fields and postinst, the version the packaged binary prints, lintian (no errors), and then, in the
# VM test bed, installs it with dpkg into the guest's root, checks the installed units with systemd-analyze
# verify, and restores a table after `ipvsadm -C` with the command line of ipvsctl-restore.service's ExecStart.
# Usage: scripts/package/test.sh [--no-vm]          (as root, for lintian's install and the VM)
set -euo pipefail
root=$(cd "$(dirname "$0")/../.." && pwd)
cd "$root"
fail=0
pass() { echo "PASS  $*"; }
bad() {
	echo "FAIL  $*"
	fail=1
}

start=$SECONDS
out=$(mktemp -d "${TMPDIR:-/tmp}/ipvsctl-pkgtest.XXXXXX")
trap 'rm -rf "$out"' EXIT
deb=$(scripts/package.sh "$out" | tail -n1)
version=$(scripts/package/version.sh)
pass "scripts/package.sh built $(basename "$deb") in $((SECONDS - start)) s"
[ "$(basename "$deb")" = "ipvsctl_${version}_amd64.deb" ] || bad "file name $(basename "$deb"), want ipvsctl_${version}_amd64.deb"

want="drwx------ root/root ./var/lib/ipvsctl/
-rw-r--r-- root/root ./lib/systemd/system/ipvsctl-restore.service
-rw-r--r-- root/root ./lib/systemd/system/ipvsctl.service
-rw-r--r-- root/root ./usr/share/bash-completion/completions/ipvsctl
-rw-r--r-- root/root ./usr/share/doc/ipvsctl/changelog.gz
-rw-r--r-- root/root ./usr/share/doc/ipvsctl/copyright
-rw-r--r-- root/root ./usr/share/man/man8/ipvsctl.8.gz
-rw-r--r-- root/root ./usr/share/zsh/vendor-completions/_ipvsctl
-rwxr-xr-x root/root ./usr/sbin/ipvsctl"
got=$(dpkg-deb -c "$deb" | awk '$1 !~ /^d/ || $6 == "./var/lib/ipvsctl/" { print $1, $2, $6 }' | sort)
if [ "$got" = "$(sort <<<"$want")" ]; then pass "contents: $(wc -l <<<"$got") files and /var/lib/ipvsctl 0700"; else
	bad "contents differ:"$'\n'"$(diff <(sort <<<"$want") <(echo "$got"))"
fi

field() { dpkg-deb -f "$deb" "$1"; }
[ "$(field Package)" = ipvsctl ] && [ "$(field Version)" = "$version" ] && [ "$(field Architecture)" = amd64 ] &&
	pass "control: ipvsctl $version amd64" || bad "control: $(field Package) $(field Version) $(field Architecture)"
depends=$(field Depends)
[[ $depends =~ libc6\ \(\>=\ [0-9.]+\) ]] && [[ $depends == *iptables* ]] && [[ $depends == *kmod* ]] &&
	[ "$(field Recommends)" = ipvsadm ] && pass "Depends: $depends; Recommends: ipvsadm" ||
	bad "Depends: $depends; Recommends: $(field Recommends)"
dpkg-deb -e "$deb" "$out/control"
if grep -v '^[[:space:]]*#' "$out/control/postinst" | grep -Eq 'systemctl.*(start|enable|restart)|invoke-rc.d|deb-systemd-invoke'; then
	bad "postinst starts or enables something:"$'\n'"$(cat "$out/control/postinst")"
else pass "postinst starts and enables nothing (daemon-reload only)"; fi

dpkg-deb -x "$deb" "$out/root"
printed=$("$out/root/usr/sbin/ipvsctl" version)
[[ $printed == "ipvsctl $version (commit $(scripts/package/version.sh --commit), go"* ]] &&
	pass "the packaged binary: $printed" || bad "the packaged binary prints: $printed"
for unit in ipvsctl ipvsctl-restore; do
	grep -q '^ExecStart=/usr/sbin/ipvsctl ' "$out/root/lib/systemd/system/$unit.service" ||
		bad "$unit.service: ExecStart is not /usr/sbin/ipvsctl"
	score=$(systemd-analyze security --offline=yes "$out/root/lib/systemd/system/$unit.service" 2>&1 | sed -n 's/.*Overall exposure level for .*: //p')
	[ -n "$score" ] && echo "INFO  systemd-analyze security $unit.service: $score"
done

if command -v lintian >/dev/null; then
	lint=$(lintian "$deb" 2>&1 | grep -v '^running with root privileges' || true)
	if grep -q '^E:' <<<"$lint"; then bad "lintian errors:"$'\n'"$lint"; else
		pass "lintian: no errors${lint:+ (warnings: $(grep -c '^W:' <<<"$lint"))}"
		[ -z "$lint" ] || sed 's/^/      /' <<<"$lint"
	fi
else
	bad "lintian is not installed (apt-get install lintian)"
fi

if [ "${1:-}" != --no-vm ]; then
	vmstart=$SECONDS
	if vmout=$(scripts/vm/run.sh --timeout 600 -- scripts/package/guest.sh "$deb" 2>&1); then
		pass "VM: $(tail -n1 <<<"$vmout") ($((SECONDS - vmstart)) s)"
	else
		bad "VM: installing and restoring failed:"$'\n'"$vmout"
	fi
fi
[ "$fail" = 0 ] && echo "package tests passed in $((SECONDS - start)) s" || { echo "package tests failed"; exit 1; }
