#!/usr/bin/env bash
# Runs inside the VM (scripts/bench.sh boots it): times ipvsctl against ipvsadm and keepalived on one table,
# each contender in its own fresh network namespace, torn down before the next one starts (IPVS keeps deleted
# destinations in a trash list that slows later re-adds, and every namespace's services share the kernel's
# hash tables, so leftovers would favour whoever runs first).
# Usage: guest.sh IPVSCTL_BIN DATA_DIR
set -euo pipefail
bin=$1 data=$2
entries=$(cat "$data/entries")
lines=$((entries + 3)) # /proc/net/ip_vs has a 3-line header

now() { date +%s%N; }
ms() { echo $((($2 - $1) / 1000000)); }

fresh_ns() {
	ip netns add "$1"
	ip netns exec "$1" ip link set lo up
	# DR real servers must be reachable unicast from the director.
	ip netns exec "$1" ip link add dummy0 type dummy
	ip netns exec "$1" ip addr add 198.18.0.1/24 dev dummy0
	ip netns exec "$1" ip link set dummy0 up
}
drop_ns() {
	ip netns exec "$1" ipvsadm -C
	ip netns del "$1"
}
count() { ip netns exec "$1" ipvsadm -Sn | wc -l; }

modprobe ip_vs
modprobe ip_vs_wlc
# A syslog daemon takes keepalived's log: without one, glibc's syslog falls back to the slow serial console.
busybox syslogd -n -O /dev/null &
slpid=$!
trap 'kill $slpid 2>/dev/null || true' EXIT

# The guest reads every binary over 9p, and pays one-time costs (page faults, libraries, SQLite's first use) the
# first time a program runs after boot. A director's page cache is warm: so each contender first does its job once
# on a one-service table in a throwaway namespace.
warm_ns() {
	ip netns add warm
	ip netns exec warm ip link set lo up
	ip netns exec warm ip link add dummy0 type dummy
	ip netns exec warm ip addr add 198.18.0.1/24 dev dummy0
	ip netns exec warm ip link set dummy0 up
}
warm_ns
cat >/tmp/warm.json <<'JSON'
{"services":[{"address":"198.18.99.1","port":80,"servers":[{"address":"198.18.0.11"}]}]}
JSON
printf 'virtual_server 198.18.99.2 80 {\n  lb_kind DR\n  protocol TCP\n  real_server 198.18.0.11 80 {\n  }\n}\n' >/tmp/warm.conf
ip netns exec warm "$bin" --db /tmp/warm.db apply -f /tmp/warm.json >/dev/null
printf -- '-A -t 198.18.99.3:80 -s wlc\n-a -t 198.18.99.3:80 -r 198.18.0.11:80 -g\n' | ip netns exec warm ipvsadm -R
ip netns exec warm ipvsadm -Sn >/dev/null
timeout 20 ip netns exec warm keepalived --dont-fork --check --log-console -f /tmp/warm.conf \
	-p /run/warm-keepalived.pid -c /run/warm-checkers.pid >/dev/null 2>&1 &
wpid=$!
ip netns exec warm timeout 20 sh -c 'until grep -q C6126302 /proc/net/ip_vs; do sleep 0.05; done' || true
kill "$wpid" 2>/dev/null || true
wait "$wpid" 2>/dev/null || true
drop_ns warm

# keepalived reaching the table: polled by one shell inside its namespace.
fresh_ns bk
t0=$(now)
ip netns exec bk keepalived --dont-fork --check --log-console -f "$data/keepalived.conf" \
	-p /run/bench-keepalived.pid -c /run/bench-checkers.pid >/tmp/keepalived.log 2>&1 &
kpid=$!
if ! ip netns exec bk timeout 300 sh -c "until [ \$(wc -l </proc/net/ip_vs) -ge $lines ]; do sleep 0.02; done"; then
	echo "keepalived did not reach $entries entries in 300 s: $(count bk)"
	exit 1
fi
t1=$(now)
keep=$(ms "$t0" "$t1")
kill "$kpid"
wait "$kpid" 2>/dev/null || true
drop_ns bk

# ipvsadm -R of the same table, then ipvsadm -Sn of it.
fresh_ns br
t0=$(now); ip netns exec br ipvsadm -R <"$data/rules.ipvsadm"; t1=$(now)
restore=$(ms "$t0" "$t1")
t0=$(now); ip netns exec br ipvsadm -Sn >/tmp/saved; t1=$(now)
save=$(ms "$t0" "$t1")
drop_ns br

# ipvsctl: full apply from empty, one weight change, a no-op reconcile.
fresh_ns bi
in1() { ip netns exec bi "$@"; }
t0=$(now); in1 "$bin" --db /tmp/bench.db apply -f "$data/state.json" >/dev/null; t1=$(now)
full=$(ms "$t0" "$t1")
[ "$(count bi)" = "$entries" ] || { echo "ipvsctl apply left $(count bi) entries, want $entries"; exit 1; }
in1 ipvsadm -Sn | sort >/tmp/mine
sort /tmp/saved >/tmp/theirs
cmp -s /tmp/mine /tmp/theirs || { echo "ipvsctl's table differs from ipvsadm -R's:"; diff /tmp/mine /tmp/theirs | head; exit 1; }
t0=$(now); in1 "$bin" --db /tmp/bench.db apply -f "$data/state-weight.json" >/tmp/weight.out; t1=$(now)
weight=$(ms "$t0" "$t1")
grep -q '^1 changes applied' /tmp/weight.out || { echo "weight change was not one change:"; tail -3 /tmp/weight.out; exit 1; }
t0=$(now); in1 "$bin" --db /tmp/bench.db apply -f "$data/state-weight.json" >/tmp/noop.out; t1=$(now)
noop=$(ms "$t0" "$t1")
grep -q '^0 changes applied' /tmp/noop.out || { echo "no-op reconcile changed something"; exit 1; }
drop_ns bi

ratio() { awk -v a="$1" -v b="$2" 'BEGIN { printf "%.2f", (b > 0 ? a / b : 0) }'; }
echo "BENCH table: $entries entries (services + real servers)"
echo "BENCH ipvsctl apply from empty:   ${full} ms  = $(ratio "$full" "$keep")x keepalived (${keep} ms), $(ratio "$full" "$restore")x ipvsadm -R (${restore} ms)"
echo "BENCH ipvsctl one weight change:  ${weight} ms  = $(ratio "$weight" "$save")x ipvsadm -Sn (${save} ms)"
echo "BENCH ipvsctl no-op reconcile:    ${noop} ms  = $(ratio "$noop" "$save")x ipvsadm -Sn (${save} ms)"
