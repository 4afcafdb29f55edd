#!/usr/bin/env bash
# The lab inside the VM: scripts/lab.sh boots the VM test bed (scripts/vm/run.sh --hostfwd) with this as its
# command. It builds, in network namespaces, a director running `ipvsctl serve`, three DR real servers and two
# NAT real servers serving HTTP (each prepared by `ipvsctl realserver apply`), and a client sending a bounded
# trickle of requests through both VIPs; then it runs until serve stops or the VM is killed.
#
#   client 198.18.0.2 ─┐ br0 198.18.0.0/24 ┌─ rs1..rs3 198.18.0.11-13 (DR: VIP 198.18.0.100 on lo, ARP hidden)
#   director eth0 198.18.0.1 (VIPs .100 DR, .110 NAT)
#   director eth1 198.18.1.1 ── br1 198.18.1.0/24 ── nat1, nat2 198.18.1.11-12 (default route via the director)
#   director mgmt0 10.0.2.15: the VM's one NIC (QEMU user network), where the host's 127.0.0.1:3636 arrives
#
# Environment (from lab.sh): IPVSCTL_BIN, IPVSCTL_LAB_TRICKLE (scripts/lab/trickle, built), IPVSCTL_LAB_PASSWORD (the admin's), IPVSCTL_LAB_RATE (requests a
# second per VIP, default 2), IPVSCTL_LAB_REQUESTS (the client's total per VIP, default 10000),
# IPVSCTL_LAB_LOADTEST (SECONDS: run the load test of scripts/lab/loadtest.sh once the lab is ready).
# Output: "lab: ..." progress lines, then "LAB-READY TOKEN" once serve answers, then serve's log (and the load
# test's "LOADTEST ..." lines, ending with "LOADTEST-DONE").
set -euo pipefail

bin=${IPVSCTL_BIN:?IPVSCTL_BIN is not set (scripts/lab.sh sets it)}
trickle=${IPVSCTL_LAB_TRICKLE:?IPVSCTL_LAB_TRICKLE is not set (scripts/lab.sh sets it)}
password=${IPVSCTL_LAB_PASSWORD:?IPVSCTL_LAB_PASSWORD is not set (scripts/lab.sh sets it)}
rate=${IPVSCTL_LAB_RATE:-2}
requests=${IPVSCTL_LAB_REQUESTS:-10000}
here=$(cd "$(dirname "$0")" && pwd)
run=/run/lab

say() { echo "lab: $*"; }
in_ns() {
	local ns=$1
	shift
	ip netns exec "$ns" "$@"
}

# plug NS IFNAME BRIDGE ADDR: a veth from NS to the bridge in the switch namespace.
plug() {
	local ns=$1 ifname=$2 br=$3 addr=$4 peer=v$1$2
	ip link add "$peer" type veth peer name "$ifname" netns "$ns"
	ip link set "$peer" netns switch
	ip -n switch link set "$peer" master "$br" up
	ip -n "$ns" addr add "$addr" dev "$ifname"
	ip -n "$ns" link set "$ifname" up
}

# serve_http NS: busybox's httpd on port 80 answering with the namespace's name.
serve_http() {
	mkdir -p "$run/www/$1"
	echo "$1" >"$run/www/$1/index.html"
	in_ns "$1" busybox httpd -f -p 80 -h "$run/www/$1" &
}

# as_realserver NS ARGS...: `ipvsctl realserver apply ARGS` in NS, with that real server's own copy of the
# directories it records its preparation in (all namespaces share one filesystem).
as_realserver() {
	local ns=$1 dirs=(/var/lib/ipvsctl /etc/sysctl.d /etc/ipvsctl /etc/systemd/system) d
	shift
	for d in "${dirs[@]}"; do mkdir -p "$run/root-$ns$d"; done
	in_ns "$ns" sh -c 'set -e; r=$1; shift; for d in /var/lib/ipvsctl /etc/sysctl.d /etc/ipvsctl /etc/systemd/system; do
		mkdir -p "$d"; mount --bind "$r$d" "$d"; done; exec "$@"' sh "$run/root-$ns" "$bin" realserver apply "$@" \
		>"$run/realserver-$ns.log"
	say "$ns: prepared ($(grep -c '^changed: ' "$run/realserver-$ns.log") changes: $(sed -n 's/^changed: //p' "$run/realserver-$ns.log" | cut -d' ' -f1 | sort | uniq -c | awk '{ printf "%s%s %s", sep, $1, $2; sep = ", " }'))"
}

mkdir -p "$run"
say "building the network: director, client, real servers rs1-rs3 (DR) and nat1-nat2 (NAT)"
for ns in switch director client rs1 rs2 rs3 nat1 nat2; do
	ip netns add "$ns"
	ip -n "$ns" link set lo up
done
for br in br0 br1; do
	ip -n switch link add "$br" type bridge
	ip -n switch link set "$br" up
done
plug director eth0 br0 198.18.0.1/24
plug director eth1 br1 198.18.1.1/24
plug client eth0 br0 198.18.0.2/24
for i in 1 2 3; do plug "rs$i" eth0 br0 "198.18.0.1$i/24"; done
for i in 1 2; do plug "nat$i" eth0 br1 "198.18.1.1$i/24"; done

# The VM's one NIC becomes the director's management interface: QEMU delivers the host's forwarded
# 127.0.0.1:PORT to 10.0.2.15:3636, which is now serve's address. Nothing else is reachable from the host.
modprobe e1000
for _ in $(seq 50); do [ -e /sys/class/net/eth0 ] && break; sleep 0.1; done
ip link set eth0 name mgmt0
ip link set mgmt0 netns director
ip -n director addr add 10.0.2.15/24 dev mgmt0
ip -n director link set mgmt0 up

say "preparing the real servers with ipvsctl realserver apply"
for i in 1 2 3; do
	as_realserver "rs$i" --vip 198.18.0.100 --mode dr-sysctl --interface eth0
	serve_http "rs$i"
done
for i in 1 2; do
	as_realserver "nat$i" --mode nat --gateway 198.18.1.1 --interface eth0
	serve_http "nat$i"
done

say "director: ipvsctl apply -f scripts/lab/state.json"
in_ns director "$bin" apply -f "$here/state.json" | sed 's/^/lab: director: /'
printf '%s\n' "$password" | in_ns director "$bin" user add admin --role admin --password-stdin | sed 's/^/lab: director: /'
token=$(in_ns director "$bin" token create --user admin --name lab 2>/dev/null)

# start_serve: `ipvsctl serve` in the director (restoring the stored state into the kernel), until it answers.
# Plain HTTP: the lab's only way in is the VM's port forwarded to the host's loopback (see scripts/lab.sh).
start_serve() {
	say "director: ipvsctl serve --listen :3636 --plain-http"
	# Not through in_ns (a function: its subshell's pid is not serve's): ip netns exec execs serve itself.
	ip netns exec director "$bin" serve --listen :3636 --plain-http --interval 5s 2>&1 &
	serve=$!
	for try in $(seq 120); do
		in_ns director "$bin" --server http://127.0.0.1:3636 --token "$token" status >/dev/null 2>&1 && return 0
		kill -0 "$serve" 2>/dev/null || { say "serve stopped before it answered"; exit 1; }
		[ "$try" -lt 120 ] || { say "serve did not answer in 60 s"; exit 1; }
		sleep 0.5
	done
}
# stop_serve: SIGTERM, and wait until it has gone (the kernel's table stays as it was).
stop_serve() {
	kill -TERM "$serve" 2>/dev/null || true
	wait "$serve" 2>/dev/null || true
}
start_serve

say "client: $rate requests a second to each VIP, $requests each at most"
in_ns client "$trickle" -rate "$rate" -requests "$requests" http://198.18.0.100/ http://198.18.0.110/ &
echo "LAB-READY $token"
if [ -n "${IPVSCTL_LAB_LOADTEST:-}" ]; then
	# shellcheck source=scripts/lab/loadtest.sh
	. "$here/loadtest.sh"
fi
wait "$serve"
