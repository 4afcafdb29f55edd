package formats

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
	"github.com/ipvsctl/ipvsctl/internal/testenv"
	"github.com/ipvsctl/ipvsctl/ipvsmgr"
)

// keepalivedFiles are every keepalived file of the tests that imports:
// the corpus and the samples, with what they import to.
func keepalivedFiles(t *testing.T) map[string]*ipvsmgr.State {
	t.Helper()
	out := map[string]*ipvsmgr.State{}
	for _, p := range append(corpusFiles(t, "keepalived"), samples(t, "keepalived")...) {
		data, err := os.ReadFile(p)
		if err != nil {
			t.Fatal(err)
		}
		if st, _, err := ImportWith(FormatKeepalived, bytes.NewReader(data), rootedOptions(p)); err == nil {
			out[p] = st
		}
	}
	if len(out) < 30 {
		t.Fatalf("%d keepalived files import; want at least 30", len(out))
	}
	return out
}

// TestKeepalivedExportRoundTrip: every keepalived file of the samples (the
// corpus's are TestCorpus's) exported to keepalived and imported again is
// the same document, its groups groups again.
func TestKeepalivedExportRoundTrip(t *testing.T) {
	for _, p := range samples(t, "keepalived") {
		t.Run(p, func(t *testing.T) {
			st := importFile(t, FormatKeepalived, p)
			roundTrip(t, FormatKeepalived, st)
		})
	}
	st := importFile(t, FormatKeepalived, filepath.Join("testdata", "keepalived", "keepalived.conf.virtual_server_group"))
	var out bytes.Buffer
	if err := Export(FormatKeepalived, st, &out); err != nil {
		t.Fatal(err)
	}
	text := out.String()
	if strings.Count(text, "virtual_server_group VSG_1 {") != 1 || !strings.Contains(text, "virtual_server group VSG_1 {") ||
		!strings.Contains(text, "    192.168.200.10 80\n") || !strings.Contains(text, "    fwmark 2\n") {
		t.Errorf("the group is not written back as a group:\n%s", text)
	}
}

// runKeepalivedTest runs Debian's keepalived's config test on file, in its
// own process group (keepalived -t signals its group as it ends), bounded
// in time: its exit status and what it printed.
func runKeepalivedTest(t *testing.T, dir, file string) (int, string) {
	t.Helper()
	return runKeepalivedTestIn(t, dir, file, "")
}

// runKeepalivedTestIn runs it after the shell commands setup, in a
// network namespace of its own when setup is set (its interfaces are
// setup's).
func runKeepalivedTestIn(t *testing.T, dir, file, setup string) (int, string) {
	t.Helper()
	bin, err := exec.LookPath("keepalived")
	if err != nil {
		for _, p := range []string{"/usr/sbin/keepalived", "/sbin/keepalived"} {
			if _, e := os.Stat(p); e == nil {
				bin, err = p, nil
			}
		}
	}
	if err != nil {
		testenv.Need(t, "keepalived is not installed (Debian's keepalived package; scripts/vm/setup.sh installs it)")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, bin, "-t", "-f", file)
	if setup != "" {
		cmd = exec.CommandContext(ctx, "unshare", "--net", "sh", "-c", setup+` && exec "$0" -t -f "$1"`, bin, file)
	}
	cmd.Dir = dir
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	var buf bytes.Buffer
	cmd.Stdout, cmd.Stderr = &buf, &buf
	err = cmd.Run()
	if ctx.Err() != nil {
		t.Fatalf("keepalived -t -f %s did not end in 20 s", file)
	}
	code := 0
	if ee, ok := err.(*exec.ExitError); ok {
		code = ee.ExitCode()
		if ws, ok := ee.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
			code = 128 + int(ws.Signal())
		}
	} else if err != nil {
		t.Fatalf("keepalived -t: %v", err)
	}
	return code, buf.String()
}

// TestKeepalivedExportPassesKeepalivedConfigTest: the real keepalived
// (Debian's 2.2.7, `keepalived -t`) reads every export as well as the file
// it came from: it passes where the original passes (or where the
// original's only problem is what the export no longer has), with no more
// unknown keywords; and a state made in ipvsctl, with every check type a
// keepalived checker has, passes clean.
func TestKeepalivedExportPassesKeepalivedConfigTest(t *testing.T) {
	dir := t.TempDir()
	passed := 0
	for p, st := range keepalivedFiles(t) {
		var out bytes.Buffer
		if err := Export(FormatKeepalived, st, &out); err != nil {
			t.Errorf("%s: export: %v", p, err)
			continue
		}
		file := filepath.Join(dir, filepath.Base(p))
		if err := os.WriteFile(file, out.Bytes(), 0o644); err != nil {
			t.Fatal(err)
		}
		abs, _ := filepath.Abs(p)
		origCode, origOut := runKeepalivedTest(t, filepath.Dir(abs), abs)
		code, text := runKeepalivedTest(t, dir, file)
		if code != 0 && code != origCode {
			t.Errorf("%s: keepalived -t exits %d on the export, %d on the original:\n%s\nexport:\n%s", p, code, origCode, text, out.String())
		}
		if n, m := strings.Count(strings.ToLower(text), "unknown keyword"), strings.Count(strings.ToLower(origOut), "unknown keyword"); n > m {
			t.Errorf("%s: keepalived finds %d unknown keywords in the export, %d in the original:\n%s", p, n, m, text)
		}
		if code == 0 {
			passed++
		}
	}
	if passed < 15 {
		t.Errorf("keepalived -t passed %d exports clean; want at least 15", passed)
	}

	st := madeState()
	var out bytes.Buffer
	if err := Export(FormatKeepalived, st, &out); err != nil {
		t.Fatal(err)
	}
	file := filepath.Join(dir, "made.conf")
	if err := os.WriteFile(file, out.Bytes(), 0o644); err != nil {
		t.Fatal(err)
	}
	code, text := runKeepalivedTest(t, dir, file)
	if code != 0 || strings.Contains(strings.ToLower(text), "unknown") || strings.Contains(text, "WARNING") {
		t.Errorf("keepalived -t on a state made in ipvsctl: exit %d\n%s\nexport:\n%s", code, text, out.String())
	}
	back, err := Import(FormatKeepalived, bytes.NewReader(out.Bytes()))
	if err != nil {
		t.Fatalf("re-import: %v\n%s", err, out.String())
	}
	// keepalived has no names (they are comments); its global_defs, made
	// for lvs_timeouts, and the track_file of the file check are kept by
	// the import as any are.
	if len(back.Imported) != 3 || back.Imported[0].Key != "global_defs" || back.Imported[1].Key != "vrrp_instance LB" || back.Imported[2].Key != "track_file ipvsctl_file_1" {
		t.Errorf("re-imported keeps %+v, want the global_defs, the vrrp_instance and the file check's track_file", back.Imported)
	}
	noNames := cmpopts.IgnoreFields(ipvsmgr.Service{}, "Name")
	if d := cmp.Diff(st, back, cmpopts.EquateEmpty(), noNames, cmpopts.IgnoreFields(ipvsmgr.Server{}, "Name"), cmpopts.IgnoreFields(ipvsmgr.State{}, "Imported")); d != "" {
		t.Errorf("a made state round trip (-made +re-imported):\n%s\nexport:\n%s", d, out.String())
	}
}

// madeState is a state as ipvsctl writes one, with what keepalived can say
// written out explicitly (its defaults are not ipvsctl's).
func madeState() *ipvsmgr.State {
	w := func(n int) *int { return &n }
	yes := boolPtr(true)
	timing := ipvsmgr.Check{Interval: 3, Timeout: 2, Rise: 1, Fall: 3, StartHealthy: yes}
	check := func(c ipvsmgr.Check) *ipvsmgr.Check {
		c.Interval, c.Timeout, c.Rise, c.Fall, c.StartHealthy = timing.Interval, timing.Timeout, timing.Rise, timing.Fall, timing.StartHealthy
		return &c
	}
	warmup, garpDelay := 1.5, 2.0
	return &ipvsmgr.State{
		Settings: ipvsmgr.Settings{TCPTimeout: 900, UDPTimeout: 60,
			Redundancy: &ipvsmgr.Redundancy{VRID: 51, Interface: "eth0", Instance: "LB", AdvertInterval: 0.5, UnicastPeers: []string{"198.18.9.1", "198.18.9.2"},
				PreemptDelay: 5, TrackInterfaces: []string{"lo"}, GARPCount: w(3), GARPRepeatDelay: &garpDelay,
				SyncDaemon: true, SyncID: 51,
				VRRPNotify: ipvsmgr.VRRPNotify{NotifyMaster: ipvsmgr.Argv{"/etc/keepalived/master.sh", "web vip"}, NotifyBackup: ipvsmgr.Argv{"/etc/keepalived/backup.sh"},
					NotifyFault: ipvsmgr.Argv{"/etc/keepalived/fault.sh"}, NotifyStop: ipvsmgr.Argv{"/etc/keepalived/stop.sh"},
					Notify: ipvsmgr.Argv{"/usr/local/bin/ka-notify"}}, SMTPAlert: yes},
			Alerts: &ipvsmgr.Alerts{SMTP: &ipvsmgr.SMTPAlerts{Server: "198.18.9.25", Port: 2525, HeloName: "lb1.example.com", From: "lb@example.com",
				To: []string{"ops@example.com", "noc@example.com"}, ConnectTimeout: 10, RouterID: "LB1", AlertChecker: boolPtr(false), NoEmailFaults: true}}},
		Services: []ipvsmgr.Service{
			{Name: "web", Protocol: "tcp", Address: "198.18.0.10", Port: 80, Scheduler: "wrr", Forwarding: "dr", Interface: "eth0",
				Check:       check(ipvsmgr.Check{Type: "http", Path: "/health", ExpectStatus: []int{200, 201, 202, 204}, Host: "www.example.com", FastInterval: 1, OnFailure: "quiesce"}),
				SorryServer: &ipvsmgr.SorryServer{Address: "198.18.1.250"}, Quorum: 2,
				Servers: []ipvsmgr.Server{{Name: "a", Address: "198.18.1.1", Weight: w(2)}, {Address: "198.18.1.2", Weight: w(2)}}},
			{Protocol: "tcp", Address: "198.18.0.10", Port: 443, Interface: "eth0", Scheduler: "sh", SchedulerFlags: []string{"port"}, Persistence: 300, PersistenceNetmask: "255.255.255.0", Forwarding: "nat",
				Servers: []ipvsmgr.Server{
					{Address: "198.18.1.1", Port: 8443, Weight: w(1), Check: check(ipvsmgr.Check{Type: "https", Path: "/"})},
					{Address: "198.18.1.2", Port: 8443, Weight: w(1), Check: check(ipvsmgr.Check{Type: "exec", Command: []string{"/usr/local/bin/check", "%h", "a b"}, DynamicWeight: yes})},
					{Address: "198.18.1.3", Port: 8443, Weight: w(1), Check: check(ipvsmgr.Check{Type: "smtp", Name: "lb.example.com"})},
					{Address: "198.18.1.4", Port: 8443, Weight: w(1), UpperThreshold: 100, LowerThreshold: 10, Check: check(ipvsmgr.Check{Type: "tcp", Port: 9000})},
				}},
			{Protocol: "udp", Address: "198.18.0.11", Port: 53, Scheduler: "rr", Forwarding: "dr", Group: "dns",
				Check:   check(ipvsmgr.Check{Type: "dns", Name: "example.com", QType: "AAAA"}),
				Servers: []ipvsmgr.Server{{Address: "198.18.2.1", Weight: w(1)}, {Address: "198.18.2.2", Weight: w(1)}}},
			{Protocol: "udp", Address: "198.18.0.12", Port: 53, Scheduler: "rr", Forwarding: "dr", Group: "dns",
				Check:   check(ipvsmgr.Check{Type: "dns", Name: "example.com", QType: "AAAA"}),
				Servers: []ipvsmgr.Server{{Address: "198.18.2.1", Weight: w(1)}, {Address: "198.18.2.2", Weight: w(1)}}},
			{Protocol: "udp", Address: "198.18.0.13", Port: 5000, Scheduler: "wlc", Forwarding: "tun",
				Check:   check(ipvsmgr.Check{Type: "send_expect", Protocol: "udp", Send: `hello\n`, Expect: "hello"}),
				Servers: []ipvsmgr.Server{{Address: "198.18.3.1", Weight: w(1), Tunnel: "gue", TunnelPort: 6080}}},
			{FWMark: 7, Scheduler: "lc", Forwarding: "dr",
				Servers: []ipvsmgr.Server{{Address: "198.18.4.1", Weight: w(1)}}},
			{Protocol: "tcp", Address: "198.18.0.14", Port: 3306, Scheduler: "wlc", Forwarding: "dr",
				Servers: []ipvsmgr.Server{
					{Address: "198.18.5.1", Weight: w(10), Check: check(ipvsmgr.Check{Type: "ping", Warmup: &warmup})},
					{Address: "198.18.5.2", Weight: w(10), Check: &ipvsmgr.Check{Type: "file", File: "/run/ipvsctl-test/db2.weight", FileWeight: w(-5), FileReverse: yes,
						Interval: 1, Rise: 1, Fall: 1, StartHealthy: yes}},
				}},
		},
	}
}

// TestKeepalivedExportRefusals: what keepalived cannot say is an error
// naming the field, never left out.
func TestKeepalivedExportRefusals(t *testing.T) {
	for _, c := range []struct {
		edit func(*ipvsmgr.State)
		want string
	}{
		{func(s *ipvsmgr.State) { s.Services[0].Check.Rise = 3 }, "services[0].check.rise: 3"},
		{func(s *ipvsmgr.State) { s.Services[0].Servers[0].Drained = true }, "services[0].servers[0].drained"},
		{func(s *ipvsmgr.State) { s.Services[0].Servers[1].Enabled = boolPtr(false) }, "services[0].servers[1].enabled"},
		{func(s *ipvsmgr.State) { s.Services[0].Servers[1].Weight = intPtr(3) }, "services[0].quorum: 2 servers"},
		{func(s *ipvsmgr.State) { s.Services[1].Servers[3].Check.Type = "agent" }, "services[1].servers[3].check.type"},
		{func(s *ipvsmgr.State) { s.Services[3].Scheduler = "wrr" }, `services[3].settings differs from services[2] of group "dns"`},
		{func(s *ipvsmgr.State) { s.Services[4].Group = "dns" }, `services[4].settings differs from services[2] of group "dns"`},
		{func(s *ipvsmgr.State) { s.Services[5].Group = "dns" }, `services[5].group: "dns": its services from services[5] on are fwmark 7`},
		{func(s *ipvsmgr.State) {
			s.Settings.Redundancy = &ipvsmgr.Redundancy{VRID: 5, Interface: "eth0", Auth: &ipvsmgr.RedundancyAuth{Keys: []ipvsmgr.RedundancyKey{{ID: 1, File: "/etc/ipvsctl/vrrp.key"}}}}
		}, "settings.redundancy.auth"},
		{func(s *ipvsmgr.State) {
			s.Settings.Alerts = &ipvsmgr.Alerts{Webhooks: []ipvsmgr.Webhook{{URL: "http://198.18.0.9/"}}}
		}, "settings.alerts.webhooks"},
		{func(s *ipvsmgr.State) {
			wait := 10.0
			s.Settings.Redundancy = &ipvsmgr.Redundancy{VRID: 5, Interface: "eth0", SyncDaemon: true, PreemptSyncWait: &wait}
		}, "settings.redundancy.preempt_sync_wait: 10"},
	} {
		st := madeState()
		c.edit(st)
		var out bytes.Buffer
		err := Export(FormatKeepalived, st, &out)
		switch {
		case c.want == "" && err != nil:
			t.Errorf("unexpected refusal: %v", err)
		case c.want != "" && (err == nil || !strings.Contains(err.Error(), c.want)):
			t.Errorf("want an error with %q, got %v", c.want, err)
		}
	}
}

// TestKeepalivedExportKeptUnderAPortWrittenWithZeros: a virtual_server
// port or fwmark written with leading zeros ("0358", keepalived's
// read_unsigned reads it as 358) still finds its block's kept keys
// (FuzzImportKeepalived seed c9f59be47ad3e43d: the UDP_CHECK was lost).
func TestKeepalivedExportKeptUnderAPortWrittenWithZeros(t *testing.T) {
	in := "virtual_server 198.18.0.1 0358 {\n  protocol UDP\n  ha_suspend\n  real_server 198.18.1.1 1358 {\n    UDP_CHECK {\n    }\n  }\n}\n" +
		"virtual_server fwmark 007 {\n  ha_suspend\n  real_server 198.18.1.2 80 {\n    snmp_name d\n  }\n}\n"
	st, err := Import(FormatKeepalived, strings.NewReader(in))
	if err != nil {
		t.Fatal(err)
	}
	if len(st.Imported) != 4 {
		t.Fatalf("kept %+v, want the two ha_suspend of the blocks, the UDP_CHECK and the server's snmp_name", st.Imported)
	}
	var out bytes.Buffer
	if err := Export(FormatKeepalived, st, &out); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"virtual_server 198.18.0.1 0358 {", "UDP_CHECK {", "ha_suspend", "virtual_server fwmark 007 {", "ha_suspend", "snmp_name d"} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("export lacks %q:\n%s", want, out.String())
		}
	}
	back, err := Import(FormatKeepalived, bytes.NewReader(out.Bytes()))
	if err != nil {
		t.Fatalf("re-import: %v\n%s", err, out.String())
	}
	if d := cmp.Diff(st, back, cmpopts.IgnoreFields(ipvsmgr.ImportedKey{}, "Line")); d != "" {
		t.Errorf("round trip (-imported +re-imported):\n%s\nexport:\n%s", d, out.String())
	}
}

// TestKeepalivedExportServersAtOneAddress: two real servers at one address
// whose ports are written with leading zeros (080, 081) are each written
// with their own real_server line and kept keys, found by the port as
// read, not the first line at that address for both.
func TestKeepalivedExportServersAtOneAddress(t *testing.T) {
	in := "virtual_server 198.18.0.1 80 {\n  protocol TCP\n  real_server 198.18.1.1 080 {\n    snmp_name a\n  }\n" +
		"  real_server 198.18.1.1 081 {\n    snmp_name b\n  }\n}\n"
	st, err := Import(FormatKeepalived, strings.NewReader(in))
	if err != nil {
		t.Fatal(err)
	}
	var out bytes.Buffer
	if err := Export(FormatKeepalived, st, &out); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"real_server 198.18.1.1 080 {", "real_server 198.18.1.1 081 {", "snmp_name a", "snmp_name b"} {
		if strings.Count(out.String(), want) != 1 {
			t.Errorf("export has not one %q:\n%s", want, out.String())
		}
	}
	back, err := Import(FormatKeepalived, bytes.NewReader(out.Bytes()))
	if err != nil {
		t.Fatalf("re-import: %v\n%s", err, out.String())
	}
	if d := cmp.Diff(st, back, cmpopts.IgnoreFields(ipvsmgr.ImportedKey{}, "Line")); d != "" {
		t.Errorf("round trip (-imported +re-imported):\n%s\nexport:\n%s", d, out.String())
	}
}

// TestKeepalivedCommandLinesPassKeepalived: Debian's keepalived 2.2.7 (one
// that reads a command line's escapes in both splits) reads every misc_path
// and quorum program the export writes, awkward words and all, without a
// quoting error; a line it cannot read is reported by it (the control).
func TestKeepalivedCommandLinesPassKeepalived(t *testing.T) {
	dir := t.TempDir()
	quotingError := func(text string) bool {
		return strings.Contains(text, "missing terminating") || strings.Contains(text, "Missing escape") || strings.Contains(text, "Unable to parse")
	}
	control := filepath.Join(dir, "control.conf")
	conf := "virtual_server 198.18.0.100 80 {\n protocol TCP\n quorum_up \"/bin/n 'a\"\n real_server 198.18.0.11 80 {\n }\n}\n"
	if err := os.WriteFile(control, []byte(conf), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, text := runKeepalivedTest(t, dir, control); !quotingError(text) {
		t.Fatalf("keepalived -t does not report an unterminated quote in a quorum program:\n%s", text)
	}
	// kaScriptLegacy fails where Debian's keepalived fails to read a line.
	for i, line := range []string{`"/bin/n 'it'\\''s'"`, `"/bin/n it\'s"`, `"/bin/echo \x41 'it\'s'"`, `"/bin/n a\\ 'b"`, `"/bin/printf a\\tb"`} {
		file := filepath.Join(dir, fmt.Sprintf("legacy%d.conf", i))
		conf := "virtual_server 198.18.0.100 80 {\n protocol TCP\n quorum_up " + line + "\n real_server 198.18.0.11 80 {\n }\n}\n"
		if err := os.WriteFile(file, []byte(conf), 0o644); err != nil {
			t.Fatal(err)
		}
		_, text := runKeepalivedTest(t, dir, file)
		if argv, _, err := kaScriptLegacy(line); (err != nil) != quotingError(text) {
			t.Errorf("quorum_up %s: kaScriptLegacy reads %q (%v), keepalived -t says:\n%s", line, argv, err, text)
		}
	}
	for i, argv := range [][]string{
		{"/bin/n", "up", "web 1"}, {"/bin/n", "", "tab\there", "#1", "{x}", "!"}, {"/opt/my tools/n"}, {"/bin/n", "a\nb", "\r\x01", "\n1"},
	} {
		st := &ipvsmgr.State{Services: []ipvsmgr.Service{{Address: "198.18.0.100", Port: 80, Protocol: "tcp", Forwarding: "nat",
			QuorumUp: argv, QuorumDown: argv,
			Servers: []ipvsmgr.Server{{Address: "198.18.0.11", Port: 80, Check: &ipvsmgr.Check{Type: "exec", Command: argv, Rise: 1}}}}}}
		var out bytes.Buffer
		if err := Export(FormatKeepalived, st, &out); err != nil {
			t.Errorf("%q: export: %v", argv, err)
			continue
		}
		file := filepath.Join(dir, fmt.Sprintf("lines%d.conf", i))
		if err := os.WriteFile(file, out.Bytes(), 0o644); err != nil {
			t.Fatal(err)
		}
		if _, text := runKeepalivedTest(t, dir, file); quotingError(text) || strings.Contains(strings.ToLower(text), "unknown keyword") {
			t.Errorf("%q: keepalived -t:\n%s\nexport:\n%s", argv, text, out.String())
		}
	}
}

// TestKeepalivedOmega: omega is a virtual_server keyword (check_parser.c):
// it makes keepalived run the quorum_down and notify_down programs as it
// shuts down. ipvsctl serve leaves the kernel's table as it is when it
// stops, so it has nothing to map omega to: the import keeps it, with its
// line, and the export writes it back. In a real_server keepalived does not
// know it, and the import refuses it there by line, as keepalived -t does.
func TestKeepalivedOmega(t *testing.T) {
	dir := t.TempDir()
	vs := "virtual_server 198.18.0.100 80 {\n protocol TCP\n omega\n real_server 198.18.0.11 80 {\n  weight 1\n }\n}\n"
	rs := "virtual_server 198.18.0.100 80 {\n protocol TCP\n real_server 198.18.0.11 80 {\n  omega\n }\n}\n"
	for name, conf := range map[string]string{"vs.conf": vs, "rs.conf": rs} {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(conf), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	if _, text := runKeepalivedTest(t, dir, filepath.Join(dir, "vs.conf")); strings.Contains(strings.ToLower(text), "unknown keyword") {
		t.Errorf("keepalived -t does not know omega in a virtual_server:\n%s", text)
	}
	if _, text := runKeepalivedTest(t, dir, filepath.Join(dir, "rs.conf")); !strings.Contains(text, "Line 4) Unknown keyword 'omega'") {
		t.Errorf("keepalived -t knows omega in a real_server:\n%s", text)
	}
	st, err := Import(FormatKeepalived, strings.NewReader(vs))
	if err != nil {
		t.Fatal(err)
	}
	want := []ipvsmgr.ImportedKey{{Source: FormatKeepalived, Line: 3, Scope: "virtual_server 198.18.0.100 80", Key: "omega"}}
	if d := cmp.Diff(want, st.Imported); d != "" {
		t.Errorf("omega kept (-want +got):\n%s", d)
	}
	var out bytes.Buffer
	if err := Export(FormatKeepalived, st, &out); err != nil || !strings.Contains(out.String(), "\n    omega\n") {
		t.Errorf("export: %v\n%s", err, out.String())
	}
	_, err = Import(FormatKeepalived, strings.NewReader(rs))
	var pe *ParseError
	if !errors.As(err, &pe) || pe.Line != 4 || !strings.Contains(pe.Msg, `unknown keyword "omega"`) {
		t.Errorf("omega in a real_server: %v", err)
	}
}

// A real server's notify_up and notify_down are its programs (run as root
// by the daemon, as quorum_up), not kept text; one with a user to run as is
// kept, never run as root. They are written back as keepalived reads them.
func TestKeepalivedRealServerNotifyPrograms(t *testing.T) {
	in := "virtual_server 198.18.0.1 80 {\n  protocol TCP\n  real_server 198.18.1.1 80 {\n    notify_up \"/usr/local/bin/cmdb up r1\"\n" +
		"    notify_down /usr/local/bin/down.sh\n  }\n  real_server 198.18.1.2 80 {\n    notify_up \"/usr/local/bin/cmdb up r2\" nobody\n  }\n}\n"
	st, err := Import(FormatKeepalived, strings.NewReader(in))
	if err != nil {
		t.Fatal(err)
	}
	r1, r2 := st.Services[0].Servers[0], st.Services[0].Servers[1]
	if d := cmp.Diff(ipvsmgr.Argv{"/usr/local/bin/cmdb", "up", "r1"}, r1.NotifyUp); d != "" {
		t.Errorf("r1's notify_up (-want +got):\n%s", d)
	}
	if d := cmp.Diff(ipvsmgr.Argv{"/usr/local/bin/down.sh"}, r1.NotifyDown); d != "" {
		t.Errorf("r1's notify_down (-want +got):\n%s", d)
	}
	if r2.NotifyUp != nil || len(st.Imported) != 1 || st.Imported[0].Key != "notify_up" {
		t.Errorf("r2's notify_up with a user: mapped %q, kept %+v", r2.NotifyUp, st.Imported)
	}
	var out bytes.Buffer
	if err := Export(FormatKeepalived, st, &out); err != nil {
		t.Fatal(err)
	}
	back, err := Import(FormatKeepalived, bytes.NewReader(out.Bytes()))
	if err != nil {
		t.Fatalf("re-import: %v\n%s", err, out.String())
	}
	if d := cmp.Diff(st, back, cmpopts.IgnoreFields(ipvsmgr.ImportedKey{}, "Line")); d != "" {
		t.Errorf("round trip (-imported +re-imported):\n%s\nexport:\n%s", d, out.String())
	}
}
