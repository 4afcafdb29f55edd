package main

import (
	"context"
	"encoding/json"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"golang.org/x/crypto/ssh"

	"github.com/ipvsctl/ipvsctl/arpguard"
	"github.com/ipvsctl/ipvsctl/arpguard/sshtest"
	"github.com/ipvsctl/ipvsctl/ipvsmgr/tune"
	"github.com/ipvsctl/ipvsctl/server"
	"github.com/ipvsctl/ipvsctl/server/auth"
	"github.com/ipvsctl/ipvsctl/server/servertest"
	"github.com/ipvsctl/ipvsctl/server/store"
)

// TestRealserverTuneCLI: an unreachable real server is reported and fails
// the verb; bad flags are usage errors naming the value. (The SSH work
// itself is tested against sshd in arpguard's TestSSHTunePushCheckUndo.)
func TestRealserverTuneCLI(t *testing.T) {
	home := t.TempDir()
	writeIdentity(t, home)
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	port := l.Addr().(*net.TCPAddr).Port
	l.Close()
	db := filepath.Join(t.TempDir(), "ipvsctl.db")
	for _, verb := range []string{"check", "push", "undo"} {
		r := runRealserverCLI(t, home, "tune", verb, "--db", db, "--rip", "127.0.0.1", "--ssh-port", strconv.Itoa(port), "--json")
		var rs []arpguard.TuneResult
		if r.code != exitFail || json.Unmarshal([]byte(r.stdout), &rs) != nil || len(rs) != 1 || rs[0].State != arpguard.StateUnreachable ||
			rs[0].Action != "tune "+verb {
			t.Errorf("tune %s of a closed port: exit %d, %s %s", verb, r.code, r.stdout, r.stderr)
		}
	}
	r := runRealserverCLI(t, home, "tune", "check", "--db", db, "--rip", "127.0.0.1", "--ssh-port", strconv.Itoa(port))
	if r.code != exitFail || !strings.Contains(r.stdout, "127.0.0.1:"+strconv.Itoa(port)+"): unreachable: ") || !strings.Contains(r.stdout, "connection refused") {
		t.Errorf("tune check's text: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}
	for _, bad := range [][]string{
		{"tune", "check", "--rip", "127.0.0.1", "--port", "70000"},
		{"tune", "check", "--rip", "not-an-address"},
		{"tune", "check", "--rip", "127.0.0.1", "--server", "https://198.18.0.1:3636", "--identity", "/etc/ssh/none"},
		{"tune", "check", "--rip", "127.0.0.1", "--server", "https://198.18.0.1:3636", "--ssh-port", "2222"},
		{"tune", "frobnicate"},
	} {
		if r := runRealserverCLI(t, home, bad...); r.code != exitUsage {
			t.Errorf("%v: exit %d, want %d (%s)", bad, r.code, exitUsage, r.stderr)
		}
	}
	if r := runRealserverCLI(t, home, "tune", "check", "--rip", "127.0.0.1", "--port", "70000"); !strings.Contains(r.stderr, `"70000"`) {
		t.Errorf("a bad port is named: %s", r.stderr)
	}
}

// TestRealserverTuneThroughTheDaemon (tier 2): realserver tune with
// --server goes through the daemon's API and core, which logs in to the real
// sshd in a namespace with its own SSH settings: check finds the small
// fs.file-max (a file of the bed over /proc/sys, so the machine's stays),
// push raises it and the namespace's somaxconn (read back there), undo puts
// both back; each run is audited as its own action, and an operator is
// refused.
func TestRealserverTuneThroughTheDaemon(t *testing.T) {
	b := sshtest.StartWith(t, sshtest.Options{HostSysctls: map[string]string{"fs.file-max": "65536", "fs.nr_open": "1048576"}})
	b.InRS(t, "sysctl -qw net.core.somaxconn=128")
	g := sshDaemon(t, b)
	run := func(verb string, role auth.Role) (cliRun, []arpguard.TuneResult) {
		t.Helper()
		r := runRealserverCLI(t, t.TempDir(), "tune", verb, "--server", g.URL, "--token", g.Tokens[role], "--rip", sshtest.RIP, "--json")
		var rs []arpguard.TuneResult
		if role == auth.Admin && (json.Unmarshal([]byte(r.stdout), &rs) != nil || len(rs) != 1) {
			t.Fatalf("tune %s --server: %+v", verb, r)
		}
		return r, rs
	}
	r, rs := run("check", auth.Admin)
	if r.code != exitFail || rs[0].State != arpguard.StateDrift {
		t.Fatalf("check: exit %d, %+v", r.code, rs[0].Result)
	}
	if f := tuneFinding(t, rs[0], "fs.file-max"); f.Current != "65536" || f.Status != tune.Change || f.Source != "Documentation/admin-guide/sysctl/fs.rst" {
		t.Errorf("check: fs.file-max %+v", f)
	}
	r, rs = run("push", auth.Admin)
	if r.code != exitOK || rs[0].State != arpguard.StatePrepared {
		t.Errorf("push: exit %d, %+v", r.code, rs[0].Result)
	}
	if got := b.HostSysctl(t, "fs.file-max"); got != "2097152" {
		t.Errorf("fs.file-max after push: %s, want 2097152", got)
	}
	if got := strings.TrimSpace(b.InRS(t, "sysctl -n net.core.somaxconn")); got != "4096" {
		t.Errorf("somaxconn in the namespace after push: %s, want 4096", got)
	}
	for _, f := range rs[0].Findings {
		if f.Kind == tune.KindSysctl && f.Status == tune.Change {
			t.Errorf("after push: %+v", f)
		}
	}
	r, rs = run("undo", auth.Admin)
	if r.code != exitOK || rs[0].State != arpguard.StateUndone {
		t.Fatalf("undo: exit %d, %+v", r.code, rs[0].Result)
	}
	if got := b.HostSysctl(t, "fs.file-max"); got != "65536" {
		t.Errorf("fs.file-max after undo: %s, want 65536", got)
	}
	if got := strings.TrimSpace(b.InRS(t, "sysctl -n net.core.somaxconn")); got != "128" {
		t.Errorf("somaxconn after undo: %s, want 128", got)
	}
	if r, _ := run("push", auth.Operator); r.code != exitFail || !strings.Contains(r.stderr, "admin") {
		t.Errorf("push as an operator: %+v", r)
	}
	if got := b.HostSysctl(t, "fs.file-max"); got != "65536" {
		t.Errorf("fs.file-max after an operator's refused push: %s", got)
	}
	for _, action := range []string{"realserver tune check", "realserver tune push", "realserver tune undo"} {
		es, err := g.Store.Audit(context.Background(), store.AuditFilter{Action: action})
		if err != nil || len(es) != 1 || es[0].Actor != "admin" || es[0].Target != sshtest.RIP+":22" || es[0].Detail == "" {
			t.Errorf("audit %q: %+v, err %v", action, es, err)
		}
	}
	es, _ := g.Store.Audit(context.Background(), store.AuditFilter{Action: "realserver tune push"})
	if len(es) == 1 && !strings.Contains(es[0].Detail, "settings changed") {
		t.Errorf("the push's audit detail says nothing of its changes: %q", es[0].Detail)
	}
}

// TestRealserverTuneWebThroughTheDaemon (tier 2): the web server's
// findings travel through the daemon's API to the CLI as the sysctls' do,
// each with its manual and file:line (the text names it too); push without
// --apply writes nothing for nginx, push --apply writes the drop-in (audited
// as such, naming the file), undo removes it; --apply goes with push only.
func TestRealserverTuneWebThroughTheDaemon(t *testing.T) {
	b := sshtest.Start(t)
	dir, conf := b.StartNginx(t, `pid DIR/nginx.pid;
error_log DIR/error.log;
events {
    worker_connections 768;
}
http {
    access_log off;
    include DIR/conf.d/*.conf;
    server {
        listen RIP:80;
        location / { return 200 "ok\n"; }
    }
}
`, 80)
	dropIn := filepath.Join(dir, "conf.d", "ipvsctl-tune.conf")
	g := sshDaemon(t, b)
	run := func(args ...string) (cliRun, []arpguard.TuneResult) {
		t.Helper()
		r := runRealserverCLI(t, t.TempDir(), append([]string{"tune"}, append(args, "--server", g.URL, "--token", g.Tokens[auth.Admin], "--rip", sshtest.RIP)...)...)
		var rs []arpguard.TuneResult
		if strings.Contains(strings.Join(args, " "), "--json") && (json.Unmarshal([]byte(r.stdout), &rs) != nil || len(rs) != 1) {
			t.Fatalf("tune %v: %+v", args, r)
		}
		return r, rs
	}
	_, rs := run("check", "--json")
	if f := tuneFinding(t, rs[0], "nginx worker_connections"); f.Status != tune.Change || f.Where != conf+":4" ||
		f.Source != "https://nginx.org/en/docs/ngx_core_module.html#worker_connections" {
		t.Errorf("check: worker_connections %+v", f)
	}
	if f := tuneFinding(t, rs[0], "nginx open_file_cache"); f.Kind != "nginx-dropin" || f.Where != conf+":6" {
		t.Errorf("check: open_file_cache %+v", f)
	}
	if r, _ := run("check"); !strings.Contains(r.stdout, "  at: "+conf+":4\n") || !strings.Contains(r.stdout, "nginx worker_connections") {
		t.Errorf("check's text does not name the file and line:\n%s", r.stdout)
	}
	run("push", "--json")
	if _, err := os.Stat(dropIn); err == nil {
		t.Fatal("push without --apply wrote the nginx drop-in")
	}
	_, rs = run("push", "--apply", "--json")
	if !strings.Contains(strings.Join(rs[0].Changed, "\n"), "nginx drop-in "+dropIn) {
		t.Errorf("push --apply: %+v", rs[0].Result)
	}
	if got, err := os.ReadFile(dropIn); err != nil || !strings.Contains(string(got), "open_file_cache max=10000 inactive=30s;") {
		t.Errorf("the drop-in after push --apply: %q %v", got, err)
	}
	if f := tuneFinding(t, rs[0], "nginx open_file_cache"); f.Status != tune.OK || !strings.HasPrefix(f.Where, dropIn+":") {
		t.Errorf("push --apply's read-back: %+v", f)
	}
	es, err := g.Store.Audit(context.Background(), store.AuditFilter{Action: "realserver tune push --apply"})
	if err != nil || len(es) != 1 || !strings.Contains(es[0].Detail, "nginx drop-in "+dropIn) {
		t.Errorf("audit of push --apply: %+v, err %v", es, err)
	}
	if r, rs := run("undo", "--json"); r.code != exitOK || !strings.Contains(strings.Join(rs[0].Changed, "\n"), "nginx drop-in "+dropIn) {
		t.Errorf("undo: %+v", r)
	}
	if _, err := os.Stat(dropIn); err == nil {
		t.Error("the drop-in is left after undo")
	}
	if r, _ := run("check", "--apply"); r.code != exitUsage || !strings.Contains(r.stderr, "--apply goes with push only") {
		t.Errorf("check --apply: %+v", r)
	}
}

// sshDaemon is a daemon whose real-server pushes log in to b's sshd as root.
func sshDaemon(t *testing.T, b *sshtest.Bed) *servertest.Rig {
	t.Helper()
	return servertest.Start(t, servertest.WithRealServerSSH(server.RealServerSSH{SSHConfig: arpguard.SSHConfig{User: "root",
		Signers: []ssh.Signer{b.Signer}, KnownHostsFile: b.KnownHosts(t, b.HostKey), Dial: b.Dial, Timeout: 30 * time.Second,
		Paths: arpguard.DefaultPaths().UnderRoot(t.TempDir())}}))
}

// tuneFinding is r's finding on setting.
func tuneFinding(t *testing.T, r arpguard.TuneResult, setting string) tune.Finding {
	t.Helper()
	for _, f := range r.Findings {
		if f.Setting == setting {
			return f
		}
	}
	t.Fatalf("no %s in %+v", setting, r.Findings)
	return tune.Finding{}
}
