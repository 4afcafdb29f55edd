#!/usr/bin/env bash
# Benchmark (in the VM test bed, one run): ipvsctl applying 1,000 services x 10 real servers from empty, one
# weight change and a no-op reconcile, each beside ipvsadm -R, ipvsadm -Sn and keepalived on the same table.
# The contenders take turns, several times (BENCH_FULL_REPS, BENCH_EDIT_REPS); it prints the medians and ratios.
# Usage: scripts/bench.sh [SERVICES [SERVERS]]
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
out=$(mktemp -d /tmp/ipvsctl-bench.XXXXXX)
trap 'rm -rf "$out"' EXIT
cd "$root"
go build -o "$out/ipvsctl" ./cmd/ipvsctl
go run ./scripts/bench/gen -out "$out" -services "${1:-1000}" -servers "${2:-10}"
"$root/scripts/vm/run.sh" --timeout 1500 -- "$root/scripts/bench/guest.sh" "$out/ipvsctl" "$out"
