package main

import (
	"context"
	"encoding/json"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/ipvsctl/ipvsctl/server"
	"github.com/ipvsctl/ipvsctl/server/auth"
	"github.com/ipvsctl/ipvsctl/server/client"
	"github.com/ipvsctl/ipvsctl/server/store"
	"github.com/ipvsctl/ipvsctl/server/trust"
	"github.com/ipvsctl/ipvsctl/server/trust/trusttest"
)

type syncOutput struct {
	mu sync.Mutex
	b  strings.Builder
}

func (o *syncOutput) Write(p []byte) (int, error) {
	o.mu.Lock()
	defer o.mu.Unlock()
	return o.b.Write(p)
}

func (o *syncOutput) String() string {
	o.mu.Lock()
	defer o.mu.Unlock()
	return o.b.String()
}

// serveProc is one `ipvsctl serve` in a child process (a fake kernel, a
// real SQLite file, real TLS on a loopback port).
type serveProc struct {
	t    *testing.T
	name string
	db   string
	port int
	cmd  *exec.Cmd
	out  *syncOutput
	// tls are serve's TLS flags (default --tls-self-signed).
	tls []string
	// env is added to the child's environment.
	env []string
	// netns, when set, is the network namespace serve runs in (ip netns
	// exec); its socket, beside the database, is reached from anywhere.
	netns string
	// interval is serve's --interval (default 1h: reconciles follow edits).
	interval string
}

func newServeProc(t *testing.T, name string) *serveProc {
	t.Helper()
	p := &serveProc{t: t, name: name, db: filepath.Join(t.TempDir(), "ipvsctl.db"), port: freePort(t), out: &syncOutput{}}
	t.Cleanup(func() {
		p.stop()
		if t.Failed() {
			t.Logf("%s's serve said:\n%s", p.name, p.out)
		}
	})
	return p
}

func (p *serveProc) start() {
	p.t.Helper()
	tlsFlags := p.tls
	if tlsFlags == nil {
		tlsFlags = []string{"--tls-self-signed"}
	}
	interval := p.interval
	if interval == "" {
		interval = "1h"
	}
	args := append([]string{"--db", p.db, "serve", "--listen", fmt.Sprintf("127.0.0.1:%d", p.port), "--interval", interval}, tlsFlags...)
	p.cmd = exec.Command(os.Args[0], "-test.run=^TestServeHelper$")
	if p.netns != "" {
		p.cmd = exec.Command("ip", "netns", "exec", p.netns, os.Args[0], "-test.run=^TestServeHelper$")
	}
	p.cmd.Env = append(append(os.Environ(), p.env...), "IPVSCTL_SERVE_HELPER="+strings.Join(args, "\x1f"))
	p.cmd.Stdout, p.cmd.Stderr = p.out, p.out
	if err := p.cmd.Start(); err != nil {
		p.t.Fatal(err)
	}
	waitFor(p.t, 30*time.Second, p.name+"'s daemon answering on its socket", func() bool { return client.Reachable(socketPath(p.db)) })
}

func (p *serveProc) stop() {
	if p.cmd == nil {
		return
	}
	_ = p.cmd.Process.Signal(syscall.SIGTERM)
	_ = p.cmd.Wait()
	p.cmd = nil
}

func (p *serveProc) url() string { return fmt.Sprintf("https://127.0.0.1:%d", p.port) }

func (p *serveProc) fingerprint() string {
	cert, _ := trust.IdentityPaths(filepath.Dir(p.db))
	if len(p.tls) == 4 && p.tls[0] == "--tls-cert" {
		cert = p.tls[1]
	}
	return mustFingerprint(p.t, cert)
}

// cli runs ipvsctl against this daemon (over its socket).
func (p *serveProc) cli(args ...string) cliRun {
	p.t.Helper()
	return runCLI(p.t, nil, append([]string{"--db", p.db}, args...)...)
}

func (p *serveProc) mustCLI(args ...string) string {
	p.t.Helper()
	r := p.cli(args...)
	if r.code != 0 {
		p.t.Fatalf("%s: ipvsctl %s: exit %d\n%s%s", p.name, strings.Join(args, " "), r.code, r.stdout, r.stderr)
	}
	return r.stdout
}

func (p *serveProc) status() *server.StatusView {
	p.t.Helper()
	var v server.StatusView
	if err := json.Unmarshal([]byte(p.mustCLI("status", "--json")), &v); err != nil {
		p.t.Fatal(err)
	}
	return &v
}

// state is the desired state this director holds, as JSON.
func (p *serveProc) state() string {
	p.t.Helper()
	st, _, err := client.Local(socketPath(p.db), "test").State(context.Background())
	if err != nil {
		return "error: " + err.Error()
	}
	b, _ := json.Marshal(st)
	return string(b)
}

func waitFor(t *testing.T, within time.Duration, what string, ok func() bool) {
	t.Helper()
	deadline := time.Now().Add(within)
	for !ok() {
		if time.Now().After(deadline) {
			t.Fatalf("%s: not within %s", what, within)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// peerToken is the viewer token seedAccounts made on db before the daemon
// runs: the role check the followers present.
func peerToken(t *testing.T, db string) string {
	t.Helper()
	seedAccounts(t, db)
	return viewerToken(t, db, "followers")
}

// viewerToken makes a viewer token named name in db (seedAccounts first).
// A token the followers use becomes a director's, taken over TLS only with
// a believed director certificate: a test's own reads use another one.
func viewerToken(t *testing.T, db, name string) string {
	t.Helper()
	ctx := context.Background()
	st, err := store.Open(ctx, db)
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	tok, _, err := auth.New(st, auth.Config{Params: auth.CheapParams()}).CreateToken(ctx,
		&auth.Principal{User: "root", Role: auth.Admin, Via: "cli"}, auth.Viewer.String(), name, 0)
	if err != nil {
		t.Fatal(err)
	}
	return tok
}

func followerOf(t *testing.T, f []server.FollowerStatus, fp string) *server.FollowerStatus {
	t.Helper()
	for i := range f {
		if f[i].Fingerprint == fp {
			return &f[i]
		}
	}
	return nil
}

// Three real daemons on loopback (real TLS, real SQLite files, each with
// its own certificate): an edit on the source reaches both followers; a
// local edit on a follower is refused naming the source; a follower that
// was down catches up; the source's status shows each follower's lag and
// error; a fourth director that is not pinned is refused at the source
// before its token is looked at, and is shown and audited there.
func TestReplicationToNDirectors(t *testing.T) {
	src, f1, f2, rogue := newServeProc(t, "source"), newServeProc(t, "follower1"), newServeProc(t, "follower2"), newServeProc(t, "unpinned")
	tok := peerToken(t, src.db)
	for _, p := range []*serveProc{src, f1, f2, rogue} {
		p.start()
	}
	src.mustCLI("node", "set", "--replication", "source", "--follower-fingerprint", f1.fingerprint()+","+f2.fingerprint())
	if out := src.mustCLI("node", "show"); !strings.Contains(out, "directors:   source, edits are made here; followers pinned: "+f1.fingerprint()) {
		t.Errorf("node show on the source:\n%s", out)
	}
	for _, f := range []*serveProc{f1, f2, rogue} {
		f.mustCLI("node", "set", "--replication", "follower", "--peer-url", src.url(), "--peer-token", tok, "--peer-fingerprint", src.fingerprint())
	}

	// An edit on the source reaches both followers.
	start := time.Now()
	src.mustCLI("apply", "-f", writeDoc(t, webDoc))
	want := src.state()
	for _, f := range []*serveProc{f1, f2} {
		waitFor(t, 10*time.Second, f.name+" has the source's edit", func() bool { return f.state() == want })
	}
	t.Logf("the edit reached both followers in %s", time.Since(start).Round(time.Millisecond))
	waitFor(t, 10*time.Second, "the source's status shows both followers in sync", func() bool {
		v := src.status()
		a, b := followerOf(t, v.Followers, f1.fingerprint()), followerOf(t, v.Followers, f2.fingerprint())
		return a != nil && b != nil && a.InSync && b.InSync && a.LagSeconds == 0 && a.Connected && b.Connected
	})

	// A local edit on a follower is refused, naming the source.
	other := writeDoc(t, strings.Replace(webDoc, "198.18.0.12", "198.18.0.13", 1))
	r := f1.cli("apply", "-f", other)
	if r.code == 0 || !strings.Contains(r.stderr, "follows the source "+src.url()) {
		t.Fatalf("a local edit on a follower: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}
	if f1.state() != want {
		t.Fatal("the refused edit changed the follower's state")
	}

	// The unpinned director is refused at the source, before its token.
	waitFor(t, 10*time.Second, "the unpinned director refused at the source", func() bool {
		for _, f := range src.status().Followers {
			if f.Refused && f.Fingerprint == rogue.fingerprint() && strings.Contains(f.Error, "not the pinned") {
				return true
			}
		}
		return false
	})
	waitFor(t, 10*time.Second, "the unpinned follower showing why it is refused", func() bool {
		return strings.Contains(rogue.mustCLI("node", "show"), "unreachable: peer not trusted: the caller's certificate's fingerprint is "+rogue.fingerprint())
	})
	if rogue.state() == want {
		t.Error("the unpinned director got the source's state")
	}
	waitFor(t, 10*time.Second, "the refusal audited on the source", func() bool {
		return strings.Contains(src.mustCLI("audit", "--action", "replication caller refused"), "replication caller refused")
	})

	// A follower that is down catches up when it is back; meanwhile the
	// source shows it behind.
	f2.stop()
	next := writeDoc(t, strings.Replace(webDoc, "198.18.0.11", "198.18.0.21", 1))
	src.mustCLI("apply", "-f", next)
	want = src.state()
	waitFor(t, 10*time.Second, f1.name+" has the second edit", func() bool { return f1.state() == want })
	waitFor(t, 10*time.Second, "the source shows the stopped follower behind", func() bool {
		f := followerOf(t, src.status().Followers, f2.fingerprint())
		return f != nil && !f.InSync && !f.Connected && f.LagSeconds > 0
	})
	if out := src.mustCLI("status"); !strings.Contains(out, "behind by") || !strings.Contains(out, "last seen") {
		t.Errorf("status on the source:\n%s", out)
	}
	if os.Getenv("IPVSCTL_SHOW") != "" {
		t.Logf("source status:\n%s\nunpinned node show:\n%s\nfollower node show:\n%s", src.mustCLI("status"), rogue.mustCLI("node", "show"), f1.mustCLI("node", "show"))
	}
	f2.start()
	waitFor(t, 15*time.Second, f2.name+" caught up", func() bool { return f2.state() == want })
	waitFor(t, 10*time.Second, "the source shows it in sync again", func() bool {
		f := followerOf(t, src.status().Followers, f2.fingerprint())
		return f != nil && f.InSync && f.Connected
	})
}

// With a pair CA instead of pins: the directors' certificates are the
// CA's (serve --tls-cert), each for its address; a follower whose
// certificate the CA signed for another address is refused at the source.
func TestReplicationToNDirectorsWithAPairCA(t *testing.T) {
	ca := trusttest.NewCA(t, "pair CA")
	caFile := filepath.Join(t.TempDir(), "pair-ca.pem")
	if err := os.WriteFile(caFile, ca.PEM, 0o644); err != nil {
		t.Fatal(err)
	}
	src, f1, other := newServeProc(t, "source"), newServeProc(t, "follower"), newServeProc(t, "CA-signed for another address")
	for _, p := range []*serveProc{src, f1} {
		c, k := trusttest.WriteFiles(t, ca.Issue(t, p.name, trusttest.Loopback()), filepath.Dir(p.db), "director")
		p.tls = []string{"--tls-cert", c, "--tls-key", k}
	}
	c, k := trusttest.WriteFiles(t, ca.Issue(t, other.name, []net.IP{net.ParseIP("198.18.0.66")}), filepath.Dir(other.db), "director")
	other.tls = []string{"--tls-cert", c, "--tls-key", k}
	tok := peerToken(t, src.db)
	for _, p := range []*serveProc{src, f1, other} {
		p.start()
	}
	src.mustCLI("node", "set", "--replication", "source", "--peer-ca", caFile)
	if out := src.mustCLI("node", "show"); !strings.Contains(out, "pair CA: CN=pair CA") {
		t.Errorf("node show on the source:\n%s", out)
	}
	for _, f := range []*serveProc{f1, other} {
		f.mustCLI("node", "set", "--replication", "follower", "--peer-url", src.url(), "--peer-token", tok, "--peer-ca", caFile)
	}
	src.mustCLI("apply", "-f", writeDoc(t, webDoc))
	want := src.state()
	waitFor(t, 10*time.Second, "the follower has the source's edit", func() bool { return f1.state() == want })
	waitFor(t, 10*time.Second, "the other address's certificate refused at the source", func() bool {
		for _, f := range src.status().Followers {
			if f.Refused && f.Fingerprint == other.fingerprint() && strings.Contains(f.Error, "not for 127.0.0.1") {
				return true
			}
		}
		return false
	})
	if other.state() == want {
		t.Error("the director with a certificate for another address got the source's state")
	}
	// The source learns the follower's revision from the follower's next call, after the follower has stored it.
	waitFor(t, 10*time.Second, "the follower in sync in the source's status", func() bool {
		f := followerOf(t, src.status().Followers, f1.fingerprint())
		return f != nil && f.InSync
	})
	// Removing the CA (no pins left) shuts the follower out too.
	src.mustCLI("node", "set", "--peer-ca", "")
	src.mustCLI("apply", "-f", writeDoc(t, strings.Replace(webDoc, "198.18.0.11", "198.18.0.31", 1)))
	waitFor(t, 10*time.Second, "the follower refused once the CA is gone", func() bool {
		for _, f := range src.status().Followers {
			if f.Refused && f.Fingerprint == f1.fingerprint() {
				return true
			}
		}
		return false
	})
	if f1.state() == src.state() {
		t.Error("the follower still got the source's edit with no CA and no pin")
	}
}
