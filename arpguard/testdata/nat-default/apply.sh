#!/bin/sh
# Written by ipvsctl realserver for real server 198.18.1.11, mode nat, gateway 198.18.1.1.
# Removed by ipvsctl realserver undo; do not edit.
set -eu
umask 022
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
# journal KEY [PREVIOUS] records a change once, before it is made, with the value it replaces.
journal() {
	line=$1
	[ -z "${2:-}" ] || line="$1 $2"
	awk -v k="$1" 'index($0, k " ") == 1 || $0 == k { f = 1 } END { exit !f }' "$J" || printf '%s\n' "$line" >>"$J"
}
# mkdir_j DIR creates DIR and its missing parents, recording each, outermost first.
mkdir_j() { [ -d "$1" ] || { mkdir_j "$(dirname "$1")" && journal "dir $1" && mkdir "$1"; }; }
# The journal cannot record its own directory before it exists: create the missing levels, then record them.
jdirs=
d=$(dirname "$J")
while [ ! -d "$d" ]; do
	jdirs="$d $jdirs"
	d=$(dirname "$d")
done
mkdir -p "$(dirname "$J")"
touch "$J"
for d in $jdirs; do journal "dir $d"; done

# 1. route 0.0.0.0/0 via 198.18.1.1
if ! has_route -4 0.0.0.0/0 198.18.1.1 0
then
	prev=$(route_line -4 0.0.0.0/0 0)
	journal 'route 0.0.0.0/0 198.18.1.1' "$prev"
	ip -4 route replace 0.0.0.0/0 via 198.18.1.1 metric 0
	echo 'changed: route 0.0.0.0/0 via 198.18.1.1'
fi

# 2. file /etc/ipvsctl/realserver-boot.sh
if ! cmp -s /etc/ipvsctl/realserver-boot.sh - <<'IPVSCTL_EOF'
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
has_route -4 0.0.0.0/0 198.18.1.1 0 || ip -4 route replace 0.0.0.0/0 via 198.18.1.1 metric 0 || failed=1
exit "$failed"
IPVSCTL_EOF
then
	mkdir_j /etc/ipvsctl
	[ -e /etc/ipvsctl/realserver-boot.sh ] || journal 'file /etc/ipvsctl/realserver-boot.sh'
	cat >/etc/ipvsctl/realserver-boot.sh <<'IPVSCTL_EOF'
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
has_route -4 0.0.0.0/0 198.18.1.1 0 || ip -4 route replace 0.0.0.0/0 via 198.18.1.1 metric 0 || failed=1
exit "$failed"
IPVSCTL_EOF
	chmod 755 /etc/ipvsctl/realserver-boot.sh
	echo 'changed: file /etc/ipvsctl/realserver-boot.sh'
fi

# 3. file /etc/systemd/system/ipvsctl-realserver.service
if ! cmp -s /etc/systemd/system/ipvsctl-realserver.service - <<'IPVSCTL_EOF'
# Written by ipvsctl realserver for real server 198.18.1.11, mode nat, gateway 198.18.1.1.
# Removed by ipvsctl realserver undo; do not edit.
[Unit]
Description=ipvsctl real-server preparation (LVS nat)
Wants=network-online.target
After=network-online.target

[Service]
Type=oneshot
RemainAfterExit=yes
ExecStart=/bin/sh /etc/ipvsctl/realserver-boot.sh

[Install]
WantedBy=multi-user.target
IPVSCTL_EOF
then
	mkdir_j /etc/systemd/system
	[ -e /etc/systemd/system/ipvsctl-realserver.service ] || journal 'file /etc/systemd/system/ipvsctl-realserver.service'
	cat >/etc/systemd/system/ipvsctl-realserver.service <<'IPVSCTL_EOF'
# Written by ipvsctl realserver for real server 198.18.1.11, mode nat, gateway 198.18.1.1.
# Removed by ipvsctl realserver undo; do not edit.
[Unit]
Description=ipvsctl real-server preparation (LVS nat)
Wants=network-online.target
After=network-online.target

[Service]
Type=oneshot
RemainAfterExit=yes
ExecStart=/bin/sh /etc/ipvsctl/realserver-boot.sh

[Install]
WantedBy=multi-user.target
IPVSCTL_EOF
	chmod 644 /etc/systemd/system/ipvsctl-realserver.service
	echo 'changed: file /etc/systemd/system/ipvsctl-realserver.service'
fi

# 4. symlink /etc/systemd/system/multi-user.target.wants/ipvsctl-realserver.service -> /etc/systemd/system/ipvsctl-realserver.service
if ! [ "$(readlink /etc/systemd/system/multi-user.target.wants/ipvsctl-realserver.service 2>/dev/null)" = /etc/systemd/system/ipvsctl-realserver.service ]
then
	mkdir_j /etc/systemd/system/multi-user.target.wants
	[ -e /etc/systemd/system/multi-user.target.wants/ipvsctl-realserver.service ] || [ -L /etc/systemd/system/multi-user.target.wants/ipvsctl-realserver.service ] || journal 'file /etc/systemd/system/multi-user.target.wants/ipvsctl-realserver.service'
	ln -sfn /etc/systemd/system/ipvsctl-realserver.service /etc/systemd/system/multi-user.target.wants/ipvsctl-realserver.service
	echo 'changed: symlink /etc/systemd/system/multi-user.target.wants/ipvsctl-realserver.service -> /etc/systemd/system/ipvsctl-realserver.service'
fi
