package ipvsmgr_test

import (
	"net/netip"
	"strconv"
	"strings"
	"testing"

	"github.com/ipvsctl/ipvsctl/ipvsmgr"
)

func compileDoc(t *testing.T, doc string) *ipvsmgr.Desired {
	t.Helper()
	st, err := ipvsmgr.DecodeState(strings.NewReader(doc))
	if err != nil {
		t.Fatal(err)
	}
	d, err := ipvsmgr.Compile(st)
	if err != nil {
		t.Fatal(err)
	}
	return d
}

func compileErr(doc string) error {
	st, err := ipvsmgr.DecodeState(strings.NewReader(doc))
	if err != nil {
		return err
	}
	_, err = ipvsmgr.Compile(st)
	return err
}

// settings.maintenance_dir and check.connect_checks are validated by
// field and value.
func TestMaintenanceAndConnectChecksValidation(t *testing.T) {
	for _, c := range []struct{ doc, want string }{
		{`{"settings":{"maintenance_dir":"var/maint"},"services":[]}`, `settings.maintenance_dir: "var/maint" is not a clean absolute path`},
		{`{"settings":{"maintenance_dir":"/etc/ha.d/../maint"},"services":[]}`, `settings.maintenance_dir: "/etc/ha.d/../maint" is not a clean absolute path`},
		{`{"services":[{"address":"198.18.0.100","port":80,"check":{"type":"http","connect_checks":-1},"servers":[{"address":"198.18.0.11"}]}]}`,
			`services[0].check.connect_checks: -1 is out of range 1..999999`},
		{`{"services":[{"address":"198.18.0.100","port":80,"check":{"type":"tcp","connect_checks":3},"servers":[{"address":"198.18.0.11"}]}]}`,
			`services[0].check.connect_checks: only for http and https and send_expect`},
		{`{"services":[{"address":"198.18.0.100","port":80,"check":{"type":"http"},"servers":[{"address":"198.18.0.11","check":{"type":"ping","connect_checks":2}}]}]}`,
			`services[0].servers[0].check.connect_checks: only for`},
		{`{"services":[{"address":"198.18.0.100","port":53,"protocol":"udp","check":{"type":"send_expect","protocol":"udp","send":"x","connect_checks":2},"servers":[{"address":"198.18.0.11"}]}]}`,
			`services[0].servers[0].check.connect_checks: 2: a udp send_expect check has no connection to make`},
	} {
		if err := compileErr(c.doc); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s:\n got %v\nwant %q", c.doc, err, c.want)
		}
	}
	d := compileDoc(t, `{"settings":{"maintenance_dir":"/etc/ha.d/maint"},"services":[{"address":"198.18.0.100","port":80,
	 "check":{"type":"http","connect_checks":4},"servers":[{"address":"198.18.0.11"},{"address":"198.18.0.12","check":{"connect_checks":9}}]}]}`)
	if d.Settings.MaintenanceDir != "/etc/ha.d/maint" || d.Checks[0].Spec.ConnectChecks != 4 || d.Checks[1].Spec.ConnectChecks != 9 {
		t.Errorf("compiled: %q, %d, %d", d.Settings.MaintenanceDir, d.Checks[0].Spec.ConnectChecks, d.Checks[1].Spec.ConnectChecks)
	}
}

// The names ldirectord's _check_real_for_maintenance looks for: IP:port,
// IP, and host names (resolved by the caller), IPv6 as ldirectord writes
// it ([addr]:port), or bare.
func TestParseMaintenanceName(t *testing.T) {
	for _, c := range []struct {
		name, addr string
		port       uint16
		host       string
		ok         bool
	}{
		{"198.18.0.11", "198.18.0.11", 0, "", true},
		{"198.18.0.11:8080", "198.18.0.11", 8080, "", true},
		{"2001:db8::11", "2001:db8::11", 0, "", true},
		{"[2001:db8::11]", "2001:db8::11", 0, "", true},
		{"[2001:db8::11]:80", "2001:db8::11", 80, "", true},
		{"web1", "", 0, "web1", true},
		{"web1.example.com:443", "", 443, "web1.example.com", true},
		{"198.18.0.11:0", "", 0, "", false},
		{"198.18.0.11:http", "", 0, "", false},
		{"[198.18.0.11]:80", "", 0, "", false},
		{"README txt", "", 0, "", false},
		{":80", "", 0, "", false},
	} {
		a, port, host, ok := ipvsmgr.ParseMaintenanceName(c.name)
		var want netip.Addr
		if c.addr != "" {
			want = netip.MustParseAddr(c.addr)
		}
		if ok != c.ok || ok && (a != want || port != c.port || host != c.host) {
			t.Errorf("%q: %v %d %q %v, want %v %d %q %v", c.name, a, port, host, ok, want, c.port, c.host, c.ok)
		}
	}
}

// A server in maintenance is at weight 0 in every service whatever its
// checks say, and counts as down for the quorum (so the sorry server comes
// in when every server is in maintenance, as ldirectord's fallback does);
// an address:port file holds out that port only.
func TestMaintenanceQuiesces(t *testing.T) {
	d := compileDoc(t, `{"services":[
	 {"address":"198.18.0.100","port":80,"check":{"type":"tcp"},"sorry_server":{"address":"198.18.0.50"},
	  "servers":[{"address":"198.18.0.11"},{"address":"198.18.0.12"}]},
	 {"address":"198.18.0.100","port":443,"servers":[{"address":"198.18.0.11"},{"address":"198.18.0.12"}]}]}`)
	up := ipvsmgr.ServerHealth{State: ipvsmgr.HealthUp}
	view := &ipvsmgr.HealthView{Servers: map[ipvsmgr.ServerRef]ipvsmgr.ServerHealth{
		ref("198.18.0.100:80", "198.18.0.11:80"): up, ref("198.18.0.100:80", "198.18.0.12:80"): up}}
	view.Maintenance = &ipvsmgr.Maintenance{Dir: "/m", Files: map[ipvsmgr.DestKey]string{
		{Addr: mustAddr("198.18.0.11")}:            "198.18.0.11",
		{Addr: mustAddr("198.18.0.12"), Port: 443}: "198.18.0.12:443",
	}}
	got := weights(ipvsmgr.ApplyHealth(d.Table, d, view))
	want := "198.18.0.100:80 198.18.0.11:80=0 198.18.0.12:80=1; 198.18.0.100:443 198.18.0.11:443=0 198.18.0.12:443=0"
	if got != want {
		t.Errorf("kernel:\n got %s\nwant %s", got, want)
	}
	if f := view.Maintenance.File(ipvsmgr.DestKey{Addr: mustAddr("198.18.0.12"), Port: 443}); f != "/m/198.18.0.12:443" {
		t.Errorf("file %q", f)
	}
	view.Maintenance.Files[ipvsmgr.DestKey{Addr: mustAddr("198.18.0.12")}] = "198.18.0.12"
	got = weights(ipvsmgr.ApplyHealth(d.Table, d, view))
	want = "198.18.0.100:80 198.18.0.11:80=0 198.18.0.12:80=0 198.18.0.50:80=1; 198.18.0.100:443 198.18.0.11:443=0 198.18.0.12:443=0"
	if got != want {
		t.Errorf("all in maintenance:\n got %s\nwant %s", got, want)
	}
	if c := ipvsmgr.HealthyCounts(d.Table, d, view)[d.Table.Services[0].Key]; c.Healthy != 0 {
		t.Errorf("quorum counts %d healthy, want 0", c.Healthy)
	}
	view.Maintenance = nil // the files gone: back as the checks say
	got = weights(ipvsmgr.ApplyHealth(d.Table, d, view))
	want = "198.18.0.100:80 198.18.0.11:80=1 198.18.0.12:80=1; 198.18.0.100:443 198.18.0.11:443=1 198.18.0.12:443=1"
	if got != want {
		t.Errorf("files gone:\n got %s\nwant %s", got, want)
	}
}

func weights(t *ipvsmgr.Table) string {
	var svcs []string
	for _, s := range t.Services {
		line := netip.AddrPortFrom(s.Key.Addr, s.Key.Port).String()
		for _, d := range s.Dests {
			line += " " + d.Key.String() + "=" + strconv.Itoa(int(d.Weight))
		}
		svcs = append(svcs, line)
	}
	return strings.Join(svcs, "; ")
}
