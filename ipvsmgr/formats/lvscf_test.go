package formats

import (
	"bytes"
	"errors"
	"net"
	"os"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
	"github.com/ipvsctl/ipvsctl/ipvsmgr"
)

func TestImportLVSCFSamples(t *testing.T) {
	for _, p := range samples(t, "lvs.cf") {
		t.Run(p, func(t *testing.T) { importFile(t, FormatLVSCF, p) })
	}
}

// TestLVSCFRoundTrip: import, export, import again gives the same state,
// imported keys included (only their line numbers move).
func TestLVSCFRoundTrip(t *testing.T) {
	for _, p := range samples(t, "lvs.cf") {
		t.Run(p, func(t *testing.T) {
			first := importFile(t, FormatLVSCF, p)
			var out bytes.Buffer
			if err := Export(FormatLVSCF, first, &out); err != nil {
				t.Fatal(err)
			}
			second, err := Import(FormatLVSCF, bytes.NewReader(out.Bytes()))
			if err != nil {
				t.Fatalf("re-import: %v\n%s", err, out.String())
			}
			noLines := cmpopts.IgnoreFields(ipvsmgr.ImportedKey{}, "Line")
			byScopeKey := cmpopts.SortSlices(func(a, b ipvsmgr.ImportedKey) bool {
				return a.Scope+"\x00"+a.Key+"\x00"+a.Value < b.Scope+"\x00"+b.Key+"\x00"+b.Value
			})
			if d := cmp.Diff(first, second, noLines, byScopeKey); d != "" {
				t.Errorf("round trip (-first +second):\n%s\nexported:\n%s", d, out.String())
			}
			if len(first.Imported) == 0 {
				t.Error("sample keeps no imported keys; the round trip proves nothing about them")
			}
		})
	}
}

func TestExportLVSCF(t *testing.T) {
	st, err := Import(FormatLVSCF, strings.NewReader(`primary = 198.18.0.2
network = nat
nat_router = 198.18.1.254 eth1:1
virtual web {
     address = 198.18.0.100 eth0:1
     port = 80
     send = "GET / HTTP/1.0\r\n\r\n"
     server a {
         address = 198.18.1.11
         port = 8080
     }
}
`))
	if err != nil {
		t.Fatal(err)
	}
	st.Services = append(st.Services, ipvsmgr.Service{Address: "198.18.0.100", Port: 443, Interface: "eth0",
		Servers: []ipvsmgr.Server{{Address: "198.18.1.11"}}})
	var out bytes.Buffer
	if err := Export(FormatLVSCF, st, &out); err != nil {
		t.Fatal(err)
	}
	want := `primary = 198.18.0.2
service = lvs
network = nat
nat_router = 198.18.1.254 eth1:1
virtual web {
    active = 1
    address = 198.18.0.100 eth0:1
    port = 80
    protocol = tcp
    scheduler = wlc
    send = "GET / HTTP/1.0\r\n\r\n"
    server a {
        address = 198.18.1.11
        active = 1
        port = 8080
        weight = 1
    }
}
virtual vs1 {
    active = 1
    address = 198.18.0.100 eth0:1
    port = 443
    protocol = tcp
    scheduler = wlc
    server rs1 {
        address = 198.18.1.11
        active = 1
        weight = 1
    }
}
`
	if d := cmp.Diff(want, out.String()); d != "" {
		t.Error(d)
	}
}

func TestExportLVSCFRefusesWhatItCannotSay(t *testing.T) {
	st := &ipvsmgr.State{Settings: ipvsmgr.Settings{Network: "dr"}, Services: []ipvsmgr.Service{
		{Name: "dns", Protocol: "udp", Address: "198.18.0.1", Port: 53, OnePacket: true, Forwarding: "nat",
			Servers: []ipvsmgr.Server{{Address: "198.18.1.1", UpperThreshold: 10}}},
		{Name: "sip", Protocol: "sctp", Address: "198.18.0.1", Port: 5060, Scheduler: "sh", SchedulerFlags: []string{"port"},
			Servers: []ipvsmgr.Server{{Address: "198.18.0.11", Forwarding: "tun"}}},
	}}
	err := Export(FormatLVSCF, st, &bytes.Buffer{})
	if err == nil {
		t.Fatal("want an error")
	}
	for _, want := range []string{"services[0].forwarding", "services[0].one_packet", "services[0].servers[0]: lvs.cf has no connection thresholds",
		"services[1].protocol", "services[1].scheduler_flags", "services[1].servers[0].forwarding"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error does not name %s: %v", want, err)
		}
	}
}

func TestImportLVSCFErrors(t *testing.T) {
	checkErrors(t, FormatLVSCF, []errorCase{
		{"bad network", "primary = 198.18.0.2\nnetwork = bridge\n", 2, `network "bridge"`},
		{"unclosed", "virtual web {\n  address = 198.18.0.1 eth0:1\n  port = 80\n", 1, "not closed"},
		{"stray brace", "network = nat\n}\n", 2, "closes no block"},
		{"server outside", "server a {\n}\n", 1, "outside a virtual block"},
		{"nested virtual", "virtual a {\nvirtual b {\n", 2, "inside virtual a"},
		{"no address", "virtual web {\n  port = 80\n}\n", 1, "has no address"},
		{"bad address", "virtual web {\n  address = www_example eth0:1\n}\n", 2, "neither an IP address nor a host name"},
		{"bad server address", "virtual web {\n  address = 198.18.0.1\n  port = 80\n  server a {\n    address = web_1\n  }\n}\n", 5, "neither an IP address nor a host name"},
		{"bad active", "virtual web {\n  address = 198.18.0.1\n  active = yes\n}\n", 3, "want 0 or 1"},
		{"bad port", "virtual web {\n  address = 198.18.0.1\n  port = no-such-service\n}\n", 3, `port "no-such-service": neither a number nor a service name`},
		{"bad protocol", "virtual web {\n  address = 198.18.0.1\n  port = 80\n  protocol = icmp\n}\n", 4, "want tcp or udp"},
		{"bad scheduler", "virtual web {\n  address = 198.18.0.1\n  port = 80\n  scheduler = best\n}\n", 4, `"best" is not a scheduler`},
		{"bad weight", "virtual web {\n  address = 198.18.0.1\n  port = 80\n  server a {\n    address = 198.18.0.2\n    weight = 70000\n  }\n}\n", 6, "70000 is out of range"},
		{"dr port change", "network = direct\nvirtual web {\n  address = 198.18.0.1\n  port = 80\n  server a {\n    address = 198.18.0.2\n    port = 8080\n  }\n}\n", 7, "dr forwarding cannot change the port"},
		{"duplicate names", "virtual web {\n  address = 198.18.0.1\n  port = 80\n}\nvirtual web {\n  address = 198.18.0.1\n  port = 81\n}\n", 5, "already the name"},
		{"no brace", "virtual web\naddress = 198.18.0.1\n", 2, "want { to open virtual web"},
		{"garbage", "primary = 198.18.0.2\n{ what\n", 2, "want KEY = VALUE"},
		{"missing port", "virtual web {\n  address = 198.18.0.1\n}\n", 1, "services[0].port"},
	})
}

// nanny's keys are the virtual's check: exported back as nanny's keys, and
// what nanny cannot do is refused by name.
func TestLVSCFChecks(t *testing.T) {
	st, err := Import(FormatLVSCF, strings.NewReader(`network = direct   # DR
virtual web {
     address = 198.18.0.100 eth0:1  # VIP
     port = 80
     send = "GET / HTTP/1.0\r\n\r\n"
     expect = "HTTP/1.[01] 200"
     use_regex = 1
     timeout = 3
     reentry = 15
     quiesce_server = 1
     server a {
         address = 198.18.0.11
     }
}
`))
	if err != nil {
		t.Fatal(err)
	}
	c := st.Services[0].Check
	if c == nil || c.Type != "send_expect" || c.Send != `GET / HTTP/1.0\r\n\r\n` || c.Expect != "HTTP/1.[01] 200" ||
		c.UseRegex == nil || !*c.UseRegex || c.Timeout != 3 || c.Rise != 8 || c.OnFailure != "quiesce" {
		t.Fatalf("check = %+v", c)
	}
	for _, k := range st.Imported {
		if k.Key != lvsAliasKey && k.Key != lvsReentryKey {
			t.Errorf("mapped key still kept: %+v", k)
		}
	}
	var out bytes.Buffer
	if err := Export(FormatLVSCF, st, &out); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{`send = "GET / HTTP/1.0\r\n\r\n"`, `expect = "HTTP/1.[01] 200"`, "use_regex = 1", "timeout = 3", "reentry = 15", "quiesce_server = 1"} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("export lacks %q:\n%s", want, out.String())
		}
	}
	st.Services[0].Check = &ipvsmgr.Check{Type: "http", Path: "/healthz"}
	st.Services[0].SorryServer = &ipvsmgr.SorryServer{Address: "198.18.0.50"}
	err = Export(FormatLVSCF, st, &bytes.Buffer{})
	if err == nil || !strings.Contains(err.Error(), "services[0].check.type: nanny has no http check") || !strings.Contains(err.Error(), "services[0].sorry_server: lvs.cf has no sorry server") {
		t.Errorf("export of an http check: %v", err)
	}
}

// TestLVSCFAsPiranhaWritesIt: the VIPs' device aliases and a reentry time
// that is not a whole number of check intervals come back as written; a
// port may be a service name (nanny resolves it with getservbyname).
func TestLVSCFAsPiranhaWritesIt(t *testing.T) {
	in := "network = direct\nvirtual web {\n    address = 198.18.0.100 eth0:0\n    port = http\n    protocol = tcp\n    reentry = 15\n" +
		"    server a {\n        address = 198.18.0.11\n    }\n}\n" +
		"virtual mail {\n    address = 198.18.0.101 eth0:3\n    port = smtp\n    protocol = tcp\n    reentry = 10\n" +
		"    server b {\n        address = 198.18.0.12\n    }\n}\n"
	st, _, err := ImportWith(FormatLVSCF, strings.NewReader(in), Options{ServicesFile: func() ([]byte, error) { return nil, os.ErrNotExist }})
	if err != nil {
		t.Fatal(err)
	}
	if st.Services[0].Port != 80 || st.Services[1].Port != 25 {
		t.Errorf("ports: %d %d", st.Services[0].Port, st.Services[1].Port)
	}
	var out bytes.Buffer
	if err := Export(FormatLVSCF, st, &out); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"address = 198.18.0.100 eth0:0\n", "address = 198.18.0.101 eth0:3\n", "reentry = 15\n", "reentry = 10\n"} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("export lacks %q:\n%s", want, out.String())
		}
	}
	if strings.Contains(out.String(), "alias") || strings.Contains(out.String(), "seconds") {
		t.Errorf("an internal key leaked into the export:\n%s", out.String())
	}
}

// Piranha's lvsconfig.c reads a port through getservbyname(name, "tcp")
// and an address through gethostbyname: `port = http` is port 80, a host
// name its address, each resolved at import with a warning that names the
// value; an unknown name is refused at its line.
func TestLVSCFNames(t *testing.T) {
	hosts := map[string][]string{"vip.lab": {"2001:db8::1", "198.18.0.100"}, "web1.lab": {"198.18.0.11"}, "v6only.lab": {"2001:db8::2"}}
	opts := Options{
		ServicesFile: func() ([]byte, error) {
			return []byte("http\t80/tcp\twww\nhttps 443/tcp\ndomain 53/tcp\ndomain 53/udp\n"), nil
		},
		LookupHost: func(h string) ([]string, error) {
			if a, ok := hosts[h]; ok {
				return a, nil
			}
			return nil, &net.DNSError{Err: "no such host", Name: h, IsNotFound: true}
		},
	}
	in := "network = direct\nvirtual web {\n    address = vip.lab eth0:0\n    port = http\n    protocol = tcp\n    server r1 {\n        address = web1.lab\n        port = www\n    }\n}\n"
	st, rep, err := ImportWith(FormatLVSCF, strings.NewReader(in), opts)
	if err != nil {
		t.Fatal(err)
	}
	svc := st.Services[0]
	if svc.Address != "198.18.0.100" || svc.Port != 80 || svc.Servers[0].Address != "198.18.0.11" || svc.Servers[0].Port != 80 {
		t.Errorf("service %+v servers %+v", svc, svc.Servers)
	}
	// getPort asks for the tcp name whatever the virtual's protocol.
	udp := strings.NewReplacer("port = http", "port = domain", "port = www", "port = domain", "protocol = tcp", "protocol = udp").Replace(in)
	if st, rep, err := ImportWith(FormatLVSCF, strings.NewReader(udp), opts); err != nil || st.Services[0].Port != 53 ||
		!strings.Contains(reportText(rep), "line 4: port domain resolved to 53 (tcp)") {
		t.Errorf("udp virtual, port = domain: %v %+v", err, rep)
	}
	got := reportText(rep)
	for _, want := range []string{"line 3: vip.lab resolved to 198.18.0.100", "line 4: port http resolved to 80 (tcp)",
		"line 7: web1.lab resolved to 198.18.0.11", "line 8: port www resolved to 80 (tcp)"} {
		if !strings.Contains(got, want) {
			t.Errorf("report lacks %q:\n%s", want, got)
		}
	}
	for _, c := range []errorCase{
		{"unknown host", strings.Replace(in, "web1.lab", "web9.lab", 1), 7, `host "web9.lab" does not resolve`},
		{"no IPv4", strings.Replace(in, "web1.lab", "v6only.lab", 1), 7, "no IPv4 address"},
		{"unknown port name", strings.Replace(in, "port = www", "port = gopherx", 1), 8, `port "gopherx"`},
	} {
		_, _, err := ImportWith(FormatLVSCF, strings.NewReader(c.in), opts)
		var pe *ParseError
		if !errors.As(err, &pe) || pe.Line != c.line || !strings.Contains(err.Error(), c.msg) {
			t.Errorf("%s: %v, want line %d with %q", c.name, err, c.line, c.msg)
		}
	}
}
