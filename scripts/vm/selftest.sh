#!/usr/bin/env bash
# Self-check of the VM test bed: boots the VM through run.sh and proves what the project's tests rely on
# (IPVS and scheduler module autoload, namespaces, veth, iptables, arptables, exit status, quoting, timeout).
# Usage: selftest.sh          (as root; exits 0 when every check passed)
# Inside the guest it runs itself again with --in-guest.
set -euo pipefail

here=$(cd "$(dirname "$0")" && pwd)
failures=0

pass() { echo "PASS  $*"; }
fail() {
	echo "FAIL  $*"
	failures=$((failures + 1))
}
# check NAME COMMAND...: runs COMMAND, shows its output only when it fails.
check() {
	local name=$1 out
	shift
	if out=$("$@" 2>&1); then
		pass "$name"
	else
		fail "$name (exit $?): $*"
		[ -z "$out" ] || printf '%s\n' "$out" | sed 's/^/      /'
	fi
}

in_guest() {
	echo "guest: kernel $(uname -r), hostname $(hostname)"
	check "hostname is set" test "$(hostname)" = ipvsctl-vm
	check "loopback is up" sh -c 'ip -o link show lo | grep -q "[<,]UP[,>]"'
	check "PATH has /usr/sbin and /sbin" sh -c 'case ":$PATH:" in *:/usr/sbin:*:/sbin:*|*:/sbin:*:/usr/sbin:*) ;; *) exit 1;; esac'
	check "/tmp is writable" sh -c 'echo x >/tmp/selftest && rm /tmp/selftest'

	check "/proc/net/ip_vs absent at boot" test ! -e /proc/net/ip_vs
	check "ipvsadm -Ln loads ip_vs" ipvsadm -Ln
	check "/proc/net/ip_vs present after ipvsadm" test -e /proc/net/ip_vs
	check "ip_vs_mh not loaded yet" sh -c '! grep -q "^ip_vs_mh " /proc/modules'
	check "ipvsadm -A -t 198.18.0.1:80 -s mh" ipvsadm -A -t 198.18.0.1:80 -s mh
	check "the kernel autoloaded ip_vs_mh" grep -q '^ip_vs_mh ' /proc/modules
	check "add a NAT real server" ipvsadm -a -t 198.18.0.1:80 -r 198.18.0.11:80 -m -w 2
	check "ipvsadm reads the service back" sh -c \
		'ipvsadm -Ln | grep -q "TCP  198.18.0.1:80 mh" && ipvsadm -Ln | grep -q "198.18.0.11:80 *Masq *2"'
	check "ipvsadm -C" ipvsadm -C

	check "ip netns add x" ip netns add x
	check "veth pair created" ip link add vtest0 type veth peer name vtest1
	check "veth end moved into netns x" ip link set vtest1 netns x
	check "veth addresses and links up" sh -c '
		ip addr add 198.18.1.1/24 dev vtest0 && ip link set vtest0 up &&
		ip -n x addr add 198.18.1.2/24 dev vtest1 && ip -n x link set vtest1 up && ip -n x link set lo up'
	check "ping across the veth into netns x" busybox ping -c 1 -W 5 198.18.1.2

	echo "guest: $(iptables -V) (default alternative: $(readlink -f "$(command -v iptables)"))"
	check "iptables -t mangle -L" iptables -t mangle -L -n
	check "iptables MARK rule (multiport, as ipvsctl writes)" iptables -t mangle -A PREROUTING -d 198.18.0.1/32 \
		-p tcp -m multiport --dports 80,443 -j MARK --set-xmark 0x1/0xffffffff
	check "iptables -t mangle -S shows the rule" sh -c 'iptables -t mangle -S PREROUTING | grep -q "set-xmark 0x1"'
	check "iptables -t mangle -F" iptables -t mangle -F
	echo "guest: $(arptables -V)"
	check "arptables -L" arptables -L
	check "arptables DROP rule for a VIP" arptables -A INPUT -d 198.18.0.1 -j DROP
	check "arptables -F" arptables -F
	echo "guest: modules loaded: $(cut -d' ' -f1 /proc/modules | sort | tr '\n' ' ')"
	[ "$failures" = 0 ]
}

on_host() {
	[ "$(id -u)" = 0 ] || {
		echo "selftest.sh: must run as root (setup.sh installs packages)" >&2
		exit 1
	}
	"$here/setup.sh" >/dev/null

	local start=$SECONDS out status
	set +e
	out=$("$here/run.sh" -- "$here/selftest.sh" --in-guest)
	status=$?
	set -e
	printf '%s\n' "$out"
	if [ "$status" = 0 ]; then pass "guest checks (boot and run took $((SECONDS - start)) s)"; else fail "guest checks (run.sh exit $status)"; fi
	case $out in
	*$'\r'* | *IPVSCTL-VM-* | *SeaBIOS*) fail "run.sh output carries CRs, markers or boot noise" ;;
	*) pass "run.sh output is clean (no CR, markers, boot noise)" ;;
	esac

	# One more boot: exit status, quoting, the working directory and IPVSCTL_VM_ENV.
	local tricky="it's \"quoted\" \$HOME \\ and
two lines"
	set +e
	out=$(cd / && SELFTEST_VALUE=$tricky IPVSCTL_VM_ENV="SELFTEST_VALUE SELFTEST_UNSET" "$here/run.sh" -- sh -c '
		[ "$SELFTEST_VALUE" = "$1" ] || { echo "env var differs: <$SELFTEST_VALUE>"; exit 1; }
		[ "$(pwd)" = / ] || { echo "cwd differs: $(pwd)"; exit 1; }
		[ -z "${SELFTEST_UNSET+set}" ] || { echo "SELFTEST_UNSET is set"; exit 1; }
		printf "last line without newline"; exit 3' sh "$tricky")
	status=$?
	set -e
	if [ "$status" = 3 ]; then pass "exit status 3 propagates"; else fail "exit status: want 3, got $status (output: $out)"; fi
	if [ "$out" = "last line without newline" ]; then
		pass "arguments, IPVSCTL_VM_ENV and the working directory reach the guest"
	else
		fail "quoting/env/cwd: output was <$out>"
	fi

	start=$SECONDS
	set +e
	"$here/run.sh" --timeout 3 -- sleep 60 >/dev/null 2>&1
	status=$?
	set -e
	if [ "$status" = 124 ] && [ $((SECONDS - start)) -lt 20 ]; then
		pass "--timeout kills the VM and exits 124"
	else
		fail "--timeout 3: exit $status after $((SECONDS - start)) s"
	fi

	if [ "$failures" = 0 ]; then
		echo "selftest: all checks passed"
	else
		echo "selftest: $failures check(s) failed"
		exit 1
	fi
}

case ${1:-} in
--in-guest) in_guest ;;
"") on_host ;;
*)
	echo "usage: selftest.sh" >&2
	exit 2
	;;
esac
