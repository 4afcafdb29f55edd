#!/usr/bin/env bash
# Health-check benchmark (in the VM test bed, one run): N real servers checked by tcp every 1 s for 30 s, the CPU
# seconds (utime+stime from /proc/PID/stat) and RSS of `ipvsctl serve` beside keepalived's TCP_CHECK on the same
# targets. The targets are addresses of one namespace answered by one listener (scripts/bench/sink), bounded in
# time; each contender gets a fresh director namespace and builds the table itself.
# Usage: scripts/bench-health.sh [SIZE ...]   (default: 1000 10000)
# SIZE is N, one service of N real servers, or SxR, shared probes: S services (VIPs 198.18.1.1 on) each over the
# same R real servers with the same tcp check, so that ipvsctl sends R probes a round that answer for all S x R
# pairs, and keepalived, which checks each real server of each virtual_server on its own, S x R. For SxR it also
# prints the probes each sent a second (the SYNs counted at the real servers) and the CPU per pair answered.
# `scripts/bench-health.sh 1000x10` is issue 28's: 1,000 services x the same 10 real servers.
# Each SIZE runs twice: BENCH_HEALTH_RX=remote (the real servers' TCP stack on the other CPU, as on a network) and
# inline (a veth runs it inside the checker's own sends); BENCH_HEALTH_RX=remote or =inline runs one of them.
# BENCH_HEALTH_SECONDS sets the 30 s; BENCH_HEALTH_GOMAXPROCS (remote only) ipvsctl's GOMAXPROCS: 2 by default,
# what the Go runtime takes unpinned on this machine, or `go`: unset, as a unit leaves it (Go alone would take 1 on
# the one CPU it is pinned to; `serve` takes 2 where Go would take 1).
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
out=$(mktemp -d /tmp/ipvsctl-bench-health.XXXXXX)
trap 'rm -rf "$out"' EXIT
cd "$root"
sizes=${*:-1000 10000}
for size in $sizes; do # bounded: at most 20,000 real servers, or service x real server pairs
	if ! [[ $size =~ ^([1-9][0-9]*)(x([1-9][0-9]*))?$ ]] || ((${BASH_REMATCH[1]} * ${BASH_REMATCH[3]:-1} > 20000)); then
		echo "bench-health: $size: want N or SxR, at most 20000 real servers or pairs" >&2
		exit 2
	fi
done
go build -o "$out/ipvsctl" ./cmd/ipvsctl
go build -o "$out/sink" ./scripts/bench/sink
export IPVSCTL_VM_ENV="${IPVSCTL_VM_ENV:-} BENCH_HEALTH_RX BENCH_HEALTH_SECONDS BENCH_HEALTH_GOMAXPROCS"
"$root/scripts/vm/run.sh" --timeout 3000 -- "$root/scripts/bench/health-guest.sh" "$out" $sizes
