package arpguard

import (
	"context"
	"fmt"
	"net/netip"
	"os"
	"strings"
	"testing"
	"time"

	"golang.org/x/crypto/ssh"

	"github.com/ipvsctl/ipvsctl/arpguard/sshtest"
	"github.com/ipvsctl/ipvsctl/ipvsmgr/tune"
)

// A check's answer from a real server with Debian 12's defaults and two
// listeners: nginx on 80 (backlog 511), sshd on 22.
const debianCheck = `sysctl net.core.somaxconn 4096
sysctl net.ipv4.tcp_max_syn_backlog 512
sysctl net.ipv4.ip_local_port_range 32768 60999
sysctl net.ipv4.tcp_max_tw_buckets 65536
sysctl net.ipv4.tcp_rmem 4096 131072 6291456
sysctl net.ipv4.tcp_wmem 4096 16384 4194304
sysctl net.core.rmem_max 212992
sysctl net.core.wmem_max 212992
sysctl net.core.netdev_max_backlog 1000
sysctl fs.file-max 9223372036854775807
sysctl fs.nr_open 1048576
listen 0.0.0.0:22 128 612
nofile 612 1024 524288
listen 0.0.0.0:80 511 700
nofile 700 1024 524288
listen [::]:8080 4096 701
nofile 701 65536 65536
`

func TestTuneFindings(t *testing.T) {
	r, err := ParseTuneCheck(debianCheck)
	if err != nil {
		t.Fatal(err)
	}
	type row struct {
		cur    string
		status tune.Status
	}
	for _, tc := range []struct {
		name  string
		ports []int
		want  map[string]row
		none  []string
	}{
		{"every listener but ssh", nil, map[string]row{
			"net.core.somaxconn":                {"4096", tune.OK},
			"net.ipv4.tcp_max_syn_backlog":      {"512", tune.Change},
			"net.ipv4.ip_local_port_range":      {"32768 60999", tune.Change},
			"net.ipv4.tcp_max_tw_buckets":       {"65536", tune.Change},
			"net.ipv4.tcp_rmem":                 {"4096 131072 6291456", tune.Change},
			"net.ipv4.tcp_wmem":                 {"4096 16384 4194304", tune.Change},
			"net.core.rmem_max":                 {"212992", tune.Change},
			"net.core.wmem_max":                 {"212992", tune.Change},
			"net.core.netdev_max_backlog":       {"1000", tune.Change},
			"fs.file-max":                       {"9223372036854775807", tune.OK},
			"fs.nr_open":                        {"1048576", tune.OK},
			"listen backlog of 0.0.0.0:80":      {"511", tune.Change},
			"open files of pid 700 (port 80)":   {"1024", tune.Change},
			"listen backlog of [::]:8080":       {"4096", tune.OK},
			"open files of pid 701 (port 8080)": {"65536", tune.OK},
		}, []string{"listen backlog of 0.0.0.0:22"}},
		{"only the service's port", []int{8080}, map[string]row{
			"listen backlog of [::]:8080": {"4096", tune.OK},
		}, []string{"listen backlog of 0.0.0.0:80", "listen backlog of 0.0.0.0:22"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			fs := TuneFindings(r, tc.ports)
			got := map[string]tune.Finding{}
			for _, f := range fs {
				got[f.Setting] = f
			}
			for k, w := range tc.want {
				f, ok := got[k]
				if !ok || f.Current != w.cur || f.Status != w.status || f.Why == "" || f.Source == "" {
					t.Errorf("%s: %+v, want %+v", k, f, w)
				}
			}
			for _, k := range tc.none {
				if _, ok := got[k]; ok {
					t.Errorf("%s listed", k)
				}
			}
		})
	}
	if f := TuneFindings(r, []int{80})[len(TCPSettings())]; !strings.Contains(f.Why, "asked for 511 in listen()") {
		t.Errorf("a small application backlog names the application: %q", f.Why)
	}
	capped, _ := ParseTuneCheck(strings.Replace(debianCheck, "somaxconn 4096", "somaxconn 511", 1))
	for _, f := range TuneFindings(capped, []int{80}) {
		if f.Setting == "listen backlog of 0.0.0.0:80" && !strings.Contains(f.Why, "capped by net.core.somaxconn 511") {
			t.Errorf("a backlog capped by somaxconn names it: %q", f.Why)
		}
	}
}

// A real server that is a network namespace on an older kernel does not see
// the host's settings: they are the host's to change, not a change to push.
func TestTuneFindingsHostSettingsNotSeen(t *testing.T) {
	r, err := ParseTuneCheck(strings.NewReplacer("netdev_max_backlog 1000", "netdev_max_backlog -", "rmem_max 212992", "rmem_max -",
		"somaxconn 4096", "somaxconn -").Replace(debianCheck) + "readonly net.core.wmem_max\n")
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range TuneFindings(r, []int{80}) {
		switch f.Setting {
		case "net.core.netdev_max_backlog", "net.core.rmem_max", "net.core.wmem_max":
			if f.Status != tune.Info || !strings.Contains(f.Why, "change it on the host") || f.Source != srcNetSysctl {
				t.Errorf("%s, not seen: %+v", f.Setting, f)
			}
		case "net.core.somaxconn": // the namespace's own: unreadable is wrong, not the host's
			if f.Status != tune.Change {
				t.Errorf("somaxconn, not seen: %+v", f)
			}
		}
	}
	for _, s := range TCPSettings() {
		if s.Source == "" || s.Why == "" || !s.ok(s.Want) || s.ok("-") {
			t.Errorf("%s: source %q, why %q, its own floor good enough %v", s.Key, s.Source, s.Why, s.ok(s.Want))
		}
	}
}

func TestParseTuneCheckNeedsEverySetting(t *testing.T) {
	_, err := ParseTuneCheck("sysctl net.core.somaxconn 4096\n")
	if err == nil || !strings.Contains(err.Error(), "net.ipv4.tcp_max_syn_backlog") {
		t.Errorf("a partial answer: %v", err)
	}
}

// TestSSHTunePushCheckUndo drives the real sshd in a namespace (tier 2):
// check finds the namespace's defaults and an application's small listen
// backlog, push raises the settings (read back with sysctl in the
// namespace) and writes the sysctl.d file, a second push changes nothing,
// undo puts every value back and removes the files. The host-wide fs.*
// limits are files of the bed bind-mounted over /proc/sys in sshd's mount
// namespace (the machine's own stay as they are); a host setting the
// namespace does not see (net.core.netdev_max_backlog) is reported as the
// host's and left alone.
func TestSSHTunePushCheckUndo(t *testing.T) {
	hostOnes := map[string]string{"fs.file-max": "65536", "fs.nr_open": "1048576"}
	b := sshtest.StartWith(t, sshtest.Options{HostSysctls: hostOnes})
	// read is a setting's value as the real server's sessions see it ("-" when they do not).
	read := func(key string) string {
		t.Helper()
		if _, ok := hostOnes[key]; ok {
			return b.HostSysctl(t, key)
		}
		if strings.TrimSpace(b.InRS(t, "test -e /proc/sys/"+strings.ReplaceAll(key, ".", "/")+" && echo yes || echo no")) == "no" {
			return "-"
		}
		return strings.Join(strings.Fields(b.InRS(t, "sysctl -n "+key)), " ")
	}
	ctx, cancel := context.WithTimeout(t.Context(), 90*time.Second)
	defer cancel()
	root := t.TempDir()
	paths := DefaultPaths().UnderRoot(root)
	b.ListenRS(t, 8080, 100)
	// A namespace starts with the kernel's defaults; make two of them
	// small, as on an older distribution, so that push has work to do.
	b.InRS(t, "sysctl -qw net.core.somaxconn=128 net.ipv4.tcp_max_syn_backlog=256")
	before := map[string]string{}
	for _, s := range TCPSettings() {
		before[s.Key] = read(s.Key)
	}
	if before["net.core.netdev_max_backlog"] != "-" {
		t.Fatalf("net.core.netdev_max_backlog is visible in a network namespace (%s): the test would change the host's", before["net.core.netdev_max_backlog"])
	}
	p := newTestPusher(t, SSHConfig{Signers: []ssh.Signer{b.Signer}, Dial: b.Dial, Paths: paths,
		KnownHostsFile: b.KnownHosts(t, b.HostKey)})
	target := []Target{{Name: "r1", RIP: netip.MustParseAddr(sshtest.RIP)}}

	r := oneResult(t, p.TuneCheck(ctx, target, []int{8080}))
	if r.State != StateDrift {
		t.Fatalf("check of a default namespace: %s", r.Summary())
	}
	for _, s := range TCPSettings() {
		if f := findingOf(t, r, s.Key); f.Current != before[s.Key] {
			t.Errorf("%s: check read %q, sysctl -n %q", s.Key, f.Current, before[s.Key])
		}
	}
	if f := findingOf(t, r, fmt.Sprintf("listen backlog of %s:8080", sshtest.RIP)); f.Current != "100" || f.Status != tune.Change {
		t.Errorf("the listener's backlog (100, capped by nothing): %+v", f)
	}
	if f := findingOf(t, r, "net.core.somaxconn"); f.Status != tune.Change {
		t.Errorf("somaxconn 128: %+v", f)
	}
	if f := findingOf(t, r, "fs.file-max"); f.Status != tune.Change || f.Source != srcFSSysctl {
		t.Errorf("fs.file-max 65536: %+v", f)
	}
	if f := findingOf(t, r, "net.core.netdev_max_backlog"); f.Status != tune.Info || !strings.Contains(f.Why, "change it on the host") {
		t.Errorf("netdev_max_backlog, not in the namespace: %+v", f)
	}

	r = oneResult(t, p.TunePush(ctx, target, []int{8080}, false))
	if len(r.Changed) < 2 {
		t.Fatalf("push changed %v (%s)", r.Changed, r.Summary())
	}
	for _, s := range TCPSettings() {
		got := read(s.Key)
		if got == "-" || s.Host && strings.Contains(b.InRS(t, "test -w /proc/sys/"+strings.ReplaceAll(s.Key, ".", "/")+" || echo readonly"), "readonly") {
			if f := findingOf(t, r, s.Key); f.Status != tune.Info {
				t.Errorf("push's read-back of %s, not in the namespace: %+v", s.Key, f)
			}
			continue
		}
		if !s.ok(got) {
			t.Errorf("after push %s = %s (sysctl -n), below %s", s.Key, got, s.Want)
		}
		if f := findingOf(t, r, s.Key); f.Status != tune.OK {
			t.Errorf("push's read-back of %s: %+v", s.Key, f)
		}
	}
	if !strings.Contains(strings.Join(r.Changed, "\n"), "fs.file-max 65536 -> 2097152") {
		t.Errorf("push's changes lack fs.file-max: %v", r.Changed)
	}
	// The application's own backlog stays: only it can raise it.
	if f := findingOf(t, r, fmt.Sprintf("listen backlog of %s:8080", sshtest.RIP)); f.Status != tune.Change || !strings.Contains(f.Why, "asked for 100") {
		t.Errorf("after push the listener: %+v", f)
	}
	conf, err := os.ReadFile(paths.TuneSysctlConf())
	if err != nil || !strings.Contains(string(conf), "net.core.somaxconn = 4096") {
		t.Errorf("the sysctl.d file: %q %v", conf, err)
	}
	// The file loads with sysctl(8) in the namespace.
	b.InRS(t, "sysctl -q -p "+paths.TuneSysctlConf())
	if r2 := oneResult(t, p.TunePush(ctx, target, []int{8080}, false)); len(r2.Changed) != 0 {
		t.Errorf("a second push changed %v", r2.Changed)
	}
	if conf2, _ := os.ReadFile(paths.TuneSysctlConf()); string(conf2) != string(conf) {
		t.Errorf("a second push rewrote the file:\n%s\nwas\n%s", conf2, conf)
	}

	r = oneResult(t, p.TuneUndo(ctx, target))
	if r.State != StateUndone || len(r.Changed) < 2 {
		t.Fatalf("undo: %s, %v", r.Summary(), r.Changed)
	}
	for _, s := range TCPSettings() {
		if got := read(s.Key); got != before[s.Key] {
			t.Errorf("after undo %s = %q, want %q", s.Key, got, before[s.Key])
		}
	}
	for _, f := range []string{paths.TuneSysctlConf(), paths.TuneJournal()} {
		if _, err := os.Stat(f); err == nil {
			t.Errorf("%s left after undo", f)
		}
	}
}

// oneResult is the one real server's result of a tune verb.
func oneResult(t *testing.T, rs []TuneResult) TuneResult {
	t.Helper()
	if len(rs) != 1 {
		t.Fatalf("%d results", len(rs))
	}
	return rs[0]
}

// findingOf is r's finding on setting.
func findingOf(t *testing.T, r TuneResult, setting string) tune.Finding {
	t.Helper()
	for _, f := range r.Findings {
		if f.Setting == setting {
			return f
		}
	}
	t.Fatalf("no %s in %+v", setting, r.Findings)
	return tune.Finding{}
}
