#!/usr/bin/env bash
# The fault matrix (in the VM test bed, one boot): the TestFault* tests of scripts/vmtest, each breaking one thing
# under live traffic (long-lived connections and a stream of new requests through a DR and a NAT VIP), then a
# summary table of what each kept, lost and how long the repair took (the FAULTROW lines the tests print), and the
# figures they measured (BENCH lines). CI runs the same tests in the VM tier (scripts/vmtest.sh).
# Usage: scripts/faults.sh [go test -run regexp]   (default ^TestFault)
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
log=$(mktemp /tmp/ipvsctl-faults.XXXXXX)
trap 'rm -f "$log"' EXIT
status=0
"$root/scripts/vmtest.sh" "${1:-^TestFault}" 2>&1 | tee "$log" || status=$?
echo
echo "| fault | kept | lost | time to recover |"
echo "|---|---|---|---|"
grep -o 'FAULTROW | .*' "$log" | sed 's/^FAULTROW //' || true
echo
grep -o 'BENCH .*' "$log" | sed 's/^BENCH //' || true
grep -E '^(--- FAIL|FAIL|ok|PASS)' "$log" | grep -v '^PASS$' || true
exit "$status"
