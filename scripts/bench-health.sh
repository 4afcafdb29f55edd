#!/usr/bin/env bash
# Health-check benchmark (in the VM test bed, one run): N real servers checked by tcp every 1 s for 30 s, the CPU
# seconds (utime+stime from /proc/PID/stat) and RSS of `ipvsctl serve` beside keepalived's TCP_CHECK on the same
# targets. The targets are addresses of one namespace answered by one listener (scripts/bench/sink), bounded in
# time; each contender gets a fresh director namespace and builds the table itself.
# Usage: scripts/bench-health.sh [N ...]   (default: 1000 10000)
# Each N runs twice: BENCH_HEALTH_RX=remote (the real servers' TCP stack on the other CPU, as on a network) and
# inline (a veth runs it inside the checker's own sends); BENCH_HEALTH_RX=remote or =inline runs one of them.
# BENCH_HEALTH_SECONDS sets the 30 s.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
out=$(mktemp -d /tmp/ipvsctl-bench-health.XXXXXX)
trap 'rm -rf "$out"' EXIT
cd "$root"
go build -o "$out/ipvsctl" ./cmd/ipvsctl
go build -o "$out/sink" ./scripts/bench/sink
sizes=${*:-1000 10000}
export IPVSCTL_VM_ENV="${IPVSCTL_VM_ENV:-} BENCH_HEALTH_RX BENCH_HEALTH_SECONDS"
"$root/scripts/vm/run.sh" --timeout 3000 -- "$root/scripts/bench/health-guest.sh" "$out" $sizes
