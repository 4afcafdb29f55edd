package formats

import (
	"bytes"
	"os"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/ipvsctl/ipvsctl/ipvsmgr"
)

func TestImportIpvsadmSamples(t *testing.T) {
	for _, p := range samples(t, "ipvsadm") {
		t.Run(p, func(t *testing.T) { importFile(t, FormatIpvsadm, p) })
	}
}

// TestIpvsadmRoundTrip: what `ipvsadm -S -n` printed in the VM comes back
// byte for byte after import and export.
func TestIpvsadmRoundTrip(t *testing.T) {
	data, err := os.ReadFile("testdata/ipvsadm/full.sn")
	if err != nil {
		t.Fatal(err)
	}
	st, err := Import(FormatIpvsadm, bytes.NewReader(data))
	if err != nil {
		t.Fatal(err)
	}
	var out bytes.Buffer
	if err := Export(FormatIpvsadm, st, &out); err != nil {
		t.Fatal(err)
	}
	if d := cmp.Diff(string(data), out.String()); d != "" {
		t.Errorf("round trip (-saved +exported):\n%s", d)
	}
}

// The restore file the capture was made from: same table, other order and
// spellings (-p without a timeout, thresholds, ipvsadm's order of options).
func TestIpvsadmRestoreFileMatchesSave(t *testing.T) {
	a := importFile(t, FormatIpvsadm, "testdata/ipvsadm/full.rules")
	data, _ := os.ReadFile("testdata/ipvsadm/full.sn")
	b, err := Import(FormatIpvsadm, bytes.NewReader(data))
	if err != nil {
		t.Fatal(err)
	}
	key := func(s ipvsmgr.Service) string {
		return s.Protocol + s.Address + string(rune(s.Port)) + string(rune(s.FWMark))
	}
	byKey := map[string]ipvsmgr.Service{}
	for _, s := range b.Services {
		byKey[key(s)] = s
	}
	for _, s := range a.Services {
		want := byKey[key(s)]
		// ipvsadm -S does not save thresholds.
		for j := range s.Servers {
			s.Servers[j].UpperThreshold, s.Servers[j].LowerThreshold = 0, 0
		}
		if d := cmp.Diff(want, s); d != "" {
			t.Errorf("service %s %s:%d: (-saved +restore file)\n%s", s.Protocol, s.Address, s.Port, d)
		}
	}
}

func TestExportIpvsadmThresholdsAndDisabled(t *testing.T) {
	off := false
	st := &ipvsmgr.State{Settings: ipvsmgr.Settings{Network: "nat", TCPTimeout: 900, TCPFinTimeout: 120, UDPTimeout: 300},
		Services: []ipvsmgr.Service{
			{Name: "web", Address: "198.18.0.100", Port: 80, Interface: "eth0", Servers: []ipvsmgr.Server{
				{Address: "198.18.1.11", Port: 8080, UpperThreshold: 100, LowerThreshold: 10},
				{Address: "198.18.1.12", Enabled: &off},
			}},
			{Name: "off", Address: "198.18.0.100", Port: 81, Enabled: &off},
		}}
	var out bytes.Buffer
	if err := Export(FormatIpvsadm, st, &out); err != nil {
		t.Fatal(err)
	}
	want := "--set 900 120 300\n" +
		"-A -t 198.18.0.100:80 -s wlc\n" +
		"-a -t 198.18.0.100:80 -r 198.18.1.11:8080 -m -w 1 -x 100 -y 10\n"
	if d := cmp.Diff(want, out.String()); d != "" {
		t.Error(d)
	}
	back, err := Import(FormatIpvsadm, &out)
	if err != nil {
		t.Fatal(err)
	}
	if rs := back.Services[0].Servers[0]; rs.UpperThreshold != 100 || rs.LowerThreshold != 10 || back.Settings.TCPTimeout != 900 {
		t.Errorf("thresholds or timeouts lost: %+v %+v", rs, back.Settings)
	}
}

func TestIpvsadmKeepsWhatTheModelLacks(t *testing.T) {
	in := "-A -u 198.18.0.5:5060 -s rr -p 30 --pe sip\n" +
		"-a -u 198.18.0.5:5060 -r 198.18.2.11:5060 -i -w 1 --tun-type gue --tun-port 6080 --tun-nocsum\n" +
		"-A -f 7 -6 -s rr\n"
	st, err := Import(FormatIpvsadm, strings.NewReader(in))
	if err != nil {
		t.Fatal(err)
	}
	want := []ipvsmgr.ImportedKey{
		{Source: "ipvsadm", Line: 1, Scope: "-u 198.18.0.5:5060", Key: "--pe", Value: "sip"},
		{Source: "ipvsadm", Line: 3, Scope: "-f 7 -6", Key: "-6"},
	}
	if d := cmp.Diff(want, st.Imported); d != "" {
		t.Error(d)
	}
	if rs := st.Services[0].Servers[0]; rs.Tunnel != "gue" || rs.TunnelPort != 6080 || rs.TunnelChecksum != "" {
		t.Errorf("the gue tunnel is the server's: %+v", rs)
	}
	var out bytes.Buffer
	if err := Export(FormatIpvsadm, st, &out); err != nil {
		t.Fatal(err)
	}
	if out.String() != in {
		t.Errorf("round trip:\n%s\nwant:\n%s", out.String(), in)
	}
}

// TestIpvsadmServiceNames: `ipvsadm -S` without -n writes service names;
// they resolve as ipvsadm resolves them (the services file, then the
// fallback table on a machine without one), to the table -S -n printed.
func TestIpvsadmServiceNames(t *testing.T) {
	numeric, err := os.ReadFile("testdata/ipvsadm/full.sn")
	if err != nil {
		t.Fatal(err)
	}
	names, err := os.ReadFile("testdata/ipvsadm/names.s")
	if err != nil {
		t.Fatal(err)
	}
	want, err := Import(FormatIpvsadm, bytes.NewReader(numeric))
	if err != nil {
		t.Fatal(err)
	}
	noFile := func() ([]byte, error) { return nil, os.ErrNotExist }
	ownFile := func() ([]byte, error) { return []byte("# a comment\nhttp 8080/tcp www\nhttp 80/udp\n"), nil }
	for name, o := range map[string]Options{"system": {}, "no services file": {ServicesFile: noFile}} {
		got, _, err := ImportWith(FormatIpvsadm, bytes.NewReader(names), o)
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		if d := cmp.Diff(want, got); d != "" {
			t.Errorf("%s: names.s differs from full.sn (-numeric +names):\n%s", name, d)
		}
	}
	got, _, err := ImportWith(FormatIpvsadm, strings.NewReader("-A -t 198.18.0.1:http -s rr\n-a -t 198.18.0.1:http -r 198.18.0.2:http -m\n"), Options{ServicesFile: ownFile})
	if err != nil {
		t.Fatal(err)
	}
	if p := got.Services[0].Port; p != 8080 {
		t.Errorf("the services file says tcp/http is 8080; got %d", p)
	}
}

// TestIpvsadmAsIpvsadmDoes: a port-0 persistent service, a fwmark DR/TUN
// server's port kept, a DR server's port reset to the service's.
func TestIpvsadmAsIpvsadmDoes(t *testing.T) {
	in := "-A -t 198.18.0.1:0 -s rr -p 300\n-a -t 198.18.0.1:0 -r 198.18.0.2:0 -g -w 1\n" +
		"-A -f 7 -s wlc\n-a -f 7 -r 198.18.0.3:80 -g -w 1\n-a -f 7 -r 198.18.0.4:443 -i -w 1\n" +
		"-A -t 198.18.0.1:80 -s rr\n-a -t 198.18.0.1:80 -r 198.18.0.5:8080 -g -w 1\n"
	st, rep, err := ImportWith(FormatIpvsadm, strings.NewReader(in), Options{})
	if err != nil {
		t.Fatal(err)
	}
	if s := st.Services[0]; s.Port != 0 || s.Persistence != 300 {
		t.Errorf("port-0 service: %+v", s)
	}
	if p := st.Services[1].Servers[1].Port; p != 443 {
		t.Errorf("fwmark TUN server port %d, want 443 kept", p)
	}
	if p := st.Services[2].Servers[0].Port; p != 80 {
		t.Errorf("DR server port %d, want the service's 80", p)
	}
	if len(rep.Warnings) != 1 || rep.Warnings[0].Line != 7 || !strings.Contains(rep.Warnings[0].Msg, "not 8080") {
		t.Errorf("warnings: %+v", rep.Warnings)
	}
	if rep.Summary() != "3 virtual services, 4 real servers, 0 kept" {
		t.Errorf("summary %q", rep.Summary())
	}
}

func TestImportIpvsadmErrors(t *testing.T) {
	checkErrors(t, FormatIpvsadm, []errorCase{
		{"unknown service name", "-A -t 198.18.0.1:no-such-service -s rr\n", 1, "neither a number nor a service name"},
		{"port 0 not persistent", "-A -t 198.18.0.1:0 -s rr\n", 1, "Zero port specified for non-persistent service"},
		{"host name", "-A -t 198.18.0.1:80 -s rr\n-a -t 198.18.0.1:80 -r web1.example.com:80 -g -w 1\n", 2, "ipvsadm -S -n"},
		{"unknown command", "-A -t 198.18.0.1:80 -s rr\n\n-E -t 198.18.0.1:80 -s wlc\n", 3, `"-E" is not a command`},
		{"server before service", "-a -t 198.18.0.1:80 -r 198.18.0.2:80 -g -w 1\n", 1, "no -A line before it defines"},
		{"duplicate service", "-A -t 198.18.0.1:80 -s rr\n-A -t 198.18.0.1:80 -s wlc\n", 2, "already defined on line 1"},
		{"bad weight", "-A -t 198.18.0.1:80 -s rr\n-a -t 198.18.0.1:80 -r 198.18.0.2:80 -g -w heavy\n", 2, `-w "heavy"`},
		{"missing value", "-A -t 198.18.0.1:80 -s\n", 1, "-s needs a value"},
		{"unknown scheduler", "-A -t 198.18.0.1:80 -s fastest\n", 1, `"fastest" is not a scheduler`},
		{"bad flag", "-A -t 198.18.0.1:80 -s sh -b sh-magic\n", 1, `"sh-magic" is not a scheduler flag`},
		{"no port", "-A -t 198.18.0.1 -s rr\n", 1, "needs a port"},
		{"bad mark", "-A -f zero -s rr\n", 1, "firewall mark"},
		{"family mix", "-A -t 198.18.0.1:80 -s rr\n-a -t 198.18.0.1:80 -r [2001:db8::1]:80 -g -w 1\n", 2, "IPv4 service cannot have an IPv6 real server"},
		{"second problem named", "-A -t 198.18.0.1:80 -s rr\n-a -t 198.18.0.1:80 -r 198.18.0.2:80 -g -w 1\n-A -t 198.18.0.1:81 -s nope\n", 3, "nope"},
		{"set", "--set 1 2\n", 1, "three timeouts"},
		{"bad bracket", "-A -t [2001:db8::1:80 -s rr\n", 1, "missing ]"},
		{"-6 on address", "-A -t 198.18.0.1:80 -6 -s rr\n", 1, "-6 is for fwmark"},
	})
}
