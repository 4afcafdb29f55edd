package arpguard

import (
	"fmt"
	"net/netip"
	"path"
	"strings"
)

// The scripts are POSIX sh, for dash and busybox alike, and need only ip,
// awk, cmp and (in their modes) arptables and modprobe on the real server.

const shellPrelude = `PATH=$PATH:/usr/sbin:/sbin:/usr/bin:/bin
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
`

const journalFuncs = `# journal KEY [PREVIOUS] records a change once, before it is made, with the value it replaces.
journal() {
	line=$1
	[ -z "${2:-}" ] || line="$1 $2"
	awk -v k="$1" 'index($0, k " ") == 1 || $0 == k { f = 1 } END { exit !f }' "$J" || printf '%s\n' "$line" >>"$J"
}
# mkdir_j DIR creates DIR and its missing parents, recording each, outermost first.
mkdir_j() { [ -d "$1" ] || { mkdir_j "$(dirname "$1")" && journal "dir $1" && mkdir "$1"; }; }
`

// RenderApply renders the plan as an idempotent shell script that makes every
// step true, journals what it changes, and prints "changed: STEP" for each.
func RenderApply(t Target, steps []Step, p Paths) string {
	var b strings.Builder
	fmt.Fprintf(&b, "#!/bin/sh\n%sset -eu\numask 022\n%s", header(t, "#"), shellPrelude)
	fmt.Fprintf(&b, "J=%s\n%s", shq(p.Journal), journalFuncs)
	b.WriteString(`# The journal cannot record its own directory before it exists: create the missing levels, then record them.
jdirs=
d=$(dirname "$J")
while [ ! -d "$d" ]; do
	jdirs="$d $jdirs"
	d=$(dirname "$d")
done
mkdir -p "$(dirname "$J")"
touch "$J"
for d in $jdirs; do journal "dir $d"; done
`)
	for i, s := range steps {
		fmt.Fprintf(&b, "\n# %d. %s\nif ! %s\nthen\n", i+1, s, check(s))
		for _, l := range apply(s) {
			fmt.Fprintf(&b, "\t%s\n", l)
		}
		fmt.Fprintf(&b, "\techo %s\nfi\n", shq("changed: "+s.String()))
	}
	return b.String()
}

// RenderVerify renders a read-only script printing "ok N" or "drift N" for
// each step N (counted from 1).
func RenderVerify(t Target, steps []Step) string {
	var b strings.Builder
	fmt.Fprintf(&b, "#!/bin/sh\n%sset -u\n%s", header(t, "#"), shellPrelude)
	for i, s := range steps {
		fmt.Fprintf(&b, "\n# %d. %s\nif %s\nthen echo 'ok %d'\nelse echo 'drift %d'\nfi\n", i+1, s, check(s), i+1, i+1)
	}
	return b.String()
}

// RenderUndo renders the script that reverts, newest first, each change the
// journal records, then removes the journal. It needs no plan: what was
// added is what the real server's journal says, whatever the desired state
// has become since.
func RenderUndo(p Paths) string {
	var b strings.Builder
	fmt.Fprintf(&b, "#!/bin/sh\n# Written by ipvsctl realserver: undo what ipvsctl realserver apply or push added.\nset -u\n%s", shellPrelude)
	fmt.Fprintf(&b, "J=%s\n", shq(p.Journal))
	b.WriteString(`undo_one() {
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
`)
	return b.String()
}

// renderBoot renders the script the systemd unit runs at boot: the runtime
// steps, each guarded, nothing journaled (the journal already holds them).
func renderBoot(t Target, runtime []Step) string {
	var b strings.Builder
	fmt.Fprintf(&b, "#!/bin/sh\n%sset -u\n%sfailed=0\n", header(t, "#"), shellPrelude)
	for _, s := range runtime {
		do := apply(s)
		fmt.Fprintf(&b, "%s || %s || failed=1\n", check(s), do[len(do)-1])
	}
	b.WriteString("exit \"$failed\"\n")
	return b.String()
}

// check renders the shell condition that holds when the step is in effect.
func check(s Step) string {
	switch s := s.(type) {
	case Sysctl:
		return fmt.Sprintf("[ \"$(cat %s 2>/dev/null)\" = %s ]", shq(procPath(s.Key)), shq(s.Value))
	case Module:
		return fmt.Sprintf("[ -d %s ]", shq("/sys/module/"+s.Name))
	case LinkUp:
		return "link_up " + shq(s.Dev)
	case Address:
		return fmt.Sprintf("has_addr %s %s", s.Prefix, shq(s.Dev))
	case ArpRule:
		return fmt.Sprintf("arptables -C %s %s 2>/dev/null", s.Chain, shjoin(s.Args))
	case Route:
		return fmt.Sprintf("has_route %s %s %s %d", family(s.Dst.Addr()), s.Dst, s.Gateway, s.metric())
	case File:
		return fmt.Sprintf("cmp -s %s - <<'IPVSCTL_EOF'\n%sIPVSCTL_EOF", shq(s.Path), s.Content)
	case Symlink:
		return fmt.Sprintf("[ \"$(readlink %s 2>/dev/null)\" = %s ]", shq(s.Path), shq(s.Target))
	}
	panic(fmt.Sprintf("arpguard: unknown step %T", s))
}

// apply renders the commands that make the step true and journal it; the
// last command alone is the change itself (the boot script uses only that).
func apply(s Step) []string {
	switch s := s.(type) {
	case Sysctl:
		p := shq(procPath(s.Key))
		return []string{
			"prev=$(cat " + p + ")",
			fmt.Sprintf("journal %s \"$prev\"", shq(journalSysctl(s))),
			fmt.Sprintf("echo %s >%s", shq(s.Value), p),
		}
	case Module:
		return []string{"journal " + shq("module "+s.Name), "modprobe " + shq(s.Name)}
	case LinkUp:
		return []string{"journal " + shq("linkup "+s.Dev), "ip link set dev " + shq(s.Dev) + " up"}
	case Address:
		return []string{
			"journal " + shq(fmt.Sprintf("address %s %s", s.Prefix, s.Dev)),
			fmt.Sprintf("ip addr add %s dev %s", s.Prefix, shq(s.Dev)),
		}
	case ArpRule:
		return []string{
			"journal " + shq("arptables "+s.Chain+" "+strings.Join(s.Args, " ")),
			fmt.Sprintf("arptables -A %s %s", s.Chain, shjoin(s.Args)),
		}
	case Route:
		f := family(s.Dst.Addr())
		return []string{
			fmt.Sprintf("prev=$(route_line %s %s %d)", f, s.Dst, s.metric()),
			fmt.Sprintf("journal %s \"$prev\"", shq(journalRoute(s))),
			fmt.Sprintf("ip %s route replace %s via %s metric %d", f, s.Dst, s.Gateway, s.metric()),
		}
	case File:
		dir := path.Dir(s.Path)
		return []string{
			"mkdir_j " + shq(dir),
			fmt.Sprintf("[ -e %s ] || journal %s", shq(s.Path), shq("file "+s.Path)),
			fmt.Sprintf("cat >%s <<'IPVSCTL_EOF'\n%sIPVSCTL_EOF", shq(s.Path), s.Content),
			fmt.Sprintf("chmod %o %s", s.Perm, shq(s.Path)),
		}
	case Symlink:
		dir := path.Dir(s.Path)
		return []string{
			"mkdir_j " + shq(dir),
			fmt.Sprintf("[ -e %s ] || [ -L %s ] || journal %s", shq(s.Path), shq(s.Path), shq("file "+s.Path)),
			fmt.Sprintf("ln -sfn %s %s", shq(s.Target), shq(s.Path)),
		}
	}
	panic(fmt.Sprintf("arpguard: unknown step %T", s))
}

func journalSysctl(s Sysctl) string { return "sysctl " + s.Key + " " + s.Value }
func journalRoute(s Route) string   { return "route " + s.Dst.String() + " " + s.Gateway.String() }

func procPath(key string) string { return "/proc/sys/" + key }

func family(a netip.Addr) string {
	if a.Is4() {
		return "-4"
	}
	return "-6"
}

// shq quotes s for sh unless it is a plain word.
func shq(s string) string {
	plain := s != ""
	for _, r := range s {
		if !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || strings.ContainsRune("/._-:=+,@%", r)) {
			plain = false
			break
		}
	}
	if plain {
		return s
	}
	return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
}

func shjoin(args []string) string {
	q := make([]string, len(args))
	for i, a := range args {
		q[i] = shq(a)
	}
	return strings.Join(q, " ")
}
