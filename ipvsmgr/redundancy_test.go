package ipvsmgr

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"
	"time"
)

const redundancyDoc = `{"settings":{"network":"dr","tcp_timeout":0,"tcpfin_timeout":0,"udp_timeout":0,"redundancy":{"vrid":51,"interface":"eth0","advert_interval":0.1,"unicast_peers":["198.18.0.2","198.18.0.3"],"preempt":false,"preempt_delay":2.5,"sync_daemon":true,"track_interfaces":["eth1"],"garp_count":0,"garp_repeat_delay":0}},"services":[]}`

func TestRedundancySettingsDecodeAndEncode(t *testing.T) {
	st, err := DecodeState(strings.NewReader(redundancyDoc))
	if err != nil {
		t.Fatal(err)
	}
	r := st.Settings.Redundancy
	if r == nil || r.VRID != 51 || r.Interface != "eth0" || len(r.UnicastPeers) != 2 || r.PreemptOn() || !r.SyncDaemon {
		t.Fatalf("decoded %+v", r)
	}
	if r.Advert() != 100*time.Millisecond || r.Delay() != 2500*time.Millisecond {
		t.Errorf("advert %s, preempt delay %s", r.Advert(), r.Delay())
	}
	if n, d := r.GARPs(); n != 0 || d != 0 {
		t.Errorf("garps %d, %s: explicit zeros must stay zeros", n, d)
	}
	if r.SyncDaemonInterface() != "eth0" {
		t.Errorf("sync interface %q", r.SyncDaemonInterface())
	}
	if _, err := Compile(st); err != nil {
		t.Fatal(err)
	}
	// Encoded exactly as encoding/json encodes it.
	want, _ := json.Marshal(st)
	var fast bytes.Buffer
	if err := st.Encode(&fast); err != nil {
		t.Fatal(err)
	}
	var compact bytes.Buffer
	_ = json.Compact(&compact, fast.Bytes())
	if compact.String() != string(want) || string(want) != redundancyDoc {
		t.Errorf("encoded\n%s\nwant\n%s", compact.String(), redundancyDoc)
	}

	// The defaults.
	st, err = DecodeState(strings.NewReader(`{"settings":{"redundancy":{"vrid":1,"interface":"eth0"}},"services":[]}`))
	if err != nil {
		t.Fatal(err)
	}
	r = st.Settings.Redundancy
	if n, d := r.GARPs(); r.Advert() != time.Second || !r.PreemptOn() || r.Delay() != 0 || n != 5 || d != 5*time.Second {
		t.Errorf("defaults: advert %s preempt %v delay %s garps %d %s", r.Advert(), r.PreemptOn(), r.Delay(), n, d)
	}
	// An auth block names key files, and round-trips.
	authDoc := `{"settings":{"redundancy":{"vrid":1,"interface":"eth0","auth":{"keys":[{"id":1,"file":"/etc/ipvsctl/vrrp-1.key"},{"id":2,"file":"/etc/ipvsctl/vrrp-2.key"}],"active_key":2,"mode":"permissive","time_window":9}}},"services":[]}`
	st, err = DecodeState(strings.NewReader(authDoc))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := Compile(st); err != nil {
		t.Fatal(err)
	}
	if a := st.Settings.Redundancy.Auth; a == nil || a.Active() != 2 || len(a.Keys) != 2 || a.Keys[1].File != "/etc/ipvsctl/vrrp-2.key" {
		t.Errorf("auth decoded %+v", a)
	}
	if a := (&RedundancyAuth{Keys: []RedundancyKey{{ID: 7, File: "/k"}}}); a.Active() != 7 {
		t.Errorf("the only key is the active one by default: %d", a.Active())
	}
	// Key material is refused: a document holds only the files' names.
	if _, err := DecodeState(strings.NewReader(`{"settings":{"redundancy":{"vrid":1,"interface":"eth0","auth":{"keys":[{"id":1,"key":"hex:00"}]}}},"services":[]}`)); err == nil {
		t.Error("a key in the document accepted")
	}
	// Unknown fields are refused.
	if _, err := DecodeState(strings.NewReader(`{"settings":{"redundancy":{"vrid":1,"interface":"eth0","priority":100}},"services":[]}`)); err == nil {
		t.Error("redundancy.priority (node-local) accepted in the document")
	}
}

func TestRedundancyValidation(t *testing.T) {
	for _, tc := range []struct {
		red, field, msg string
	}{
		{`{"vrid":0,"interface":"eth0"}`, "settings.redundancy.vrid", "0 is out of range 1..255"},
		{`{"vrid":256,"interface":"eth0"}`, "settings.redundancy.vrid", "256 is out of range 1..255"},
		{`{"vrid":1}`, "settings.redundancy.interface", `"" is not an interface name`},
		{`{"vrid":1,"interface":"eth0","advert_interval":0.005}`, "settings.redundancy.advert_interval", "0.005 is out of range 0.01..40.95 seconds"},
		{`{"vrid":1,"interface":"eth0","advert_interval":41}`, "settings.redundancy.advert_interval", "41 is out of range"},
		{`{"vrid":1,"interface":"eth0","advert_interval":0.015}`, "settings.redundancy.advert_interval", "0.015 is not a whole number of hundredths"},
		{`{"vrid":1,"interface":"eth0","advert_interval":-1}`, "settings.redundancy.advert_interval", "-1 is out of range"},
		{`{"vrid":1,"interface":"eth0","unicast_peers":["198.18.0.300"]}`, "settings.redundancy.unicast_peers[0]", `"198.18.0.300" is not an IP address`},
		{`{"vrid":1,"interface":"eth0","unicast_peers":["198.18.0.2","2001:db8::2"]}`, "settings.redundancy.unicast_peers[1]", "2001:db8::2 is not of the family of unicast_peers[0]"},
		{`{"vrid":1,"interface":"eth0","unicast_peers":["198.18.0.2","198.18.0.2"]}`, "settings.redundancy.unicast_peers[1]", "198.18.0.2 is already unicast_peers[0]"},
		{`{"vrid":1,"interface":"eth0","unicast_peers":["224.0.0.18"]}`, "settings.redundancy.unicast_peers[0]", "not a unicast address"},
		{`{"vrid":1,"interface":"eth0","preempt_delay":1001}`, "settings.redundancy.preempt_delay", "1001 is out of range 0..1000 seconds"},
		{`{"vrid":1,"interface":"eth0","sync_id":256}`, "settings.redundancy.sync_id", "256 is out of range 0..255"},
		{`{"vrid":1,"interface":"eth0","sync_interface":"a b"}`, "settings.redundancy.sync_interface", `"a b" is not an interface name`},
		{`{"vrid":1,"interface":"eth0","track_interfaces":["eth1","x/y"]}`, "settings.redundancy.track_interfaces[1]", `"x/y" is not an interface name`},
		{`{"vrid":1,"interface":"eth0","garp_count":-1}`, "settings.redundancy.garp_count", "-1 is out of range 0..1000"},
		{`{"vrid":1,"interface":"eth0","garp_repeat_delay":0.001}`, "settings.redundancy.garp_repeat_delay", "not a whole number of hundredths"},
		{`{"vrid":1,"interface":"eth0","auth":{"keys":[]}}`, "settings.redundancy.auth.keys", "at least one key is needed"},
		{`{"vrid":1,"interface":"eth0","auth":{"keys":[{"id":0,"file":"/k"}]}}`, "settings.redundancy.auth.keys[0].id", "0 is out of range 1..255"},
		{`{"vrid":1,"interface":"eth0","auth":{"keys":[{"id":1,"file":"/k"},{"id":1,"file":"/j"}],"active_key":1}}`, "settings.redundancy.auth.keys[1].id", "1 is already keys[0]"},
		{`{"vrid":1,"interface":"eth0","auth":{"keys":[{"id":1}]}}`, "settings.redundancy.auth.keys[0].file", "the key itself never goes in the document"},
		{`{"vrid":1,"interface":"eth0","auth":{"keys":[{"id":1,"file":"keys/k1"}]}}`, "settings.redundancy.auth.keys[0].file", `"keys/k1" is not a clean absolute path`},
		{`{"vrid":1,"interface":"eth0","auth":{"keys":[{"id":1,"file":"/etc/../k"}]}}`, "settings.redundancy.auth.keys[0].file", "not a clean absolute path"},
		{`{"vrid":1,"interface":"eth0","auth":{"keys":[{"id":1,"file":"/a"},{"id":2,"file":"/b"}]}}`, "settings.redundancy.auth.active_key", "with 2 keys, say which one signs"},
		{`{"vrid":1,"interface":"eth0","auth":{"keys":[{"id":1,"file":"/a"}],"active_key":3}}`, "settings.redundancy.auth.active_key", "3 is not the id of one of the keys"},
		{`{"vrid":1,"interface":"eth0","auth":{"keys":[{"id":1,"file":"/a"}],"mode":"strict"}}`, "settings.redundancy.auth.mode", `"strict" is not enforce, permissive or receive-only`},
		{`{"vrid":1,"interface":"eth0","auth":{"keys":[{"id":1,"file":"/a"}],"anti_replay":"none"}}`, "settings.redundancy.auth.anti_replay", `"none" is not time or monotonic`},
		{`{"vrid":1,"interface":"eth0","auth":{"keys":[{"id":1,"file":"/a"}],"time_window":301}}`, "settings.redundancy.auth.time_window", "301 is out of range 1..300"},
		{`{"vrid":1,"interface":"eth0","auth":{"keys":[{"id":1,"file":"/a"}],"anti_replay":"monotonic","time_window":5}}`, "settings.redundancy.auth.time_window", "for anti_replay time only"},
	} {
		t.Run(tc.field, func(t *testing.T) {
			wantProblem(t, `{"settings":{"redundancy":`+tc.red+`},"services":[]}`, tc.field, tc.msg)
		})
	}
}
