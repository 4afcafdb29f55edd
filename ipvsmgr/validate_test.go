package ipvsmgr

import (
	"strings"
	"testing"
)

const designDoc = `{
  "settings": {"network": "dr", "tcp_timeout": 0, "tcpfin_timeout": 0, "udp_timeout": 0},
  "services": [{
    "name": "web", "protocol": "tcp", "address": "198.18.0.100", "port": 80, "fwmark": 0,
    "interface": "eth0", "scheduler": "wlc", "scheduler_flags": [], "persistence": 0,
    "persistence_netmask": "", "forwarding": "dr", "enabled": true,
    "servers": [
      {"name": "r1", "address": "198.18.0.11", "port": 80, "weight": 1, "enabled": true},
      {"name": "r2", "address": "198.18.0.12", "port": 80, "weight": 3, "forwarding": "dr",
       "upper_threshold": 0, "lower_threshold": 0}
    ]
  }]
}`

func compileDoc(t *testing.T, doc string) (*Desired, error) {
	t.Helper()
	st, err := DecodeState(strings.NewReader(doc))
	if err != nil {
		return nil, err
	}
	return Compile(st)
}

func TestCompileDesignDocument(t *testing.T) {
	d, err := compileDoc(t, designDoc)
	if err != nil {
		t.Fatal(err)
	}
	if len(d.Table.Services) != 1 || len(d.Table.Services[0].Dests) != 2 {
		t.Fatalf("want 1 service with 2 servers, got %+v", d.Table.Services)
	}
	s := d.Table.Services[0]
	if s.Key.String() != "-t 198.18.0.100:80" || s.Scheduler != "wlc" || s.Netmask != 0xffffffff {
		t.Errorf("service = %s %s %x", s.Key, s.Scheduler, s.Netmask)
	}
	if s.Dests[1].Weight != 3 || s.Dests[1].Forward != ForwardDR {
		t.Errorf("r2 = %+v", s.Dests[1])
	}
	if len(d.VIPs) != 1 || d.VIPs[0].String() != "198.18.0.100 on eth0" {
		t.Errorf("VIPs = %v", d.VIPs)
	}
}

func TestValidationNamesFieldAndValue(t *testing.T) {
	svc := func(extra string) string {
		return `{"services":[{"address":"198.18.0.1","port":80,"servers":[{"address":"198.18.0.11"}]` + extra + `}]}`
	}
	cases := []struct {
		name, doc, field, msg string
	}{
		{"bad address", `{"services":[{"address":"198.18.0.300","port":80,"servers":[]}]}`, "services[0].address", `"198.18.0.300" is not an IP address`},
		{"port 0", `{"services":[{"address":"198.18.0.1","port":0,"servers":[]}]}`, "services[0].port", "0 (all ports) is only valid for a persistent service"},
		{"port too big", `{"services":[{"address":"198.18.0.1","port":65536,"servers":[]}]}`, "services[0].port", "65536 is out of range"},
		{"unknown scheduler", svc(`,"scheduler":"fastest"`), "services[0].scheduler", `"fastest" is not a scheduler`},
		{"flag for wrong scheduler", svc(`,"scheduler":"rr","scheduler_flags":["fallback"]`), "services[0].scheduler_flags[0]", "scheduler rr takes no flags"},
		{"unknown sh flag", svc(`,"scheduler":"sh","scheduler_flags":["sticky"]`), "services[0].scheduler_flags[0]", `"sticky" is not a flag of scheduler sh`},
		{"one packet on tcp", svc(`,"one_packet":true`), "services[0].one_packet", "one-packet scheduling is for udp"},
		{"bad protocol", svc(`,"protocol":"icmp"`), "services[0].protocol", `"icmp" is not a protocol`},
		{"bad forwarding", svc(`,"forwarding":"direct"`), "services[0].forwarding", `"direct" is not a forwarding method`},
		{"port on fwmark", `{"services":[{"fwmark":5,"port":80,"servers":[]}]}`, "services[0].port", "80: a fwmark service is keyed by its mark and has no port"},
		{"netmask without persistence", svc(`,"persistence_netmask":"255.255.255.0"`), "services[0].persistence_netmask", "needs persistence > 0"},
		{"bad netmask", svc(`,"persistence":60,"persistence_netmask":"255.0.255.0"`), "services[0].persistence_netmask", "not a contiguous netmask"},
		{"persistence range", svc(`,"persistence":-1`), "services[0].persistence", "-1 is out of range"},
		{"weight range", `{"services":[{"address":"198.18.0.1","port":80,"servers":[{"address":"198.18.0.11","weight":65536}]}]}`, "services[0].servers[0].weight", "65536 is out of range 0..65535"},
		{"mixed family", `{"services":[{"address":"198.18.0.1","port":80,"servers":[{"address":"2001:db8::1"}]}]}`, "services[0].servers[0].address", "an IPv4 service cannot have an IPv6 real server"},
		{"duplicate server", `{"services":[{"address":"198.18.0.1","port":80,"servers":[{"address":"198.18.0.11"},{"address":"198.18.0.11","port":80}]}]}`, "services[0].servers[1].address", "duplicate real server 198.18.0.11:80"},
		{"duplicate service", `{"services":[{"address":"198.18.0.1","port":80,"servers":[]},{"protocol":"tcp","address":"198.18.0.1","port":80,"servers":[]}]}`, "services[1]", "duplicate service -t 198.18.0.1:80"},
		{"dr port change", `{"services":[{"address":"198.18.0.1","port":80,"servers":[{"address":"198.18.0.11","port":8080}]}]}`, "services[0].servers[0].port", "8080 differs from the service port 80"},
		{"thresholds", `{"services":[{"address":"198.18.0.1","port":80,"servers":[{"address":"198.18.0.11","upper_threshold":5,"lower_threshold":9}]}]}`, "services[0].servers[0].lower_threshold", "9 is above upper_threshold 5"},
		{"match without fwmark", svc(`,"match":[{"protocol":"tcp","ports":[80]}]`), "services[0].match", "only a fwmark service marks packets"},
		{"match port", `{"services":[{"fwmark":3,"address":"198.18.0.1","match":[{"protocol":"tcp","ports":[0]}],"servers":[]}]}`, "services[0].match[0].ports[0]", "0 is out of range 1..65535"},
		{"interface name", svc(`,"interface":"eth0/1"`), "services[0].interface", `"eth0/1" is not an interface name`},
		{"settings timeout", `{"settings":{"tcp_timeout":-5},"services":[]}`, "settings.tcp_timeout", "-5 is out of range"},
		{"duplicate name", `{"services":[{"name":"a","address":"198.18.0.1","port":80,"servers":[]},{"name":"a","address":"198.18.0.1","port":81,"servers":[]}]}`, "services[1].name", `"a" is already the name of services[0]`},
		{"unknown field", `{"services":[{"address":"198.18.0.1","port":80,"weight":3,"servers":[]}]}`, "document", `unknown field "weight"`},
		{"wrong type", "{\"services\":[\n{\"address\":\"198.18.0.1\",\"port\":\"80\",\"servers\":[]}]}", "document", `line 2: field "services.port"`},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			_, err := compileDoc(t, c.doc)
			ve, ok := err.(*ValidationError)
			if !ok {
				t.Fatalf("want *ValidationError, got %v", err)
			}
			for _, p := range ve.Problems {
				if p.Field == c.field && strings.Contains(p.Message, c.msg) {
					return
				}
			}
			t.Fatalf("no problem %s: ...%s...; got %v", c.field, c.msg, ve.Problems)
		})
	}
}

func TestCompileKinds(t *testing.T) {
	d, err := compileDoc(t, `{"settings":{"network":"nat","udp_timeout":30},"services":[
	 {"protocol":"udp","address":"2001:db8::100","port":53,"scheduler":"sh","scheduler_flags":["fallback","port"],"one_packet":true,
	  "persistence":300,"persistence_netmask":"64","servers":[{"address":"2001:db8::11","port":5353,"weight":0}]},
	 {"fwmark":7,"address":"198.18.0.100","interface":"eth0","scheduler":"mh","match":[{"protocol":"tcp","ports":[80,443]}],
	  "forwarding":"dr","servers":[{"address":"198.18.0.11","forwarding":"tun"}]},
	 {"address":"198.18.0.101","port":80,"persistence":60,"persistence_netmask":"255.255.255.0","servers":[{"address":"198.18.0.11","enabled":false}]},
	 {"address":"198.18.0.102","port":80,"enabled":false,"servers":[]}]}`)
	if err != nil {
		t.Fatal(err)
	}
	if n := len(d.Table.Services); n != 3 {
		t.Fatalf("want 3 enabled services, got %d", n)
	}
	u, fw, p := d.Table.Services[0], d.Table.Services[1], d.Table.Services[2]
	if u.Key.Family != FamilyIPv6 || u.Flags != FlagSched1|FlagSched2|FlagOnePacket|FlagPersistent || u.Netmask != 64 || u.Timeout != 300 {
		t.Errorf("udp6 service = %+v", u)
	}
	if u.Dests[0].Forward != ForwardNAT || u.Dests[0].Key.Port != 5353 || u.Dests[0].Weight != 0 {
		t.Errorf("nat server = %+v", u.Dests[0])
	}
	if fw.Key.FWMark != 7 || fw.Key.Port != 0 || fw.Dests[0].Forward != ForwardTUN {
		t.Errorf("fwmark service = %+v / %+v", fw.Key, fw.Dests[0])
	}
	if len(d.Marks) != 1 || d.Marks[0].Mark != 7 || d.Marks[0].Ports[1] != 443 {
		t.Errorf("marks = %+v", d.Marks)
	}
	if p.Netmask != 0xffffff00 || len(p.Dests) != 0 {
		t.Errorf("persistent service = %+v", p)
	}
	if d.Table.Timeouts.UDP != 30 {
		t.Errorf("timeouts = %+v", d.Table.Timeouts)
	}
	if got := (Op{Kind: OpAddService, Service: u}).String(); got != "ipvsadm -A -u [2001:db8::100]:53 -s sh -b sh-fallback,sh-port -o -p 300 -M 64" {
		t.Errorf("op = %s", got)
	}
}

// Names go into history lines, logs, URLs and the panel: a newline, a
// space or 5,000 characters are refused with the field and the value.
func TestNamesAreBounded(t *testing.T) {
	for _, name := range []string{"web\nEVIL", "a b", strings.Repeat("x", 65), "tab\there"} {
		st := &State{Services: []Service{{Name: name, Address: "198.18.0.1", Port: 80,
			Servers: []Server{{Name: name, Address: "198.18.0.11"}}}}}
		_, err := Compile(st)
		if err == nil {
			t.Fatalf("name %q accepted", name)
		}
		for _, field := range []string{"services[0].name", "services[0].servers[0].name"} {
			if !strings.Contains(err.Error(), field+": ") || !strings.Contains(err.Error(), "not a valid name") {
				t.Errorf("name %q: %v does not name %s", name, err, field)
			}
		}
	}
	ok := &State{Services: []Service{{Name: strings.Repeat("é", 64), Address: "198.18.0.1", Port: 80, Servers: []Server{}}}}
	if _, err := Compile(ok); err != nil {
		t.Errorf("64 printable characters refused: %v", err)
	}
}

func TestCompileAllPortsAndFWMarkPorts(t *testing.T) {
	d, err := compileDoc(t, `{"services":[
	 {"address":"198.18.0.1","port":0,"persistence":300,"forwarding":"dr","servers":[{"address":"198.18.0.2"}]},
	 {"fwmark":3,"forwarding":"dr","servers":[{"address":"198.18.0.3","port":80},{"address":"198.18.0.4","port":443,"forwarding":"tun"}]}]}`)
	if err != nil {
		t.Fatal(err)
	}
	if len(d.Table.Services) != 2 || d.Table.Services[0].Key.Port != 0 || d.Table.Services[0].Dests[0].Key.Port != 0 {
		t.Fatalf("port-0 service: %+v", d.Table.Services)
	}
	if p := d.Table.Services[1].Dests[1].Key.Port; p != 443 {
		t.Errorf("fwmark TUN server port = %d, want 443 kept (as ipvsadm keeps it)", p)
	}
}

func TestCompileTunnels(t *testing.T) {
	d, err := compileDoc(t, `{"services":[{"address":"198.18.0.1","port":443,"forwarding":"tun","servers":[
	 {"address":"198.18.0.2","tunnel":"gue","tunnel_port":6080,"tunnel_checksum":"remcsum"},
	 {"address":"198.18.0.3","tunnel":"gre","tunnel_checksum":"csum"},
	 {"address":"198.18.0.4"}]}]}`)
	if err != nil {
		t.Fatal(err)
	}
	ds := d.Table.Services[0].Dests
	if ds[0].TunType != TunGUE || ds[0].TunPort != 6080 || ds[0].TunFlags != TunFlagRemCsum ||
		ds[1].TunType != TunGRE || ds[1].TunFlags != TunFlagCsum || ds[2].TunType != TunIPIP {
		t.Fatalf("tunnels: %+v %+v %+v", ds[0], ds[1], ds[2])
	}
	if got := destArgs(ds[0]); !strings.HasSuffix(got, "-i -w 1 --tun-type gue --tun-port 6080 --tun-remcsum") {
		t.Errorf("ipvsadm line %q", got)
	}
	for doc, want := range map[string]string{
		`{"address":"198.18.0.2","tunnel":"gue"}`:                                   "a gue tunnel needs its UDP port",
		`{"address":"198.18.0.2","tunnel":"gre","tunnel_port":1}`:                   "only a gue tunnel has a port",
		`{"address":"198.18.0.2","tunnel":"vxlan"}`:                                 `"vxlan" is not a tunnel type`,
		`{"address":"198.18.0.2","tunnel":"gre","tunnel_checksum":"remcsum"}`:       "remcsum is for gue tunnels only",
		`{"address":"198.18.0.2","tunnel_checksum":"csum"}`:                         "ipip has no checksum option",
		`{"address":"198.18.0.2","forwarding":"dr","tunnel":"gue","tunnel_port":1}`: "a tunnel is for tun forwarding",
	} {
		_, err := compileDoc(t, `{"services":[{"address":"198.18.0.1","port":443,"forwarding":"tun","servers":[`+doc+`]}]}`)
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%s: got %v, want %q", doc, err, want)
		}
	}
}
