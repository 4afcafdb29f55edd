package ipvsmgr

import (
	"bytes"
	"encoding/json"
	"reflect"
	"strings"
	"testing"
)

// A document of before the renames decodes as it did: drain_timeout is
// retire_timeout, settings.redundancy.unicast_peers is unicast_peers; it is written
// back under the new names only, and giving both names is refused.
func TestOldNamesDecode(t *testing.T) {
	old := `{"settings": {"network": "dr", "drain_timeout": 90, "redundancy": {"vrid": 51, "interface": "eth0",
	  "peers": ["198.18.0.1", "198.18.0.2"]}, "bgp": null}, "services": []}`
	st, err := DecodeState(strings.NewReader(old))
	if err != nil {
		t.Fatal(err)
	}
	if st.Settings.RetireTimeout != 90 || !reflect.DeepEqual(st.Settings.Redundancy.UnicastPeers, []string{"198.18.0.1", "198.18.0.2"}) {
		t.Fatalf("decoded: %+v %+v", st.Settings, st.Settings.Redundancy)
	}
	var b bytes.Buffer
	if err := st.Encode(&b); err != nil {
		t.Fatal(err)
	}
	out := b.String()
	if !strings.Contains(out, `"retire_timeout": 90`) || !strings.Contains(out, `"unicast_peers"`) || strings.Contains(out, "drain_timeout") || strings.Contains(out, `"peers"`) {
		t.Fatalf("written back:\n%s", out)
	}
	again, err := DecodeState(strings.NewReader(out))
	if err != nil || !reflect.DeepEqual(again.Settings, st.Settings) {
		t.Fatalf("the new names do not decode alike: %v %+v", err, again)
	}
	for _, c := range []struct{ doc, want string }{
		{`{"settings": {"drain_timeout": 90, "retire_timeout": 30}, "services": []}`, "drain_timeout is the old name of retire_timeout"},
		{`{"settings": {"redundancy": {"vrid": 1, "interface": "eth0", "peers": ["198.18.0.1"], "unicast_peers": ["198.18.0.2"]}}, "services": []}`, "peers is the old name of unicast_peers"},
		{"{\"settings\": {\n\"tcp_timeout\": \"x\"}, \"services\": []}", `field "settings.tcp_timeout": got JSON string, want int`},
		{`{"settings": {"redundancy": {"vrid": 1, "interface": 3}}, "services": []}`, `field "settings.redundancy.interface": got JSON number, want string`},
		{`{"settings": {"bogus": 1}, "services": []}`, `unknown field "bogus"`},
	} {
		_, err := DecodeState(strings.NewReader(c.doc))
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: %v, want %q", c.doc, err, c.want)
		}
	}
	// The API's settings patch takes a redundancy block alike.
	var red Redundancy
	if err := json.Unmarshal([]byte(`{"vrid": 1, "interface": "eth0", "peers": ["198.18.0.9"]}`), &red); err != nil || len(red.UnicastPeers) != 1 {
		t.Errorf("a redundancy block with peers: %v %+v", err, red)
	}
}
