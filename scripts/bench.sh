#!/usr/bin/env bash
# Benchmark (in the VM test bed, one run): ipvsctl applying 1,000 services x 10 real servers from empty, one
# weight change and a no-op reconcile, each beside ipvsadm -R, ipvsadm -Sn and keepalived on the same table; then
# `ipvsctl serve` over that table: a weight change through the API and through the CLI's socket, and reads of
# /api/v1/status and /metrics under 20 concurrent clients, each beside its peer or floor.
# The contenders take turns, several times (BENCH_FULL_REPS, BENCH_EDIT_REPS); it prints the medians and ratios.
# Usage: scripts/bench.sh [SERVICES [SERVERS]]
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
out=$(mktemp -d /tmp/ipvsctl-bench.XXXXXX)
trap 'rm -rf "$out"' EXIT
cd "$root"
go build -o "$out/ipvsctl" ./cmd/ipvsctl
go build -o "$out/apiclient" ./scripts/bench/apiclient
go run ./scripts/bench/gen -out "$out" -services "${1:-1000}" -servers "${2:-10}"
# The repetition counts go into the guest (run.sh passes only the variables it is told of). 4 GB: twenty
# concurrent /metrics of 11,000 entries are each gathered whole in the daemon.
IPVSCTL_VM_ENV="BENCH_FULL_REPS BENCH_EDIT_REPS" "$root/scripts/vm/run.sh" --mem 4096 --timeout 3600 -- "$root/scripts/bench/guest.sh" "$out/ipvsctl" "$out"
