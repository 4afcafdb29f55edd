package arpguard

import (
	"context"
	"fmt"
	"maps"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"testing"
	"time"

	"golang.org/x/crypto/ssh"

	"github.com/ipvsctl/ipvsctl/arpguard/sshtest"
	"github.com/ipvsctl/ipvsctl/arpguard/webconf"
	"github.com/ipvsctl/ipvsctl/ipvsmgr/tune"
)

// TestParseWebCheck: the web servers' part of a check's answer, whose
// dumps are fenced so that a configuration line is never read as one of
// the check's own (a "listen" with four words, a "sysctl"), and a web
// server whose configuration fails its check is reported as such.
func TestParseWebCheck(t *testing.T) {
	answer := debianCheck + `cpus 4
systemd yes
web nginx 700 1024 nginx.service /usr/sbin/nginx -c /etc/nginx/nginx.conf
` + webDumpBegin + `700@@
nginx: the configuration file /etc/nginx/nginx.conf syntax is ok
# configuration file /etc/nginx/nginx.conf:
worker_processes 2;
events {
	worker_connections 768;
}
http {
	server {
		listen 198.18.0.1:80 backlog=1 reuseport;
		sysctl x;
	}
}

` + webDumpEnd + `700@@
webcheck 700 ok
web haproxy 800 - - /usr/sbin/haproxy -f /etc/haproxy/haproxy.cfg
` + webDumpBegin + `800@@
[ALERT]    (1) : config : parsing [/etc/haproxy/haproxy.cfg:3] : unknown keyword 'maxconnn' in 'global' section
` + webDumpEnd + `800@@
webcheck 800 failed
`
	r, err := ParseTuneCheck(answer)
	if err != nil {
		t.Fatal(err)
	}
	if len(r.Listeners) != 3 || r.CPUs != 4 || !r.Systemd || len(r.Web) != 2 {
		t.Fatalf("listeners %+v, cpus %d, systemd %v, web servers %+v", r.Listeners, r.CPUs, r.Systemd, r.Web)
	}
	if r.Sysctls["x"] != "" {
		t.Errorf("a dump's line read as a sysctl: %v", r.Sysctls)
	}
	n := r.Web[0]
	if n.Kind != "nginx" || n.PID != 700 || n.NoFile != "1024" || n.Unit != "nginx.service" || n.Args != "-c /etc/nginx/nginx.conf" || !n.OK {
		t.Errorf("nginx: %+v", n)
	}
	byName := map[string]tune.Finding{}
	for _, f := range TuneFindings(r, nil) {
		byName[f.Setting] = f
	}
	for name, want := range map[string]struct {
		status tune.Status
		where  string
	}{
		"nginx worker_processes":               {tune.Change, "/etc/nginx/nginx.conf:1"},
		"nginx worker_connections":             {tune.Change, "/etc/nginx/nginx.conf:3"},
		"nginx listen 198.18.0.1:80 backlog":   {tune.Change, "/etc/nginx/nginx.conf:7"},
		"nginx listen 198.18.0.1:80 reuseport": {tune.OK, "/etc/nginx/nginx.conf:7"},
	} {
		if f := byName[name]; f.Status != want.status || f.Where != want.where {
			t.Errorf("%s: %+v, want %s at %s", name, f, want.status, want.where)
		}
	}
	if f := byName["nginx LimitNOFILE of nginx.service"]; f.Status != tune.Change || f.Kind != KindNoFileOverride || f.Current != "1024" {
		t.Errorf("nginx's file limit, systemd running it: %+v", f)
	}
	if f := byName["haproxy (pid 800) configuration"]; f.Status != tune.Far || !strings.Contains(f.Why, "unknown keyword 'maxconnn'") {
		t.Errorf("haproxy whose configuration fails haproxy -c: %+v", f)
	}
}

// TestSSHTuneWebServers (tier 2): real nginx and HAProxy started in the
// real server's namespace with a configuration that has each rule's
// problem; the check over SSH finds both by their processes and flags each
// problem with its file and line.
func TestSSHTuneWebServers(t *testing.T) {
	b := sshtest.Start(t)
	dir, ngx, hap := webBed(t, b)
	ctx, cancel := context.WithTimeout(t.Context(), 60*time.Second)
	defer cancel()
	p := newTestPusher(t, SSHConfig{Signers: []ssh.Signer{b.Signer}, Dial: b.Dial, Paths: DefaultPaths().UnderRoot(t.TempDir()),
		KnownHostsFile: b.KnownHosts(t, b.HostKey)})
	rs := p.TuneCheck(ctx, []Target{{Name: "r1", RIP: netip.MustParseAddr(sshtest.RIP)}}, nil)
	if len(rs) != 1 || rs[0].State != StateDrift {
		t.Fatalf("check: %+v", rs)
	}
	got := map[string]tune.Finding{}
	for _, f := range rs[0].Findings {
		got[f.Setting] = f
	}
	multi := runtime.NumCPU() > 1
	at := func(file string, line int) string { return file + ":" + strconv.Itoa(line) }
	for name, want := range map[string]struct {
		status tune.Status
		where  string
		kind   string
	}{
		"nginx worker_processes":                               {map[bool]tune.Status{true: tune.Change, false: tune.OK}[multi], at(ngx, 1), ""},
		"nginx worker_rlimit_nofile":                           {tune.Far, at(ngx, 2), ""},
		"nginx worker_connections":                             {tune.Change, at(ngx, 6), ""},
		"nginx multi_accept":                                   {tune.Change, at(ngx, 5), ""},
		"nginx keepalive_requests":                             {tune.Change, at(ngx, 10), ""},
		"nginx access_log " + filepath.Join(dir, "access.log"): {tune.Change, at(ngx, 9), ""},
		"nginx open_file_cache":                                {tune.Change, at(ngx, 8), webconf.KindNginxDropIn},
		"nginx sendfile":                                       {tune.Change, at(ngx, 8), webconf.KindNginxDropIn},
		"nginx listen " + sshtest.RIP + ":80 backlog":          {tune.Change, at(ngx, 14), ""},
		"haproxy maxconn":                                      {tune.Change, at(hap, 1), ""},
		"haproxy nbthread":                                     {map[bool]tune.Status{true: tune.Change, false: tune.OK}[multi], at(hap, 3), ""},
		"haproxy tune.bufsize":                                 {tune.Change, at(hap, 4), ""},
		"haproxy backend be: option http-server-close":         {tune.Change, at(hap, 15), ""},
	} {
		f, ok := got[name]
		if !ok || f.Status != want.status || f.Where != want.where || want.kind != "" && f.Kind != want.kind {
			t.Errorf("%s: %+v (found %v), want %s at %s", name, f, ok, want.status, want.where)
		}
	}
	if f := got["nginx worker_rlimit_nofile"]; f.Current != "512 (worker_rlimit_nofile)" {
		t.Errorf("nginx's file limit: %+v", f)
	}
	if f := got["haproxy maxconn"]; f.Current != "unset (about 1024: derived from the open-files limit 2048)" {
		t.Errorf("haproxy's worker limit, read from /proc: %+v", f)
	}
}

// webBed starts nginx (port 80) and HAProxy (port 8080, in front of it,
// under a file limit of 2048) in the bed's real server namespace, each
// with a configuration that has every rule's problem.
func webBed(t *testing.T, b *sshtest.Bed) (dir, ngxConf, hapConf string) {
	t.Helper()
	dir, ngxConf = b.StartNginx(t, `worker_processes 1;
worker_rlimit_nofile 512;
pid DIR/nginx.pid;
error_log DIR/error.log notice;
events { multi_accept off;
    worker_connections 1024;
}
http {
    access_log DIR/access.log;
    keepalive_requests 100;
    client_body_temp_path DIR/body;
    include DIR/conf.d/*.conf;
    server {
        listen RIP:80 backlog=8192;
        location / { return 200 "ok\n"; }
    }
}
`, 80)
	_, hapConf = b.StartHAProxy(t, `global
    # maxconn unset: derived from the file limit it starts with
    nbthread 1
    tune.bufsize 8192
defaults
    mode http
    timeout connect 5s
    timeout client 30s
    timeout server 30s
frontend fe
    bind RIP:8080
    default_backend be
backend be
    # the server side closed after each response
    option http-server-close
    server n1 RIP:80
`, 8080, 2048)
	return dir, ngxConf, hapConf
}

// TestSSHTuneWebPushUndo (tier 2): push without --apply writes nothing for
// the web servers; with it, the nginx drop-in goes where the http block
// includes it, nginx -t passes and nginx reloads while a bounded request
// loop keeps getting answers; a second push changes nothing; a drop-in
// nginx -t refuses is put back and the old configuration keeps serving;
// undo restores the configuration directory byte for byte (a file of the
// same name that was there before, with its mode, included).
func TestSSHTuneWebPushUndo(t *testing.T) {
	b := sshtest.Start(t)
	dir, _, _ := webBed(t, b)
	dropIn := filepath.Join(dir, "conf.d", webconf.DropInName)
	if err := os.WriteFile(dropIn, []byte("# the operator's, before ipvsctl\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	before := confFiles(t, dir)
	ctx, cancel := context.WithTimeout(t.Context(), 90*time.Second)
	defer cancel()
	paths := DefaultPaths().UnderRoot(t.TempDir())
	p := newTestPusher(t, SSHConfig{Signers: []ssh.Signer{b.Signer}, Dial: b.Dial, Paths: paths,
		KnownHostsFile: b.KnownHosts(t, b.HostKey)})
	target := []Target{{Name: "r1", RIP: netip.MustParseAddr(sshtest.RIP)}}

	// A bounded request loop to nginx through every push and reload.
	loopCtx, stopLoop := context.WithCancel(ctx)
	type tally struct {
		ok, failed int
		last       error
	}
	done := make(chan tally)
	go func() {
		var n tally
		for i := 0; i < 20000 && loopCtx.Err() == nil; i++ {
			rctx, cancel := context.WithTimeout(loopCtx, 5*time.Second)
			code, err := b.Get(rctx, sshtest.RIP+":80")
			cancel()
			switch {
			case loopCtx.Err() != nil:
			case err != nil || code != 200:
				n.failed++
				n.last = fmt.Errorf("%d %v", code, err)
			default:
				n.ok++
			}
			time.Sleep(2 * time.Millisecond)
		}
		done <- n
	}()

	r := oneResult(t, p.TunePush(ctx, target, nil, false))
	if got := confFiles(t, dir); !maps.Equal(got, before) {
		t.Fatalf("push without --apply changed the web server's files: %v", r.Changed)
	}
	r = oneResult(t, p.TunePush(ctx, target, nil, true))
	if r.State == StateFailed || !strings.Contains(strings.Join(r.Changed, "\n"), "nginx drop-in "+dropIn) {
		t.Fatalf("push --apply: %s, changed %v", r.Summary(), r.Changed)
	}
	written, _ := os.ReadFile(dropIn)
	for _, d := range []string{"open_file_cache max=10000 inactive=30s;", "sendfile on;", "tcp_nopush on;"} {
		if !strings.Contains(string(written), d+"\n") {
			t.Errorf("the drop-in lacks %q:\n%s", d, written)
		}
	}
	// The read-back is nginx's own dump: the directives are there now, at the drop-in's lines.
	if f := findingOf(t, r, "nginx open_file_cache"); f.Status != tune.OK || !strings.HasPrefix(f.Where, dropIn+":") {
		t.Errorf("after push, open_file_cache: %+v", f)
	}
	// Reloaded: the workers serving now were started after the drop-in.
	if out := b.InRS(t, "cat "+dir+"/error.log"); !strings.Contains(out, "reconfiguring") {
		t.Errorf("nginx was not reloaded; its log:\n%s", out)
	}
	if r2 := oneResult(t, p.TunePush(ctx, target, nil, true)); len(r2.Changed) != 0 && strings.Contains(strings.Join(r2.Changed, "\n"), "nginx") {
		t.Errorf("a second push --apply changed %v", r2.Changed)
	}

	// A drop-in nginx -t refuses: put back, no reload, still serving.
	cur, _ := os.ReadFile(dropIn)
	reading := webReadingOf(t, ctx, p, target)
	var w WebServer
	for _, s := range reading.Web {
		if s.Kind == "nginx" {
			w = s
		}
	}
	bad := nginxDropIn{Server: w, Path: dropIn, Lines: []string{"open_file_cache bogus;"}}
	res := p.each(ctx, "bad drop-in", target, func(ctx context.Context, c *ssh.Client, _ Target, _ *Result) error {
		_, err := p.run(ctx, c, RenderNginxDropInPush(bad, paths.TuneWebJournal()))
		return err
	})
	if res[0].State != StateFailed || !strings.Contains(res[0].Detail, "nginx -t refused") || !strings.Contains(res[0].Detail, "keeps its running configuration") {
		t.Errorf("an invalid drop-in: %s", res[0].Summary())
	}
	if now, _ := os.ReadFile(dropIn); string(now) != string(cur) {
		t.Errorf("the refused drop-in was left in place:\n%s", now)
	}
	if code, err := b.Get(ctx, sshtest.RIP+":80"); err != nil || code != 200 {
		t.Errorf("nginx after a refused drop-in: %d %v", code, err)
	}

	r = oneResult(t, p.TuneUndo(ctx, target))
	if r.State != StateUndone || !strings.Contains(strings.Join(r.Changed, "\n"), "nginx drop-in "+dropIn) {
		t.Fatalf("undo: %s, %v", r.Summary(), r.Changed)
	}
	if got := confFiles(t, dir); !maps.Equal(got, before) {
		t.Errorf("undo did not restore the files byte for byte:\n got %v\nwant %v", got, before)
	}
	if _, err := os.Stat(paths.TuneWebJournal()); err == nil {
		t.Error("the web journal is left after undo")
	}
	if f := findingOf(t, oneResult(t, p.TuneCheck(ctx, target, nil)), "nginx open_file_cache"); f.Status != tune.Change {
		t.Errorf("after undo, open_file_cache: %+v", f)
	}
	stopLoop()
	n := <-done
	if n.failed > 0 || n.ok < 10 {
		t.Errorf("requests during push, reload and undo: %d answered, %d failed (last: %v)", n.ok, n.failed, n.last)
	}
	t.Logf("requests during push, reload and undo: %d answered, %d failed", n.ok, n.failed)
}

// confFiles is every configuration file under dir (nginx's and HAProxy's,
// not logs or pid files) with its mode and bytes.
func confFiles(t *testing.T, dir string) map[string]string {
	t.Helper()
	out := map[string]string{}
	err := filepath.WalkDir(dir, func(p string, d os.DirEntry, err error) error {
		if err != nil || d.IsDir() || !(strings.HasSuffix(p, ".conf") || strings.HasSuffix(p, ".cfg")) {
			return err
		}
		b, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		info, err := d.Info()
		if err != nil {
			return err
		}
		out[p] = fmt.Sprintf("%v %q", info.Mode(), b)
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// webReadingOf runs a check and returns its reading.
func webReadingOf(t *testing.T, ctx context.Context, p *Pusher, target []Target) *TuneReading {
	t.Helper()
	var reading *TuneReading
	res := p.each(ctx, "read", target, func(ctx context.Context, c *ssh.Client, _ Target, _ *Result) error {
		out, err := p.run(ctx, c, RenderTuneCheck())
		if err == nil {
			reading, err = ParseTuneCheck(out)
		}
		return err
	})
	if reading == nil {
		t.Fatalf("check: %s", res[0].Summary())
	}
	return reading
}

// TestNginxDropInScripts runs push --apply's and undo's scripts here (no
// root, no SSH) against a stand-in nginx that records how it was called:
// a new drop-in is validated then reloaded, and undo removes it; a file
// that was there (empty, mode 0640) comes back byte for byte with its
// mode; a drop-in nginx -t refuses is put back and nginx is not reloaded.
func TestNginxDropInScripts(t *testing.T) {
	for _, tc := range []struct {
		name   string
		before *string // the drop-in's content before push (nil: none)
		refuse bool
	}{
		{"new file", nil, false},
		{"an empty file there before", new(string), false},
		{"refused by nginx -t", func() *string { s := "# mine\n"; return &s }(), true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			calls := filepath.Join(dir, "calls")
			fake := filepath.Join(dir, "nginx")
			script := "#!/bin/sh\necho \"$*\" >> " + calls + "\ncase \" $* \" in *\" -t \"*) [ ! -e " + dir + "/refuse ] || { echo 'nginx: [emerg] invalid value' >&2; exit 1; } ;; esac\n"
			if err := os.WriteFile(fake, []byte(script), 0o755); err != nil {
				t.Fatal(err)
			}
			if tc.refuse {
				os.WriteFile(filepath.Join(dir, "refuse"), nil, 0o644)
			}
			os.MkdirAll(filepath.Join(dir, "conf.d"), 0o755)
			d := nginxDropIn{Server: WebServer{Kind: "nginx", Exe: fake, Args: "-c " + dir + "/nginx.conf"},
				Path: filepath.Join(dir, "conf.d", webconf.DropInName), Lines: []string{"open_file_cache max=10000 inactive=30s;", "sendfile on;"}}
			if tc.before != nil {
				if err := os.WriteFile(d.Path, []byte(*tc.before), 0o640); err != nil {
					t.Fatal(err)
				}
				os.Chmod(d.Path, 0o640)
			}
			state := func() string {
				info, err := os.Stat(d.Path)
				if err != nil {
					return "absent"
				}
				b, _ := os.ReadFile(d.Path)
				return fmt.Sprintf("%v %q", info.Mode(), b)
			}
			was := state()
			journal := filepath.Join(dir, "lib", "web.journal")
			sh := func(script string) (string, error) {
				cmd := exec.Command("sh", "-s")
				cmd.Stdin = strings.NewReader(script)
				out, err := cmd.CombinedOutput()
				return string(out), err
			}
			out, err := sh(RenderNginxDropInPush(d, journal))
			callsOf := func() string { b, _ := os.ReadFile(calls); return string(b) }
			if tc.refuse {
				if err == nil || !strings.Contains(out, "nginx -t refused") || !strings.Contains(out, "invalid value") {
					t.Fatalf("refused push: %v\n%s", err, out)
				}
				if state() != was || strings.Contains(callsOf(), "reload") {
					t.Errorf("after a refused drop-in: %s (was %s); nginx called %q", state(), was, callsOf())
				}
			} else {
				if err != nil || !strings.Contains(out, "changed: nginx drop-in "+d.Path) {
					t.Fatalf("push: %v\n%s", err, out)
				}
				if b, _ := os.ReadFile(d.Path); string(b) != d.Content() {
					t.Errorf("the drop-in:\n%s", b)
				}
				if want := "-c " + dir + "/nginx.conf -t\n-c " + dir + "/nginx.conf -s reload\n"; callsOf() != want {
					t.Errorf("nginx called %q, want %q", callsOf(), want)
				}
			}
			out, err = sh(RenderTuneWebUndo(journal))
			if err != nil || !strings.Contains(out, "undone: nginx drop-in "+d.Path) {
				t.Fatalf("undo: %v\n%s", err, out)
			}
			if state() != was {
				t.Errorf("after undo: %s, want %s", state(), was)
			}
			if _, err := os.Stat(journal); err == nil {
				t.Error("the journal is left after undo")
			}
		})
	}
}

// TestNoFileFinding: push --apply may write a web server's file limit only
// where systemd runs it in a unit of its own.
func TestNoFileFinding(t *testing.T) {
	for _, tc := range []struct {
		w       WebServer
		systemd bool
		ok      bool
		status  tune.Status
		kind    string
	}{
		{WebServer{Kind: "nginx", Unit: "-", NoFile: "1024"}, true, false, "", ""},
		{WebServer{Kind: "nginx", Unit: "nginx.service", NoFile: "1024"}, true, true, tune.Change, KindNoFileOverride},
		{WebServer{Kind: "nginx", Unit: "nginx.service", NoFile: "1024"}, false, true, tune.Change, tune.KindManual},
		{WebServer{Kind: "haproxy", Unit: "ci-runner.service", NoFile: "1024"}, true, true, tune.Change, tune.KindManual},
		{WebServer{Kind: "haproxy", Unit: "haproxy.service", NoFile: "524288"}, true, true, tune.OK, tune.KindManual},
		{WebServer{Kind: "nginx", Unit: "nginx.service", NoFile: "unlimited"}, true, true, tune.OK, tune.KindManual},
	} {
		f, ok := noFileFinding(tc.w, tc.systemd)
		if ok != tc.ok || ok && (f.Status != tc.status || f.Kind != tc.kind) {
			t.Errorf("%+v, systemd %v: %v %+v", tc.w, tc.systemd, ok, f)
		}
	}
}

// TestNoFileOverrideScripts runs push --apply's systemd drop-in and undo
// here (no root) with a stand-in systemctl: the drop-in (and the unit's .d
// directory it needed) is written and systemd reloads its units; undo
// removes both, or puts back byte for byte a drop-in of the same name that
// was there, and reloads again.
func TestNoFileOverrideScripts(t *testing.T) {
	for _, before := range []*string{nil, func() *string { s := "[Service]\nLimitNOFILE=4096\n"; return &s }()} {
		dir := t.TempDir()
		calls := filepath.Join(dir, "calls")
		bin := filepath.Join(dir, "bin")
		os.MkdirAll(bin, 0o755)
		if err := os.WriteFile(filepath.Join(bin, "systemctl"), []byte("#!/bin/sh\necho \"$*\" >> "+calls+"\n"), 0o755); err != nil {
			t.Fatal(err)
		}
		paths := DefaultPaths().UnderRoot(filepath.Join(dir, "root"))
		file := paths.NoFileOverride("nginx.service")
		if before != nil {
			os.MkdirAll(filepath.Dir(file), 0o755)
			if err := os.WriteFile(file, []byte(*before), 0o600); err != nil {
				t.Fatal(err)
			}
		}
		state := func() string {
			info, err := os.Stat(file)
			if err != nil {
				if _, derr := os.Stat(filepath.Dir(file)); derr != nil {
					return "absent, and its directory"
				}
				return "absent"
			}
			b, _ := os.ReadFile(file)
			return fmt.Sprintf("%v %q", info.Mode(), b)
		}
		was := state()
		sh := func(script string) string {
			t.Helper()
			cmd := exec.Command("sh", "-s")
			cmd.Stdin = strings.NewReader(script)
			cmd.Env = append(os.Environ(), "PATH="+bin+":"+os.Getenv("PATH"))
			out, err := cmd.CombinedOutput()
			if err != nil {
				t.Fatalf("%v\n%s", err, out)
			}
			return string(out)
		}
		out := sh(RenderNoFileOverridePush("nginx.service", file, paths.TuneWebJournal()))
		if !strings.Contains(out, "changed: systemd drop-in "+file+": LimitNOFILE=65536 (at the next restart of nginx.service)") {
			t.Errorf("push: %s", out)
		}
		if b, _ := os.ReadFile(file); !strings.Contains(string(b), "[Service]\nLimitNOFILE=65536\n") {
			t.Errorf("the drop-in: %q", b)
		}
		out = sh(RenderTuneWebUndo(paths.TuneWebJournal()))
		if !strings.Contains(out, "undone: systemd drop-in "+file) || state() != was {
			t.Errorf("undo: %s; now %s, was %s", out, state(), was)
		}
		if b, _ := os.ReadFile(calls); string(b) != "daemon-reload\ndaemon-reload\n" {
			t.Errorf("systemctl called %q", b)
		}
	}
}
