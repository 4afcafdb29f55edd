#!/bin/sh
# Written by ipvsctl realserver for real server 198.18.0.11, mode tun, VIPs 198.18.0.100.
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

# 1. sysctl net/ipv4/conf/all/arp_ignore=1
if ! [ "$(cat /proc/sys/net/ipv4/conf/all/arp_ignore 2>/dev/null)" = 1 ]
then
	prev=$(cat /proc/sys/net/ipv4/conf/all/arp_ignore)
	journal 'sysctl net/ipv4/conf/all/arp_ignore 1' "$prev"
	echo 1 >/proc/sys/net/ipv4/conf/all/arp_ignore
	echo 'changed: sysctl net/ipv4/conf/all/arp_ignore=1'
fi

# 2. sysctl net/ipv4/conf/all/arp_announce=2
if ! [ "$(cat /proc/sys/net/ipv4/conf/all/arp_announce 2>/dev/null)" = 2 ]
then
	prev=$(cat /proc/sys/net/ipv4/conf/all/arp_announce)
	journal 'sysctl net/ipv4/conf/all/arp_announce 2' "$prev"
	echo 2 >/proc/sys/net/ipv4/conf/all/arp_announce
	echo 'changed: sysctl net/ipv4/conf/all/arp_announce=2'
fi

# 3. sysctl net/ipv4/conf/eth0/arp_ignore=1
if ! [ "$(cat /proc/sys/net/ipv4/conf/eth0/arp_ignore 2>/dev/null)" = 1 ]
then
	prev=$(cat /proc/sys/net/ipv4/conf/eth0/arp_ignore)
	journal 'sysctl net/ipv4/conf/eth0/arp_ignore 1' "$prev"
	echo 1 >/proc/sys/net/ipv4/conf/eth0/arp_ignore
	echo 'changed: sysctl net/ipv4/conf/eth0/arp_ignore=1'
fi

# 4. sysctl net/ipv4/conf/eth0/arp_announce=2
if ! [ "$(cat /proc/sys/net/ipv4/conf/eth0/arp_announce 2>/dev/null)" = 2 ]
then
	prev=$(cat /proc/sys/net/ipv4/conf/eth0/arp_announce)
	journal 'sysctl net/ipv4/conf/eth0/arp_announce 2' "$prev"
	echo 2 >/proc/sys/net/ipv4/conf/eth0/arp_announce
	echo 'changed: sysctl net/ipv4/conf/eth0/arp_announce=2'
fi

# 5. module ipip
if ! [ -d /sys/module/ipip ]
then
	journal 'module ipip'
	modprobe ipip
	echo 'changed: module ipip'
fi

# 6. sysctl net/ipv4/conf/tunl0/rp_filter=2
if ! [ "$(cat /proc/sys/net/ipv4/conf/tunl0/rp_filter 2>/dev/null)" = 2 ]
then
	prev=$(cat /proc/sys/net/ipv4/conf/tunl0/rp_filter)
	journal 'sysctl net/ipv4/conf/tunl0/rp_filter 2' "$prev"
	echo 2 >/proc/sys/net/ipv4/conf/tunl0/rp_filter
	echo 'changed: sysctl net/ipv4/conf/tunl0/rp_filter=2'
fi

# 7. link tunl0 up
if ! link_up tunl0
then
	journal 'linkup tunl0'
	ip link set dev tunl0 up
	echo 'changed: link tunl0 up'
fi

# 8. address 198.18.0.100/32 dev tunl0
if ! has_addr 198.18.0.100/32 tunl0
then
	journal 'address 198.18.0.100/32 tunl0'
	ip addr add 198.18.0.100/32 dev tunl0
	echo 'changed: address 198.18.0.100/32 dev tunl0'
fi

# 9. file /etc/sysctl.d/90-ipvsctl-realserver.conf
if ! cmp -s /etc/sysctl.d/90-ipvsctl-realserver.conf - <<'IPVSCTL_EOF'
# Written by ipvsctl realserver for real server 198.18.0.11, mode tun, VIPs 198.18.0.100.
# Removed by ipvsctl realserver undo; do not edit.
net/ipv4/conf/all/arp_ignore = 1
net/ipv4/conf/all/arp_announce = 2
net/ipv4/conf/eth0/arp_ignore = 1
net/ipv4/conf/eth0/arp_announce = 2
net/ipv4/conf/tunl0/rp_filter = 2
IPVSCTL_EOF
then
	mkdir_j /etc/sysctl.d
	[ -e /etc/sysctl.d/90-ipvsctl-realserver.conf ] || journal 'file /etc/sysctl.d/90-ipvsctl-realserver.conf'
	cat >/etc/sysctl.d/90-ipvsctl-realserver.conf <<'IPVSCTL_EOF'
# Written by ipvsctl realserver for real server 198.18.0.11, mode tun, VIPs 198.18.0.100.
# Removed by ipvsctl realserver undo; do not edit.
net/ipv4/conf/all/arp_ignore = 1
net/ipv4/conf/all/arp_announce = 2
net/ipv4/conf/eth0/arp_ignore = 1
net/ipv4/conf/eth0/arp_announce = 2
net/ipv4/conf/tunl0/rp_filter = 2
IPVSCTL_EOF
	chmod 644 /etc/sysctl.d/90-ipvsctl-realserver.conf
	echo 'changed: file /etc/sysctl.d/90-ipvsctl-realserver.conf'
fi

# 10. file /etc/ipvsctl/realserver-boot.sh
if ! cmp -s /etc/ipvsctl/realserver-boot.sh - <<'IPVSCTL_EOF'
#!/bin/sh
# Written by ipvsctl realserver for real server 198.18.0.11, mode tun, VIPs 198.18.0.100.
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
[ -d /sys/module/ipip ] || modprobe ipip || failed=1
[ "$(cat /proc/sys/net/ipv4/conf/tunl0/rp_filter 2>/dev/null)" = 2 ] || echo 2 >/proc/sys/net/ipv4/conf/tunl0/rp_filter || failed=1
link_up tunl0 || ip link set dev tunl0 up || failed=1
has_addr 198.18.0.100/32 tunl0 || ip addr add 198.18.0.100/32 dev tunl0 || failed=1
exit "$failed"
IPVSCTL_EOF
then
	mkdir_j /etc/ipvsctl
	[ -e /etc/ipvsctl/realserver-boot.sh ] || journal 'file /etc/ipvsctl/realserver-boot.sh'
	cat >/etc/ipvsctl/realserver-boot.sh <<'IPVSCTL_EOF'
#!/bin/sh
# Written by ipvsctl realserver for real server 198.18.0.11, mode tun, VIPs 198.18.0.100.
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
[ -d /sys/module/ipip ] || modprobe ipip || failed=1
[ "$(cat /proc/sys/net/ipv4/conf/tunl0/rp_filter 2>/dev/null)" = 2 ] || echo 2 >/proc/sys/net/ipv4/conf/tunl0/rp_filter || failed=1
link_up tunl0 || ip link set dev tunl0 up || failed=1
has_addr 198.18.0.100/32 tunl0 || ip addr add 198.18.0.100/32 dev tunl0 || failed=1
exit "$failed"
IPVSCTL_EOF
	chmod 755 /etc/ipvsctl/realserver-boot.sh
	echo 'changed: file /etc/ipvsctl/realserver-boot.sh'
fi

# 11. file /etc/systemd/system/ipvsctl-realserver.service
if ! cmp -s /etc/systemd/system/ipvsctl-realserver.service - <<'IPVSCTL_EOF'
# Written by ipvsctl realserver for real server 198.18.0.11, mode tun, VIPs 198.18.0.100.
# Removed by ipvsctl realserver undo; do not edit.
[Unit]
Description=ipvsctl real-server preparation (LVS tun)
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
# Written by ipvsctl realserver for real server 198.18.0.11, mode tun, VIPs 198.18.0.100.
# Removed by ipvsctl realserver undo; do not edit.
[Unit]
Description=ipvsctl real-server preparation (LVS tun)
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

# 12. symlink /etc/systemd/system/multi-user.target.wants/ipvsctl-realserver.service -> /etc/systemd/system/ipvsctl-realserver.service
if ! [ "$(readlink /etc/systemd/system/multi-user.target.wants/ipvsctl-realserver.service 2>/dev/null)" = /etc/systemd/system/ipvsctl-realserver.service ]
then
	mkdir_j /etc/systemd/system/multi-user.target.wants
	[ -e /etc/systemd/system/multi-user.target.wants/ipvsctl-realserver.service ] || [ -L /etc/systemd/system/multi-user.target.wants/ipvsctl-realserver.service ] || journal 'file /etc/systemd/system/multi-user.target.wants/ipvsctl-realserver.service'
	ln -sfn /etc/systemd/system/ipvsctl-realserver.service /etc/systemd/system/multi-user.target.wants/ipvsctl-realserver.service
	echo 'changed: symlink /etc/systemd/system/multi-user.target.wants/ipvsctl-realserver.service -> /etc/systemd/system/ipvsctl-realserver.service'
fi
