#!/usr/bin/env bash
# Load test of the director. Two places to run it:
#
#   scripts/loadtest.sh [--svg FILE] [SECONDS]
#     in the VM test bed, one run (TestLoadTest): Debian's wrk in the client namespace through a DR and a NAT VIP
#     (two real servers each, Go HTTP servers, a new connection per request), on the kernel's defaults and again
#     after `ipvsctl tune apply` sized for the rate just measured (conn_tab_bits with the ip_vs reload it needs,
#     the net.ipv4.vs sysctls) with the real servers' TCP floors set. Four runs.
#
#   scripts/loadtest.sh --lab [--keep] [--port PORT] [--svg FILE] [SECONDS]
#     in the lab (scripts/lab.sh, as root; it binds 127.0.0.1:PORT, default 3636): wrk through the lab's DR VIP
#     (wlc over rs1-rs3, health-checked) and NAT VIP (rr over nat1, nat2) while `ipvsctl serve` runs, on the
#     defaults, tuned (the same apply, reload and floors), and on the defaults again after `tune undo` (the
#     spread between the two default runs is the noise). Six runs, each marked through the daemon's API
#     (ipvsctl loadtest start/end), so that the panel's Tuning page shows the same runs with the sampler's
#     charts of them. --keep leaves the lab running afterwards to look at that page (stop it with
#     scripts/lab.sh --stop); by default the lab is stopped.
#
# Each prints requests/s, latency p50/p99, the VM's CPU and softirq share during each run (director, client and
# real servers share the VM's two emulated CPUs) and the director's connection table (entries, buckets).
# Bounded: SECONDS per run (default 10, at most 120). With --svg FILE, the requests/s and p99 of the runs are
# also drawn as a bar chart (docs/performance.md's).
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
die() {
	echo "loadtest.sh: $*" >&2
	exit 1
}
lab=0 keep=0 port=3636 svg=""
while [ $# -gt 0 ]; do
	case $1 in
	--lab) lab=1; shift ;;
	--keep) keep=1; shift ;;
	--port) [ $# -ge 2 ] || die "--port needs a value"; port=$2; shift 2 ;;
	--svg) [ $# -ge 2 ] || die "--svg needs a file"; svg=$2; shift 2 ;;
	-h | --help) sed -n '2,/^set -euo/{/^set -euo/d;s/^# \{0,1\}//;p}' "$0"; exit 0 ;;
	-*) die "unknown option '$1' (usage: scripts/loadtest.sh [--lab [--keep] [--port PORT]] [--svg FILE] [SECONDS])" ;;
	*) break ;;
	esac
done
secs=${1:-10}
[[ $secs =~ ^[1-9][0-9]*$ ]] && [ "$secs" -le 120 ] || die "SECONDS must be 1..120, got '$secs'"
[ "$keep" = 0 ] || [ "$lab" = 1 ] || die "--keep is for --lab"
out=$(mktemp -d /tmp/ipvsctl-loadtest.XXXXXX)
trap 'rm -rf "$out"' EXIT
cd "$root"

# svg LOG: LOADTEST <setting> <DR|NAT> <req/s> <p50> <p99> ... lines as two bar groups (req/s, p99 in ms), the
# settings (default, tuned and, from the lab, again) side by side.
draw_svg() {
	awk -v secs="$secs" -v where="$1" '
function ms(v) { if (v ~ /ms$/) return v + 0; if (v ~ /us$/) return v / 1000; if (v ~ /s$/) return v * 1000; return v }
$1 == "LOADTEST" && ($2 == "default" || $2 == "tuned" || $2 == "again") && ($3 == "DR" || $3 == "NAT") {
	k = $2 " " $3; rps[k] = $4; p99[k] = ms($6); have[$2] = 1; if ($4 > maxr) maxr = $4; if (ms($6) > maxp) maxp = ms($6)
}
END {
	ns = 0; split("default tuned again", all, " ")
	for (i = 1; i <= 3; i++) if (have[all[i]]) set[++ns] = all[i]
	col["default"] = "#9aa5b1"; col["tuned"] = "#2f6fdf"; col["again"] = "#c7ced6"
	name["default"] = "defaults"; name["tuned"] = "tuned (tune apply, real-server floors)"; name["again"] = "defaults again (tune undo)"
	bw = (ns == 3 ? 36 : 50); w = 640; h = 300
	print "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"" w "\" height=\"" h "\" font-family=\"sans-serif\" font-size=\"12\">"
	print "<rect width=\"100%\" height=\"100%\" fill=\"white\"/>"
	print "<text x=\"10\" y=\"18\" font-size=\"14\" font-weight=\"bold\">Load test (" where "): wrk, " secs " s a run, a new connection per request</text>"
	split("DR NAT", via, " ")
	for (g = 0; g < 2; g++) {
		x0 = 40 + g * 300; base = 250; top = 66
		print "<text x=\"" x0 "\" y=\"" 40 "\">" (g == 0 ? "requests/s (higher is better)" : "p99 latency, ms (lower is better)") "</text>"
		print "<line x1=\"" x0 "\" y1=\"" base "\" x2=\"" x0 + 260 "\" y2=\"" base "\" stroke=\"black\"/>"
		for (i = 1; i <= 2; i++) for (j = 1; j <= ns; j++) {
			k = set[j] " " via[i]; v = (g == 0 ? rps[k] : p99[k]); m = (g == 0 ? maxr : maxp); if (m <= 0) m = 1
			bh = (base - top) * v / m; x = x0 + 10 + (i - 1) * 130 + (j - 1) * (bw + 4)
			printf "<rect x=\"%d\" y=\"%.1f\" width=\"%d\" height=\"%.1f\" fill=\"%s\"/>\n", x, base - bh, bw, bh, col[set[j]]
			printf "<text x=\"%d\" y=\"%.1f\" text-anchor=\"middle\">%.0f</text>\n", x + bw / 2, base - bh - 4, v
			if (j == 1) printf "<text x=\"%d\" y=\"%d\" text-anchor=\"middle\">%s</text>\n", x + ns * (bw + 4) / 2, base + 16, via[i]
		}
	}
	lx = 40
	for (j = 1; j <= ns; j++) {
		printf "<rect x=\"%d\" y=\"278\" width=\"12\" height=\"12\" fill=\"%s\"/><text x=\"%d\" y=\"289\">%s</text>\n", lx, col[set[j]], lx + 16, name[set[j]]
		lx += 16 + length(name[set[j]]) * 6.2 + 14
	}
	print "</svg>"
}' "$2"
}

if [ "$lab" = 0 ]; then
	go build -o "$out/ipvsctl" ./cmd/ipvsctl
	go test -c -tags vmtest -o "$out/vmtest.test" ./scripts/vmtest
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
	[ -z "$svg" ] || { draw_svg "the VM test bed" "$out/log" >"$svg" && echo "wrote $svg"; }
	exit 0
fi

# The lab: started here with its load test, its console followed until the test is done.
[ "$(id -u)" = 0 ] || die "--lab runs the lab, which must run as root"
lab_dir=${IPVSCTL_LAB_DIR:-/run/ipvsctl-lab}
IPVSCTL_LAB_LOADTEST=$secs "$root/scripts/lab.sh" --port "$port" >"$out/lab.log" 2>&1 &
lab_pid=$!
stop_lab() { "$root/scripts/lab.sh" --stop >/dev/null 2>&1 || true; wait "$lab_pid" 2>/dev/null || true; }
trap 'stop_lab; rm -rf "$out"' INT TERM
echo "loadtest.sh: starting the lab (scripts/lab.sh --port $port) with its load test, $secs s a run, six runs"
deadline=$((SECONDS + 420 + 6 * (secs + 90)))
while :; do
	kill -0 "$lab_pid" 2>/dev/null || { cat "$out/lab.log" >&2; die "the lab stopped before its load test was done"; }
	[ "$SECONDS" -lt "$deadline" ] || { stop_lab; die "the load test was not done in time; the lab's console was $lab_dir/console.log"; }
	# Until this lab is ready (its lab.env names it), a console there may be an older lab's.
	if ! grep -qs "^LAB_PID=$lab_pid\$" "$lab_dir/lab.env"; then
		sleep 2
		continue
	fi
	if grep -q '^LOADTEST-DONE' "$lab_dir/console.log"; then break; fi
	if grep -q '^LOADTEST-FAILED' "$lab_dir/console.log"; then
		grep '^lab: \|^LOADTEST' "$lab_dir/console.log" >&2
		stop_lab
		die "the lab's load test failed (above)"
	fi
	sleep 2
done
grep '^lab: loadtest' "$lab_dir/console.log" || true
grep '^LOADTEST' "$lab_dir/console.log" | tee "$out/log"
[ -z "$svg" ] || { draw_svg "the lab" "$out/log" >"$svg" && echo "wrote $svg"; }
if [ "$keep" = 1 ]; then
	trap - INT TERM
	cat "$lab_dir/lab.env" | sed -n 's/^LAB_\(URL\|PASSWORD\|TOKEN\)=/  \1 /p'
	echo "loadtest.sh: the lab is still up (the Tuning page shows the runs); stop it with scripts/lab.sh --stop"
	exit 0
fi
stop_lab
echo "loadtest.sh: the lab is stopped"
