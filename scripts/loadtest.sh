#!/usr/bin/env bash
# Load test of the director (in the VM test bed, one run): Debian's wrk in the client namespace through a DR and a
# NAT VIP (two real servers each, a new connection per request), on the kernel's defaults and again after
# `ipvsctl tune apply` sized for the rate just measured (conn_tab_bits with the ip_vs reload it needs, the
# net.ipv4.vs sysctls) with the real servers' TCP floors set. Prints requests/s, latency p50/p99, the VM's CPU and
# softirq share during each run (director, client and real servers share the VM's CPUs) and the director's
# connection table (entries, buckets). Bounded: SECONDS per run (default 10, at most 120), four runs.
# With --svg FILE, the requests/s and p99 of the four runs are also drawn as a bar chart (the README's).
# Usage: scripts/loadtest.sh [--svg FILE] [SECONDS]
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
out=$(mktemp -d /tmp/ipvsctl-loadtest.XXXXXX)
trap 'rm -rf "$out"' EXIT
cd "$root"
go build -o "$out/ipvsctl" ./cmd/ipvsctl
go test -c -tags vmtest -o "$out/vmtest.test" ./scripts/vmtest
svg=""
if [ "${1:-}" = "--svg" ]; then svg=$2; shift 2; fi
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
"$root/scripts/vm/run.sh" --timeout 1200 -- "$out/guest.sh" | tee "$out/log"
[ -n "$svg" ] || exit 0
# LOADTEST <setting> <DR|NAT> <req/s> <p50> <p99> ...: two bar groups (req/s, p99 in ms), default and tuned side by side.
awk -v secs="$secs" '
function ms(v) { if (v ~ /ms$/) return v + 0; if (v ~ /us$/) return v / 1000; if (v ~ /s$/) return v * 1000; return v }
$1 == "LOADTEST" && ($2 == "default" || $2 == "tuned") && ($3 == "DR" || $3 == "NAT") {
	k = $2 " " $3; rps[k] = $4; p99[k] = ms($6); if ($4 > maxr) maxr = $4; if (ms($6) > maxp) maxp = ms($6)
}
END {
	w = 640; h = 300; print "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"" w "\" height=\"" h "\" font-family=\"sans-serif\" font-size=\"12\">"
	print "<rect width=\"100%\" height=\"100%\" fill=\"white\"/>"
	print "<text x=\"10\" y=\"18\" font-size=\"14\" font-weight=\"bold\">Load test through the director (wrk, " secs " s a run, a new connection per request)</text>"
	n = split("DR NAT", via, " "); split("default tuned", set, " "); col["default"] = "#9aa5b1"; col["tuned"] = "#2f6fdf"
	for (g = 0; g < 2; g++) {
		x0 = 40 + g * 300; base = 250; top = 66
		print "<text x=\"" x0 "\" y=\"" 40 "\">" (g == 0 ? "requests/s (higher is better)" : "p99 latency, ms (lower is better)") "</text>"
		print "<line x1=\"" x0 "\" y1=\"" base "\" x2=\"" x0 + 260 "\" y2=\"" base "\" stroke=\"black\"/>"
		for (i = 1; i <= 2; i++) for (j = 1; j <= 2; j++) {
			k = set[j] " " via[i]; v = (g == 0 ? rps[k] : p99[k]); m = (g == 0 ? maxr : maxp); if (m <= 0) m = 1
			bh = (base - top) * v / m; x = x0 + 10 + (i - 1) * 130 + (j - 1) * 55
			printf "<rect x=\"%d\" y=\"%.1f\" width=\"50\" height=\"%.1f\" fill=\"%s\"/>\n", x, base - bh, bh, col[set[j]]
			printf "<text x=\"%d\" y=\"%.1f\" text-anchor=\"middle\">%.0f</text>\n", x + 25, base - bh - 4, v
			if (j == 1) printf "<text x=\"%d\" y=\"%d\" text-anchor=\"middle\">%s</text>\n", x + 52, base + 16, via[i]
		}
	}
	print "<rect x=\"40\" y=\"278\" width=\"12\" height=\"12\" fill=\"#9aa5b1\"/><text x=\"56\" y=\"289\">kernel defaults</text>"
	print "<rect x=\"170\" y=\"278\" width=\"12\" height=\"12\" fill=\"#2f6fdf\"/><text x=\"186\" y=\"289\">after ipvsctl tune apply (and real-server floors)</text>"
	print "</svg>"
}' "$out/log" >"$svg"
echo "wrote $svg"
