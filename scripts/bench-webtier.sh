#!/usr/bin/env bash
# Web-tier benchmark (natively, as root, one run): what `ipvsctl realserver tune`'s advice buys nginx and HAProxy
# on this machine. Debian's default configuration against the advisor's, for two setups:
#   nginx    one nginx (Debian's nginx.conf and default site, its index page), wrk from a client namespace;
#   haproxy  HAProxy (Debian's haproxy.cfg plus a frontend and a backend) in front of two such nginx.
# The tuned configuration is not written by hand: the advisor's own Go code (arpguard/webconf, built at run time
# from a file in a temporary folder) reads the default configuration (`nginx -T`, haproxy.cfg) with this
# machine's CPUs, open-files limit and somaxconn, and each finding it marks "change" or "far" is applied: the
# drop-in it would push (ipvsctl-tune.conf) and the edits its advice names (worker_connections, worker_rlimit_nofile,
# multi_accept, listen backlog= and reuseport, access_log buffer=, HAProxy's maxconn). The real servers' sysctls
# (arpguard/tcptune.go's recommended values) are set in the tuned rounds' namespaces where a namespace takes them.
# A finding with no edit here is printed as not applied.
#
# Namespaces wt<PID>-cli, -lb, -rs1, -rs2 joined by veth pairs, addresses from 198.18.0.0/15 only; nginx and
# HAProxy run with their own -c/-f configuration, pid and log files under a temporary folder (never the system
# services). Rounds are taken in turns, default then tuned, setup by setup, ROUNDS times; each round is one
# bounded wrk run (`wrk -t2 -cCONNS -dSECONDSs --latency`, under `timeout`). It prints every round's line, then
# per setup the median and min-max of requests/s and of p99 latency, the ratio tuned/default of the medians, and
# says plainly when the ranges overlap: "tuning bought nothing measurable here"; then the paired ratios (each tuned
# round over the default round just before it), which the machine's drift between rounds disturbs least.
#
# Usage: scripts/bench-webtier.sh [-r ROUNDS] [-d SECONDS] [-c CONNS] [-s SETUPS]
#   -r ROUNDS   rounds per configuration and setup (BENCH_WEBTIER_ROUNDS, default 5, at most 20)
#   -d SECONDS  length of one wrk run (BENCH_WEBTIER_SECONDS, default 10, at most 60)
#   -c CONNS    wrk's connections (BENCH_WEBTIER_CONNS, default 64, at most 1024)
#   -s SETUPS   "nginx haproxy" (BENCH_WEBTIER_SETUPS, default both)
# On a shared machine run it as `nice -n 19 scripts/bench-webtier.sh`: every process it starts inherits it.
# Needs: root, ip, nginx, haproxy, wrk, go. Not part of scripts/test.sh.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
die() {
	echo "bench-webtier: $*" >&2
	exit 1
}
rounds=${BENCH_WEBTIER_ROUNDS:-5} secs=${BENCH_WEBTIER_SECONDS:-10} conns=${BENCH_WEBTIER_CONNS:-64}
setups=${BENCH_WEBTIER_SETUPS:-nginx haproxy}
while getopts r:d:c:s:h opt; do
	case $opt in
	r) rounds=$OPTARG ;;
	d) secs=$OPTARG ;;
	c) conns=$OPTARG ;;
	s) setups=$OPTARG ;;
	h) sed -n '2,/^set -euo/{/^set -euo/d;s/^# \{0,1\}//;p}' "$0"; exit 0 ;;
	*) die "usage: scripts/bench-webtier.sh [-r ROUNDS] [-d SECONDS] [-c CONNS] [-s SETUPS]" ;;
	esac
done
[[ $rounds =~ ^[1-9][0-9]*$ ]] && [ "$rounds" -le 20 ] || die "ROUNDS must be 1..20, got '$rounds'"
[[ $secs =~ ^[1-9][0-9]*$ ]] && [ "$secs" -le 60 ] || die "SECONDS must be 1..60, got '$secs'"
[[ $conns =~ ^[1-9][0-9]*$ ]] && [ "$conns" -le 1024 ] || die "CONNS must be 1..1024, got '$conns'"
for s in $setups; do [[ $s == nginx || $s == haproxy ]] || die "unknown setup '$s' (nginx, haproxy)"; done
[ "$(id -u)" = 0 ] || die "needs root (network namespaces)"
for t in ip nginx haproxy wrk go timeout; do command -v "$t" >/dev/null || die "needs $t"; done

ns=wt$$
cli=$ns-cli lb=$ns-lb rs1=$ns-rs1 rs2=$ns-rs2
out=$(mktemp -d /tmp/ipvsctl-bench-webtier.XXXXXX)
advdir=$(mktemp -d "$root/.bench-webtier.XXXXXX") # inside the module so the helper may import arpguard/webconf
stop_all() {
	local p
	for p in "$out"/run/*.pid; do
		[ -s "$p" ] || continue
		kill "$(cat "$p")" 2>/dev/null || true
	done
	sleep 0.3
}
cleanup() {
	stop_all
	local n
	for n in "$cli" "$lb" "$rs1" "$rs2"; do ip netns del "$n" 2>/dev/null || true; done
	rm -rf "$out" "$advdir"
}
trap cleanup EXIT
trap 'exit 130' INT TERM
chmod 755 "$out" # nginx's workers run as www-data and read the pages below it
mkdir -p "$out/run"

# --- the advisor, built from arpguard/webconf --------------------------------------------------------------------
cat >"$advdir/main.go" <<'EOF'
// The advisor's findings for one configuration, one a line: setting, status, kind, value, recommended, where.
package main

import (
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"

	"github.com/ipvsctl/ipvsctl/arpguard/webconf"
	"github.com/ipvsctl/ipvsctl/ipvsmgr/tune"
)

func main() {
	kind, main := os.Args[1], os.Args[2]
	cpus, _ := strconv.Atoi(os.Args[3])
	nofile, _ := strconv.ParseInt(os.Args[4], 10, 64)
	somax, _ := strconv.Atoi(os.Args[5])
	h := webconf.Host{CPUs: cpus, NoFile: nofile, Somaxconn: somax}
	in, err := io.ReadAll(os.Stdin)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	var fs []tune.Finding
	switch kind {
	case "nginx":
		files, err := webconf.SplitNginxDump(string(in))
		if err == nil {
			var ds []*webconf.Directive
			if ds, err = webconf.ParseNginx(files); err == nil {
				fs = webconf.NginxFindings(ds, main, h)
			}
		}
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(1)
		}
	case "haproxy":
		fs = webconf.HAProxyFindings(webconf.ParseHAProxy([]webconf.File{{Path: main, Text: string(in)}}), main, h)
	}
	clean := func(s string) string { // a field of its own for bash's read: no tab, never empty
		if s == "" {
			return "-"
		}
		return strings.NewReplacer("\t", " ", "\n", " ").Replace(s)
	}
	for _, f := range fs {
		fmt.Printf("%s\t%s\t%s\t%s\t%s\t%s\n", clean(f.Setting), f.Status, f.Kind, clean(f.Value), clean(f.Recommended), clean(f.Where))
	}
}
EOF
echo "bench-webtier: building the advisor (arpguard/webconf)"
(cd "$root" && go build -o "$out/advice" "./$(basename "$advdir")") || die "build the advisor"

# --- namespaces and veths ----------------------------------------------------------------------------------------
for n in "$cli" "$lb" "$rs1" "$rs2"; do
	ip netns add "$n"
	ip -n "$n" link set lo up
done
# link NS1 ADDR1 NS2 ADDR2: a veth pair between two namespaces, a /24 of 198.18.0.0/15 on it.
link() {
	local a=$ns-$RANDOM$RANDOM b=$ns-$RANDOM$RANDOM
	ip link add "${a:0:15}" type veth peer name "${b:0:15}"
	ip link set "${a:0:15}" netns "$1"
	ip link set "${b:0:15}" netns "$3"
	ip -n "$1" addr add "$2/24" dev "${a:0:15}"
	ip -n "$3" addr add "$4/24" dev "${b:0:15}"
	ip -n "$1" link set "${a:0:15}" up
	ip -n "$3" link set "${b:0:15}" up
}
link "$cli" 198.18.31.1 "$rs1" 198.18.31.2 # the nginx setup: the client straight to one nginx
link "$cli" 198.18.32.1 "$lb" 198.18.32.2  # the haproxy setup: the client to HAProxy...
link "$lb" 198.18.33.1 "$rs1" 198.18.33.2  # ...and HAProxy to the two nginx
link "$lb" 198.18.34.1 "$rs2" 198.18.34.2

# --- the real servers' sysctls (arpguard/tcptune.go's recommended values), per namespace --------------------------
sysctls="net.core.somaxconn=4096 net.ipv4.tcp_max_syn_backlog=8192 net.ipv4.ip_local_port_range=10000,65000
net.ipv4.tcp_max_tw_buckets=262144 net.ipv4.tcp_rmem=4096,131072,16777216 net.ipv4.tcp_wmem=4096,16384,16777216
net.core.rmem_max=16777216 net.core.wmem_max=16777216 net.core.netdev_max_backlog=16384"
declare -A sys_default
sys_taken="" sys_not=""
for kv in $sysctls; do
	k=${kv%%=*} t=${kv#*=}
	t=${t//,/ }
	# taken: the tuned value reads back in a namespace (net.core.rmem_max, for one, is the host's here: writing it in
	# a namespace fails or is ignored)
	if v=$(ip netns exec "$rs1" sysctl -n "$k" 2>/dev/null) && ip netns exec "$rs1" sysctl -qw "$k=$t" 2>/dev/null &&
		[ "$(ip netns exec "$rs1" sysctl -n "$k" | tr -s '\t ' '  ')" = "$t" ]; then
		ip netns exec "$rs1" sysctl -qw "$k=$v"
		sys_default[$k]=$(tr -s '\t ' ',,' <<<"$v")
		sys_taken+=" $kv"
	else
		sys_not+=" $k"
	fi
done
# sysctl_set default|tuned: each server namespace's sysctls as the round wants them.
sysctl_set() {
	local n kv k v
	for n in "$lb" "$rs1" "$rs2"; do
		for kv in $sys_taken; do
			k=${kv%%=*}
			v=${kv#*=}
			[ "$1" = tuned ] || v=${sys_default[$k]}
			ip netns exec "$n" sysctl -qw "$k=${v//,/ }"
		done
	done
}
echo "bench-webtier: sysctls set in the tuned rounds' server namespaces (lb, rs1, rs2):$sys_taken"
echo "bench-webtier: sysctls a namespace does not take here, left as they are:${sys_not:- none}"

# --- Debian's default configurations, in the temporary folder ----------------------------------------------------
# nginx_default DIR: Debian's nginx.conf and default site with their paths moved under DIR.
nginx_default() {
	local d=$1
	mkdir -p "$d/conf.d" "$d/sites-enabled" "$d/www"
	sed -e "s#^pid .*#pid $d/nginx.pid;#" \
		-e "s#/var/log/nginx/#$d/#g" \
		-e "s#include /etc/nginx/conf.d/#include $d/conf.d/#" \
		-e "s#include /etc/nginx/sites-enabled/#include $d/sites-enabled/#" /etc/nginx/nginx.conf >"$d/nginx.conf"
	sed -e "s#root /var/www/html;#root $d/www;#" /etc/nginx/sites-available/default >"$d/sites-enabled/default"
	cp /var/www/html/index.nginx-debian.html "$d/www/"
	chmod -R a+rX "$d"
}
# haproxy_default FILE: Debian's haproxy.cfg (its syslog lines dropped, not to flood the machine's journal; the
# stats socket under the temporary folder) with a frontend for the client and a backend of the two nginx.
haproxy_default() {
	sed -e '/^[[:space:]]*log \/dev\/log/d' -e "s#stats socket /run/haproxy/admin.sock#stats socket $(dirname "$1")/admin.sock#" \
		/etc/haproxy/haproxy.cfg >"$1"
	cat >>"$1" <<'EOF'

frontend web
	bind 198.18.32.2:80
	default_backend nginx

backend nginx
	server rs1 198.18.33.2:80
	server rs2 198.18.34.2:80
EOF
}
cpus=$(nproc)
nofile=$(ulimit -n)
for c in default tuned; do
	nginx_default "$out/$c/nginx"
	mkdir -p "$out/$c/haproxy"
	haproxy_default "$out/$c/haproxy/haproxy.cfg"
done
somax=$(ip netns exec "$rs1" sysctl -n net.core.somaxconn)

# --- the advisor on the default configurations, and its findings applied to the tuned copies ---------------------
nginx -q -t -c "$out/default/nginx/nginx.conf" || die "Debian's nginx.conf, moved, does not pass nginx -t"
nginx -T -c "$out/default/nginx/nginx.conf" 2>/dev/null | "$out/advice" nginx "$out/default/nginx/nginx.conf" "$cpus" "$nofile" "$somax" >"$out/advice-nginx.tsv"
"$out/advice" haproxy "$out/default/haproxy/haproxy.cfg" "$cpus" "$nofile" "$somax" <"$out/default/haproxy/haproxy.cfg" >"$out/advice-haproxy.tsv"
tn=$out/tuned/nginx
wc_new=4096
applied=()
skipped=()
while IFS=$'\t' read -r setting status kind value rec where; do
	[[ $status == change || $status == far ]] || continue
	case $kind:$setting in
	nginx-dropin:*) echo "$value" >>"$tn/conf.d/ipvsctl-tune.conf" ;;
	*"nginx worker_processes") sed -i 's/^worker_processes .*/worker_processes auto;/' "$tn/nginx.conf" && rec="worker_processes auto" ;;
	*"nginx worker_connections") sed -i "s/worker_connections [0-9]*;/worker_connections $wc_new;/" "$tn/nginx.conf" && rec="worker_connections $wc_new" ;;
	*"nginx worker_rlimit_nofile") sed -i "/^worker_processes /a worker_rlimit_nofile $((2 * wc_new));" "$tn/nginx.conf" && rec="worker_rlimit_nofile $((2 * wc_new))" ;;
	*"nginx multi_accept") sed -i -e '/multi_accept/d' -e "s/worker_connections .*;/&\n\tmulti_accept on;/" "$tn/nginx.conf" && rec="multi_accept on" ;;
	*"nginx listen "*" backlog") # one finding per address; the edit covers both listen lines at once
		grep -q backlog= "$tn/sites-enabled/default" || sed -i "/^[[:space:]]*listen /s/;\$/ backlog=4096;/" "$tn/sites-enabled/default"
		rec="listen ... backlog=4096"
		;;
	*"nginx listen "*" reuseport")
		grep -q reuseport "$tn/sites-enabled/default" || sed -i "/^[[:space:]]*listen /s/;\$/ reuseport;/" "$tn/sites-enabled/default"
		rec="listen ... reuseport"
		;;
	*"nginx access_log"*)
		sed -i "s#^\([[:space:]]*access_log $tn/access.log\);#\1 combined buffer=64k flush=1s;#" "$tn/nginx.conf"
		setting="nginx access_log" rec="access_log ... combined buffer=64k flush=1s"
		;;
	*"haproxy maxconn") # "set, with the open-files limit above 2 x maxconn": HAProxy raises its own limit to fit, up to the hard one
		hmc=$((($(ulimit -Hn) - 1000) / 2))
		((hmc <= 100000)) || hmc=100000
		sed -i "0,/^global/s//global\n\tmaxconn $hmc/" "$out/tuned/haproxy/haproxy.cfg"
		rec="maxconn $hmc"
		;;
	*) skipped+=("$setting: $rec ($status)"); continue ;;
	esac
	[ "$value" != - ] || value=""
	applied+=("$setting -> ${value:-$rec}")
done < <(cat "$out/advice-nginx.tsv" "$out/advice-haproxy.tsv")
echo "bench-webtier: the advisor's findings on Debian's default configuration (status change/far), applied to 'tuned':"
printf '  applied  %s\n' "${applied[@]}"
[ ${#skipped[@]} = 0 ] || printf '  not applied (no edit for it here)  %s\n' "${skipped[@]}"
echo "bench-webtier: the advisor's other findings (ok/info) left as they are:"
awk -F'\t' '$2 != "change" && $2 != "far" {printf "  %s  %s (%s)\n", $1, $2, $5}' "$out/advice-nginx.tsv" "$out/advice-haproxy.tsv"
for c in default tuned; do
	nginx -q -t -c "$out/$c/nginx/nginx.conf" || die "$c nginx.conf does not pass nginx -t"
	haproxy -q -c -f "$out/$c/haproxy/haproxy.cfg" || die "$c haproxy.cfg does not pass haproxy -c"
done
for f in nginx/nginx.conf nginx/sites-enabled/default nginx/conf.d/ipvsctl-tune.conf haproxy/haproxy.cfg; do
	echo "bench-webtier: tuned $f against the default (paths shown as DIR/):"
	diff <(sed "s#$out/default/#DIR/#g" "$out/default/$f" 2>/dev/null) <(sed "s#$out/tuned/#DIR/#g" "$out/tuned/$f" 2>/dev/null) | sed 's/^/  /' || true
done

# --- rounds --------------------------------------------------------------------------------------------------------
# wait_port NS ADDR: until something listens on ADDR:80 in NS (at most 5 s).
wait_port() {
	local i
	for i in $(seq 50); do
		ip netns exec "$1" bash -c "exec 3<>/dev/tcp/$2/80" 2>/dev/null && return 0
		sleep 0.1
	done
	die "nothing answers on $2:80 in $1"
}
start() { # start SETUP CONFIG
	sysctl_set "$2"
	local c=$out/$2
	case $1 in
	nginx)
		ip netns exec "$rs1" nginx -c "$c/nginx/nginx.conf" -g "pid $out/run/rs1.pid;"
		wait_port "$cli" 198.18.31.2
		;;
	haproxy)
		ip netns exec "$rs1" nginx -c "$c/nginx/nginx.conf" -g "pid $out/run/rs1.pid;"
		ip netns exec "$rs2" nginx -c "$c/nginx/nginx.conf" -g "pid $out/run/rs2.pid;"
		ip netns exec "$lb" haproxy -q -D -f "$c/haproxy/haproxy.cfg" -p "$out/run/lb.pid"
		wait_port "$lb" 198.18.33.2
		wait_port "$lb" 198.18.34.2
		wait_port "$cli" 198.18.32.2
		;;
	esac
}
# the nginx of both rounds share pid file names; nginx.conf's own pid line is overridden by -g, so drop it
for c in default tuned; do sed -i '/^pid /d' "$out/$c/nginx/nginx.conf"; done
stop() {
	stop_all
	local p i
	for i in $(seq 50); do # until the old processes have let go of port 80
		p=0
		for f in "$out"/run/*.pid; do [ -s "$f" ] && kill -0 "$(cat "$f")" 2>/dev/null && p=1; done
		[ $p = 0 ] && break
		sleep 0.1
	done
	rm -f "$out"/run/*.pid
}
# ms VALUE: wrk's latency (123.45us, 1.23ms, 1.02s) in milliseconds.
ms() { awk -v v="$1" 'BEGIN { x = v + 0; if (v ~ /us$/) x /= 1000; else if (v ~ /ms$/) x = x; else if (v ~ /s$/) x *= 1000; printf "%.3f", x }'; }
results=$out/results
: >"$results"
echo "bench-webtier: $rounds round(s) of wrk -t2 -c$conns -d${secs}s per setup and configuration, in turns; $cpus CPUs, shared by client, proxy and servers"
for r in $(seq "$rounds"); do
	for s in $setups; do
		case $s in nginx) url=http://198.18.31.2/ ;; haproxy) url=http://198.18.32.2/ ;; esac
		for c in default tuned; do
			start "$s" "$c"
			if ! ip netns exec "$cli" timeout $((secs + 20)) wrk -t2 -c"$conns" -d"${secs}s" --latency "$url" >"$out/wrk.txt" 2>&1; then
				cat "$out/wrk.txt" >&2
				die "wrk failed ($s $c round $r)"
			fi
			stop
			rps=$(awk '/^Requests\/sec:/ {print $2}' "$out/wrk.txt")
			p99=$(ms "$(awk '$1 == "99%" {print $2}' "$out/wrk.txt")")
			errs=$(awk '/Non-2xx|Socket errors/ {$1 = $1; printf "%s; ", $0}' "$out/wrk.txt")
			printf 'WEBTIER %s %s round=%d rps=%s p99_ms=%s%s\n' "$s" "$c" "$r" "$rps" "$p99" "${errs:+ errors: $errs}" | tee -a "$results"
		done
	done
done

# --- medians, spreads, ratios ---------------------------------------------------------------------------------------
echo
printf '%-8s %-8s %12s %23s %10s %21s\n' setup config "req/s median" "req/s min-max" "p99 median" "p99 min-max (ms)"
for s in $setups; do
	awk -v s="$s" '
function med(a, n,   i, j, t) { for (i = 2; i <= n; i++) for (j = i; j > 1 && a[j-1] > a[j]; j--) { t = a[j]; a[j] = a[j-1]; a[j-1] = t }
	return n % 2 ? a[(n+1)/2] : (a[n/2] + a[n/2+1]) / 2 }
$1 == "WEBTIER" && $2 == s {
	c = $3; sub(/^rps=/, "", $5); sub(/^p99_ms=/, "", $6)
	n[c]++; r[c, n[c]] = $5 + 0; p[c, n[c]] = $6 + 0
	if (!(c in rmin) || $5 + 0 < rmin[c]) rmin[c] = $5 + 0; if ($5 + 0 > rmax[c]) rmax[c] = $5 + 0
	if (!(c in pmin) || $6 + 0 < pmin[c]) pmin[c] = $6 + 0; if ($6 + 0 > pmax[c]) pmax[c] = $6 + 0
}
END {
	split("default tuned", cs, " ")
	for (k = 1; k <= 2; k++) { c = cs[k]; delete a; delete b
		for (i = 1; i <= n[c]; i++) { a[i] = r[c, i]; b[i] = p[c, i] }
		rm[c] = med(a, n[c]); pm[c] = med(b, n[c])
		printf "%-8s %-8s %12.0f %23s %10.2f %21s\n", s, c, rm[c], sprintf("%.0f-%.0f", rmin[c], rmax[c]), pm[c], sprintf("%.2f-%.2f", pmin[c], pmax[c])
	}
	printf "%-8s ratio tuned/default of the medians: requests/s %.2f, p99 %.2f\n", s, rm["tuned"] / rm["default"], pm["tuned"] / pm["default"]
	if (n["default"] < 3 || n["tuned"] < 3) { printf "%-8s %d round(s) each: too few to tell a difference from the noise (take 3 or more).\n", s, n["default"]; exit }
	if (rmin["tuned"] > rmax["default"]) v = sprintf("tuning bought %.0f%% more requests/s (every tuned round above every default one)", 100 * (rm["tuned"] / rm["default"] - 1))
	else if (rmax["tuned"] < rmin["default"]) v = sprintf("tuning cost %.0f%% of requests/s (every tuned round below every default one)", 100 * (1 - rm["tuned"] / rm["default"]))
	else v = "tuning bought nothing measurable here in requests/s (the ranges overlap)"
	if (pmax["tuned"] < pmin["default"]) w = "p99 lower in every tuned round"
	else if (pmin["tuned"] > pmax["default"]) w = "p99 higher in every tuned round"
	else w = "p99: the ranges overlap, nothing measurable"
	printf "%-8s %s; %s.\n", s, v, w
	# Each tuned round ran right after its default one: their ratio is what the drift of the machine between rounds
	# (other load easing or growing) disturbs least.
	m = n["default"] < n["tuned"] ? n["default"] : n["tuned"]; faster = 0; delete q
	for (i = 1; i <= m; i++) { q[i] = r["tuned", i] / r["default", i]; if (q[i] > 1) faster++
		if (i == 1 || q[i] < qmin) qmin = q[i]; if (i == 1 || q[i] > qmax) qmax = q[i] }
	printf "%-8s paired rounds (tuned / the default just before it): requests/s ratio median %.2f (%.2f-%.2f), tuned faster in %d of %d", s, med(q, m), qmin, qmax, faster, m
	if (faster == m || faster == 0) printf " (all %d one way: by chance 1 in %d)", m, 2 ^ (m - 1)
	printf ".\n"
}' "$results"
done
