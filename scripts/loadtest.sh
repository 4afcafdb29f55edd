#!/usr/bin/env bash
# Load test of the director (in the VM test bed, one run): Debian's wrk in the client namespace through a DR and a
# NAT VIP (two real servers each, a new connection per request), on the kernel's defaults and again after
# `ipvsctl tune apply` sized for the rate just measured (conn_tab_bits with the ip_vs reload it needs, the
# net.ipv4.vs sysctls) with the real servers' TCP floors set. Prints requests/s, latency p50/p99, the VM's CPU and
# softirq share during each run (director, client and real servers share the VM's CPUs) and the director's
# connection table (entries, buckets). Bounded: SECONDS per run (default 10, at most 120), four runs.
# Usage: scripts/loadtest.sh [SECONDS]
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
out=$(mktemp -d /tmp/ipvsctl-loadtest.XXXXXX)
trap 'rm -rf "$out"' EXIT
cd "$root"
go build -o "$out/ipvsctl" ./cmd/ipvsctl
go test -c -tags vmtest -o "$out/vmtest.test" ./scripts/vmtest
secs=${1:-10}
cat >"$out/guest.sh" <<GUEST
#!/bin/sh
set -e
export IPVSCTL_BIN=$out/ipvsctl IPVSCTL_LOADTEST=$secs
cd $root/scripts/vmtest
wrk --version 2>&1 | head -1 || true
$out/vmtest.test -test.v -test.timeout 900s -test.run '^TestLoadTest\$'
GUEST
chmod +x "$out/guest.sh"
"$root/scripts/vm/run.sh" --timeout 1200 -- "$out/guest.sh"
