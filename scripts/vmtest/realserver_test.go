//go:build vmtest

package vmtest

import (
	"context"
	"crypto/ed25519"
	"crypto/rand"
	"encoding/binary"
	"encoding/json"
	"encoding/pem"
	"errors"
	"fmt"
	"io/fs"
	"net"
	"net/netip"
	"os"
	"os/exec"
	"path"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/ipvsctl/ipvsctl/arpguard"
	"golang.org/x/crypto/ssh"
	"golang.org/x/crypto/ssh/knownhosts"
)

// The tests of `ipvsctl realserver` on the real kernel: real servers that
// nobody prepared by hand (newBareLab), prepared by push over SSH or by the
// local apply, then checked with real ARP and real HTTP through the VIP.

// TestRealserverWithoutPushAnswersARP shows the failure arpguard prevents:
// real servers that hold the VIP as an ordinary address (on lo, as most
// how-tos say, or on eth0) with the kernel's default ARP settings answer the
// client's ARP request for the VIP, each with its own MAC, beside the
// director. Whichever answer the client takes, it may send its traffic for
// the VIP straight to one real server, past the balancer.
func TestRealserverWithoutPushAnswersARP(t *testing.T) {
	l := newBareLab(t, 2)
	l.apply(drDoc("rr", rs12))
	l.ns(l.rs[0], "ip addr add "+vip+"/32 dev lo")
	l.ns(l.rs[1], "ip addr add "+vip+"/32 dev eth0")
	got := l.arpAnswerers(vip)
	if want := []string{"director", "rs1", "rs2"}; !slices.Equal(got, want) {
		t.Fatalf("ARP answers for the VIP %s from %v, want %v (the director and both unprepared real servers)", vip, got, want)
	}
	t.Logf("without ARP hiding, the client's ARP request for %s was answered by %v", vip, got)
}

// TestRealserverPushPreparesDR prepares bare real servers only with
// `ipvsctl realserver push` (over SSH to a real sshd in each real server's
// namespace, host keys checked against known_hosts), then: each real server
// holds the VIP on lo with ARP hidden (read back with ip and sysctl) and its
// own persistence files; only the director answers ARP for the VIP; the
// director's DR round-robin service serves HTTP from the client through the
// VIP across both real servers; verify says prepared (and the result is
// stored); a second push changes nothing; undo restores the real servers.
func TestRealserverPushPreparesDR(t *testing.T) {
	l := newBareLab(t, 2)
	before := map[string]string{}
	for _, rs := range l.rs {
		before[rs] = l.rsState(rs)
	}
	id, known := l.startSSHDs()
	rips := "198.18.0.11,198.18.0.12"
	flags := []string{"--rip", rips, "--vip", vip, "--interface", "eth0", "--identity", id, "--known-hosts", known,
		"--timeout", "60s", "--json"}

	start := time.Now()
	res := l.realserver("push", flags...)
	t.Logf("push took %s", time.Since(start).Round(time.Millisecond))
	for i, r := range res {
		if r.State != arpguard.StatePrepared || len(r.Changed) == 0 {
			t.Fatalf("push to real server %d: %s, changed %v", i+1, r.Summary(), r.Changed)
		}
	}
	for i, rs := range l.rs {
		rip := fmt.Sprintf("198.18.0.%d", 11+i)
		if out := l.ns(rs, "ip -o addr show dev lo"); !strings.Contains(out, " "+vip+"/32 ") {
			t.Errorf("%s: VIP not on lo after the push:\n%s", rs, out)
		}
		want := "1\n2\n1\n2\n"
		if got := l.ns(rs, "sysctl -n net.ipv4.conf.all.arp_ignore net.ipv4.conf.all.arp_announce net.ipv4.conf.eth0.arp_ignore net.ipv4.conf.eth0.arp_announce"); got != want {
			t.Errorf("%s: arp_ignore/arp_announce (all, eth0) after the push:\n%swant:\n%s", rs, got, want)
		}
		// Persistence, on this real server's own filesystem.
		p := arpguard.DefaultPaths().UnderRoot(l.rsRoot(rs))
		conf, err := os.ReadFile(p.SysctlConf)
		if err != nil || !strings.Contains(string(conf), "real server "+rip+",") || !strings.Contains(string(conf), "net/ipv4/conf/eth0/arp_ignore = 1") {
			t.Errorf("%s: sysctl.d file after the push: %v\n%s", rs, err, conf)
		}
		if target, err := os.Readlink(p.UnitLink); err != nil || target != arpguard.DefaultPaths().Unit {
			t.Errorf("%s: unit not enabled: %q, %v", rs, target, err)
		}
	}

	l.apply(drDoc("rr", rs12))
	if got := l.arpAnswerers(vip); !slices.Equal(got, []string{"director"}) {
		t.Fatalf("ARP answers for the VIP %s from %v, want the director's alone", vip, got)
	}
	counts := l.get(vip+":80", 20)
	if counts["rs1"] != 10 || counts["rs2"] != 10 {
		t.Fatalf("DR round robin through the VIP over 20 requests: %v", counts)
	}
	// The requests went through IPVS (the client found the director by ARP).
	waitFor(t, "IPVS counters (summed every 2 s)", 10*time.Second, func() bool {
		out, _ := l.ipvsctl("status", "--json")
		return strings.Contains(out, `"conns": 20`)
	})

	for i, r := range l.realserver("verify", flags...) {
		if r.Summary() != "prepared" {
			t.Errorf("verify of real server %d: %s", i+1, r.Summary())
		}
	}
	// The last result per real server is kept in the state database, and status shows it.
	var status struct {
		RealServers []arpguard.Result `json:"real_servers"`
	}
	if out, err := l.ipvsctl("status", "--json"); err != nil || json.Unmarshal([]byte(out), &status) != nil || len(status.RealServers) != 2 ||
		status.RealServers[0].Action != "verify" || status.RealServers[0].Summary() != "prepared" {
		t.Errorf("stored results: %v %+v\n%s", err, status.RealServers, out)
	}
	for i, r := range l.realserver("push", flags...) {
		if r.State != arpguard.StatePrepared || len(r.Changed) > 0 {
			t.Errorf("second push to real server %d: %s, changed %v (want nothing)", i+1, r.Summary(), r.Changed)
		}
	}

	for i, r := range l.realserver("undo", flags...) {
		if r.State != arpguard.StateUndone || len(r.Changed) == 0 {
			t.Errorf("undo on real server %d: %s, undone %v", i+1, r.Summary(), r.Changed)
		}
	}
	for _, rs := range l.rs {
		if got := l.rsState(rs); got != before[rs] {
			t.Errorf("%s after undo:\n%s\nbefore the push:\n%s", rs, got, before[rs])
		}
		p := arpguard.DefaultPaths().UnderRoot(l.rsRoot(rs))
		for _, f := range []string{p.Journal, p.SysctlConf, p.BootScript, p.Unit, p.UnitLink} {
			if _, err := os.Lstat(f); !errors.Is(err, fs.ErrNotExist) {
				t.Errorf("%s: %s left after undo (%v)", rs, f, err)
			}
		}
	}
}

// TestRealserverTunApplyServesHTTP prepares bare real servers for IPIP with
// `ipvsctl realserver apply --mode tun` run on each of them, then: tunl0
// holds the VIP, is up, has loose rp_filter and ARP is hidden; only the
// director answers ARP for the VIP; a tun service serves HTTP through the VIP
// across both real servers (the director encapsulates, the real servers
// decapsulate and answer the client directly); `apply --undo` restores each.
func TestRealserverTunApplyServesHTTP(t *testing.T) {
	l := newBareLab(t, 2)
	before := map[string]string{}
	for _, rs := range l.rs {
		before[rs] = l.rsState(rs)
		out := l.inRS(rs, os.Getenv("IPVSCTL_BIN"), "realserver", "apply", "--vip", vip, "--mode", "tun", "--interface", "eth0")
		if !strings.Contains(out, "changed: address "+vip+"/32 dev tunl0") {
			t.Fatalf("%s: realserver apply --mode tun:\n%s", rs, out)
		}
		if out := l.ns(rs, "ip -o addr show dev tunl0"); !strings.Contains(out, " "+vip+"/32 ") {
			t.Fatalf("%s: VIP not on tunl0:\n%s", rs, out)
		}
		if out := l.ns(rs, "ip -o link show dev tunl0"); !strings.Contains(out, ",UP") {
			t.Errorf("%s: tunl0 not up:\n%s", rs, out)
		}
		want := "1\n2\n1\n2\n2\n"
		if got := l.ns(rs, "sysctl -n net.ipv4.conf.all.arp_ignore net.ipv4.conf.all.arp_announce net.ipv4.conf.eth0.arp_ignore net.ipv4.conf.eth0.arp_announce net.ipv4.conf.tunl0.rp_filter"); got != want {
			t.Errorf("%s: arp_ignore/arp_announce (all, eth0), tunl0 rp_filter:\n%swant:\n%s", rs, got, want)
		}
	}
	l.apply(fmt.Sprintf(`{"settings":{"network":"tun"},"services":[{"name":"web","protocol":"tcp","address":"%s","port":80,
	"interface":"eth0","scheduler":"rr","servers":[%s]}]}`, vip, rs12))
	if got := l.saved(); !strings.Contains(got, "-a -t 198.18.0.100:80 -r 198.18.0.11:80 -i -w 1") {
		t.Fatalf("ipvsadm -Sn:\n%s", got)
	}
	if got := l.arpAnswerers(vip); !slices.Equal(got, []string{"director"}) {
		t.Fatalf("ARP answers for the VIP %s from %v, want the director's alone", vip, got)
	}
	counts := l.get(vip+":80", 20)
	if counts["rs1"] != 10 || counts["rs2"] != 10 {
		t.Fatalf("tun round robin through the VIP over 20 requests: %v", counts)
	}
	// Undo in reverse order: rs1 loaded ipip, and its undo unloads it,
	// which removes tunl0 from every namespace of this one kernel.
	for _, rs := range slices.Backward(l.rs) {
		out := l.inRS(rs, os.Getenv("IPVSCTL_BIN"), "realserver", "apply", "--undo")
		if !strings.Contains(out, "undone: address "+vip+"/32 tunl0") {
			t.Errorf("%s: realserver apply --undo:\n%s", rs, out)
		}
		if got := l.rsState(rs); got != before[rs] {
			t.Errorf("%s after undo:\n%s\nbefore the apply:\n%s", rs, got, before[rs])
		}
		if _, err := os.Stat(arpguard.DefaultPaths().UnderRoot(l.rsRoot(rs)).Journal); !errors.Is(err, fs.ErrNotExist) {
			t.Errorf("%s: journal left after undo (%v)", rs, err)
		}
	}
}

// TestRealserverTunNetnsApplyUndo runs arpguard's own real-kernel test of
// tun mode (local executor and shell scripts: apply, second apply, undo,
// each read back with ip and /proc, in a fresh namespace) on this kernel,
// which has the ipip module the host's lacks. It must pass, not skip.
func TestRealserverTunNetnsApplyUndo(t *testing.T) {
	bin := os.Getenv("ARPGUARD_TEST_BIN")
	if bin == "" {
		t.Fatal("ARPGUARD_TEST_BIN is not set (scripts/vmtest.sh builds arpguard's test binary)")
	}
	ctx, cancel := context.WithTimeout(t.Context(), 180*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, bin, "-test.run", "^TestNetnsApplyUndo$/^tun$", "-test.v", "-test.count=1")
	cmd.Dir = t.TempDir()
	out, err := cmd.CombinedOutput()
	t.Logf("arpguard.test:\n%s", out)
	if err != nil {
		t.Fatalf("arpguard's tun netns test: %v", err)
	}
	if !strings.Contains(string(out), "--- PASS: TestNetnsApplyUndo/tun ") || strings.Contains(string(out), "--- SKIP") {
		t.Fatal("arpguard's tun netns test did not run and pass")
	}
}

// arpAnswerers sends one ARP request for target from the client's eth0 and
// names, sorted, whoever answered within 2 s: "director", "rs1", ... .
func (l *lab) arpAnswerers(target string) []string {
	l.t.Helper()
	owners := map[string]string{l.mac(l.dir): "director"}
	for _, rs := range l.rs {
		owners[l.mac(rs)] = rs[len(l.id):]
	}
	tip := netip.MustParseAddr(target).As4()
	sip := netip.MustParseAddr(labNet + ".2").As4()
	proto := htons(syscall.ETH_P_ARP)
	var macs []string
	inNS(l.t, l.cli, func() {
		ifi, err := net.InterfaceByName("eth0")
		if err != nil {
			l.t.Fatal(err)
		}
		fd, err := syscall.Socket(syscall.AF_PACKET, syscall.SOCK_DGRAM, int(proto))
		if err != nil {
			l.t.Fatalf("packet socket: %v", err)
		}
		defer syscall.Close(fd)
		if err := syscall.Bind(fd, &syscall.SockaddrLinklayer{Protocol: proto, Ifindex: ifi.Index}); err != nil {
			l.t.Fatalf("bind packet socket: %v", err)
		}
		// Ethernet/IPv4 ARP request: who has tip? tell sip.
		req := []byte{0, 1, 8, 0, 6, 4, 0, 1}
		req = append(req, ifi.HardwareAddr...)
		req = append(req, sip[:]...)
		req = append(req, 0, 0, 0, 0, 0, 0)
		req = append(req, tip[:]...)
		bcast := &syscall.SockaddrLinklayer{Protocol: proto, Ifindex: ifi.Index, Halen: 6,
			Addr: [8]byte{0xff, 0xff, 0xff, 0xff, 0xff, 0xff}}
		if err := syscall.Sendto(fd, req, 0, bcast); err != nil {
			l.t.Fatalf("send ARP request: %v", err)
		}
		deadline := time.Now().Add(2 * time.Second)
		buf := make([]byte, 1500)
		for {
			left := time.Until(deadline)
			if left <= 0 {
				break
			}
			tv := syscall.NsecToTimeval(left.Nanoseconds())
			if err := syscall.SetsockoptTimeval(fd, syscall.SOL_SOCKET, syscall.SO_RCVTIMEO, &tv); err != nil {
				l.t.Fatal(err)
			}
			n, _, err := syscall.Recvfrom(fd, buf, 0)
			if errors.Is(err, syscall.EAGAIN) || errors.Is(err, syscall.EINTR) {
				continue
			}
			if err != nil {
				l.t.Fatalf("receive ARP: %v", err)
			}
			p := buf[:n]
			// A reply (op 2) from tip to sip.
			if n < 28 || binary.BigEndian.Uint16(p[6:8]) != 2 || [4]byte(p[14:18]) != tip || [4]byte(p[24:28]) != sip {
				continue
			}
			macs = append(macs, net.HardwareAddr(p[8:14]).String())
		}
	})
	var who []string
	for _, m := range macs {
		name, ok := owners[m]
		if !ok {
			name = "unknown " + m
		}
		if !slices.Contains(who, name) {
			who = append(who, name)
		}
	}
	slices.Sort(who)
	return who
}

func htons(v uint16) uint16 { return v<<8 | v>>8 }

// mac is the MAC address of eth0 in namespace ns.
func (l *lab) mac(ns string) string {
	l.t.Helper()
	var mac string
	inNS(l.t, ns, func() {
		ifi, err := net.InterfaceByName("eth0")
		if err != nil {
			l.t.Fatalf("eth0 in %s: %v", ns, err)
		}
		mac = ifi.HardwareAddr.String()
	})
	return mac
}

// rsState is what a preparation may change on real server rs, read with ip
// and sysctl: addresses (all devices) and the ARP and rp_filter settings of
// all, eth0 and lo.
func (l *lab) rsState(rs string) string {
	l.t.Helper()
	var b strings.Builder
	for _, line := range strings.Split(l.ns(rs, "ip -o addr show"), "\n") {
		if f := strings.Fields(line); len(f) >= 4 {
			fmt.Fprintf(&b, "%s %s %s\n", f[1], f[2], f[3])
		}
	}
	b.WriteString(l.ns(rs, "sysctl net.ipv4.conf.all.arp_ignore net.ipv4.conf.all.arp_announce net.ipv4.conf.all.rp_filter "+
		"net.ipv4.conf.eth0.arp_ignore net.ipv4.conf.eth0.arp_announce net.ipv4.conf.eth0.rp_filter "+
		"net.ipv4.conf.lo.arp_ignore net.ipv4.conf.lo.arp_announce"))
	return b.String()
}

// rsRoot is real server rs's own copy of the directories arpguard writes to
// (DefaultPaths' directories, under this root) and of root's home. The
// namespaces of the VM share one filesystem (the host's); rsCommand
// bind-mounts these copies over the real directories in the mount namespace
// of the command it runs, so each real server keeps its own journal and
// persistence files, as separate machines would, and root's shell on it does
// not source the host's ~/.bashrc (which bash does for an SSH command: on a
// developer's machine that may run pyenv and the like, seconds per session
// under emulation).
func (l *lab) rsRoot(rs string) string {
	root := filepath.Join(filepath.Dir(l.db), "root-"+rs)
	for _, d := range rsDirs() {
		if err := os.MkdirAll(filepath.Join(root, d), 0o755); err != nil {
			l.t.Fatal(err)
		}
	}
	return root
}

func rsDirs() []string {
	p := arpguard.DefaultPaths()
	var dirs []string
	for _, f := range []string{p.Journal, p.SysctlConf, p.BootScript, p.Unit} {
		if d := path.Dir(f); !slices.Contains(dirs, d) {
			dirs = append(dirs, d)
		}
	}
	return append(dirs, "/root")
}

// rsCommand runs argv in real server rs's network namespace, with rs's own
// copy of arpguard's directories mounted (see rsRoot).
func (l *lab) rsCommand(rs string, argv ...string) *exec.Cmd {
	root := l.rsRoot(rs)
	args := []string{"netns", "exec", rs, "sh", "-c",
		`set -e; while [ "$1" != -- ]; do mkdir -p "$2"; mount --bind "$1" "$2"; shift 2; done; shift; exec "$@"`, "sh"}
	for _, d := range rsDirs() {
		args = append(args, filepath.Join(root, d), d)
	}
	args = append(append(args, "--"), argv...)
	return exec.Command("ip", args...)
}

// inRS runs argv as rsCommand does and returns its output.
func (l *lab) inRS(rs string, argv ...string) string {
	l.t.Helper()
	out, err := l.rsCommand(rs, argv...).CombinedOutput()
	if err != nil {
		l.t.Fatalf("in %s: %s: %v\n%s", rs, strings.Join(argv, " "), err, out)
	}
	return string(out)
}

// startSSHDs starts Debian's sshd in each real server's namespace, on its
// RIP, with a host key of its own and root's login by one client key; it
// returns the client's identity file and a known_hosts file with the real
// servers' host keys (so the pushes check them strictly).
func (l *lab) startSSHDs() (identity, knownHosts string) {
	t := l.t
	t.Helper()
	sshd := "/usr/sbin/sshd"
	if _, err := os.Stat(sshd); err != nil {
		t.Fatalf("needs Debian's openssh-server on the host: %v", err)
	}
	dir := t.TempDir()
	clientPub, clientPriv := genSSHKey(t)
	identity = filepath.Join(dir, "id_ed25519")
	writePrivateKey(t, identity, clientPriv)
	authorized := filepath.Join(dir, "authorized_keys")
	writeTestFile(t, authorized, string(ssh.MarshalAuthorizedKey(clientPub)))
	// sshd insists on its privilege separation directory.
	if err := os.MkdirAll("/run/sshd", 0o755); err != nil {
		t.Fatal(err)
	}
	var known strings.Builder
	for i, rs := range l.rs {
		rip := fmt.Sprintf("198.18.0.%d", 11+i)
		hostPub, hostPriv := genSSHKey(t)
		hostKey := filepath.Join(dir, rs+"_host_ed25519_key")
		writePrivateKey(t, hostKey, hostPriv)
		known.WriteString(knownhosts.Line([]string{knownhosts.Normalize(rip + ":22")}, hostPub) + "\n")
		cfg := filepath.Join(dir, rs+"_sshd_config")
		writeTestFile(t, cfg, fmt.Sprintf(`ListenAddress %s:22
HostKey %s
AuthorizedKeysFile %s
PermitRootLogin prohibit-password
PasswordAuthentication no
KbdInteractiveAuthentication no
UsePAM no
StrictModes no
PidFile none
`, rip, hostKey, authorized))
		var logs syncBuffer
		cmd := l.rsCommand(rs, sshd, "-D", "-e", "-f", cfg)
		cmd.Stdout, cmd.Stderr = &logs, &logs
		cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() {
			syscall.Kill(-cmd.Process.Pid, syscall.SIGTERM)
			done := make(chan struct{})
			go func() { cmd.Wait(); close(done) }()
			select {
			case <-done:
			case <-time.After(5 * time.Second):
				syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
				<-done
			}
			if t.Failed() {
				t.Logf("sshd log of %s:\n%s", rs, logs.String())
			}
		})
		waitFor(t, "sshd on "+rip+":22", 20*time.Second, func() bool {
			var c net.Conn
			var err error
			inNS(t, l.dir, func() { c, err = net.DialTimeout("tcp", rip+":22", time.Second) })
			if err == nil {
				c.Close()
			}
			return err == nil
		})
	}
	knownHosts = filepath.Join(dir, "known_hosts")
	writeTestFile(t, knownHosts, known.String())
	return identity, knownHosts
}

// realserver runs `ipvsctl realserver VERB ... --json` in the director's
// namespace and returns its results, one per real server, in order.
func (l *lab) realserver(verb string, args ...string) []arpguard.Result {
	l.t.Helper()
	out, err := l.ipvsctl(append([]string{"realserver", verb}, args...)...)
	var rs []arpguard.Result
	if jerr := json.Unmarshal([]byte(out), &rs); jerr != nil || len(rs) != len(l.rs) {
		l.t.Fatalf("ipvsctl realserver %s: %v, %d results (%v):\n%s", verb, err, len(rs), jerr, out)
	}
	if err != nil {
		l.t.Logf("ipvsctl realserver %s: %v\n%s", verb, err, out)
	}
	return rs
}

func genSSHKey(t *testing.T) (ssh.PublicKey, ed25519.PrivateKey) {
	t.Helper()
	pub, priv, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	sp, err := ssh.NewPublicKey(pub)
	if err != nil {
		t.Fatal(err)
	}
	return sp, priv
}

func writePrivateKey(t *testing.T, file string, key ed25519.PrivateKey) {
	t.Helper()
	blk, err := ssh.MarshalPrivateKey(key, "")
	if err != nil {
		t.Fatal(err)
	}
	writeTestFile(t, file, string(pem.EncodeToMemory(blk)))
}

func writeTestFile(t *testing.T, file, content string) {
	t.Helper()
	if err := os.WriteFile(file, []byte(content), 0o600); err != nil {
		t.Fatal(err)
	}
}
