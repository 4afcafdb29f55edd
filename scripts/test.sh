#!/usr/bin/env bash
# Runs every test tier:
#   1. go test -race ./...   (no root needed: model, diff, fake kernel, netlink encoding, CLI, arpguard generators)
#   2. the same run as root also covers the host-kernel tests (namespaces, sysctls, sshd in a namespace)
#   3. scripts/vmtest.sh     (the real IPVS kernel in the VM test bed: real traffic, ipvsadm reading back),
#      scripts/soak.sh (5 minutes of edits, health flaps, failovers and restarts under traffic, in its own boot)
#      and the lab (scripts/lab.sh started, checked on 127.0.0.1:3636 through its API, stopped)
#   4. scripts/package/test.sh (the .deb: contents, control, lintian; with the VM tier, installed and restoring)
# Usage: scripts/test.sh [--no-vm]
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root"
# Under CI a skip for a missing environment is a failure (internal/testenv.Need).
if [ "${CI:-}" = true ]; then
	export IPVSCTL_STRICT_SKIPS=1
fi
# Each section's heading says how far in it starts, so a slow CI run shows where its time went.
section() { echo "== $* [${SECONDS}s in]"; }
section "tier 1+2: go test -race ./..."
go vet ./...
go vet -tags vmtest ./scripts/vmtest
go vet -tags labtest ./scripts/lab
(cd scripts/package && go vet .)
go test -race -count=1 ./...
section "OpenAPI: redocly lint docs/openapi.json (Redocly's recommended rules, redocly.yaml; .ci/run installs it in /tmp/redocly)"
redocly=${REDOCLY:-/tmp/redocly/node_modules/.bin/redocly}
"$redocly" lint docs/openapi.json
section "Prometheus: promtool check rules and test rules (docs/prometheus)"
promtool check rules docs/prometheus/alerts.yml
(cd docs/prometheus && promtool test rules alerts_test.yml)
# A count of executions, not a duration: Go 1.26's fuzzer can fail a target with a bare "context deadline
# exceeded" when a -fuzztime duration ends while a worker is busy (go.dev/issue/75804, fixed in Go 1.27).
fuzztime=${FUZZTIME:-100000x}
section "fuzz: each importer, the fast document decoder against encoding/json, the store's reverse deltas, the VRRP HMAC advert decoder, the panel's redirect paths, certificate fingerprints, pair CAs, $fuzztime each"
for target in FuzzImportIpvsadm FuzzImportJSON FuzzImportLVSCF FuzzImportKeepalived FuzzImportLdirectord; do
	go test -run "^$" -fuzz "^$target\$" -fuzztime "$fuzztime" -fuzzminimizetime 50x ./ipvsmgr/formats
done
go test -run "^$" -fuzz "^FuzzDecodeFast\$" -fuzztime "$fuzztime" -fuzzminimizetime 50x ./ipvsmgr
go test -run "^$" -fuzz "^FuzzReverseDelta\$" -fuzztime "$fuzztime" -fuzzminimizetime 50x ./server/store
go test -run "^$" -fuzz "^FuzzParseAuthAdvert\$" -fuzztime "$fuzztime" -fuzzminimizetime 50x ./ipvsmgr/vrrp
go test -run "^$" -fuzz "^FuzzLocalPath\$" -fuzztime "$fuzztime" -fuzzminimizetime 50x ./server/panel
go test -run "^$" -fuzz "^FuzzParseFingerprint\$" -fuzztime "$fuzztime" -fuzzminimizetime 50x ./server/trust
go test -run "^$" -fuzz "^FuzzParseCA\$" -fuzztime "$fuzztime" -fuzzminimizetime 50x ./server/trust
if [ "${1:-}" = "--no-vm" ]; then
	scripts/package/test.sh --no-vm
	exit 0
fi
section "tier 3: VM test bed (Debian kernel with IPVS)"
scripts/vm/setup.sh >/dev/null
scripts/vmtest.sh
section "soak: scripts/soak.sh --duration ${IPVSCTL_SOAK_DURATION:-5m}"
scripts/soak.sh --duration "${IPVSCTL_SOAK_DURATION:-5m}"
section "the lab: scripts/lab.sh on 127.0.0.1:${IPVSCTL_LAB_PORT:-3636}"
go test -tags labtest -count=1 -v -timeout 8m ./scripts/lab
section "the Debian package (scripts/package.sh): contents, lintian, installed in the VM"
scripts/package/test.sh
section "done"
