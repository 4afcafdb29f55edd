#!/usr/bin/env bash
# The fault matrix (in the VM test bed, one boot): the TestFault* tests of scripts/vmtest, each breaking one thing
# under live traffic (long-lived connections and a stream of new requests through a DR and a NAT VIP), then a
# summary table of what each kept, lost and how long the repair took (the FAULTROW lines the tests print), and the
# figures they measured (BENCH lines). The matrix's tier-1 rows (a fake kernel, real sockets) run first, on the
# host. CI runs the same tests in tiers 1 and 3 (scripts/test.sh). The soak is scripts/soak.sh.
# Usage: scripts/faults.sh [go test -run regexp]   (default ^TestFault; the tier-1 rows run with the default only)
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
log=$(mktemp /tmp/ipvsctl-faults.XXXXXX)
trap 'rm -f "$log"' EXIT
status=0
if [ $# -eq 0 ]; then
	(cd "$root" && go test -count=1 -v -run '^(TestTransportErrorMidBatchIsRetriedNothingTwice|TestQuiescingEveryServerIsNoDrift|TestReplicationPeerMisbehavesFollowerKeepsLastGood)$' ./ipvsmgr/ ./server/...) 2>&1 |
		grep -E 'FAULTROW|^(--- FAIL|FAIL|ok)' | tee "$log" || status=$?
fi
"$root/scripts/vmtest.sh" "${1:-^TestFault}" 2>&1 | tee -a "$log" || status=$?
echo
echo "| fault | kept | lost | time to recover |"
echo "|---|---|---|---|"
grep -o 'FAULTROW | .*' "$log" | sed 's/^FAULTROW //' || true
echo
grep -o 'BENCH .*' "$log" | sed 's/^BENCH //' || true
grep -E '^(--- FAIL|FAIL|ok|PASS)' "$log" | grep -v '^PASS$' || true
exit "$status"
