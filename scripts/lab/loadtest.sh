# The lab's load test, sourced by scripts/lab/guest.sh once the lab is ready (IPVSCTL_LAB_LOADTEST=SECONDS, set by
# scripts/loadtest.sh --lab): Debian's wrk in the client namespace through the DR VIP (198.18.0.100, wlc over
# rs1-rs3) and the NAT VIP (198.18.0.110, rr over nat1, nat2), a new connection per request, SECONDS a run:
#   default  the kernel's defaults;
#   tuned    after `ipvsctl tune apply` sized for the rate just measured (--conn-rate, --lifetime 120), the ip_vs
#            reload its conn_tab_bits needs (serve stopped, ipvsadm -C, modprobe -r, modprobe, the sysctl.d file
#            loaded in the director, serve started again: it restores the table) and the real servers' TCP
#            floors (realserver tune's) set in their namespaces;
#   again    after `ipvsctl tune undo`, the same reload and the real servers' values put back: the defaults once
#            more, so that the spread between the two default runs shows how much is noise.
# Each run is marked through the daemon's API (ipvsctl loadtest start/end), so the panel's Tuning page draws the
# sampler's charts of it. Prints "LOADTEST ..." lines (a table; the same figures the runs are marked with), then
# "LOADTEST-DONE" (or "LOADTEST-FAILED why"). Uses guest.sh's in_ns, say, start_serve, stop_serve, $bin, $token.
# shellcheck shell=bash

lt_secs=$IPVSCTL_LAB_LOADTEST
[[ $lt_secs =~ ^[1-9][0-9]*$ ]] && [ "$lt_secs" -le 120 ] || lt_fail "IPVSCTL_LAB_LOADTEST must be 1..120 seconds, got '$lt_secs'"
lt_test="lab $(date -u '+%Y-%m-%d %H:%M')"
lt_tool="wrk -t2 -c64 -d${lt_secs}s --latency -H 'Connection: close'"
api() { in_ns director "$bin" --server http://127.0.0.1:3636 --token "$token" "$@"; }
# lt_fail: the load test cannot go on (scripts/loadtest.sh --lab watches for the line).
lt_fail() {
	echo "LOADTEST-FAILED $*"
	exit 1
}

# cpu_now: the VM's busy, softirq and total jiffies (/proc/stat's first line: user nice system idle iowait irq
# softirq steal ...). Director, client and real servers share the VM's CPUs.
cpu_now() { awk 'NR == 1 { t = 0; for (i = 2; i <= NF; i++) t += $i; print t - $5 - $6, $8, t }' /proc/stat; }

# lt_run PHASE LABEL VIA SERVICE URL: one wrk run, marked; prints its LOADTEST line and remembers its rate.
lt_run() {
	local phase=$1 label=$2 via=$3 svc=$4 url=$5 id out c0 c1 rps p50 p99 reqs errs entries buckets cpu soft
	id=$(api loadtest start --test "$lt_test" --phase "$phase" --service "$svc" --tool "$lt_tool ($label)")
	read -r -a c0 <<<"$(cpu_now)"
	out=$(in_ns client wrk -t2 -c64 -d"${lt_secs}s" --timeout 5s --latency -H 'Connection: close' "$url" 2>&1) ||
		lt_fail "wrk $url: $out"
	read -r -a c1 <<<"$(cpu_now)"
	rps=$(awk '/^Requests\/sec:/ { print $2 }' <<<"$out")
	p50=$(awk '$1 == "50%" { print $2 }' <<<"$out")
	p99=$(awk '$1 == "99%" { print $2 }' <<<"$out")
	reqs=$(awk '/ requests in / { print $1 }' <<<"$out")
	errs=$(awk '/Socket errors:|Non-2xx/ { sub(/^ +/, ""); printf "%s%s", sep, $0; sep = "; " }' <<<"$out")
	entries=$(($(in_ns director cat /proc/net/ip_vs_conn | wc -l) - 1))
	buckets=$(sed -n 's/.*(size=\([0-9]*\)).*/\1/p' /proc/net/ip_vs | head -1)
	read -r cpu soft <<<"$(awk -v b="$((c1[0] - c0[0]))" -v s="$((c1[1] - c0[1]))" -v t="$((c1[2] - c0[2]))" \
		'BEGIN { if (t <= 0) t = 1; printf "%.1f %.1f\n", 100 * b / t, 100 * s / t }')"
	[ -n "$rps" ] || lt_fail "wrk printed no Requests/sec: $out"
	api loadtest end "$id" --rps "$rps" --p50 "${p50:-0s}" --p99 "${p99:-0s}" --cpu "$cpu" --softirq "$soft" \
		--entries "$entries" --buckets "${buckets:-0}" --requests "${reqs:-0}" ${errs:+--errors "$errs"} >/dev/null
	printf 'LOADTEST %-8s %-4s %10s %9s %9s %6s%% %6s%% %8s %8s %s\n' "$label" "$via" "$rps" "$p50" "$p99" "$cpu" "$soft" \
		"$entries" "${buckets:-?}" "${errs:-}"
	lt_rate=$(awk -v a="${lt_rate:-0}" -v b="$rps" 'BEGIN { print (b > a ? b : a) }')
	sleep 5 # a gap in the charts between runs
}

# lt_pair PHASE LABEL: a run through each VIP.
lt_pair() {
	lt_run "$1" "$2" DR web http://198.18.0.100/
	lt_run "$1" "$2" NAT web-nat http://198.18.0.110/
}

# lt_reload: what conn_tab_bits needs to take effect; serve restores the stored state afterwards.
lt_reload() {
	local try mods
	stop_serve
	in_ns director ipvsadm -C
	for try in $(seq 120); do
		mods=$(awk '$1 ~ /^ip_vs_/ { print $1 }' /proc/modules)
		# shellcheck disable=SC2086 # one word a module
		modprobe -r $mods ip_vs 2>/dev/null && break
		[ "$try" -lt 120 ] || lt_fail "modprobe -r ip_vs did not succeed in 60 s: $(lsmod | grep ip_vs)"
		sleep 0.5
	done
	modprobe ip_vs
	[ ! -f /etc/sysctl.d/90-ipvsctl.conf ] || in_ns director sysctl -q -p /etc/sysctl.d/90-ipvsctl.conf
	start_serve
	say "loadtest: ip_vs reloaded: $(head -1 /proc/net/ip_vs)"
}

lt_rs_keys="net.core.somaxconn net.ipv4.tcp_max_syn_backlog net.ipv4.tcp_max_tw_buckets net.ipv4.ip_local_port_range"
declare -A lt_rs_before=()

say "loadtest: $lt_test, $lt_tool, through 198.18.0.100 (DR) and 198.18.0.110 (NAT)"
# The client reuses its ports fast: its own limits are not under test.
in_ns client sysctl -qw net.ipv4.ip_local_port_range="10000 65000" net.ipv4.tcp_tw_reuse=1
echo "LOADTEST $lt_tool, a new connection per request; CPU and softirq: the whole VM's (director, client and real servers share its 2 emulated CPUs)"
printf 'LOADTEST %-8s %-4s %10s %9s %9s %7s %7s %8s %8s %s\n' setting VIP req/s p50 p99 CPU softirq entries buckets errors
lt_pair default default

in_ns director "$bin" tune apply --conn-rate "$(printf '%.0f' "$lt_rate")" --lifetime 120 | sed 's/^/lab: loadtest: tune apply: /'
lt_reload
for ns in rs1 rs2 rs3 nat1 nat2; do
	for k in $lt_rs_keys; do lt_rs_before[$ns $k]=$(in_ns "$ns" sysctl -n "$k" | tr -s '\t ' '  '); done
	in_ns "$ns" sysctl -qw net.core.somaxconn=4096 net.ipv4.tcp_max_syn_backlog=8192 net.ipv4.tcp_max_tw_buckets=262144 \
		net.ipv4.ip_local_port_range="10000 65000"
done
lt_pair tuned tuned
in_ns director "$bin" tune check --conn-rate "$(printf '%.0f' "$lt_rate")" --lifetime 120 | tail -1 | sed 's/^/lab: loadtest: after: /'

in_ns director "$bin" tune undo | sed 's/^/lab: loadtest: tune undo: /'
lt_reload
for ns in rs1 rs2 rs3 nat1 nat2; do
	for k in $lt_rs_keys; do in_ns "$ns" sysctl -qw "$k=${lt_rs_before[$ns $k]}"; done
done
lt_pair default again
echo "LOADTEST-DONE $lt_test"
