#!/bin/sh
# Written by ipvsctl realserver: undo what ipvsctl realserver apply or push added.
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
J=/var/lib/ipvsctl/realserver.journal
undo_one() {
	kind=$1
	shift
	case $kind in
	sysctl) echo "$3" >"/proc/sys/$1" ;;
	module) modprobe -r "$1" 2>/dev/null || true ;; # still in use by a tunnel that is not ours
	linkup) ! link_up "$1" || ip link set dev "$1" down ;;
	address) ! has_addr "$1" "$2" || ip addr del "$1" dev "$2" ;;
	arptables) ! arptables -C "$@" 2>/dev/null || arptables -D "$@" ;;
	route)
		d=$1 g=$2
		shift 2
		f=-4 m=0
		case $d in *:*) f=-6 m=1024 ;; esac
		! has_route $f "$d" "$g" $m || ip $f route del "$d" via "$g" metric $m || return 1
		[ $# -eq 0 ] || ip $f route replace "$@"
		;;
	file) rm -f "$1" ;;
	*)
		echo "unknown journal record: $kind" >&2
		return 1
		;;
	esac
}
if [ ! -f "$J" ]; then
	echo "nothing to undo: no journal $J"
	exit 0
fi
failed=0
lines=$(awk '{ l[NR] = $0 } END { for (i = NR; i > 0; i--) print l[i] }' "$J")
dirs=
while IFS= read -r line; do
	case $line in
	'') continue ;;
	# Directories go last, once the files in them (the journal among them) are gone.
	"dir "*)
		dirs="$dirs ${line#dir }"
		continue
		;;
	esac
	# shellcheck disable=SC2086 # records are plain words
	if undo_one $line; then
		echo "undone: $line"
	else
		echo "failed: $line" >&2
		failed=1
	fi
done <<IPVSCTL_EOF
$lines
IPVSCTL_EOF
# A failed record stays journaled: every undo is guarded, so running undo again is safe.
[ "$failed" -eq 0 ] || exit 1
rm -f "$J"
for d in $dirs; do
	# Not empty: something else lives there now, and stays.
	! rmdir "$d" 2>/dev/null || echo "undone: dir $d"
done
