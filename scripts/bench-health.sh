#!/usr/bin/env bash
# Health-check benchmark (in the VM test bed, one run): N real servers checked by tcp every 1 s for 30 s, the CPU
# seconds (utime+stime from /proc/PID/stat) and RSS of `ipvsctl serve` beside keepalived's TCP_CHECK on the same
# targets. The targets are addresses of one namespace answered by one listener (scripts/bench/sink), bounded in
# time; each contender gets a fresh director namespace and builds the table itself.
# Usage: scripts/bench-health.sh [N ...]   (default: 1000 10000)
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
out=$(mktemp -d /tmp/ipvsctl-bench-health.XXXXXX)
trap 'rm -rf "$out"' EXIT
cd "$root"
go build -o "$out/ipvsctl" ./cmd/ipvsctl
go build -o "$out/sink" ./scripts/bench/sink
sizes=${*:-1000 10000}
"$root/scripts/vm/run.sh" --timeout 1500 -- "$root/scripts/bench/health-guest.sh" "$out" $sizes
