#!/usr/bin/env bash
# ECMP benchmark (in the VM test bed, one run): three ipvsctl directors announce a VIP over BGP to FRR 8.4, which
# spreads flows over them by layer-4 ECMP; DR to three real servers; 300 long-lived connections (a line every 3 s
# each). Per round a fresh bed: a steady window counts the BFD and BGP sessions that went down and the VM's longest
# scheduling stall; then one director is SIGKILLed and its link cut: the time until its route is gone at FRR, until
# a new connection is answered, and the share of long-lived connections kept, mh beside wlc, beside the theory.
# IPVSCTL_BENCH_ROUNDS=mh:0.1,wlc:0.1,mh:0.3,wlc:0.3,mh:hold,wlc:hold (the default) lists the rounds, SCHEDULER:BFD-SECONDS (x 3) or
# SCHEDULER:hold (no BFD, BGP hold time 9 s, as with BFD); IPVSCTL_BENCH_STEADY=30 the steady window in seconds.
# Usage: [IPVSCTL_BENCH_ROUNDS=...] [IPVSCTL_BENCH_STEADY=S] scripts/bench-ecmp.sh
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
out=$(mktemp -d /tmp/ipvsctl-bench-ecmp.XXXXXX)
trap 'rm -rf "$out"' EXIT
cd "$root"
go build -o "$out/ipvsctl" ./cmd/ipvsctl
go test -c -tags vmtest -o "$out/vmtest.test" ./scripts/vmtest
cat >"$out/guest.sh" <<GUEST
#!/bin/sh
set -e
export IPVSCTL_BIN=$out/ipvsctl IPVSCTL_BENCH_ECMP=1 IPVSCTL_BENCH_ROUNDS=${IPVSCTL_BENCH_ROUNDS:-} \\
	IPVSCTL_BENCH_STEADY=${IPVSCTL_BENCH_STEADY:-}
cd $root/scripts/vmtest
$out/vmtest.test -test.v -test.timeout 2400s -test.run '^TestBenchECMP\$'
GUEST
chmod +x "$out/guest.sh"
"$root/scripts/vm/run.sh" --timeout 2700 -- "$out/guest.sh"
