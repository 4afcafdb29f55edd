#!/usr/bin/env bash
# Runs inside the VM (scripts/bench.sh boots it): times ipvsctl against ipvsadm and keepalived on one table,
# each contender in its own fresh network namespace, torn down before the next one starts (IPVS keeps deleted
# destinations in a trash list that slows later re-adds, and every namespace's services share the kernel's
# hash tables, so leftovers would favour whoever runs first).
# Usage: guest.sh IPVSCTL_BIN DATA_DIR (DATA_DIR also holds the API client, apiclient)
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

# The machine is shared and noisy: every figure is the median of several samples, taken in one run with the
# contenders interleaved, so that a slow spell falls on all of them alike.
full_reps=${BENCH_FULL_REPS:-3}
edit_reps=${BENCH_EDIT_REPS:-7}
keep_ms=() restore_ms=() full_ms=() save_ms=() weight_ms=() noop_ms=()

for rep in $(seq "$full_reps"); do
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
	keep_ms+=("$(ms "$t0" "$t1")")
	kill "$kpid"
	wait "$kpid" 2>/dev/null || true
	drop_ns bk

	# ipvsadm -R of the same table.
	fresh_ns br
	t0=$(now); ip netns exec br ipvsadm -R <"$data/rules.ipvsadm"; t1=$(now)
	restore_ms+=("$(ms "$t0" "$t1")")
	ip netns exec br ipvsadm -Sn >/tmp/saved
	drop_ns br

	# ipvsctl from empty, with a fresh state database.
	fresh_ns bi
	rm -f /tmp/bench.db*
	t0=$(now); ip netns exec bi "$bin" --db /tmp/bench.db apply -f "$data/state.json" >/tmp/full.out 2>&1 || { cat /tmp/full.out; exit 1; }; t1=$(now)
	full_ms+=("$(ms "$t0" "$t1")")
	[ "$(count bi)" = "$entries" ] || { echo "ipvsctl apply left $(count bi) entries, want $entries"; exit 1; }
	ip netns exec bi ipvsadm -Sn | sort >/tmp/mine
	sort /tmp/saved >/tmp/theirs
	cmp -s /tmp/mine /tmp/theirs || { echo "ipvsctl's table differs from ipvsadm -R's:"; diff /tmp/mine /tmp/theirs | head; exit 1; }
	[ "$rep" = "$full_reps" ] || drop_ns bi
done

# In the last ipvsctl namespace: ipvsadm -Sn of the table, one weight change (the two documents differ in one
# weight, so going to either is one change), then a no-op reconcile, in turn.
in1() { ip netns exec bi "$@"; }
docs=("$data/state-weight.json" "$data/state.json")
for rep in $(seq "$edit_reps"); do
	t0=$(now); in1 ipvsadm -Sn >/dev/null; t1=$(now)
	save_ms+=("$(ms "$t0" "$t1")")
	doc=${docs[$(((rep + 1) % 2))]}
	t0=$(now); in1 "$bin" --db /tmp/bench.db apply -f "$doc" >/tmp/weight.out; t1=$(now)
	weight_ms+=("$(ms "$t0" "$t1")")
	grep -q '^1 changes applied' /tmp/weight.out || { echo "weight change was not one change:"; tail -3 /tmp/weight.out; exit 1; }
	t0=$(now); in1 "$bin" --db /tmp/bench.db apply -f "$doc" >/tmp/noop.out; t1=$(now)
	noop_ms+=("$(ms "$t0" "$t1")")
	grep -q '^0 changes applied' /tmp/noop.out || { echo "no-op reconcile changed something"; exit 1; }
done

# The daemon over the same table, in the same namespace: one weight change through the API (a Go client that
# stays connected, beside ipvsadm -Sn) and through the CLI's local socket (beside ipvsctl --help, the cost of
# starting the process at all), then reads under 20 concurrent clients.
db=/tmp/bench.db
printf 'bench password 0123456789\n' | in1 "$bin" --db "$db" user add bench --role admin --password-stdin >/dev/null
token=$(in1 "$bin" --db "$db" token create --user bench 2>/dev/null)
# Not through in1: $! must be ipvsctl itself (ip netns exec execs it), not a subshell.
ip netns exec bi "$bin" --db "$db" serve --listen 127.0.0.1:3636 >/tmp/serve.log 2>&1 &
spid=$!
in1 timeout 120 sh -c 'until curl -sf -o /dev/null http://127.0.0.1:3636/healthz; do sleep 0.2; done' ||
	{ echo "ipvsctl serve did not answer in 120 s:"; cat /tmp/serve.log; exit 1; }
read -r tsvc tsrv <"$data/weight-target"
in1 "$data/apiclient" -url http://127.0.0.1:3636 -token "$token" weight -service "$tsvc" -server "$tsrv" -n "$edit_reps" \
	>/tmp/api.out 2>&1 || { cat /tmp/api.out; tail -20 /tmp/serve.log; exit 1; }
help_ms=() rsset_ms=()
in1 "$bin" --help >/dev/null
for rep in $(seq "$edit_reps"); do
	t0=$(now); in1 "$bin" --help >/dev/null; t1=$(now)
	help_ms+=("$(ms "$t0" "$t1")")
	t0=$(now); in1 "$bin" --db "$db" rs set "$tsvc" "$tsrv" --weight $((7 + rep % 2)) >/tmp/rsset.out 2>&1 ||
		{ cat /tmp/rsset.out; exit 1; }; t1=$(now)
	rsset_ms+=("$(ms "$t0" "$t1")")
	grep -q '^1 changes applied' /tmp/rsset.out || { echo "rs set through the daemon was not one change:"; cat /tmp/rsset.out; exit 1; }
done
in1 "$data/apiclient" -url http://127.0.0.1:3636 -token "$token" load -clients 20 -requests 2000 -duration 30s \
	>>/tmp/api.out 2>&1 || { cat /tmp/api.out; tail -20 /tmp/serve.log; exit 1; }
echo "BENCH serve: the daemon's peak memory after the load: $(awk '/VmHWM/ { printf "%d MB", $2 / 1024 }' /proc/$spid/status)" >>/tmp/api.out
kill -TERM "$spid"
(sleep 60 && kill -KILL "$spid" 2>/dev/null) &
watchdog=$!
st=0
wait "$spid" || st=$?
kill "$watchdog" 2>/dev/null || true
[ "$st" = 0 ] || { echo "ipvsctl serve exited with status $st after SIGTERM:"; tail -20 /tmp/serve.log; exit 1; }
drop_ns bi

median() { printf '%s\n' "$@" | sort -n | awk '{ v[NR] = $1 } END { print v[int((NR + 1) / 2)] }'; }
spread() { printf '%s\n' "$@" | sort -n | awk 'NR == 1 { lo = $1 } { hi = $1 } END { printf "%s-%s", lo, hi }'; }
ratio() { awk -v a="$1" -v b="$2" 'BEGIN { printf "%.2f", (b > 0 ? a / b : 0) }'; }
full=$(median "${full_ms[@]}") keep=$(median "${keep_ms[@]}") restore=$(median "${restore_ms[@]}")
save=$(median "${save_ms[@]}") weight=$(median "${weight_ms[@]}") noop=$(median "${noop_ms[@]}")
echo "BENCH table: $entries entries (services + real servers); medians of $full_reps full applies and $edit_reps edits (min-max in ms)"
echo "BENCH ipvsctl apply from empty:   ${full} ms ($(spread "${full_ms[@]}")) = $(ratio "$full" "$keep")x keepalived (${keep} ms, $(spread "${keep_ms[@]}")), $(ratio "$full" "$restore")x ipvsadm -R (${restore} ms, $(spread "${restore_ms[@]}"))"
echo "BENCH ipvsctl one weight change:  ${weight} ms ($(spread "${weight_ms[@]}")) = $(ratio "$weight" "$save")x ipvsadm -Sn (${save} ms, $(spread "${save_ms[@]}"))"
echo "BENCH ipvsctl no-op reconcile:    ${noop} ms ($(spread "${noop_ms[@]}")) = $(ratio "$noop" "$save")x ipvsadm -Sn (${save} ms)"
# goal WHAT RATIO TARGET: issue 28's goal line, the ratio beside its target.
goal() { awk -v w="$1" -v r="$2" -v t="$3" 'BEGIN { printf "BENCH-GOAL %s: %.2fx; target <= %sx: %s\n", w, r, t, (r <= t ? "met" : "NOT met") }'; }
goal "full apply of $entries entries vs ipvsadm -R (VM)" "$(ratio "$full" "$restore")" 0.2
goal "full apply of $entries entries vs keepalived (VM)" "$(ratio "$full" "$keep")" 0.3
goal "one weight change vs ipvsadm -Sn (VM)" "$(ratio "$weight" "$save")" 0.7
goal "no-op reconcile vs ipvsadm -Sn (VM)" "$(ratio "$noop" "$save")" 0.7
rsset=$(median "${rsset_ms[@]}") help=$(median "${help_ms[@]}")
cat /tmp/api.out
echo "BENCH serve: ipvsctl rs set through the daemon's socket: ${rsset} ms ($(spread "${rsset_ms[@]}")) = $(ratio "$rsset" "$help")x ipvsctl --help (${help} ms, $(spread "${help_ms[@]}"), the cost of starting the process)"
