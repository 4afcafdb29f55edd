package arpguard

import (
	"context"
	"crypto/ed25519"
	"crypto/rand"
	"errors"
	"io/fs"
	"net"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"golang.org/x/crypto/ssh"

	"github.com/ipvsctl/ipvsctl/arpguard/sshtest"
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

// TestSSHPushVerifyUndo drives a real sshd in a namespace: an unknown host
// key is refused until accepted explicitly, a push prepares the real server
// (read back with ip and /proc in its namespace), a second push changes
// nothing, verify reports "prepared" and then the drift made behind its back,
// the result is stored, undo restores the real server, a changed host key is
// refused before anything runs, and an unreachable host is reported as such.
func TestSSHPushVerifyUndo(t *testing.T) {
	b := sshtest.Start(t)
	ctx, cancel := context.WithTimeout(t.Context(), 90*time.Second)
	defer cancel()
	root := t.TempDir()
	paths := DefaultPaths().UnderRoot(root)
	before := snapshotFiles(t, root)
	target := Target{Name: "r1", RIP: netip.MustParseAddr(sshtest.RIP), Interface: "eth0", Mode: ModeDRSysctl,
		VIPs: []netip.Addr{netip.MustParseAddr("198.18.7.100")}}
	pusher := func(knownHosts string, acceptNew bool) *Pusher {
		return newTestPusher(t, SSHConfig{Signers: []ssh.Signer{b.Signer}, Dial: b.Dial, Paths: paths,
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

	known := b.KnownHosts(t, nil)
	r := one(pusher(known, false).Push(ctx, []Target{target}))
	if r.State != StateFailed || !strings.Contains(r.Detail, "unknown") || !strings.Contains(r.Detail, "refused") {
		t.Fatalf("push to an unknown host key: %s, want it refused", r.Summary())
	}
	journalAbsent("unknown host key")

	r = one(pusher(known, true).Push(ctx, []Target{target}))
	if r.State != StatePrepared || len(r.Changed) == 0 {
		t.Fatalf("first push: %s, changed %v", r.Summary(), r.Changed)
	}
	if kh, _ := os.ReadFile(known); !strings.Contains(string(kh), strings.TrimSpace(string(ssh.MarshalAuthorizedKey(b.HostKey)))) {
		t.Errorf("accepted host key not recorded in known_hosts:\n%s", kh)
	}
	if out := b.InRS(t, "ip -o addr show dev lo"); !strings.Contains(out, "198.18.7.100/32") {
		t.Errorf("VIP not on lo in the real server namespace:\n%s", out)
	}
	for _, k := range []string{"all/arp_ignore", "eth0/arp_ignore", "all/arp_announce", "eth0/arp_announce"} {
		want := map[bool]string{true: "1", false: "2"}[strings.HasSuffix(k, "ignore")]
		if got := strings.TrimSpace(b.InRS(t, "cat /proc/sys/net/ipv4/conf/"+k)); got != want {
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
	b.InRS(t, "ip addr del 198.18.7.100/32 dev lo")
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
		if got := strings.TrimSpace(b.InRS(t, "cat /proc/sys/net/ipv4/conf/"+k)); got != "0" {
			t.Errorf("after undo %s = %s, want 0 as before", k, got)
		}
	}
	if diff := cmp.Diff(before, snapshotFiles(t, root)); diff != "" {
		t.Errorf("files after undo (-before +after):\n%s", diff)
	}

	_, other := sshtest.GenKey(t)
	r = one(pusher(b.KnownHosts(t, other), false).Push(ctx, []Target{target}))
	if r.State != StateFailed || !strings.Contains(r.Detail, "changed") {
		t.Fatalf("push with a changed host key: %s, want it refused", r.Summary())
	}
	journalAbsent("changed host key")

	// Through sudo, as a non-root user's push would run (root may sudo).
	if _, err := exec.LookPath("sudo"); err == nil {
		sp := newTestPusher(t, SSHConfig{Signers: []ssh.Signer{b.Signer}, Dial: b.Dial, Paths: paths,
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
