#!/usr/bin/env bash
# The whole product on any Linux machine, in one command: boots Debian's kernel (which has IPVS) in the VM test
# bed (scripts/vm) with a director running `ipvsctl serve`, three DR real servers and a NAT service serving
# HTTP, and a client sending a bounded trickle of requests through the VIPs (scripts/lab/guest.sh). The panel
# and the API answer on the host's 127.0.0.1:PORT only; nothing else leaves the VM. Starts from
# scripts/lab/state.json with an admin user whose password is made for this lab, and prints it, the URL, an API
# token and `ipvsctl --server ... status`. Stays in the foreground: Ctrl-C stops the lab.
#
# Usage: scripts/lab.sh [--port PORT]   start the lab (default port 3636); as root
#        scripts/lab.sh --stop          stop the running lab (from another terminal) and wait until it is gone
# Environment: IPVSCTL_LAB_DIR (runtime files: lock, pids, credentials, the VM console; default
#   /run/ipvsctl-lab), IPVSCTL_LAB_LIFETIME (seconds before the VM is stopped anyway, default 14400),
#   IPVSCTL_LAB_RATE (client requests a second per VIP, default 2), IPVSCTL_LAB_REQUESTS (per VIP, default 10000),
#   IPVSCTL_LAB_LOADTEST (SECONDS: once ready, the lab runs its load test, scripts/lab/loadtest.sh; its lines go
#   to the console log; scripts/loadtest.sh --lab sets it and reads them).
set -euo pipefail

root=$(cd "$(dirname "$0")/.." && pwd)
. "$root/scripts/vm/lib.sh"
lab_dir=${IPVSCTL_LAB_DIR:-/run/ipvsctl-lab}
lifetime=${IPVSCTL_LAB_LIFETIME:-14400}
port=3636

die() {
	echo "lab.sh: $*" >&2
	exit 1
}
usage() { sed -n '2,/^set -euo/{/^set -euo/d;s/^# \{0,1\}//;p}' "$0"; }

# stop_lab: TERM to the lab's lab.sh (or, if that is gone, its run.sh), then wait for the lock, which every
# process of the lab holds (lab.sh, run.sh, qemu), to be free.
stop_lab() {
	[ -e "$lab_dir/lock" ] && ! flock -n "$lab_dir/lock" true || {
		echo "lab.sh: no lab is running"
		return 0
	}
	local pid
	for f in lab.pid vm.pid; do
		pid=$(cat "$lab_dir/$f" 2>/dev/null || true)
		[[ $pid =~ ^[0-9]+$ ]] && kill -TERM "$pid" 2>/dev/null && break
	done
	if ! flock -w 60 "$lab_dir/lock" true; then
		die "the lab did not stop within 60 s (pids in $lab_dir: lab.pid $(cat "$lab_dir/lab.pid" 2>/dev/null), vm.pid $(cat "$lab_dir/vm.pid" 2>/dev/null))"
	fi
	echo "lab.sh: the lab is stopped"
}

while [ $# -gt 0 ]; do
	case $1 in
	--stop)
		stop_lab
		exit 0
		;;
	--port) [ $# -ge 2 ] || die "--port needs a value"; port=$2; shift 2 ;;
	--port=*) port=${1#*=}; shift ;;
	-h | --help) usage; exit 0 ;;
	*) die "unknown argument '$1' (usage: scripts/lab.sh [--port PORT] | --stop)" ;;
	esac
done
[[ $port =~ ^[1-9][0-9]{0,4}$ ]] && [ "$port" -le 65535 ] || die "--port must be a TCP port, got '$port'"
[ "$(id -u)" = 0 ] || die "must run as root: the VM test bed installs its packages and kernel, and the guest runs as root"
command -v go >/dev/null || die "needs Go (1.26) on PATH to build ipvsctl"

mkdir -p "$lab_dir"
chmod 0700 "$lab_dir"
exec 9>>"$lab_dir/lock"
if ! flock -n 9; then
	url=$(sed -n "s/^LAB_URL='\(.*\)'$/\1/p" "$lab_dir/lab.env" 2>/dev/null || true)
	die "a lab is already running (pid $(cat "$lab_dir/lab.pid" 2>/dev/null || echo '?')${url:+, $url}); stop it with scripts/lab.sh --stop"
fi
if (exec 3<>"/dev/tcp/127.0.0.1/$port") 2>/dev/null; then
	die "127.0.0.1:$port is already in use on this machine; free it or pick another with --port"
fi
rm -f "$lab_dir/lab.env" "$lab_dir/vm.pid" "$lab_dir/console.log"
echo $$ >"$lab_dir/lab.pid"

vm_pid=
cleanup() {
	trap - INT TERM HUP EXIT
	if [ -n "$vm_pid" ] && kill -0 "$vm_pid" 2>/dev/null; then
		echo "lab.sh: stopping the lab" >&2
		kill -TERM "$vm_pid" 2>/dev/null || true
		wait "$vm_pid" 2>/dev/null || true
	fi
	rm -f "$lab_dir/lab.env" "$lab_dir/lab.pid" "$lab_dir/vm.pid"
}
trap 'cleanup; exit 130' INT
trap 'cleanup; exit 143' TERM
trap 'cleanup; exit 129' HUP
trap cleanup EXIT

bin_dir=$VM_DIR/lab
mkdir -p "$bin_dir"
bin=$bin_dir/ipvsctl
echo "lab.sh: building ipvsctl"
(cd "$root" && go build -ldflags "$("$root/scripts/package/ldflags.sh")" -o "$bin.new" ./cmd/ipvsctl) || die "go build failed"
mv "$bin.new" "$bin"
(cd "$root" && go build -o "$bin_dir/trickle" ./scripts/lab/trickle) || die "go build ./scripts/lab/trickle failed"

# The admin's password: made now, shown once here, gone with the VM (its database lives in the guest's RAM).
password=$(tr -dc 'A-Za-z0-9' </dev/urandom | head -c 20 || true)
url=http://127.0.0.1:$port

echo "lab.sh: booting the VM (Debian's kernel under QEMU; a minute or two on a busy machine)"
IPVSCTL_BIN=$bin IPVSCTL_LAB_TRICKLE=$bin_dir/trickle IPVSCTL_LAB_PASSWORD=$password \
	IPVSCTL_VM_ENV="IPVSCTL_BIN IPVSCTL_LAB_TRICKLE IPVSCTL_LAB_PASSWORD IPVSCTL_LAB_RATE IPVSCTL_LAB_REQUESTS IPVSCTL_LAB_LOADTEST" \
	"$root/scripts/vm/run.sh" --mem 1024 --timeout "$lifetime" --hostfwd "127.0.0.1:$port-:3636" -- \
	"$root/scripts/lab/guest.sh" >"$lab_dir/console.log" 2>&1 &
vm_pid=$!
echo "$vm_pid" >"$lab_dir/vm.pid"

# Shows the guest's progress lines, whole lines only, until it reports ready (or stops).
token= offset=0
deadline=$((SECONDS + 300))
while [ -z "$token" ]; do
	kill -0 "$vm_pid" 2>/dev/null || {
		wait "$vm_pid" && status=0 || status=$?
		vm_pid=
		echo "lab.sh: the VM stopped before the lab was ready (run.sh exit $status); its console:" >&2
		tail -n 40 "$lab_dir/console.log" >&2
		exit 1
	}
	[ "$SECONDS" -lt "$deadline" ] || die "the lab was not ready after 300 s; its console is $lab_dir/console.log"
	sleep 0.5
	size=$(stat -c %s "$lab_dir/console.log")
	[ "$size" -gt "$offset" ] || continue
	chunk=$(tail -c "+$((offset + 1))" "$lab_dir/console.log" | head -c "$((size - offset))"; echo .)
	chunk=${chunk%.}
	[[ $chunk == *$'\n'* ]] || continue
	chunk=${chunk%$'\n'*}
	offset=$((offset + $(LC_ALL=C; echo "${#chunk}") + 1))
	while IFS= read -r line; do
		case $line in
		"LAB-READY "*) token=${line#LAB-READY } ;;
		"lab: "* | *rror*) echo "$line" ;;
		esac
	done <<<"$chunk"
done

q() { printf "'%s'" "${1//\'/\'\\\'\'}"; }
(
	umask 077
	cat >"$lab_dir/lab.env" <<ENV
LAB_URL=$(q "$url")
LAB_USER=admin
LAB_PASSWORD=$(q "$password")
LAB_TOKEN=$(q "$token")
LAB_BIN=$(q "$bin")
LAB_PID=$$
ENV
)

cat <<BANNER

The lab is up: a director, a DR service over three real servers, a NAT service over two, and a client
sending about ${IPVSCTL_LAB_RATE:-2} requests a second to each VIP (state: scripts/lab/state.json).

  panel and API   $url/            (on this machine's loopback only)
  user            admin
  password        $password        (made for this lab; it goes when the lab stops)
  API token       $token
  log             $lab_dir/console.log  (serve's log); the same credentials: $lab_dir/lab.env

\$ ipvsctl --server $url --token \$TOKEN status
BANNER
"$bin" --server "$url" --token "$token" status || echo "lab.sh: status through the API failed" >&2
cat <<STOP

Stop it with Ctrl-C here, or scripts/lab.sh --stop from another terminal.
STOP

status=0
wait "$vm_pid" || status=$?
vm_pid=
echo "lab.sh: the VM stopped (run.sh exit $status); its console: $lab_dir/console.log" >&2
exit "$status"
