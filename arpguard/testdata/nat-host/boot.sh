#!/bin/sh
# Written by ipvsctl realserver for real server 198.18.1.11, mode nat, gateway 198.18.1.1.
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
has_route -4 203.0.113.0/24 198.18.1.1 0 || ip -4 route replace 203.0.113.0/24 via 198.18.1.1 metric 0 || failed=1
has_route -4 198.51.100.7/32 198.18.1.1 0 || ip -4 route replace 198.51.100.7/32 via 198.18.1.1 metric 0 || failed=1
exit "$failed"
