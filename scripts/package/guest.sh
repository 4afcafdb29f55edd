#!/usr/bin/env bash
# In the VM test bed (scripts/package/test.sh): installs the .deb with dpkg into the guest's root (an overlay
# on the host's, in RAM), verifies the installed units, applies the lab's state in a namespace, clears the
# kernel's table with ipvsadm -C, and runs ipvsctl-restore.service's ExecStart line: ipvsadm -Sn must be back.
set -euo pipefail
deb=$1
say() { echo "guest: $*"; }
dpkg -i --force-depends "$deb" >/dev/null
[ -x /usr/sbin/ipvsctl ] && [ -d /var/lib/ipvsctl ] && [ "$(stat -c %a /var/lib/ipvsctl)" = 700 ] ||
	{ say "dpkg -i did not install /usr/sbin/ipvsctl and /var/lib/ipvsctl (0700)"; exit 1; }
say "installed: $(/usr/sbin/ipvsctl version)"
for unit in ipvsctl.service ipvsctl-restore.service; do
	# verify loads every unit on the machine and warns about other packages' files too (ldirectord.service's
	# KillMode=none): a line that names another package's unit does not count against ours.
	out=$(systemd-analyze verify "/lib/systemd/system/$unit" 2>&1 |
		grep -v 'Failed to connect\|System has not been booted' |
		awk 'match($0, /^(\/[^: ]*\/)?[A-Za-z0-9@._-]+\.(service|socket|target|mount|timer|path|slice)[:]/) &&
			$0 !~ /^(\/[^: ]*\/)?ipvsctl/ { next } { print }' || true)
	[ -z "$out" ] || { say "systemd-analyze verify $unit:"; echo "$out"; exit 1; }
done
say "systemd-analyze verify: both units clean"

unit=/lib/systemd/system/ipvsctl-restore.service
exec_start=$(sed -n 's/^ExecStart=//p' "$unit")
env_line=$(sed -n 's/^Environment=//p' "$unit")
ip netns add d
ip -n d link set lo up
ip -n d link add eth0 type dummy
ip -n d link add eth1 type dummy
ip -n d addr add 198.18.0.1/24 dev eth0
ip -n d addr add 198.18.1.1/24 dev eth1
ip -n d link set eth0 up
ip -n d link set eth1 up
ip netns exec d env $env_line /usr/sbin/ipvsctl apply -f "$(dirname "$0")/../lab/state.json" >/dev/null
before=$(ip netns exec d ipvsadm -Sn)
ip netns exec d ipvsadm -C
[ -z "$(ip netns exec d ipvsadm -Sn)" ] || { say "ipvsadm -C left a table"; exit 1; }
# shellcheck disable=SC2086 # the unit's own words
ip netns exec d env $env_line $exec_start >/dev/null
after=$(ip netns exec d ipvsadm -Sn)
if [ "$before" != "$after" ]; then
	say "after '$exec_start' ipvsadm -Sn differs:"
	diff <(echo "$before") <(echo "$after") || true
	exit 1
fi
say "'$exec_start' (the unit's ExecStart) restored $(grep -c '^-A' <<<"$after") services and $(grep -c '^-a' <<<"$after") real servers after ipvsadm -C"
