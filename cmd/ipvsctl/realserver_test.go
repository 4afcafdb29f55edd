package main

import (
	"bytes"
	"context"
	"crypto/ed25519"
	"crypto/rand"
	"encoding/json"
	"encoding/pem"
	"github.com/ipvsctl/ipvsctl/internal/testenv"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/ipvsctl/ipvsctl/arpguard"
	"github.com/ipvsctl/ipvsctl/arpguard/sshtest"
	"github.com/ipvsctl/ipvsctl/server"
	"github.com/ipvsctl/ipvsctl/server/auth"
	"github.com/ipvsctl/ipvsctl/server/servertest"
	"github.com/ipvsctl/ipvsctl/server/store"
	"golang.org/x/crypto/ssh"
)

// writeIdentity puts a new key where the SSH flags look by default: HOME/.ssh/id_ed25519.
func writeIdentity(t *testing.T, home string) {
	t.Helper()
	_, key, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	blk, err := ssh.MarshalPrivateKey(key, "")
	if err != nil {
		t.Fatal(err)
	}
	if err := os.MkdirAll(filepath.Join(home, ".ssh"), 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(home, ".ssh", "id_ed25519"), pem.EncodeToMemory(blk), 0o600); err != nil {
		t.Fatal(err)
	}
}

func runRealserverCLI(t *testing.T, home string, args ...string) cliRun {
	t.Helper()
	var out, errb bytes.Buffer
	cmd := commands()["realserver"]
	env := &cliEnv{stdout: &out, stderr: &errb, cmd: &cmd, getenv: func(k string) string {
		if k == "HOME" {
			return home
		}
		return ""
	}}
	code := runRealserver(env, args)
	return cliRun{code, out.String(), errb.String()}
}

func TestRealserverScript(t *testing.T) {
	r := runRealserverCLI(t, "", "script", "--rip", "198.18.0.11", "--vip", "198.18.0.100,198.18.0.101", "--interface", "eth1")
	if r.code != exitOK || !strings.Contains(r.stdout, "ip addr add 198.18.0.100/32 dev lo") ||
		!strings.Contains(r.stdout, "/proc/sys/net/ipv4/conf/eth1/arp_ignore") {
		t.Fatalf("script: %+v", r)
	}
	if r := runRealserverCLI(t, "", "script", "--undo"); r.code != exitOK || !strings.Contains(r.stdout, "undo_one") {
		t.Fatalf("script --undo: %+v", r)
	}
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"script", "--rip", "198.18.0.11", "--vip", "198.18.0.300"}, `vip: "198.18.0.300"`},
		{[]string{"script", "--rip", "198.18.1.11", "--mode", "nat"}, "gateway"},
		{[]string{"script", "--rip", "198.18.0.11", "--vip", "198.18.0.100", "--mode", "lvs"}, `mode "lvs"`},
		{[]string{"frobnicate"}, "unknown verb"},
	} {
		r := runRealserverCLI(t, "", c.args...)
		if r.code != exitUsage || !strings.Contains(r.stderr, c.want) {
			t.Errorf("%v: exit %d, stderr %q; want %d and %q", c.args, r.code, r.stderr, exitUsage, c.want)
		}
	}
}

// TestRealserverVerifyUnreachable: a real server whose SSH port refuses
// connections is reported unreachable, the verb fails, and the result is
// stored in the database, the run audited.
func TestRealserverVerifyUnreachable(t *testing.T) {
	home := t.TempDir()
	writeIdentity(t, home)
	// A loopback port that was just free: nothing listens there.
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	port := l.Addr().(*net.TCPAddr).Port
	l.Close()
	db := filepath.Join(t.TempDir(), "ipvsctl.db")
	r := runRealserverCLI(t, home, "verify", "--db", db, "--rip", "127.0.0.1", "--ssh-port", strconv.Itoa(port),
		"--vip", "198.18.0.100", "--json")
	if r.code != exitFail {
		t.Fatalf("exit %d, want %d: %+v", r.code, exitFail, r)
	}
	var rs []arpguard.Result
	if err := json.Unmarshal([]byte(r.stdout), &rs); err != nil || len(rs) != 1 || rs[0].State != arpguard.StateUnreachable {
		t.Fatalf("results %+v (err %v), want one unreachable", rs, err)
	}
	st, err := store.Open(context.Background(), db)
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	stored, err := st.Results(context.Background())
	if err != nil || len(stored) != 1 || stored[0].State != arpguard.StateUnreachable {
		t.Fatalf("stored results: %+v, err %v", stored, err)
	}
	audit, err := st.Audit(context.Background(), store.AuditFilter{Action: "realserver verify"})
	if err != nil || len(audit) != 1 || audit[0].Via != "cli" || audit[0].Detail != "1 unreachable" {
		t.Fatalf("audit: %+v, err %v", audit, err)
	}
}

// TestRealserverGlobalFlagsBeforeVerb: `ipvsctl --db PATH realserver VERB`
// (the global flag where the design puts it) reaches the verb, which stores
// its results beside that database.
func TestRealserverGlobalFlagsBeforeVerb(t *testing.T) {
	var out, errb bytes.Buffer
	env := &cliEnv{stdout: &out, stderr: &errb, getenv: func(string) string { return "" }}
	if code := dispatch(env, []string{"--db", filepath.Join(t.TempDir(), "x.db"), "realserver", "script", "--undo"}); code != exitOK ||
		!strings.Contains(out.String(), "undo_one") {
		t.Fatalf("ipvsctl --db PATH realserver script --undo: exit %d\n%s%s", code, out.String(), errb.String())
	}
	home := t.TempDir()
	db := filepath.Join(t.TempDir(), "ipvsctl.db")
	out.Reset()
	errb.Reset()
	// No identity in HOME: the verb parsed --db and its flags, then failed on the key.
	code := dispatch(env, []string{"--db", db, "realserver", "verify", "--rip", "127.0.0.1", "--vip", "198.18.0.100",
		"--identity", filepath.Join(home, "missing")})
	if code != exitUsage || !strings.Contains(errb.String(), "read ssh identity") {
		t.Fatalf("ipvsctl --db PATH realserver verify: exit %d, stderr %q", code, errb.String())
	}
}

// On a terminal, an action on many real servers counts them as they finish,
// on one line that is cleared before the results.
func TestRealserverProgressOnATerminal(t *testing.T) {
	var errb bytes.Buffer
	env := &cliEnv{stderr: &errb, terminal: func() bool { return true }}
	done := env.countDone("verify", 3, false)
	done(arpguard.Result{State: arpguard.StatePrepared})
	done(arpguard.Result{State: arpguard.StateUnreachable})
	env.clearLine()
	if got := errb.String(); !strings.Contains(got, "verify: 2 of 3 real servers done, 1 failed") || !strings.HasSuffix(got, "\r\033[K") {
		t.Fatalf("progress: %q", got)
	}
	if env.countDone("verify", 3, true) != nil || (&cliEnv{stderr: &errb, terminal: func() bool { return false }}).countDone("verify", 3, false) != nil {
		t.Fatal("progress shown with --json or off a terminal")
	}
}

// With --server the daemon verifies, logging in with its own SSH settings
// (its real servers refuse here): the same table and exit status as a local
// verify, the result stored in the daemon's database; this machine's SSH
// flags are refused rather than silently unused.
func TestRealserverVerifyThroughTheDaemon(t *testing.T) {
	g := servertest.Start(t, servertest.WithRealServerSSH(server.RealServerSSH{SSHConfig: arpguard.SSHConfig{User: "root",
		Signers: []ssh.Signer{sshtest.NewSigner(t)}, KnownHostsFile: filepath.Join(t.TempDir(), "known_hosts"), Dial: sshtest.Refuse}}))
	args := []string{"verify", "--server", g.URL, "--token", g.Tokens[auth.Admin], "--rip", "198.18.0.11", "--vip", "198.18.0.100"}
	r := runRealserverCLI(t, t.TempDir(), args...)
	if r.code != exitFail || !strings.HasPrefix(r.stdout, "REAL SERVER") ||
		!strings.Contains(r.stdout, "198.18.0.11:22  198.18.0.11:22  unreachable: ") || r.stderr != "" {
		t.Fatalf("verify --server: %+v", r)
	}
	stored, err := g.Store.Results(context.Background())
	if err != nil || len(stored) != 1 || stored[0].State != arpguard.StateUnreachable {
		t.Fatalf("daemon's stored results: %+v, err %v", stored, err)
	}
	r = runRealserverCLI(t, t.TempDir(), append(args, "--identity", "/etc/ssh/none")...)
	if r.code != exitUsage || !strings.Contains(r.stderr, "--identity: with --server the daemon logs in") {
		t.Fatalf("verify --server --identity: %+v", r)
	}
	r = runRealserverCLI(t, t.TempDir(), "verify", "--server", g.URL, "--token", g.Tokens[auth.Operator], "--rip", "198.18.0.11", "--vip", "198.18.0.100")
	if r.code != exitFail || !strings.Contains(r.stderr, "admin") {
		t.Fatalf("verify --server as an operator: %+v", r)
	}
}

// realserver apply refuses a bad flag with its own words and usage, before
// it changes anything on this machine.
func TestRealserverApplyRefusals(t *testing.T) {
	if _, err := arpguard.NewNetlinkSystem(); err != nil {
		testenv.Needf(t, "no netlink: %v", err)
	}
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"--mode", "bogus", "--vip", "192.0.2.1"}, "bogus"},
		{[]string{"--vip", "192.0.2.x"}, `vip: "192.0.2.x" is not an address`},
		{[]string{"--vip", "192.0.2.1", "--mode", "nat", "--gateway", "gw"}, `gateway: "gw" is not an address`},
		{[]string{"--vip", "192.0.2.1", "--mode", "nat", "--gateway", "192.0.2.9", "--route", "host", "--client-prefix", "10/8"}, `client-prefix: "10/8" is not a prefix`},
		{[]string{"--vip", "192.0.2.1", "--interface", "lo", "--rip", "r"}, `rip: "r" is not an address`},
		{[]string{"extra"}, `unexpected argument "extra"`},
	} {
		r := runRealserverCLI(t, t.TempDir(), append([]string{"apply"}, c.args...)...)
		if r.code == 0 || !strings.Contains(r.stderr, c.want) || r.stdout != "" {
			t.Errorf("apply %q: code %d, stdout %q, stderr %q; want a refusal with %q", c.args, r.code, r.stdout, r.stderr, c.want)
		}
	}
}
