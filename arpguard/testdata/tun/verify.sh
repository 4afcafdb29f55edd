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

# 1. sysctl net/ipv4/conf/all/arp_ignore=1
if [ "$(cat /proc/sys/net/ipv4/conf/all/arp_ignore 2>/dev/null)" = 1 ]
then echo 'ok 1'
else echo 'drift 1'
fi

# 2. sysctl net/ipv4/conf/all/arp_announce=2
if [ "$(cat /proc/sys/net/ipv4/conf/all/arp_announce 2>/dev/null)" = 2 ]
then echo 'ok 2'
else echo 'drift 2'
fi

# 3. sysctl net/ipv4/conf/eth0/arp_ignore=1
if [ "$(cat /proc/sys/net/ipv4/conf/eth0/arp_ignore 2>/dev/null)" = 1 ]
then echo 'ok 3'
else echo 'drift 3'
fi

# 4. sysctl net/ipv4/conf/eth0/arp_announce=2
if [ "$(cat /proc/sys/net/ipv4/conf/eth0/arp_announce 2>/dev/null)" = 2 ]
then echo 'ok 4'
else echo 'drift 4'
fi

# 5. module ipip
if [ -d /sys/module/ipip ]
then echo 'ok 5'
else echo 'drift 5'
fi

# 6. sysctl net/ipv4/conf/tunl0/rp_filter=2
if [ "$(cat /proc/sys/net/ipv4/conf/tunl0/rp_filter 2>/dev/null)" = 2 ]
then echo 'ok 6'
else echo 'drift 6'
fi

# 7. link tunl0 up
if link_up tunl0
then echo 'ok 7'
else echo 'drift 7'
fi

# 8. address 198.18.0.100/32 dev tunl0
if has_addr 198.18.0.100/32 tunl0
then echo 'ok 8'
else echo 'drift 8'
fi

# 9. file /etc/sysctl.d/90-ipvsctl-realserver.conf
if cmp -s /etc/sysctl.d/90-ipvsctl-realserver.conf - <<'IPVSCTL_EOF'
# Written by ipvsctl realserver for real server 198.18.0.11, mode tun, VIPs 198.18.0.100.
# Removed by ipvsctl realserver undo; do not edit.
net/ipv4/conf/all/arp_ignore = 1
net/ipv4/conf/all/arp_announce = 2
net/ipv4/conf/eth0/arp_ignore = 1
net/ipv4/conf/eth0/arp_announce = 2
net/ipv4/conf/tunl0/rp_filter = 2
IPVSCTL_EOF
then echo 'ok 9'
else echo 'drift 9'
fi

# 10. file /etc/ipvsctl/realserver-boot.sh
if cmp -s /etc/ipvsctl/realserver-boot.sh - <<'IPVSCTL_EOF'
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
then echo 'ok 10'
else echo 'drift 10'
fi

# 11. file /etc/systemd/system/ipvsctl-realserver.service
if cmp -s /etc/systemd/system/ipvsctl-realserver.service - <<'IPVSCTL_EOF'
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
then echo 'ok 11'
else echo 'drift 11'
fi

# 12. symlink /etc/systemd/system/multi-user.target.wants/ipvsctl-realserver.service -> /etc/systemd/system/ipvsctl-realserver.service
if [ "$(readlink /etc/systemd/system/multi-user.target.wants/ipvsctl-realserver.service 2>/dev/null)" = /etc/systemd/system/ipvsctl-realserver.service ]
then echo 'ok 12'
else echo 'drift 12'
fi
