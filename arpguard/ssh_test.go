package arpguard

import (
	"context"
	"crypto/ed25519"
	"crypto/rand"
	"encoding/pem"
	"errors"
	"fmt"
	"io/fs"
	"net"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/vishvananda/netns"
	"golang.org/x/crypto/ssh"
	"golang.org/x/crypto/ssh/knownhosts"
)

// TestPushBoundedConcurrency: no more real servers are worked on at once
// than Parallel allows, every target gets its own result in order, and a
// refused connection is reported as unreachable.
func TestPushBoundedConcurrency(t *testing.T) {
	var inFlight, most atomic.Int32
	dial := func(ctx context.Context, network, addr string) (net.Conn, error) {
		n := inFlight.Add(1)
		defer inFlight.Add(-1)
		for {
			m := most.Load()
			if n <= m || most.CompareAndSwap(m, n) {
				break
			}
		}
		select {
		case <-time.After(20 * time.Millisecond):
		case <-ctx.Done():
		}
		return nil, &net.OpError{Op: "dial", Net: network, Err: syscall.ECONNREFUSED}
	}
	p := newTestPusher(t, SSHConfig{Parallel: 3, Dial: dial, KnownHostsFile: filepath.Join(t.TempDir(), "known_hosts")})
	var targets []Target
	for i := range 10 {
		targets = append(targets, Target{RIP: netip.AddrFrom4([4]byte{198, 18, 0, byte(10 + i)}), Interface: "eth0",
			Mode: ModeDRSysctl, VIPs: []netip.Addr{netip.MustParseAddr("198.18.0.100")}})
	}
	results := p.Verify(t.Context(), targets)
	if m := most.Load(); m > 3 || m < 2 {
		t.Errorf("at most %d dials at once, want 3 (bounded, yet concurrent)", m)
	}
	for i, r := range results {
		if r.Target != targets[i].Label() || r.State != StateUnreachable || !strings.Contains(r.Summary(), "connection refused") {
			t.Errorf("result %d = %+v", i, r)
		}
	}
}

func TestRemoteCommandSudo(t *testing.T) {
	for _, c := range []struct {
		user string
		sudo SudoMode
		want string
	}{
		{"root", SudoAuto, "sh -s"},
		{"deploy", SudoAuto, "sudo -n sh -s"},
		{"root", SudoAlways, "sudo -n sh -s"},
		{"deploy", SudoNever, "sh -s"},
	} {
		p := newTestPusher(t, SSHConfig{User: c.user, Sudo: c.sudo, KnownHostsFile: "/nonexistent"})
		if got := p.remoteCommand(); got != c.want {
			t.Errorf("user %s, sudo %s: %q, want %q", c.user, c.sudo, got, c.want)
		}
	}
}

func newTestPusher(t *testing.T, cfg SSHConfig) *Pusher {
	t.Helper()
	_, key, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	signer, err := ssh.NewSignerFromKey(key)
	if err != nil {
		t.Fatal(err)
	}
	if cfg.User == "" {
		cfg.User = "root"
	}
	if len(cfg.Signers) == 0 {
		cfg.Signers = []ssh.Signer{signer}
	}
	if cfg.Paths == (Paths{}) {
		cfg.Paths = DefaultPaths().UnderRoot(t.TempDir())
	}
	if cfg.Timeout == 0 {
		cfg.Timeout = 20 * time.Second
	}
	cfg.Logger = discard()
	p, err := NewPusher(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// sshBed is a real server namespace running Debian's sshd and a client
// namespace the pusher dials from, joined by a veth pair:
// client 198.18.7.1/24 -- 198.18.7.2/24 real server.
type sshBed struct {
	rsNS, clientNS string
	hostKey        ssh.PublicKey
	signer         ssh.Signer
	dir            string
}

const sshBedRIP = "198.18.7.2"

func newSSHBed(t *testing.T) *sshBed {
	t.Helper()
	requireRootTools(t)
	sshd, err := exec.LookPath("sshd")
	if err != nil {
		if _, serr := os.Stat("/usr/sbin/sshd"); serr != nil {
			t.Skip("needs Debian's openssh-server (apt-get install -y openssh-server)")
		}
		sshd = "/usr/sbin/sshd"
	}
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	b := &sshBed{rsNS: newNetns(t), clientNS: newNetns(t), dir: t.TempDir()}
	sh(t, ctx, fmt.Sprintf(`set -e
ip -n %[1]s link set lo up
ip -n %[2]s link set lo up
ip -n %[1]s link add eth0 type veth peer name cl0 netns %[2]s
ip -n %[1]s addr add %[3]s/24 dev eth0
ip -n %[2]s addr add 198.18.7.1/24 dev cl0
ip -n %[1]s link set eth0 up
ip -n %[2]s link set cl0 up`, b.rsNS, b.clientNS, sshBedRIP))

	hostPriv, hostPub := genKey(t)
	b.hostKey = hostPub
	clientPriv, clientPub := genKey(t)
	s, err := ssh.NewSignerFromKey(clientPriv)
	if err != nil {
		t.Fatal(err)
	}
	b.signer = s
	hostKeyFile := filepath.Join(b.dir, "ssh_host_ed25519_key")
	blk, err := ssh.MarshalPrivateKey(hostPriv, "")
	if err != nil {
		t.Fatal(err)
	}
	writeFile(t, hostKeyFile, string(pem.EncodeToMemory(blk)), 0o600)
	writeFile(t, filepath.Join(b.dir, "authorized_keys"), string(ssh.MarshalAuthorizedKey(clientPub)), 0o600)
	cfg := filepath.Join(b.dir, "sshd_config")
	writeFile(t, cfg, fmt.Sprintf(`ListenAddress %s:22
HostKey %s
AuthorizedKeysFile %s
PermitRootLogin prohibit-password
PasswordAuthentication no
KbdInteractiveAuthentication no
UsePAM no
StrictModes no
PidFile none
`, sshBedRIP, hostKeyFile, filepath.Join(b.dir, "authorized_keys")), 0o600)
	// sshd insists on its privilege separation directory.
	if err := os.MkdirAll("/run/sshd", 0o755); err != nil {
		t.Fatal(err)
	}
	var logs syncBuffer
	cmd := exec.Command("ip", "netns", "exec", b.rsNS, sshd, "-D", "-e", "-f", cfg)
	cmd.Stdout, cmd.Stderr = &logs, &logs
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		syscall.Kill(-cmd.Process.Pid, syscall.SIGTERM)
		cmd.Wait()
		if t.Failed() {
			t.Logf("sshd log:\n%s", logs.String())
		}
	})
	// Wait, bounded, until sshd accepts connections.
	deadline := time.Now().Add(10 * time.Second)
	for {
		c, err := b.dial(ctx, "tcp", sshBedRIP+":22")
		if err == nil {
			c.Close()
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("sshd did not start: %v\n%s", err, logs.String())
		}
		time.Sleep(50 * time.Millisecond)
	}
	return b
}

// dial connects from the client namespace: the socket is created on a
// thread that entered it, which is then thrown away.
func (b *sshBed) dial(ctx context.Context, network, addr string) (net.Conn, error) {
	type result struct {
		c   net.Conn
		err error
	}
	ch := make(chan result, 1)
	go func() {
		runtime.LockOSThread() // never unlocked: the thread ends with the goroutine
		h, err := netns.GetFromName(b.clientNS)
		if err != nil {
			ch <- result{nil, fmt.Errorf("open namespace %s: %w", b.clientNS, err)}
			return
		}
		defer h.Close()
		if err := netns.Set(h); err != nil {
			ch <- result{nil, fmt.Errorf("enter namespace %s: %w", b.clientNS, err)}
			return
		}
		var d net.Dialer
		c, err := d.DialContext(ctx, network, addr)
		ch <- result{c, err}
	}()
	r := <-ch
	return r.c, r.err
}

func (b *sshBed) knownHosts(t *testing.T, key ssh.PublicKey) string {
	t.Helper()
	f := filepath.Join(t.TempDir(), "known_hosts")
	content := ""
	if key != nil {
		content = knownhosts.Line([]string{knownhosts.Normalize(sshBedRIP + ":22")}, key) + "\n"
	}
	writeFile(t, f, content, 0o600)
	return f
}

// inRS runs a shell command in the real server's namespace.
func (b *sshBed) inRS(t *testing.T, script string) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	defer cancel()
	return sh(t, ctx, fmt.Sprintf("ip netns exec %s sh -c '%s'", b.rsNS, script))
}

func genKey(t *testing.T) (ed25519.PrivateKey, ssh.PublicKey) {
	t.Helper()
	pub, priv, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	sp, err := ssh.NewPublicKey(pub)
	if err != nil {
		t.Fatal(err)
	}
	return priv, sp
}

func writeFile(t *testing.T, path, content string, perm os.FileMode) {
	t.Helper()
	if err := os.WriteFile(path, []byte(content), perm); err != nil {
		t.Fatal(err)
	}
}

type syncBuffer struct {
	mu sync.Mutex
	b  strings.Builder
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// TestSSHPushVerifyUndo drives a real sshd in a namespace: an unknown host
// key is refused until accepted explicitly, a push prepares the real server
// (read back with ip and /proc in its namespace), a second push changes
// nothing, verify reports "prepared" and then the drift made behind its back,
// the result is stored, undo restores the real server, a changed host key is
// refused before anything runs, and an unreachable host is reported as such.
func TestSSHPushVerifyUndo(t *testing.T) {
	b := newSSHBed(t)
	ctx, cancel := context.WithTimeout(t.Context(), 90*time.Second)
	defer cancel()
	root := t.TempDir()
	paths := DefaultPaths().UnderRoot(root)
	before := snapshotFiles(t, root)
	target := Target{Name: "r1", RIP: netip.MustParseAddr(sshBedRIP), Interface: "eth0", Mode: ModeDRSysctl,
		VIPs: []netip.Addr{netip.MustParseAddr("198.18.7.100")}}
	pusher := func(knownHosts string, acceptNew bool) *Pusher {
		return newTestPusher(t, SSHConfig{Signers: []ssh.Signer{b.signer}, Dial: b.dial, Paths: paths,
			KnownHostsFile: knownHosts, AcceptNewHostKeys: acceptNew})
	}
	one := func(rs []Result) Result {
		t.Helper()
		if len(rs) != 1 {
			t.Fatalf("%d results, want 1", len(rs))
		}
		return rs[0]
	}
	journalAbsent := func(when string) {
		t.Helper()
		if _, err := os.Stat(paths.Journal); !errors.Is(err, fs.ErrNotExist) {
			t.Fatalf("%s: journal exists (something ran on the real server): %v", when, err)
		}
	}

	known := b.knownHosts(t, nil)
	r := one(pusher(known, false).Push(ctx, []Target{target}))
	if r.State != StateFailed || !strings.Contains(r.Detail, "unknown") || !strings.Contains(r.Detail, "refused") {
		t.Fatalf("push to an unknown host key: %s, want it refused", r.Summary())
	}
	journalAbsent("unknown host key")

	r = one(pusher(known, true).Push(ctx, []Target{target}))
	if r.State != StatePrepared || len(r.Changed) == 0 {
		t.Fatalf("first push: %s, changed %v", r.Summary(), r.Changed)
	}
	if kh, _ := os.ReadFile(known); !strings.Contains(string(kh), strings.TrimSpace(string(ssh.MarshalAuthorizedKey(b.hostKey)))) {
		t.Errorf("accepted host key not recorded in known_hosts:\n%s", kh)
	}
	if out := b.inRS(t, "ip -o addr show dev lo"); !strings.Contains(out, "198.18.7.100/32") {
		t.Errorf("VIP not on lo in the real server namespace:\n%s", out)
	}
	for _, k := range []string{"all/arp_ignore", "eth0/arp_ignore", "all/arp_announce", "eth0/arp_announce"} {
		want := map[bool]string{true: "1", false: "2"}[strings.HasSuffix(k, "ignore")]
		if got := strings.TrimSpace(b.inRS(t, "cat /proc/sys/net/ipv4/conf/"+k)); got != want {
			t.Errorf("%s = %s in the real server namespace, want %s", k, got, want)
		}
	}

	p := pusher(known, false)
	if r = one(p.Push(ctx, []Target{target})); r.State != StatePrepared || len(r.Changed) > 0 {
		t.Fatalf("second push: %s, changed %v; want prepared and nothing changed", r.Summary(), r.Changed)
	}
	if r = one(p.Verify(ctx, []Target{target})); r.Summary() != "prepared" {
		t.Fatalf("verify: %s", r.Summary())
	}
	b.inRS(t, "ip addr del 198.18.7.100/32 dev lo")
	r = one(p.Verify(ctx, []Target{target}))
	if r.Summary() != "drift: VIP 198.18.7.100 missing on lo" {
		t.Fatalf("verify after the VIP was removed: %q", r.Summary())
	}
	store := &JSONFileStore{Path: filepath.Join(t.TempDir(), "results.json")}
	if err := store.SaveResults(ctx, []Result{r}); err != nil {
		t.Fatal(err)
	}
	if got, err := store.Results(ctx); err != nil || len(got) != 1 || got[0].Summary() != r.Summary() || got[0].Target != "r1" {
		t.Fatalf("stored results %+v, err %v", got, err)
	}

	if r = one(p.Undo(ctx, []Target{target})); r.State != StateUndone || len(r.Changed) == 0 {
		t.Fatalf("undo: %s, undone %v", r.Summary(), r.Changed)
	}
	for _, k := range []string{"all/arp_ignore", "eth0/arp_ignore", "all/arp_announce", "eth0/arp_announce"} {
		if got := strings.TrimSpace(b.inRS(t, "cat /proc/sys/net/ipv4/conf/"+k)); got != "0" {
			t.Errorf("after undo %s = %s, want 0 as before", k, got)
		}
	}
	if diff := cmp.Diff(before, snapshotFiles(t, root)); diff != "" {
		t.Errorf("files after undo (-before +after):\n%s", diff)
	}

	_, other := genKey(t)
	r = one(pusher(b.knownHosts(t, other), false).Push(ctx, []Target{target}))
	if r.State != StateFailed || !strings.Contains(r.Detail, "changed") {
		t.Fatalf("push with a changed host key: %s, want it refused", r.Summary())
	}
	journalAbsent("changed host key")

	// Through sudo, as a non-root user's push would run (root may sudo).
	if _, err := exec.LookPath("sudo"); err == nil {
		sp := newTestPusher(t, SSHConfig{Signers: []ssh.Signer{b.signer}, Dial: b.dial, Paths: paths,
			KnownHostsFile: known, Sudo: SudoAlways})
		if r = one(sp.Push(ctx, []Target{target})); r.State != StatePrepared || len(r.Changed) == 0 {
			t.Fatalf("push through sudo: %s, changed %v", r.Summary(), r.Changed)
		}
		if r = one(sp.Undo(ctx, []Target{target})); r.State != StateUndone {
			t.Fatalf("undo through sudo: %s", r.Summary())
		}
	} else {
		t.Log("sudo not installed: the push through sudo is not exercised")
	}

	// TEST-NET-1 has no route in the client namespace.
	gone := target
	gone.Name, gone.RIP = "gone", netip.MustParseAddr("192.0.2.1")
	r = one(p.Verify(ctx, []Target{gone}))
	if r.State != StateUnreachable || !strings.Contains(r.Summary(), "unreachable: ") || !strings.Contains(r.Summary(), "network is unreachable") {
		t.Fatalf("verify of an unreachable host: %q", r.Summary())
	}
}
