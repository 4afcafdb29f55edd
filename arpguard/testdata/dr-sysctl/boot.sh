#!/bin/sh
# Written by ipvsctl realserver for real server 198.18.0.11, mode dr-sysctl, VIPs 198.18.0.100,198.18.0.101.
# Removed by ipvsctl realserver undo; do not edit.
set -u
PATH=$PATH:/usr/sbin:/sbin:/usr/bin:/bin
has_addr() { ip -o addr show dev "$2" 2>/dev/null | awk -v a="$1" '$4 == a { f = 1 } END { exit !f }'; }
link_up() { ip -o link show dev "$1" 2>/dev/null | grep -q '[<,]UP[,>]'; }
# route_line FAMILY DST METRIC prints the main-table route to DST at METRIC, reduced to what "ip route replace" takes back.
route_line() {
	ip "$1" route show exact "$2" 2>/dev/null | awk -v m="$3" '{
		x = 0; o = $1
		for (i = 2; i <= NF; i++) {
			if ($i == "metric") x = $(i + 1)
			if ($i ~ /^(via|dev|proto|scope|src|metric|pref)$/) { o = o " " $i " " $(i + 1); i++ }
			else if ($i == "onlink") o = o " onlink"
		}
		if (x == m) { print o; exit }
	}'
}
has_route() { route_line "$1" "$2" "$4" | awk -v g="$3" '{ for (i = 1; i < NF; i++) if ($i == "via" && $(i + 1) == g) f = 1 } END { exit !f }'; }
failed=0
[ "$(cat /proc/sys/net/ipv4/conf/all/arp_ignore 2>/dev/null)" = 1 ] || echo 1 >/proc/sys/net/ipv4/conf/all/arp_ignore || failed=1
[ "$(cat /proc/sys/net/ipv4/conf/all/arp_announce 2>/dev/null)" = 2 ] || echo 2 >/proc/sys/net/ipv4/conf/all/arp_announce || failed=1
[ "$(cat /proc/sys/net/ipv4/conf/eth0/arp_ignore 2>/dev/null)" = 1 ] || echo 1 >/proc/sys/net/ipv4/conf/eth0/arp_ignore || failed=1
[ "$(cat /proc/sys/net/ipv4/conf/eth0/arp_announce 2>/dev/null)" = 2 ] || echo 2 >/proc/sys/net/ipv4/conf/eth0/arp_announce || failed=1
has_addr 198.18.0.100/32 lo || ip addr add 198.18.0.100/32 dev lo || failed=1
has_addr 198.18.0.101/32 lo || ip addr add 198.18.0.101/32 dev lo || failed=1
exit "$failed"
