#!/usr/bin/env bash
# Failover benchmark (in the VM test bed, one run): an ipvsctl pair and a keepalived pair (vrrp_version 3, the same
# VRID, priorities 200/100, interval and VIP; keepalived moves the VIP and the same LVS DR table is loaded on both of
# its directors with ipvsadm) on one bridge with a client and two DR real servers. The master's link is cut and its
# daemon SIGKILLed; the time is until the first HTTP request through the VIP is answered (a new connection every
# 10 ms, 200 ms to connect), by way of the backup. Advert intervals 1 s and 100 ms, the median of REPS runs each.
# IPVSCTL_BENCH_LOCKTIME=0 sets the client's ARP locktime (centiseconds; the kernel's default is 100): an ARP entry
# updated less than that ago ignores the new master's gratuitous ARP, for either pair.
# IPVSCTL_BENCH_INTERVALS=0.1 runs only the intervals listed (seconds, comma-separated; default 1,0.1).
# IPVSCTL_BENCH_TRACE=1 prints each run's trace: the packets on the new master's eth0 and the client's (tcpdump,
# the Debian package), the new master's daemon log, and both namespaces' counters, in ms after the kill (the
# captures cost CPU in the VM: traced runs are not the benchmark's figures).
# Usage: [IPVSCTL_BENCH_LOCKTIME=0] scripts/bench-failover.sh [REPS]   (default 3)
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
out=$(mktemp -d /tmp/ipvsctl-bench-failover.XXXXXX)
trap 'rm -rf "$out"' EXIT
cd "$root"
go build -o "$out/ipvsctl" ./cmd/ipvsctl
go test -c -tags vmtest -o "$out/vmtest.test" ./scripts/vmtest
reps=${1:-3}
cat >"$out/guest.sh" <<GUEST
#!/bin/sh
set -e
export IPVSCTL_BIN=$out/ipvsctl IPVSCTL_BENCH_FAILOVER=$reps IPVSCTL_BENCH_LOCKTIME=${IPVSCTL_BENCH_LOCKTIME:-} \\
	IPVSCTL_BENCH_INTERVALS=${IPVSCTL_BENCH_INTERVALS:-} IPVSCTL_BENCH_TRACE=${IPVSCTL_BENCH_TRACE:-}
cd $root/scripts/vmtest
keepalived --version 2>&1 | head -1
$out/vmtest.test -test.timeout 1200s -test.run '^TestBenchFailover\$'
GUEST
chmod +x "$out/guest.sh"
"$root/scripts/vm/run.sh" --timeout 1500 -- "$out/guest.sh"
