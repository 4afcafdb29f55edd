#!/usr/bin/env bash
# Kernel tier: builds ipvsctl and the VM-tier test binary on the host, boots the VM test bed (Debian's stock
# kernel with IPVS, no network device) and runs the tests inside. The first test runs before anything loads
# ip_vs, to see the error a kernel without IPVS gives.
# Usage: scripts/vmtest.sh [go test -run regexp]
# Environment: IPVSCTL_VMTEST_TIMEOUT (seconds for the run's tests, default 1500), IPVSCTL_SOAK_DURATION
#   (passed in: TestSoak runs only with it, see scripts/soak.sh).
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
out=$(mktemp -d /tmp/ipvsctl-vmtest.XXXXXX)
trap 'rm -rf "$out"' EXIT
cd "$root"
go build -o "$out/ipvsctl" ./cmd/ipvsctl
go test -c -tags vmtest -o "$out/vmtest.test" ./scripts/vmtest
# arpguard's real-kernel tests, for the modes the host kernel lacks (ipip): run by TestRealserverTunNetnsApplyUndo.
go test -c -o "$out/arpguard.test" ./arpguard
run=${1:-.}
# Tests that need a kernel without ip_vs run first, in their own process; a -run pattern selects among them too
# (except the first, which always runs).
first='TestNoIPVSModuleIsAClearError'
if printf 'TestServeWithoutIPVSModule\n' | grep -Eq -- "$run"; then
	first="$first|TestServeWithoutIPVSModule"
fi
# Under CI a test that skips in the VM fails (internal/testenv).
strict=${IPVSCTL_STRICT_SKIPS:-}
if [ "${CI:-}" = true ]; then
	strict=1
fi
tests_timeout=${IPVSCTL_VMTEST_TIMEOUT:-1500}
cat >"$out/guest.sh" <<GUEST
#!/bin/sh
set -e
export IPVSCTL_BIN=$out/ipvsctl ARPGUARD_TEST_BIN=$out/arpguard.test
export IPVSCTL_STRICT_SKIPS=$strict IPVSCTL_SOAK_DURATION=${IPVSCTL_SOAK_DURATION:-}
cd $root/scripts/vmtest
$out/vmtest.test -test.v -test.timeout 900s -test.run '^($first)\$'
$out/vmtest.test -test.v -test.timeout ${tests_timeout}s -test.run '$run' -test.skip '^(TestNoIPVSModuleIsAClearError|TestServeWithoutIPVSModule)\$'
GUEST
chmod +x "$out/guest.sh"
"$root/scripts/vm/run.sh" --timeout $((tests_timeout + 600)) -- "$out/guest.sh"
