package arpguard

import (
	"bytes"
	"context"
	"fmt"
	"net/netip"
	"os"
	"os/exec"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/ipvsctl/ipvsctl/arpguard/sshtest"

	"github.com/ipvsctl/ipvsctl/internal/testenv"
)

// Tests in this file change a real kernel. Each runs in a network namespace
// it creates: the parent test re-executes the test binary under "ip netns
// exec" (which also mounts a fresh /sys) and the child does the work.

const netnsChildEnv = "ARPGUARD_TEST_IN_NETNS"

func requireRootTools(t *testing.T, tools ...string) {
	t.Helper()
	if os.Geteuid() != 0 {
		testenv.Need(t, "needs root to create network namespaces")
	}
	for _, tool := range append([]string{"ip"}, tools...) {
		if _, err := exec.LookPath(tool); err != nil {
			testenv.Needf(t, "needs %s: %v", tool, err)
		}
	}
}

// newNetns creates a network namespace deleted when the test ends.
func newNetns(t *testing.T) string { return sshtest.NewNetns(t) }

// inNetns runs the current test again in a fresh namespace and reports true
// in the parent, which should then return; the child gets false.
func inNetns(t *testing.T, tools ...string) (parent bool) {
	t.Helper()
	if os.Getenv(netnsChildEnv) != "" {
		return false
	}
	requireRootTools(t, tools...)
	ns := newNetns(t)
	ctx, cancel := context.WithTimeout(t.Context(), 300*time.Second)
	defer cancel()
	var run []string
	for _, part := range strings.Split(t.Name(), "/") {
		run = append(run, "^"+regexp.QuoteMeta(part)+"$")
	}
	cmd := exec.CommandContext(ctx, "ip", "netns", "exec", ns, os.Args[0], "-test.run="+strings.Join(run, "/"), "-test.v", "-test.count=1")
	cmd.Env = append(os.Environ(), netnsChildEnv+"=1")
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("in namespace %s: %v\n%s", ns, err, out)
	}
	if bytes.Contains(out, []byte("--- SKIP")) {
		reason := "skipped"
		if m := regexp.MustCompile(`\S+\.go:\d+: (.*)`).FindAllSubmatch(out, -1); m != nil {
			reason = string(m[len(m)-1][1])
		}
		// The child's skip keeps its kind: a case another test runs is
		// skipped here too; anything else could not run, and fails under CI.
		if m := regexp.MustCompile(`\(run by ([^)]*)\)`).FindSubmatch(out); m != nil {
			testenv.Elsewhere(t, string(m[1]), "in namespace: "+reason)
		}
		testenv.Needf(t, "in namespace: %s", reason)
	}
	if !bytes.Contains(out, []byte("--- PASS")) {
		t.Fatalf("in namespace %s: the test did not run:\n%s", ns, out)
	}
	t.Logf("in namespace %s:\n%s", ns, out)
	return true
}

func sh(t *testing.T, ctx context.Context, script string) string {
	t.Helper()
	cmd := exec.CommandContext(ctx, "sh", "-c", script)
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("sh -c %q: %v\n%s", script, err, out)
	}
	return string(out)
}

// realServerNetns makes the namespace look like a real server: lo up, eth0
// (one end of a veth pair) with the RIP, and an operator's default route.
func realServerNetns(t *testing.T, ctx context.Context) {
	t.Helper()
	sh(t, ctx, `set -e
echo 0 >/proc/sys/net/ipv6/conf/all/accept_dad
echo 0 >/proc/sys/net/ipv6/conf/default/accept_dad
ip link set lo up
ip link add eth0 type veth peer name eth0p
ip addr add 198.18.0.11/24 dev eth0
ip addr add 198.18.1.11/24 dev eth0
ip addr add 2001:db8::11/64 dev eth0
ip link set eth0 up
ip link set eth0p up
ip route add default via 198.18.0.254 dev eth0 proto static
# The kernel adds the links' IPv6 link-local addresses (and their routes) a
# moment after they come up, from a work queue: the "before" a test reads
# must already hold them, or a late one reads as a change of the undo's.
for i in $(seq 100); do
	if [ -n "$(ip -6 -o addr show dev eth0 scope link)" ] && [ -n "$(ip -6 -o addr show dev eth0p scope link)" ]; then break; fi
	sleep 0.05
done
[ -n "$(ip -6 -o addr show dev eth0 scope link)" ] && [ -n "$(ip -6 -o addr show dev eth0p scope link)" ]`)
}

// observe reads what a preparation could touch with independent tools, not
// with arpguard's own code.
func observe(t *testing.T, ctx context.Context) string {
	t.Helper()
	var b strings.Builder
	for _, l := range strings.Split(sh(t, ctx, "ip -o addr show"), "\n") {
		if f := strings.Fields(l); len(f) >= 4 {
			fmt.Fprintf(&b, "addr %s %s %s\n", f[1], f[2], f[3])
		}
	}
	for _, l := range strings.Split(sh(t, ctx, "ip -o link show"), "\n") {
		if f := strings.Fields(l); len(f) >= 3 {
			// "tunl0@NONE:", "eth0@eth0p:": the name is what comes before the @.
			name, _, _ := strings.Cut(strings.TrimSuffix(f[1], ":"), "@")
			fmt.Fprintf(&b, "link %s up=%t\n", name, regexp.MustCompile(`[<,]UP[,>]`).MatchString(f[2]))
		}
	}
	b.WriteString(sh(t, ctx, "ip -4 route show table main; ip -6 route show table main"))
	b.WriteString(sh(t, ctx, `for f in /proc/sys/net/ipv4/conf/*/arp_ignore /proc/sys/net/ipv4/conf/*/arp_announce /proc/sys/net/ipv4/conf/*/rp_filter; do echo "$f $(cat "$f")"; done`))
	// Not arptables-save nor -S: they resolve the mangle address to a name,
	// sending DNS queries. An emptied nf_tables arp filter table is inert,
	// so only rules are compared.
	if _, err := exec.LookPath("arptables"); err == nil {
		chain := ""
		for _, l := range strings.Split(sh(t, ctx, "arptables -L -n 2>/dev/null || true"), "\n") {
			if f := strings.Fields(l); len(f) > 1 && f[0] == "Chain" {
				chain = f[1]
			} else if strings.HasPrefix(l, "-") {
				fmt.Fprintf(&b, "-A %s %s\n", chain, l)
			}
		}
	}
	lines := strings.Split(strings.TrimSpace(b.String()), "\n")
	slices.Sort(lines)
	return strings.Join(lines, "\n")
}

func netnsTargets() map[string]Target {
	a := netip.MustParseAddr
	return map[string]Target{
		"dr-sysctl": {RIP: a("198.18.0.11"), Interface: "eth0", Mode: ModeDRSysctl,
			VIPs: []netip.Addr{a("198.18.0.100"), a("2001:db8::100")}},
		"dr-arptables": {RIP: a("198.18.0.11"), Interface: "eth0", Mode: ModeDRArptables,
			VIPs: []netip.Addr{a("198.18.0.100"), a("198.18.0.101")}},
		"tun":         {RIP: a("198.18.0.11"), Interface: "eth0", Mode: ModeTUN, VIPs: []netip.Addr{a("198.18.0.100")}},
		"nat-default": {RIP: a("198.18.1.11"), Interface: "eth0", Mode: ModeNAT, Gateway: a("198.18.1.1")},
		"nat-host": {RIP: a("198.18.1.11"), Interface: "eth0", Mode: ModeNAT, Gateway: a("198.18.1.1"), Route: RouteHost,
			ClientPrefixes: []netip.Prefix{netip.MustParsePrefix("203.0.113.0/24"), netip.MustParsePrefix("198.51.100.7/32")}},
	}
}

// skipUnsupported skips a mode the host kernel or tools cannot do, saying why.
func skipUnsupported(t *testing.T, ctx context.Context, tg Target) {
	t.Helper()
	switch tg.Mode {
	case ModeDRArptables:
		if _, err := exec.LookPath("arptables"); err != nil {
			testenv.Need(t, "arptables mode: arptables is not installed")
		}
		if out, err := exec.CommandContext(ctx, "arptables", "-L", "INPUT", "-n").CombinedOutput(); err != nil {
			testenv.Needf(t, "arptables mode: arptables does not work on this kernel: %v: %s", err, out)
		}
		if out, err := exec.CommandContext(ctx, "arptables", "-C", "INPUT", "-d", "192.0.2.1", "-j", "DROP").CombinedOutput(); err != nil && !strings.Contains(string(out), "Bad rule") {
			testenv.Needf(t, "arptables mode: this arptables has no -C (legacy?): %v: %s", err, out)
		}
	case ModeTUN:
		if _, err := os.Stat("/sys/module/ipip"); err != nil {
			if out, err := exec.CommandContext(ctx, "modprobe", "-n", "ipip").CombinedOutput(); err != nil {
				testenv.Elsewhere(t, "scripts/vmtest TestRealserverTunNetnsApplyUndo, in the VM's kernel", fmt.Sprintf("tun mode: the host kernel cannot load ipip: %v: %s", err, out))
			}
		}
	}
}

// TestNetnsApplyUndo proves on a real kernel, for each mode, that the local
// executor and the shell script each make every step hold (read back with
// ip, arptables -S and /proc), that a second apply changes nothing, and
// that undo (by either of them, whichever applied) leaves the namespace and
// the files exactly as they were.
func TestNetnsApplyUndo(t *testing.T) {
	for name := range netnsTargets() {
		t.Run(name, func(t *testing.T) {
			if inNetns(t) {
				return
			}
			netnsApplyUndo(t, netnsTargets()[name])
		})
	}
}

func netnsApplyUndo(t *testing.T, tg Target) {
	ctx, cancel := context.WithTimeout(t.Context(), 240*time.Second)
	defer cancel()
	skipUnsupported(t, ctx, tg)
	realServerNetns(t, ctx)
	root := t.TempDir()
	paths := DefaultPaths().UnderRoot(root)
	steps, err := Plan(tg, paths)
	if err != nil {
		t.Fatal(err)
	}
	sys, err := NewNetlinkSystem()
	if err != nil {
		t.Fatal(err)
	}
	defer sys.Close()
	l := &Local{Sys: sys, Paths: paths, Logger: discard()}
	before, beforeFiles := observe(t, ctx), snapshotFiles(t, root)

	assertPrepared := func(how string) {
		t.Helper()
		if drift, err := l.Check(ctx, steps); err != nil || len(drift) > 0 {
			t.Fatalf("after %s: %s, err %v", how, driftSummary(drift), err)
		}
		out := sh(t, ctx, RenderVerify(tg, steps))
		if strings.Contains(out, "drift") {
			t.Fatalf("after %s the verify script says:\n%s", how, out)
		}
		after := observe(t, ctx)
		for _, s := range steps {
			if want := independentEvidence(s); want != "" && !strings.Contains(after, want) {
				t.Errorf("after %s: %q not seen by ip/arptables -S/proc:\n%s", how, want, after)
			}
		}
	}
	assertRestored := func(how string) {
		t.Helper()
		if diff := cmp.Diff(before, observe(t, ctx)); diff != "" {
			t.Errorf("after %s the kernel differs from before (-before +after):\n%s", how, diff)
		}
		if diff := cmp.Diff(beforeFiles, snapshotFiles(t, root)); diff != "" {
			t.Errorf("after %s the files differ from before (-before +after):\n%s", how, diff)
		}
	}

	// Local apply, local undo.
	if _, err := l.Apply(ctx, steps); err != nil {
		t.Fatal(err)
	}
	assertPrepared("local apply")
	if again, err := l.Apply(ctx, steps); err != nil || len(again) > 0 {
		t.Fatalf("second local apply changed %v, err %v", again, err)
	}
	if _, err := l.Undo(ctx); err != nil {
		t.Fatal(err)
	}
	assertRestored("local undo")

	// Script apply, script apply again, local undo: the journal is shared.
	if out := sh(t, ctx, RenderApply(tg, steps, paths)); !strings.Contains(out, "changed:") {
		t.Fatalf("apply script changed nothing:\n%s", out)
	}
	assertPrepared("apply script")
	if out := sh(t, ctx, RenderApply(tg, steps, paths)); strings.Contains(out, "changed:") {
		t.Fatalf("second run of the apply script changed something:\n%s", out)
	}
	if _, err := l.Undo(ctx); err != nil {
		t.Fatal(err)
	}
	assertRestored("local undo of a script apply")

	// Local apply, script undo.
	if _, err := l.Apply(ctx, steps); err != nil {
		t.Fatal(err)
	}
	sh(t, ctx, RenderUndo(paths))
	assertRestored("undo script after a local apply")
}

// independentEvidence is what observe shows when the step holds.
func independentEvidence(s Step) string {
	switch s := s.(type) {
	case Sysctl:
		return fmt.Sprintf("/proc/sys/%s %s", s.Key, s.Value)
	case Address:
		fam := "inet"
		if s.Prefix.Addr().Is6() {
			fam = "inet6"
		}
		return fmt.Sprintf("addr %s %s %s", s.Dev, fam, s.Prefix)
	case ArpRule:
		return "-A " + s.Chain
	case Route:
		dst := s.Dst.String()
		switch s.Dst.Bits() {
		case 0:
			dst = "default"
		case s.Dst.Addr().BitLen():
			dst = s.Dst.Addr().String()
		}
		return dst + " via " + s.Gateway.String()
	case LinkUp:
		return "link " + s.Dev + " up=true"
	}
	return ""
}
