#!/usr/bin/env bash
# Runs inside the VM (scripts/bench-health.sh boots it). Usage: health-guest.sh DIR SIZE...
# SIZE is N (one service, N real servers) or SxR (S services, each with the same R real servers and the same
# check: shared probes).
set -euo pipefail
dir=$1
shift
bin=$dir/ipvsctl
secs=${BENCH_HEALTH_SECONDS:-30}
warm=$((secs / 3)) # the CPU is read at this point too: what the steady state costs, without the start
hz=$(getconf CLK_TCK)
# remote: the real servers' TCP stack runs on CPU 1 (RPS on both veth ends), each contender pinned to CPU 0, so
#   that a checker pays for its own system calls and not for the real servers' receive path, as on a network where
#   they are other machines; ipvsctl gets GOMAXPROCS=2, what the Go runtime takes unpinned on this machine
#   (BENCH_HEALTH_GOMAXPROCS=N sets another; =go leaves it unset, as a unit does: serve then takes 2 Ps where Go
#   alone would take 1 on the one CPU it is pinned to).
# inline: nothing pinned, and a veth runs its peer's receive path inside the sender's system call: each SYN's
#   sendmsg also pays for the real server's SYN processing, its SYN-ACK and the director's reset.
modes=${BENCH_HEALTH_RX:-remote inline}
modprobe ip_vs
modprobe -q ip_tables 2>/dev/null || true
# The neighbour table is the whole machine's, and 1,024 entries by default: past that, the director cannot ARP
# for its real servers (at 10,000 only about a thousand were reachable, for both contenders).
sysctl -qw net.ipv4.neigh.default.gc_thresh1=32768 net.ipv4.neigh.default.gc_thresh2=49152 \
	net.ipv4.neigh.default.gc_thresh3=65536
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
		ip netns exec tg sh -c 'echo 2 >/sys/class/net/veth-t/queues/rx-0/rps_cpus'
		ip netns exec dir sh -c 'echo 2 >/sys/class/net/veth-d/queues/rx-0/rps_cpus'
	fi
	# A counting rule (no target): the SYNs that reach the real servers are the checks made.
	ip netns exec tg iptables -w -A INPUT -p tcp --syn --dport 80
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
syns() { ip netns exec tg iptables -w -nvxL INPUT | awk 'NR == 3 { print $1 }'; }
# window T0: seconds since EPOCHREALTIME T0, the time between two reads of the SYN counter: each read takes a
# few hundred ms under emulation, so the sleep between them is not the window (the rates came out 3-15% high).
window() { awk -v a="$1" -v b="$EPOCHREALTIME" 'BEGIN { printf "%.3f", b - a }'; }
servers_up() { ip netns exec dir ipvsadm -Ln | grep -c -- '-> 198.19' || true; }
# start_delay: the daemon's histogram of how late its checks started (the checker's status, GET /readyz).
start_delay() { ip netns exec dir curl -s --max-time 20 http://127.0.0.1:3636/readyz | jq -c '.start_delay // empty' || true; }
# delay_between A B: the runs counted between two start_delay readings, and their p50 and p99 in ms, estimated
# within a bucket as histogram_quantile does ("0 0 0" without both readings).
delay_between() {
	[ -n "$1" ] && [ -n "$2" ] || { echo "0 0 0"; return; }
	jq -rn --argjson a "$1" --argjson b "$2" '
		[range(0; $b.buckets | length) | {le: $b.buckets[.].le, c: ($b.buckets[.].count - $a.buckets[.].count)}] as $k
		| ($b.count - $a.count) as $n
		| def q($p): ($p * $n) as $r
			| (first(range(0; $k | length) | select($k[.].c >= $r)) // -1) as $i
			| if $n == 0 then 0 elif $i < 0 then $k[-1].le * 1000
			  else (if $i == 0 then 0 else $k[$i - 1].le end) as $lo | (if $i == 0 then 0 else $k[$i - 1].c end) as $below
			  | ($lo + ($k[$i].le - $lo) * ($r - $below) / ($k[$i].c - $below)) * 1000 end;
		"\($n) \(q(0.5)) \(q(0.99))"'
}

# configs_one N: both contenders' tables for one service of N real servers.
configs_one() {
	# keepalived: one virtual_server with N real servers, each with a TCP_CHECK every second.
	{
		echo 'virtual_server 198.18.0.100 80 {'
		echo '  delay_loop 1'
		echo '  lb_algo wlc'
		echo '  lb_kind DR'
		echo '  protocol TCP'
		for i in $(seq 0 $(($1 - 1))); do
			echo "  real_server $(addr "$i") 80 { weight 1
    TCP_CHECK { connect_timeout 1 retry 3 delay_before_retry 1 } }"
		done
		echo '}'
	} >"$dir/ka-$n.conf"
	{
		printf '{"services":[{"name":"bench","address":"198.18.0.100","port":80,"forwarding":"dr","scheduler":"wlc",'
		printf '"check":{"type":"tcp","interval":1,"timeout":1,"rise":2,"fall":3},"servers":['
		for i in $(seq 0 $(($1 - 1))); do
			[ "$i" = 0 ] || printf ','
			printf '{"address":"%s"}' "$(addr "$i")"
		done
		printf ']}]}\n'
	} >"$dir/state-$n.json"
}

# configs_shared S R: both contenders' tables for S services over the same R real servers (addr 0..R-1), every
# service the same tcp check, so that ipvsctl runs R probes a round and keepalived S x R. Service j (0-based) is
# 198.18.(1 + j/250).(j%250 + 1):80, not on the director (IPVS needs no local VIP, and no packet goes to one).
# One awk each: a shell loop of 10,000 entries forks too often under emulation.
configs_shared() {
	awk -v s="$1" -v r="$2" 'BEGIN {
		for (j = 0; j < s; j++) {
			printf "virtual_server 198.18.%d.%d 80 {\n  delay_loop 1\n  lb_algo wlc\n  lb_kind DR\n  protocol TCP\n", 1 + int(j / 250), j % 250 + 1
			for (i = 0; i < r; i++)
				printf "  real_server 198.19.%d.%d 80 { weight 1\n    TCP_CHECK { connect_timeout 1 retry 3 delay_before_retry 1 } }\n", int(i / 250), i % 250 + 1
			print "}"
		} }' >"$dir/ka-$n.conf"
	state_shared 1 "$1" "$2" >"$dir/state-$n.json"
	state_shared 0 "$1" "$2" >"$dir/state-$n-bare.json" # the same table without checks
}

# state_shared CHECK S R: the document of configs_shared, with its tcp check or (CHECK 0) none.
state_shared() {
	awk -v check="$1" -v s="$2" -v r="$3" 'BEGIN {
		printf "{\"services\":["
		for (j = 0; j < s; j++) {
			printf "%s{\"name\":\"s%d\",\"address\":\"198.18.%d.%d\",\"port\":80,\"forwarding\":\"dr\",\"scheduler\":\"wlc\",", (j ? "," : ""), j, 1 + int(j / 250), j % 250 + 1
			if (check)
				printf "\"check\":{\"type\":\"tcp\",\"interval\":1,\"timeout\":1,\"rise\":2,\"fall\":3},"
			printf "\"servers\":["
			for (i = 0; i < r; i++)
				printf "%s{\"address\":\"198.19.%d.%d\"}", (i ? "," : ""), int(i / 250), i % 250 + 1
			printf "]}"
		}
		print "]}" }'
}

# serve STATE: ipvsctl serve in a fresh director namespace over the table STATE describes, for secs seconds;
# sets scpu swarm ssyn swin suser srss sup ssink as the contenders' variables above.
serve() {
	setup "$targets"
	rm -f /tmp/bh.db*
	ip netns exec dir "$bin" --db /tmp/bh.db apply --no-apply -f "$1" >/dev/null
	# Its HTTP on the namespace's loopback only for /readyz, read twice (a few hundred bytes).
	ip netns exec dir "${pin[@]}" env "${goenv[@]}" "$bin" --db /tmp/bh.db serve --listen 127.0.0.1:3636 >/tmp/bh-serve.log 2>&1 &
	local pid=$! syn0 t0 sd0 sd1 a0 a1 b0 b1
	sleep "$warm"
	a0=$EPOCHREALTIME sd0=$(start_delay) a1=$EPOCHREALTIME
	swarm=$(cpu "$pid") syn0=$(syns) t0=$EPOCHREALTIME
	sleep $((secs - warm))
	scpu=$(cpu "$pid")
	b0=$EPOCHREALTIME sd1=$(start_delay) b1=$EPOCHREALTIME
	# The runs counted between the two readings, and the time between them (the middles of the two reads).
	sdelay="$(delay_between "$sd0" "$sd1") $(awk -v a0="$a0" -v a1="$a1" -v b0="$b0" -v b1="$b1" 'BEGIN { printf "%.3f", (b0 + b1 - a0 - a1) / 2 }')"
	ssyn=$(($(syns) - syn0)) swin=$(window "$t0") suser=$(utime "$pid") srss=$(rss "$pid") sup=$(servers_up) ssink=$(cpu "$sinkpid")
	if [ "$1" = "$dir/state-$n.json" ]; then
		grep -c "health changed" /tmp/bh-serve.log >/tmp/bh-transitions || true
	fi
	kill "$pid"
	wait "$pid" 2>/dev/null || true
	teardown
}

for n in "$@"; do
	case $n in
	*x*)
		svcs=${n%x*} targets=${n#*x}
		pairs=$((svcs * targets))
		label="$svcs services x the same $targets real servers ($pairs pairs, one check)"
		configs_shared "$svcs" "$targets"
		;;
	*)
		svcs=1 targets=$n pairs=$n
		label="$n real servers"
		configs_one "$n"
		;;
	esac

	for rx in $modes; do
		pin=() goenv=()
		[ "$rx" = remote ] && pin=(taskset -c 0) goenv=(GOMAXPROCS="${BENCH_HEALTH_GOMAXPROCS:-2}")
		[ "$rx" = remote ] && [ "${BENCH_HEALTH_GOMAXPROCS:-2}" = go ] && goenv=(-u GOMAXPROCS) # as a unit leaves it
		rxl=$rx
		[ "$rx" = remote ] && rxl="remote, ipvsctl's GOMAXPROCS ${BENCH_HEALTH_GOMAXPROCS:-2}"
		setup "$targets"
		ip netns exec dir "${pin[@]}" keepalived --dont-fork --check --log-console -f "$dir/ka-$n.conf" \
			-p /run/bh-keepalived.pid -c /run/bh-checkers.pid >/tmp/bh-keepalived.log 2>&1 &
		kpid=$!
		sleep "$warm"
		cpids="$kpid $(cat /run/bh-checkers.pid 2>/dev/null || true)"
		kwarm=$(cpu $cpids) ksyn0=$(syns) kt0=$EPOCHREALTIME
		sleep $((secs - warm))
		kcpu=$(cpu $cpids) ksyn=$(($(syns) - ksyn0)) kwin=$(window "$kt0") kuser=$(utime $cpids) krss=$(rss $cpids) kup=$(servers_up) ksink=$(cpu "$sinkpid")
		kill "$kpid"
		wait "$kpid" 2>/dev/null || true
		teardown

		serve "$dir/state-$n.json"
		icpu=$scpu iwarm=$swarm isyn=$ssyn iwin=$swin iuser=$suser irss=$srss iup=$sup isink=$ssink
		read -r iruns ip50 ip99 idwin <<<"$sdelay"
		bcpu=0 bwarm=0 brss=0 bup=0
		if [ "$svcs" -gt 1 ]; then
			# The same table without checks: what the daemon costs besides them (its 2 s read of the kernel's
			# table, the periodic reconcile), which keepalived does not do; the difference is the checks' own.
			serve "$dir/state-$n-bare.json"
			bcpu=$scpu bwarm=$swarm brss=$srss bup=$sup
		fi

		awk -v bc="$bcpu" -v bw="$bwarm" -v br="$brss" -v bu="$bup" \
			 -v label="$label" -v svcs="$svcs" -v pairs="$pairs" -v targets="$targets" -v s="$secs" -v rx="$rx" -v rxl="$rxl" -v hz="$hz" -v ic="$icpu" -v kc="$kcpu" -v ir="$irss" -v kr="$krss" -v iu="$iup" -v ku="$kup" \
			-v iusr="$iuser" -v kusr="$kuser" -v is="$isink" -v ks="$ksink" \
			-v w="$warm" -v iw="$iwarm" -v kw="$kwarm" -v isyn="$isyn" -v ksyn="$ksyn" \
			-v iwin="$iwin" -v kwin="$kwin" -v iruns="$iruns" -v ip50="$ip50" -v ip99="$ip99" -v idwin="$idwin" '
			function goal(what, r, t) { printf "BENCH-GOAL %s: %.2fx; target <= %sx: %s\n", what, r, t, (r <= t ? "met" : "NOT met") }
			BEGIN {
			printf "BENCH-HEALTH %s, tcp check every 1 s, %d s, %s: ipvsctl serve %.2f CPU-s, RSS %.1f MB (%d in the table) | keepalived %.2f CPU-s, RSS %.1f MB (%d in the table) | ratio %.2fx\n",
				label, s, rxl, ic / hz, ir / 1024, iu, kc / hz, kr / 1024, ku, (kc > 0 ? ic / kc : 0)
			printf "BENCH-HEALTH   user/system CPU-s: ipvsctl %.2f/%.2f, keepalived %.2f/%.2f; the real servers (sink, whose handshake work the checker pays for in part on a veth) %.2f beside ipvsctl, %.2f beside keepalived\n",
				iusr / hz, (ic - iusr) / hz, kusr / hz, (kc - kusr) / hz, is / hz, ks / hz
			printf "BENCH-HEALTH   the last %d s alone (started, first results in): ipvsctl %.2f CPU-s, keepalived %.2f | ratio %.2fx\n",
				s - w, (ic - iw) / hz, (kc - kw) / hz, (kc > kw ? (ic - iw) / (kc - kw) : 0)
			ipk = isyn > 0 ? (ic - iw) / hz * 1e6 / isyn : 0
			kpk = ksyn > 0 ? (kc - kw) / hz * 1e6 / ksyn : 0
			if (svcs == 1) {
				printf "BENCH-HEALTH   in those %d s: checks made (SYNs that reached the real servers) ipvsctl %d a second, keepalived %d; CPU per check ipvsctl %.0f us, keepalived %.0f us | ratio %.2fx\n",
					s - w, isyn / iwin, ksyn / kwin, ipk, kpk, (kpk > 0 ? ipk / kpk : 0)
				printf "BENCH-HEALTH   ipvsctl by its own count (checker.start_delay): %d runs in %.1f s, %.3f a second per real server; runs started %.1f ms late at the median, %.1f ms at p99\n",
					iruns, idwin, (idwin > 0 ? iruns / idwin / targets : 0), ip50, ip99
				if (rx != "remote")
					exit
				if (targets == 1000) {
					goal(sprintf("%d tcp targets at 1 s, CPU of ipvsctl serve vs keepalived (VM, %s)", targets, rx), (kc > 0 ? ic / kc : 0), 0.2)
					goal(sprintf("RSS with %d checked real servers vs keepalived (VM, %s: %.1f MB vs %.1f MB)", targets, rx, ir / 1024, kr / 1024), (kr > 0 ? ir / kr : 0), 1)
				}
				# Kept up: every target checked each second, by the count of runs the daemon keeps (the SYNs counted at
				# the real servers say the same within the error of their window), its runs starting within the
				# twentieth of the interval its scheduler batches by.
				kept = idwin > 0 ? iruns / idwin / targets : 0
				printf "BENCH-GOAL %d targets at 1 s kept up on one emulated CPU (VM, %s): %.3f runs a second per target (SYNs counted: %d a second), runs started %.0f ms late at the median, %.0f ms at p99; target: 0.98 or more, p99 within 50 ms: %s\n",
					targets, rx, kept, isyn / iwin, ip50, ip99, (kept >= 0.98 && ip99 <= 50 ? "met" : "NOT met")
				exit
			}
			# Shared: a probe of ipvsctl answers for every pair of its target (pairs / targets of them), one of
			# keepalived for its own pair; the pairs answered a second are the work both do for the operator.
			ipr = isyn / iwin; kpr = ksyn / kwin
			ians = ipr * pairs / targets; kans = kpr
			ipa = ians > 0 ? (ic - iw) / hz * 1e6 / (ians * iwin) : 0
			kpa = kans > 0 ? (kc - kw) / hz * 1e6 / (kans * kwin) : 0
			printf "BENCH-HEALTH   in those %d s: probes sent (SYNs that reached the real servers) ipvsctl %.1f a second, keepalived %.1f (counted over %.1f s and %.1f s; %d pairs checked every 1 s: %d probes a second shared, %d each on its own) | ratio %.4fx\n",
				s - w, ipr, kpr, iwin, kwin, pairs, targets, pairs, (kpr > 0 ? ipr / kpr : 0)
			printf "BENCH-HEALTH   pairs answered a second: ipvsctl %d, keepalived %d (of %d); CPU per pair answered ipvsctl %.2f us, keepalived %.0f us | ratio %.4fx\n",
				ians, kans, pairs, ipa, kpa, (kpa > 0 ? ipa / kpa : 0)
			if (rx == "remote")
				printf "BENCH-GOAL shared probes, %s (VM, %s): %.1f probes a second for %d due (%.4fx the %.1f of keepalived), CPU per pair answered %.4fx that of keepalived; target: one probe per real server and round: %s\n",
					label, rx, ipr, targets, (kpr > 0 ? ipr / kpr : 0), kpr, (kpa > 0 ? ipa / kpa : 0), (ipr <= targets * 1.05 && ipr >= targets * 0.95 ? "met" : "NOT met")
			printf "BENCH-HEALTH   ipvsctl serve over the same table without checks: %.2f CPU-s (the last %d s %.2f), RSS %.1f MB (%d in the table); the checks%s own share %.2f CPU-s (the last %d s %.2f) vs keepalived %.2f (%.2f) | ratio %.2fx (%.2fx)\n",
				bc / hz, s - w, (bc - bw) / hz, br / 1024, bu, "\047", (ic - bc) / hz, s - w, ((ic - iw) - (bc - bw)) / hz, kc / hz, (kc - kw) / hz,
				(kc > 0 ? (ic - bc) / kc : 0), (kc > kw ? ((ic - iw) - (bc - bw)) / (kc - kw) : 0) }'
		sed 's/^/BENCH-HEALTH   ipvsctl health transitions logged: /' /tmp/bh-transitions
	done
done
