#!/usr/bin/env bash
# The soak run (in the VM test bed, one boot): TestSoak of scripts/vmtest, a pair of ipvsctl directors under
# long-lived connections and new requests through the VIP while edits, health flaps, failovers and restarts of
# the backup's daemon take turns until the time is up; then every stored revision read back, each kernel
# compared with its desired state, the connections checked, and the master daemon's memory and file
# descriptors compared with their first sample. Prints the soak's FAULTROW line as a row of the fault table.
# CI runs the 5-minute version (scripts/test.sh).
# Usage: scripts/soak.sh [--duration 5m]   (N followed by s, m or h; a minute or more)
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
duration=5m
while [ $# -gt 0 ]; do
	case $1 in
	--duration) [ $# -ge 2 ] || { echo "soak.sh: --duration needs a value" >&2; exit 2; }; duration=$2; shift 2 ;;
	--duration=*) duration=${1#*=}; shift ;;
	-h | --help) sed -n '2,/^set -euo/{/^set -euo/d;s/^# \{0,1\}//;p}' "$0"; exit 0 ;;
	*) echo "soak.sh: unknown argument $1 (usage: scripts/soak.sh [--duration 5m])" >&2; exit 2 ;;
	esac
done
n=${duration%[smh]}
case $n in '' | *[!0-9]*) echo "soak.sh: --duration $duration: want N followed by s, m or h (5m)" >&2; exit 2 ;; esac
case $duration in
*s) secs=$n ;;
*m) secs=$((n * 60)) ;;
*h) secs=$((n * 3600)) ;;
*) echo "soak.sh: --duration $duration: want N followed by s, m or h (5m)" >&2; exit 2 ;;
esac
# The test's time, and its setup and checks beside it (a few minutes under emulation): the run's timeout.
log=$(mktemp /tmp/ipvsctl-soak.XXXXXX)
trap 'rm -f "$log"' EXIT
status=0
IPVSCTL_SOAK_DURATION=$duration IPVSCTL_VMTEST_TIMEOUT=$((secs + 600)) "$root/scripts/vmtest.sh" '^TestSoak$' 2>&1 | tee "$log" || status=$?
echo
grep -o 'FAULTROW | .*' "$log" | sed 's/^FAULTROW //' || true
grep -E '^(--- FAIL|--- SKIP|FAIL|ok)' "$log" || true
if grep -q -- '--- SKIP: TestSoak' "$log"; then
	echo "soak.sh: TestSoak skipped" >&2
	status=1
fi
exit "$status"
