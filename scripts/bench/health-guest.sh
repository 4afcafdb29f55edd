#!/usr/bin/env bash
# Runs inside the VM (scripts/bench-health.sh boots it). Usage: health-guest.sh DIR N...
set -euo pipefail
dir=$1
shift
bin=$dir/ipvsctl
secs=${BENCH_HEALTH_SECONDS:-30}
hz=$(getconf CLK_TCK)
rx=${BENCH_HEALTH_RX:-inline}
pin=()
[ "$rx" = remote ] && pin=(taskset -c 0)
modprobe ip_vs
busybox syslogd -n -O /dev/null &
slpid=$!
trap 'kill $slpid 2>/dev/null || true' EXIT

# target N: the address of real server i (1-based) in 198.19.0.0/16.
addr() { echo "198.19.$(($1 / 250)).$(($1 % 250 + 1))"; }

setup() { # N
	ip netns add tg
	ip netns add dir
	ip -n tg link set lo up
	ip -n dir link set lo up
	ip link add veth-d netns dir type veth peer name veth-t netns tg
	ip -n dir addr add 198.19.255.254/16 dev veth-d
	ip -n tg addr add 198.19.255.253/16 dev veth-t
	ip -n dir link set veth-d up
	ip -n tg link set veth-t up
	for i in $(seq 0 $(($1 - 1))); do echo "addr add $(addr "$i")/32 dev lo"; done | ip -n tg -batch -
	ip -n dir link add dummy0 type dummy
	ip -n dir addr add 198.18.0.100/32 dev dummy0
	ip -n dir link set dummy0 up
	if [ "$rx" = remote ]; then
		# The real servers' receive work on CPU 1 (RPS), the checker on CPU 0: a checker pays for what it sends,
		# not for the real servers' TCP stack.
		ip netns exec tg sh -c 'echo 2 >/sys/class/net/veth-t/queues/rx-0/rps_cpus'
		ip netns exec dir sh -c 'echo 2 >/sys/class/net/veth-d/queues/rx-0/rps_cpus'
	fi
	ip netns exec tg "$dir/sink" -listen :80 -for $((secs + 60))s &
	sinkpid=$!
	sleep 0.5
}
teardown() {
	kill "$sinkpid" 2>/dev/null || true
	wait "$sinkpid" 2>/dev/null || true
	ip netns exec dir ipvsadm -C 2>/dev/null || true
	ip netns del dir
	ip netns del tg
}
cpu() { # PID...: utime+stime in ticks
	local t=0
	for p in "$@"; do t=$((t + $(awk '{ print $14 + $15 }' "/proc/$p/stat"))); done
	echo "$t"
}
utime() { # PID...: utime in ticks (stime is cpu - utime)
	local t=0
	for p in "$@"; do t=$((t + $(awk '{ print $14 }' "/proc/$p/stat"))); done
	echo "$t"
}
rss() { # PID...: VmRSS in kB
	local t=0
	for p in "$@"; do t=$((t + $(awk '/^VmRSS/ { print $2 }' "/proc/$p/status"))); done
	echo "$t"
}
servers_up() { ip netns exec dir ipvsadm -Ln | grep -c -- '-> 198.19' || true; }

for n in "$@"; do
	# keepalived: one virtual_server with N real servers, each with a TCP_CHECK every second.
	{
		echo 'virtual_server 198.18.0.100 80 {'
		echo '  delay_loop 1'
		echo '  lb_algo wlc'
		echo '  lb_kind DR'
		echo '  protocol TCP'
		for i in $(seq 0 $((n - 1))); do
			echo "  real_server $(addr "$i") 80 { weight 1
    TCP_CHECK { connect_timeout 1 retry 3 delay_before_retry 1 } }"
		done
		echo '}'
	} >"$dir/ka-$n.conf"
	{
		printf '{"services":[{"name":"bench","address":"198.18.0.100","port":80,"forwarding":"dr","scheduler":"wlc",'
		printf '"check":{"type":"tcp","interval":1,"timeout":1,"rise":2,"fall":3},"servers":['
		for i in $(seq 0 $((n - 1))); do
			[ "$i" = 0 ] || printf ','
			printf '{"address":"%s"}' "$(addr "$i")"
		done
		printf ']}]}\n'
	} >"$dir/state-$n.json"

	setup "$n"
	ip netns exec dir "${pin[@]}" keepalived --dont-fork --check --log-console -f "$dir/ka-$n.conf" \
		-p /run/bh-keepalived.pid -c /run/bh-checkers.pid >/tmp/bh-keepalived.log 2>&1 &
	kpid=$!
	sleep "$secs"
	cpids="$kpid $(cat /run/bh-checkers.pid 2>/dev/null || true)"
	kcpu=$(cpu $cpids) kuser=$(utime $cpids) krss=$(rss $cpids) kup=$(servers_up) ksink=$(cpu "$sinkpid")
	kill "$kpid"
	wait "$kpid" 2>/dev/null || true
	teardown

	setup "$n"
	rm -f /tmp/bh.db*
	ip netns exec dir "$bin" --db /tmp/bh.db apply --no-apply -f "$dir/state-$n.json" >/dev/null
	ip netns exec dir "${pin[@]}" env ${BENCH_HEALTH_GOMAXPROCS:+GOMAXPROCS=$BENCH_HEALTH_GOMAXPROCS} "$bin" --db /tmp/bh.db serve --listen "" >/tmp/bh-serve.log 2>&1 &
	ipid=$!
	sleep "$secs"
	icpu=$(cpu "$ipid") iuser=$(utime "$ipid") irss=$(rss "$ipid") iup=$(servers_up) isink=$(cpu "$sinkpid")
	kill "$ipid"
	wait "$ipid" 2>/dev/null || true
	teardown

	awk -v n="$n" -v s="$secs" -v hz="$hz" -v ic="$icpu" -v kc="$kcpu" -v ir="$irss" -v kr="$krss" -v iu="$iup" -v ku="$kup" \
		-v iusr="$iuser" -v kusr="$kuser" -v is="$isink" -v ks="$ksink" 'BEGIN {
		printf "BENCH-HEALTH %d real servers, tcp check every 1 s, %d s: ipvsctl serve %.2f CPU-s, RSS %.1f MB (%d in the table) | keepalived %.2f CPU-s, RSS %.1f MB (%d in the table) | ratio %.2fx\n",
			n, s, ic / hz, ir / 1024, iu, kc / hz, kr / 1024, ku, (kc > 0 ? ic / kc : 0)
		printf "BENCH-HEALTH   user/system CPU-s: ipvsctl %.2f/%.2f, keepalived %.2f/%.2f; the real servers (sink, whose handshake work the checker pays for in part on a veth) %.2f beside ipvsctl, %.2f beside keepalived\n",
			iusr / hz, (ic - iusr) / hz, kusr / hz, (kc - kusr) / hz, is / hz, ks / hz }'
	grep -c "health changed" /tmp/bh-serve.log | sed 's/^/BENCH-HEALTH   ipvsctl health transitions logged: /'
done
