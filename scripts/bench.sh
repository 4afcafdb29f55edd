#!/usr/bin/env bash
# Benchmark (in the VM test bed, one run): ipvsctl applying 1,000 services x 10 real servers from empty, one
# weight change and a no-op reconcile, each beside ipvsadm -R, ipvsadm -Sn and keepalived on the same table; then
# `ipvsctl serve` over that table: a weight change through the API and through the CLI's socket, and reads of
# /api/v1/status and /metrics under 20 concurrent clients, each beside its peer or floor.
# The contenders take turns, several times (BENCH_FULL_REPS, BENCH_EDIT_REPS); it prints the medians and ratios.
# First, natively (no VM, no root), start-up: `ipvsctl version` and a one-change `ipvsctl apply --no-apply`
# beside `ipvsadm --version`, with hyperfine; `--startup` runs only that.
# `--goals` also runs, in the same VM after the above, the health-check benchmark (scripts/bench-health.sh) at
# 1,000 and 10,000 real servers and 1,000 services x the same 10 (placement remote), and ends with every goal of
# issue 28 beside its target (the BENCH-GOAL lines), from this one run (about an hour on a 2-core machine).
# Usage: scripts/bench.sh [--startup | --goals] [SERVICES [SERVERS]]
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
out=$(mktemp -d /tmp/ipvsctl-bench.XXXXXX)
trap 'rm -rf "$out"' EXIT
cd "$root"
only_startup= goals=
case ${1:-} in
--startup) only_startup=1 && shift ;;
--goals) goals=1 && shift ;;
esac
go build -o "$out/ipvsctl" ./cmd/ipvsctl

# startup times ipvsctl's start-up beside ipvsadm's, natively, taking turns: BENCH_STARTUP_ROUNDS rounds (5) of
# hyperfine running each contender BENCH_STARTUP_RUNS times (20) in turn, so a slow spell of the shared machine
# falls on both; it prints the medians over all runs and their ratio. Here ip_vs is absent: `ipvsadm --version`
# then exits 2 after it fails to open IPVS (and to run modprobe), which is its whole start-up, and a one-change
# apply is stored only (--no-apply: no kernel to write), each run from the same one-service database.
startup() {
	if ! command -v hyperfine >/dev/null || ! command -v ipvsadm >/dev/null || ! command -v jq >/dev/null; then
		echo "BENCH start-up: skipped: needs hyperfine, ipvsadm and jq (apt-get install -y hyperfine ipvsadm jq)"
		return
	fi
	local d=$out/startup rounds=${BENCH_STARTUP_ROUNDS:-5} runs=${BENCH_STARTUP_RUNS:-20} i
	mkdir -p "$d"
	printf '{"services":[{"name":"web","address":"198.18.0.100","port":80,"servers":[{"address":"198.18.0.11","weight":%d}]}]}\n' 1 >"$d/before.json"
	printf '{"services":[{"name":"web","address":"198.18.0.100","port":80,"servers":[{"address":"198.18.0.11","weight":%d}]}]}\n' 2 >"$d/after.json"
	"$out/ipvsctl" --db "$d/base.db" apply --no-apply -f "$d/before.json" >/dev/null 2>&1
	printf '#!/bin/sh\nrm -f %s/run.db-wal %s/run.db-shm\ncp %s/base.db %s/run.db\n' "$d" "$d" "$d" "$d" >"$d/reset"
	chmod +x "$d/reset"
	"$d/reset"
	# Once each for its output: a contender that fails for another reason is not timed.
	"$out/ipvsctl" version >/dev/null
	"$out/ipvsctl" --db "$d/run.db" apply --no-apply -f "$d/after.json" 2>&1 | grep -q 'stored revision 2' || { echo "BENCH start-up: the one-change apply failed" >&2; return 1; }
	for ((i = 0; i < rounds; i++)); do
		hyperfine -N -i -w 3 -r "$runs" --export-json "$d/version.$i.json" \
			"$out/ipvsctl version" "ipvsadm --version" >/dev/null 2>&1
		hyperfine -N -i -w 3 -r "$runs" --prepare "$d/reset" --prepare "true" --export-json "$d/apply.$i.json" \
			"$out/ipvsctl --db $d/run.db apply --no-apply -f $d/after.json" "ipvsadm --version" >/dev/null 2>&1
	done
	# median NAME FILES...: the median of every run of the command whose line starts with NAME, in ms.
	median() {
		local name=$1
		shift
		jq -s --arg n "$name" '[.[].results[] | select(.command | startswith($n)) | .times[]] | sort |
			.[length / 2 | floor] * 1000' "$@"
	}
	local v a p q
	v=$(median "$out/ipvsctl version" "$d"/version.*.json)
	p=$(median "ipvsadm" "$d"/version.*.json)
	a=$(median "$out/ipvsctl --db" "$d"/apply.*.json)
	q=$(median "ipvsadm" "$d"/apply.*.json)
	awk -v v="$v" -v p="$p" -v a="$a" -v q="$q" -v n=$((rounds * runs)) 'BEGIN {
		printf "BENCH start-up: ipvsctl version: %.1f ms = %.2fx ipvsadm --version (%.1f ms), medians of %d runs each, natively; target <= 1x\n", v, v / p, p, n
		printf "BENCH start-up: one-change ipvsctl apply --no-apply: %.1f ms = %.2fx ipvsadm --version (%.1f ms), medians of %d runs each, natively; target <= 1x\n", a, a / q, q, n
		printf "BENCH-GOAL start-up, ipvsctl version vs ipvsadm --version (natively): %.2fx; target <= 1x: %s\n", v / p, (v <= p ? "met" : "NOT met")
		printf "BENCH-GOAL start-up, one-change apply vs ipvsadm --version (natively): %.2fx; target <= 1x: %s\n", a / q, (a <= q ? "met" : "NOT met")
	}'
}
startup | tee "$out/startup.log"
if [[ -n $only_startup ]]; then
	exit 0
fi
go build -o "$out/apiclient" ./scripts/bench/apiclient
go run ./scripts/bench/gen -out "$out" -services "${1:-1000}" -servers "${2:-10}"
# The repetition counts go into the guest (run.sh passes only the variables it is told of). 4 GB: twenty
# concurrent /metrics of 11,000 entries are each gathered whole in the daemon.
if [[ -z $goals ]]; then
	IPVSCTL_VM_ENV="BENCH_FULL_REPS BENCH_EDIT_REPS" "$root/scripts/vm/run.sh" --mem 4096 --timeout 3600 -- "$root/scripts/bench/guest.sh" "$out/ipvsctl" "$out"
	exit
fi
go build -o "$out/sink" ./scripts/bench/sink
BENCH_HEALTH_RX=remote IPVSCTL_VM_ENV="BENCH_FULL_REPS BENCH_EDIT_REPS BENCH_HEALTH_RX BENCH_HEALTH_SECONDS BENCH_HEALTH_GOMAXPROCS" "$root/scripts/vm/run.sh" --mem 4096 --timeout 7200 -- \
	sh -c '"$1" "$2" "$3" && "$4" "$3" 1000 10000 1000x10' sh "$root/scripts/bench/guest.sh" "$out/ipvsctl" "$out" "$root/scripts/bench/health-guest.sh" | tee "$out/vm.log"
echo "Every goal of this run, beside its target:"
grep -h '^BENCH-GOAL' "$out/startup.log" "$out/vm.log"
