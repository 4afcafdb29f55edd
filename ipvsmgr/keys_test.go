package ipvsmgr

import (
	"encoding/json"
	"net/netip"
	"strings"
	"testing"
)

func TestKeysAsText(t *testing.T) {
	for _, tc := range []struct {
		key  ServiceKey
		text string
	}{
		{ServiceKey{Family: FamilyIPv4, Protocol: ProtoTCP, Addr: netip.MustParseAddr("198.18.0.100"), Port: 80}, "-t 198.18.0.100:80"},
		{ServiceKey{Family: FamilyIPv6, Protocol: ProtoUDP, Addr: netip.MustParseAddr("2001:db8::100"), Port: 53}, "-u [2001:db8::100]:53"},
		{ServiceKey{Family: FamilyIPv4, Protocol: ProtoSCTP, Addr: netip.MustParseAddr("198.18.0.1"), Port: 9}, "--sctp-service 198.18.0.1:9"},
		{ServiceKey{Family: FamilyIPv4, Protocol: 99, Addr: netip.MustParseAddr("198.18.0.1"), Port: 9}, "-proto99 198.18.0.1:9"},
		{ServiceKey{Family: FamilyIPv4, FWMark: 5}, "-f 5"},
		{ServiceKey{Family: FamilyIPv6, FWMark: 4294967295}, "-f 4294967295 -6"},
	} {
		b, err := json.Marshal(Retiring{Service: tc.key, Dest: DestKey{Addr: netip.MustParseAddr("2001:db8::11"), Port: 8080}})
		if err != nil {
			t.Fatal(err)
		}
		want := `{"service":"` + tc.text + `","dest":"[2001:db8::11]:8080"`
		if !strings.HasPrefix(string(b), want) {
			t.Errorf("%+v encodes as %s, want %s...", tc.key, b, want)
		}
		var back Retiring
		if err := json.Unmarshal(b, &back); err != nil || back.Service != tc.key || back.Dest.String() != "[2001:db8::11]:8080" {
			t.Errorf("%s decodes as %+v (%v)", b, back, err)
		}
	}
	for _, bad := range []string{`"-t 198.18.0.1"`, `"-x 198.18.0.1:80"`, `"-f 0"`, `"-f 5 -4"`, `""`, `7`} {
		var k ServiceKey
		if err := json.Unmarshal([]byte(bad), &k); err == nil {
			t.Errorf("%s decoded as %+v", bad, k)
		}
	}
	var d DestKey
	if err := json.Unmarshal([]byte(`"198.18.0.11"`), &d); err == nil {
		t.Errorf("a real server without a port decoded as %+v", d)
	}
}

// Ledgers written before keys were text hold them as objects: still read.
func TestLedgerWithObjectKeys(t *testing.T) {
	old := `{"services":[{"Family":2,"Protocol":6,"Addr":"198.18.0.100","Port":80,"FWMark":0},{"Family":10,"Protocol":0,"Addr":"","Port":0,"FWMark":7}],
	"vips":[],"drains":[{"service":{"Family":2,"Protocol":6,"Addr":"198.18.0.100","Port":80,"FWMark":0},"dest":{"Addr":"198.18.0.12","Port":80},"since":"2026-11-30T06:00:00Z","active_conns":3}],"marks":true}`
	var l Ledger
	if err := json.Unmarshal([]byte(old), &l); err != nil {
		t.Fatal(err)
	}
	if len(l.Services) != 2 || l.Services[0].String() != "-t 198.18.0.100:80" || l.Services[1].String() != "-f 7 -6" ||
		len(l.Retiring) != 1 || l.Retiring[0].Dest.String() != "198.18.0.12:80" || l.Retiring[0].Service != l.Services[0] || !l.Marks {
		t.Fatalf("old ledger read as %+v", l)
	}
}
