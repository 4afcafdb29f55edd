package formats

import (
	"bytes"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/ipvsctl/ipvsctl/ipvsmgr"
)

// ldFeatures uses every key read_config knows, the way the manual page
// writes them; the test loads it with ldirectord too.
const ldFeatures = `# globals
checktimeout=3
negotiatetimeout = 7
checkinterval=4
failurecount=2
quiescent=yes
fallback=127.0.0.1:8080
fallbackcommand=/usr/local/bin/sorry-page
autoreload=no
callback="/usr/local/bin/sync-peer"
logfile="local0"
emailalert="ops@example.org"
emailalertfreq=3600
emailalertstatus=starting,running
emailalertfrom=lb@example.org
smtp=localhost
cleanstop=no
maintenancedir=/etc/ha.d/maintenance
readdquiescent=no
supervised=no
fork=no

virtual=198.18.0.100:http
	real=198.18.0.11:80 gate 5
	real=198.18.0.12->198.18.0.14:80 masq 2 "health.html", "ok" l:5 u:100
	real=localhost:80 ipip
	service=http
	request="index.html"
	receive="Welcome"
	httpmethod=head
	virtualhost=www.example.org
	scheduler=wlc
	persistent=600
	netmask=255.255.255.0
	protocol=tcp
	checkport=8080
	quiescent=no
	fallback=198.18.0.250:80 masq
	fallbackcommand="/usr/local/bin/web-sorry --site 'www two'"
	checktype=2
	emailalert="web@example.org"

virtual=198.18.0.101:3306
	real=198.18.0.21:3306 gate
	checktype=negotiate
	service=mysql
	login="monitor"
	passwd="hunter2"
	database="app"
	request="SELECT 1"
	scheduler=rr

virtual=198.18.0.102:53
	real=198.18.0.31:53 gate
	request="example.org"
	receive="198.18.0.31"
	checktype=3

virtual=7
	real=198.18.0.41 gate 3
	checktype=connect
	checktimeout=2
	checkport=22
	scheduler=sh
	schedflags=sh-port
	fallbackcommand="logger -t ldirectord $1"

virtual=198.18.0.103:1812
	real=198.18.0.51:1812 gate
	protocol=udp
	service=radius
	secret="s3cret"
	checktype=off

virtual=198.18.0.104:22
	real=198.18.0.61:22 gate
	checktype=external
	checkcommand="/usr/local/bin/check-ssh"
`

func TestLdirectordKeys(t *testing.T) {
	needLdirectord(t)
	p := filepath.Join(t.TempDir(), "ldirectord.cf")
	if err := os.WriteFile(p, []byte(ldFeatures), 0o644); err != nil {
		t.Fatal(err)
	}
	st, rep, err := compareWithLdirectord(t, p)
	if err != nil {
		t.Fatalf("import: %v", err)
	}
	if rep.Services != 6 || rep.Servers != 10 {
		t.Errorf("report %s; want 6 virtual services, 10 real servers", rep.Summary())
	}
	web := st.Services[0]
	c := web.Check
	if web.Port != 80 || c == nil || c.Type != "http" || c.Method != "HEAD" || c.Path != "/index.html" || c.ExpectBody != "Welcome" ||
		c.Host != "www.example.org" || c.Port != 8080 || c.Timeout != 7 || c.Interval != 4 || c.Fall != 2 || c.Rise != 1 || c.OnFailure != "remove" {
		t.Errorf("web service %+v check %+v", web, c)
	}
	if web.Scheduler != "wlc" || web.Persistence != 600 || web.PersistenceNetmask != "255.255.255.0" ||
		web.SorryServer == nil || web.SorryServer.Address != "198.18.0.250" || web.SorryServer.Port != 0 {
		t.Errorf("web service %+v sorry %+v", web, web.SorryServer)
	}
	rs := web.Servers
	if len(rs) != 5 || rs[0].Forwarding != "dr" || *rs[0].Weight != 5 || rs[1].Address != "198.18.0.12" || rs[3].Address != "198.18.0.14" ||
		rs[1].Forwarding != "nat" || rs[1].LowerThreshold != 5 || rs[1].UpperThreshold != 100 || rs[1].Check == nil || rs[1].Check.Path != "/health.html" ||
		rs[4].Address != "127.0.0.1" || rs[4].Forwarding != "tun" {
		t.Errorf("web real servers %+v", rs)
	}
	// service=mysql is ipvsctl's mysql check; its passwd goes to a file by the convention, with a warning at its line.
	if db := st.Services[1]; db.Check == nil || db.Check.Type != "mysql" || db.Check.OnFailure != "quiesce" || db.Check.Timeout != 7 ||
		db.Check.Login != "monitor" || db.Check.Database != "app" || db.Check.Request != "SELECT 1" ||
		db.Check.PasswordFile != "/var/lib/ipvsctl/secrets/check-198.18.0.101_3306.passwd" {
		t.Errorf("mysql service check %+v", db.Check)
	}
	if w := "line 48: passwd in virtual 198.18.0.101:3306 is not kept (secrets never live in the document): write it to /var/lib/ipvsctl/secrets/check-198.18.0.101_3306.passwd (mode 0600)"; !strings.Contains(reportText(rep), w) {
		t.Errorf("no warning %q in:\n%s", w, reportText(rep))
	}
	if dns := st.Services[2]; dns.Protocol != "udp" || dns.Check == nil || dns.Check.Type != "dns" || dns.Check.Name != "example.org" ||
		dns.SorryServer == nil || dns.SorryServer.Port != 0 {
		t.Errorf("dns service %+v check %+v", dns, dns.Check)
	}
	if fw := st.Services[3]; fw.FWMark != 7 || fw.Check == nil || fw.Check.Type != "tcp" || fw.Check.Timeout != 2 ||
		len(fw.SchedulerFlags) != 1 || fw.SchedulerFlags[0] != "port" || fw.SorryServer != nil {
		t.Errorf("fwmark service %+v", fw)
	}
	if rad := st.Services[4]; rad.Check != nil || rad.Servers[0].Health != "down" {
		t.Errorf("checktype=off service %+v", rad)
	}
	if ext := st.Services[5]; ext.Check == nil || ext.Check.Type != "exec" ||
		strings.Join(ext.Check.Command, " ") != "/usr/local/bin/check-ssh 198.18.0.104 22 %h %p" {
		t.Errorf("external check %+v", ext.Check)
	}
	kept := map[string]string{}
	for _, k := range st.Imported {
		kept[strings.TrimSpace(k.Scope+" "+k.Key)] = k.Value
	}
	for _, k := range []string{"callback", "logfile", "emailalert", "emailalertfreq", "emailalertstatus", "emailalertfrom",
		"smtp", "cleanstop", "autoreload", "readdquiescent", "supervised", "fork", "virtual 7 fallbackcommand",
		"virtual 198.18.0.100:80 emailalert", "virtual 198.18.0.100:80 fallback-forward",
		"virtual 198.18.0.102:53 checktype",
		"virtual 198.18.0.102:53 receive", "virtual 198.18.0.103:1812 service", "virtual 198.18.0.103:1812 secret"} {
		if _, ok := kept[k]; !ok {
			t.Errorf("%s is not kept; kept: %v", k, kept)
		}
	}
	for _, k := range []string{"fallbackcommand", "maintenancedir", "virtual 198.18.0.100:80 checktype", "virtual 198.18.0.100:80 fallbackcommand"} {
		if v, ok := kept[k]; ok {
			t.Errorf("%s=%s is kept, not mapped", k, v)
		}
	}
	// checktype=2 on the http check; maintenancedir; the fallbackcommands as
	// quorum programs with ldirectord's arguments (the virtual's own, else
	// the global one; one that needs a shell is kept).
	if st.Settings.MaintenanceDir != "/etc/ha.d/maintenance" || c.ConnectChecks != 2 {
		t.Errorf("maintenance_dir %q, web connect_checks %d", st.Settings.MaintenanceDir, c.ConnectChecks)
	}
	for i, want := range []string{
		"/usr/local/bin/web-sorry --site www two|198.18.0.100:80 tcp",
		"/usr/local/bin/sorry-page|198.18.0.101:3306 tcp",
		"/usr/local/bin/sorry-page|198.18.0.102:53 udp",
		"",
		"/usr/local/bin/sorry-page|198.18.0.103:1812 udp",
	} {
		svc := st.Services[i]
		got := ""
		if svc.QuorumDown != nil {
			n := len(svc.QuorumDown) - 3
			got = strings.Join(svc.QuorumDown[:n], " ") + "|" + strings.Join(svc.QuorumDown[n+1:], " ")
			if svc.QuorumDown[n] != "start" || svc.QuorumUp[n] != "stop" || strings.Join(svc.QuorumUp[:n], " ") != strings.Join(svc.QuorumDown[:n], " ") {
				t.Errorf("service %d: quorum_down %q, quorum_up %q", i, svc.QuorumDown, svc.QuorumUp)
			}
		}
		if got != want {
			t.Errorf("service %d fallbackcommand: %q, want %q", i, got, want)
		}
	}
	if w := "line 66: fallbackcommand=logger -t ldirectord $1 in virtual 7 needs a shell"; !strings.Contains(reportText(rep), w) {
		t.Errorf("no warning %q in:\n%s", w, reportText(rep))
	}
	if _, ok := kept["virtual 198.18.0.100:80 real 198.18.0.12:80 request-receive"]; ok {
		t.Errorf("a per-real request kept although the service's http check holds it")
	}
	var doc, report bytes.Buffer
	if err := st.Encode(&doc); err != nil {
		t.Fatal(err)
	}
	report.WriteString(reportText(rep))
	for _, secret := range []string{"hunter2", "s3cret"} {
		if strings.Contains(doc.String(), secret) || strings.Contains(report.String(), secret) {
			t.Errorf("secret %q is in the document or the report", secret)
		}
	}
	if !strings.Contains(report.String(), "localhost resolved to 127.0.0.1") {
		t.Errorf("no warning names what localhost resolved to:\n%s", report.String())
	}
	roundTrip(t, FormatLdirectord, st)
	exportLoadsInLdirectord(t, st)
}

// Each of these is refused by ldirectord at the line given, and by ipvsctl
// at the same line, naming the key and its value.
func TestLdirectordRefusals(t *testing.T) {
	needLdirectord(t)
	cases := []struct{ name, doc, says string }{
		{"unknown global", "checktimeout=3\nbogus=1\n", "bogus=1"},
		{"unknown virtual key", "virtual=198.18.0.1:80\n    real=198.18.0.2:80 gate\n    colour=blue\n", "colour=blue"},
		{"indented global", " checktimeout=3\n", "checktimeout=3"},
		{"blank line inside a virtual", "virtual=198.18.0.1:80\n    real=198.18.0.2:80 gate\n\n    scheduler=rr\n", "scheduler=rr"},
		{"forward method", "virtual=198.18.0.1:80\n    real=198.18.0.2:80 direct\n", "forward method"},
		{"connecttimeout", "connecttimeout=3\n", "connecttimeout=3"},
		{"quiescent with a blank", "quiescent=yes \n", `"yes "`},
		{"scheduler", "virtual=198.18.0.1:80\n    real=198.18.0.2:80 gate\n    scheduler=RR\n", "scheduler=RR"},
		{"service", "virtual=198.18.0.1:80\n    real=198.18.0.2:80 gate\n    service=gopher\n", "service=gopher"},
		{"duplicate", "virtual=198.18.0.1:80\n    real=198.18.0.2:80 gate\nvirtual=198.18.0.1:80\n    real=198.18.0.3:80 gate\n", "duplicate"},
		{"port name", "virtual=198.18.0.1:nosuchservice\n    real=198.18.0.2:80 gate\n", "nosuchservice"},
		{"fwmark protocol", "virtual=5\n    real=198.18.0.2 gate\n    protocol=tcp\n", "protocol=tcp"},
		{"unquoted request", "virtual=198.18.0.1:80\n    real=198.18.0.2:80 gate\n    request=/x\n", "request=/x"},
		{"real server junk", "virtual=198.18.0.1:80\n    real=198.18.0.2:80 gate 1 xyz\n", "xyz"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			p := filepath.Join(t.TempDir(), "ldirectord.cf")
			if err := os.WriteFile(p, []byte(c.doc), 0o644); err != nil {
				t.Fatal(err)
			}
			_, _, err := compareWithLdirectord(t, p)
			var pe *ParseError
			if !errors.As(err, &pe) {
				t.Fatalf("ldirectord refuses it; ipvsctl: %v", err)
			}
			if !strings.Contains(err.Error(), c.says) {
				t.Errorf("error %q does not say %q", err, c.says)
			}
		})
	}
	// --ignore-unknown goes past the unknown keys, and lists them.
	st, rep, err := ImportWith(FormatLdirectord, strings.NewReader("bogus=1\nvirtual=198.18.0.1:80\n    real=198.18.0.2:80 gate\n    colour=blue\n"), Options{IgnoreUnknown: true})
	if err != nil || len(st.Services) != 1 || len(rep.Ignored) != 2 || rep.Ignored[0].Line != 1 || rep.Ignored[1].Line != 4 {
		t.Fatalf("--ignore-unknown: %v %+v", err, rep)
	}
}

func TestLdirectordExportRefusesWhatItCannotSay(t *testing.T) {
	st := &ipvsmgr.State{Services: []ipvsmgr.Service{{Protocol: "sctp", Address: "198.18.0.1", Port: 80, Servers: []ipvsmgr.Server{}}}}
	var out bytes.Buffer
	if err := Export(FormatLdirectord, st, &out); err == nil || !strings.Contains(err.Error(), "sctp") {
		t.Errorf("export of an sctp service: %v", err)
	}
	// A check that verifies the certificate: ldirectord's take any.
	yes := true
	for _, svc := range []ipvsmgr.Service{
		{Protocol: "tcp", Address: "198.18.0.1", Port: 443, Check: &ipvsmgr.Check{Type: "https", TLSVerify: &yes}, Servers: []ipvsmgr.Server{{Address: "198.18.0.2", Port: 443}}},
		{Protocol: "tcp", Address: "198.18.0.1", Port: 636, Servers: []ipvsmgr.Server{{Address: "198.18.0.2", Port: 636, Check: &ipvsmgr.Check{Type: "ldaps", TLSVerify: &yes}}}},
	} {
		out.Reset()
		err := Export(FormatLdirectord, &ipvsmgr.State{Services: []ipvsmgr.Service{svc}}, &out)
		if err == nil || !strings.Contains(err.Error(), "tls_verify") || out.Len() > 0 && strings.Contains(out.String(), "virtual=") {
			t.Errorf("export of a check with tls_verify: %v\n%s", err, out.String())
		}
	}
	no := false
	svc := ipvsmgr.Service{Protocol: "tcp", Address: "198.18.0.1", Port: 443, Check: &ipvsmgr.Check{Type: "https", TLSVerify: &no}, Servers: []ipvsmgr.Server{{Address: "198.18.0.2", Port: 443}}}
	if err := Export(FormatLdirectord, &ipvsmgr.State{Services: []ipvsmgr.Service{svc}}, &out); err != nil {
		t.Errorf("export with tls_verify false: %v", err)
	}
}

// A tcp and a udp virtual on one address and port keep their own keys,
// through an export and back (the fuzzer's find: both receives were written
// to both virtuals, and the last one read won in each).
func TestLdirectordTCPAndUDPVirtualsKeepTheirKeys(t *testing.T) {
	const cf = "virtual=198.18.0.1:53\n    real=198.18.0.8:53 gate 1\n    protocol=tcp\n    service=dns\n    request=\"a.example\"\n    receive=\"198.18.0.2\"\n" +
		"virtual=198.18.0.1:53\n    real=198.18.0.8:53 gate 1\n    protocol=udp\n    service=dns\n    request=\"a.example\"\n    receive=\"198.18.0.3\"\n"
	st, err := Import(FormatLdirectord, strings.NewReader(cf))
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]string{}
	for _, k := range st.Imported {
		got[k.Scope+" "+k.Key] = k.Value
	}
	if got["virtual 198.18.0.1:53 receive"] != `"198.18.0.2"` || got["virtual 198.18.0.1:53 protocol=udp receive"] != `"198.18.0.3"` || len(got) != 2 {
		t.Errorf("kept %v", got)
	}
	roundTrip(t, FormatLdirectord, st)

	// A udp virtual alone on its address and port is named without its
	// protocol, as before.
	alone := &ipvsmgr.State{Services: st.Services[1:], Imported: []ipvsmgr.ImportedKey{{Source: FormatLdirectord, Scope: "virtual 198.18.0.1:53", Key: "receive", Value: `"198.18.0.3"`}}}
	var out bytes.Buffer
	if err := Export(FormatLdirectord, alone, &out); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(out.String(), `receive="198.18.0.3"`) {
		t.Errorf("the udp virtual's kept receive was not exported:\n%s", out.String())
	}
}
