package ipvsmgr

import (
	"errors"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

func TestBGPSettingsValidation(t *testing.T) {
	doc := `{"settings": {"bgp": {"asn": 0, "communities": ["65000:100", "65000:70000", "x"], "med": -1,
	  "peers": [{"address": "198.18.0.1", "asn": 65000, "bfd": {"interval": 0.001, "multiplier": 0}, "hold_time": 2},
	            {"address": "198.18.0.1", "asn": 4294967296, "password": "` + strings.Repeat("k", 81) + `"},
	            {"address": "nope", "asn": 65000, "port": 70000}]}}, "services": []}`
	st, err := DecodeState(strings.NewReader(doc))
	if err != nil {
		t.Fatal(err)
	}
	_, err = Compile(st)
	var ve *ValidationError
	if !errors.As(err, &ve) {
		t.Fatalf("err = %v, want a ValidationError", err)
	}
	var fields []string
	for _, p := range ve.Problems {
		fields = append(fields, p.Field)
	}
	want := []string{
		"settings.bgp.asn",
		"settings.bgp.peers[0].hold_time", "settings.bgp.peers[0].bfd.interval", "settings.bgp.peers[0].bfd.multiplier",
		"settings.bgp.peers[1].address", "settings.bgp.peers[1].asn", "settings.bgp.peers[1].password",
		"settings.bgp.peers[2].address", "settings.bgp.peers[2].port",
		"settings.bgp.communities[1]", "settings.bgp.communities[2]", "settings.bgp.med",
	}
	if diff := cmp.Diff(want, fields); diff != "" {
		t.Errorf("problem fields (-want +got):\n%s\n%v", diff, err)
	}
	if !strings.Contains(err.Error(), `"65000:70000" is not a community`) {
		t.Errorf("error %q does not show the bad community", err)
	}
}

func TestBGPSettingsUnknownFieldAndRedundancy(t *testing.T) {
	_, err := DecodeState(strings.NewReader(`{"settings": {"bgp": {"asn": 65001, "peers": [{"address": "198.18.0.1", "asn": 65000, "bfd": {"interval": 0.1, "multiplier": 3, "echo": true}}]}}, "services": []}`))
	if err == nil || !strings.Contains(err.Error(), `unknown field "echo"`) {
		t.Fatalf("err = %v, want unknown field echo", err)
	}
	st, err := DecodeState(strings.NewReader(`{"settings": {"bgp": {"asn": 65001, "peers": [{"address": "198.18.0.1", "asn": 65000}]},
	  "redundancy": {"vrid": 1, "interface": "eth0"}}, "services": []}`))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := Compile(st); err == nil || !strings.Contains(err.Error(), "settings.bgp: BGP mode and settings.redundancy") {
		t.Fatalf("err = %v, want bgp and redundancy refused together", err)
	}
}

func TestBGPWarnings(t *testing.T) {
	doc := `{"settings": {"network": "dr", "bgp": {"asn": 65001, "peers": [{"address": "198.18.0.1", "asn": 65000}]}}, "services": [
	  {"protocol": "tcp", "address": "198.18.0.100", "port": 80, "servers": [{"address": "198.18.1.1"}]},
	  {"protocol": "tcp", "address": "198.18.0.100", "port": 443, "scheduler": "wlc", "persistence": 300, "forwarding": "nat", "servers": [{"address": "198.18.1.1"}]},
	  {"protocol": "tcp", "address": "198.18.0.101", "port": 80, "scheduler": "sh", "servers": [{"address": "198.18.1.1", "forwarding": "nat"}]},
	  {"protocol": "tcp", "address": "198.18.0.102", "port": 80, "check": {"type": "tcp", "slow_start": 30},
	    "servers": [{"address": "198.18.1.1"}, {"address": "198.18.1.2", "check": {"type": "agent", "port": 8081}},
	      {"address": "198.18.1.3", "check": {"type": "exec", "command": "/bin/true", "dynamic_weight": true}},
	      {"address": "198.18.1.4", "check": {"type": "file", "file": "/run/w"}},
	      {"address": "198.18.1.5", "check": {"type": "file", "file": "/run/w", "file_weight": 0}}]},
	  {"protocol": "tcp", "address": "198.18.0.103", "port": 80, "check": {"type": "tcp", "slow_start": 0}, "servers": [{"address": "198.18.1.1"}]}]}`
	st, err := DecodeState(strings.NewReader(doc))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := Compile(st); err != nil {
		t.Fatalf("warnings must not refuse the state: %v", err)
	}
	var fields []string
	msgs := map[string]string{}
	for _, p := range BGPWarnings(st) {
		fields = append(fields, p.Field)
		msgs[p.Field] = p.Message
	}
	want := []string{"services[1].scheduler", "services[1].persistence", "services[1].forwarding", "services[2].servers[0].forwarding",
		"services[3].check.slow_start", "services[3].servers[1].check.type", "services[3].servers[2].check.dynamic_weight", "services[3].servers[3].check.type"}
	if diff := cmp.Diff(want, fields); diff != "" {
		t.Errorf("warnings (-want +got):\n%s", diff)
	}
	for f, v := range map[string]string{"services[3].check.slow_start": "30 seconds", "services[3].servers[1].check.type": `"agent"`,
		"services[3].servers[2].check.dynamic_weight": "true", "services[3].servers[3].check.type": `"file"`} {
		if !strings.HasPrefix(msgs[f], v+":") {
			t.Errorf("warning for %s = %q, want it to start with the value %s", f, msgs[f], v)
		}
	}
	st.Settings.BGP = nil
	if w := BGPWarnings(st); w != nil {
		t.Errorf("warnings without BGP: %v", w)
	}
}

func TestBGPDrainSettings(t *testing.T) {
	bad := `{"settings": {"bgp": {"asn": 65001, "peers": [{"address": "198.18.0.1", "asn": 65000}],
	  "drain": {"mode": "shout", "prepend": 17, "quiet": -1, "timeout": 90000}}}, "services": []}`
	st, err := DecodeState(strings.NewReader(bad))
	if err != nil {
		t.Fatal(err)
	}
	_, err = Compile(st)
	var ve *ValidationError
	if !errors.As(err, &ve) {
		t.Fatalf("err = %v, want a ValidationError", err)
	}
	var fields []string
	for _, p := range ve.Problems {
		fields = append(fields, p.Field)
	}
	want := []string{"settings.bgp.drain.mode", "settings.bgp.drain.prepend", "settings.bgp.drain.quiet", "settings.bgp.drain.timeout"}
	if diff := cmp.Diff(want, fields); diff != "" {
		t.Errorf("problem fields (-want +got):\n%s\n%v", diff, err)
	}
	if !strings.Contains(err.Error(), `"shout" is not prepend or withdraw`) {
		t.Errorf("error %q does not name the bad mode", err)
	}
	short := `{"settings": {"bgp": {"asn": 65001, "peers": [{"address": "198.18.0.1", "asn": 65000}], "drain": {"quiet": 30, "timeout": 20}}}, "services": []}`
	if st, err = DecodeState(strings.NewReader(short)); err != nil {
		t.Fatal(err)
	}
	if _, err := Compile(st); err == nil || !strings.Contains(err.Error(), "settings.bgp.drain.timeout: 20 seconds is shorter than the quiet window of 30 seconds") {
		t.Errorf("err = %v, want the timeout refused as shorter than the quiet window", err)
	}
	if got, want := (BGP{}).DrainPolicy(), (BGPDrain{Mode: "prepend", Prepend: 3, Quiet: 10, Timeout: 300}); got != want {
		t.Errorf("default drain policy = %+v, want %+v", got, want)
	}
	if got := (BGP{Drain: &BGPDrain{Mode: "withdraw", Quiet: 2}}).DrainPolicy(); got.Mode != "withdraw" || got.Quiet != 2 || got.Prepend != 3 {
		t.Errorf("drain policy = %+v, want withdraw, quiet 2, the default prepend", got)
	}
}
