package ipvsmgr_test

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/ipvsctl/ipvsctl/ipvsmgr"
	"github.com/ipvsctl/ipvsctl/ipvsmgr/ipvsmgrtest"
)

// slowDecode is DecodeState without the fast path: encoding/json, strict.
func slowDecode(data []byte) (*ipvsmgr.State, error) { return ipvsmgr.DecodeJSON(data) }

// checkFastDecode fails if the fast decoder accepted data with a result
// encoding/json would not give, or if a service it decoded does not encode
// back to what json.Marshal writes.
func checkFastDecode(t *testing.T, data []byte) (ok bool) {
	t.Helper()
	fast, ok := ipvsmgr.DecodeFast(data)
	if !ok {
		return false
	}
	slow, err := slowDecode(data)
	if err != nil {
		t.Fatalf("fast decoder accepted what encoding/json refuses (%v):\n%s", err, data)
	}
	if d := cmp.Diff(slow, fast); d != "" {
		t.Fatalf("fast and encoding/json decoding differ (-json +fast):\n%s\n%s", d, data)
	}
	// A document in the stored form (as json.Marshal writes it) splits into
	// its services' bytes, and joins back to itself.
	parts, ok := ipvsmgr.SplitStored(data)
	if stored, _ := json.Marshal(fast); !bytes.Equal(stored, data) {
		return true
	}
	raw := parts.Services
	if !ok || len(raw) != len(fast.Services) {
		t.Fatalf("split: ok %v, %d services for %d: %s", ok, len(raw), len(fast.Services), data)
	}
	if back := parts.Join(); !bytes.Equal(back, data) {
		t.Fatalf("split and joined, a stored document gave\n%s\nnot\n%s", back, data)
	}
	if settings, imported, ok := parts.DecodeSettingsAndImported(); !ok || !cmp.Equal(settings, fast.Settings) || !cmp.Equal(imported, fast.Imported) {
		t.Fatalf("settings and imported keys of a stored document: ok %v, %+v %+v", ok, settings, imported)
	}
	for i := range fast.Services {
		var back ipvsmgr.Service
		if err := json.Unmarshal(raw[i], &back); err != nil || !cmp.Equal(back, fast.Services[i]) {
			t.Fatalf("service %d's bytes %s do not decode to it (%v)", i, raw[i], err)
		}
	}
	return true
}

func TestFastDecode(t *testing.T) {
	for _, tc := range []struct {
		doc  string
		fast bool // the fast decoder takes it (else encoding/json does)
	}{
		{`{}`, true},
		{`{"services":null}`, true},
		{`{"services":[]}`, true},
		{` { "settings" : { "network" : "nat", "tcp_timeout": 900 } ,` + "\n\t\r" + `"services" : [ ] } `, true},
		{`{"services":[{"name":"web","protocol":"tcp","address":"198.18.0.100","port":80,"scheduler":"sh","scheduler_flags":["sh-port","sh-fallback"],` +
			`"one_packet":true,"persistence":300,"persistence_netmask":"255.255.255.0","forwarding":"nat","interface":"eth0","enabled":false,` +
			`"servers":[{"name":"r1","address":"198.18.0.11","port":8080,"weight":0,"forwarding":"dr","upper_threshold":100,"lower_threshold":10,"enabled":true},{"address":"198.18.0.12","weight":null,"enabled":null}]}]}`, true},
		{`{"services":[{"fwmark":4294967295,"address":"2001:db8::1","match":[{"protocol":"tcp","ports":[80,443]},{"protocol":"udp","ports":null},{"protocol":"sctp","ports":[]}],"servers":null}]}`, true},
		{`{"services":[{"name":"caf\u00e9 \"x\" <&> \\ \/ \n","address":"198.18.0.1","servers":[]}]}`, true},
		{`{"services":[{"name":"日本","address":"198.18.0.1","port":-0,"servers":[]}]}`, true},
		{`{"imported":[{"source":"lvs.cf","line":3,"key":"send","value":"GET / HTTP/1.0\r\n"}],"services":[]}`, true},
		{`{"services":[{"address":"198.18.0.1","check":{"type":"http","interval":0.5,"timeout":1e-7,"expect_status":[200,204],"command":"/bin/check -h %h 'a b'","slow_start":0},` +
			`"sorry_server":{"address":"198.18.0.50","port":8080},"quorum":2,"servers":[{"address":"198.18.0.11","health":"down","check":{"port":8081,"tls_verify":true,"command":["x","y"]}},{"address":"198.18.0.12","check":null}]}]}`, true},
		{`{"services":[{"check":{"type":"tcp","Type":"http"},"servers":[]}]}`, true}, // encoding/json's own case-folding, inside the check
		{`{"services":[{"check":{"typ":"tcp"},"servers":[]}]}`, false},
		{`{"services":[{"check":{"command":"a 'b"},"servers":[]}]}`, false},
		{`{"services":[{"check":{},"check":{},"servers":[]}]}`, false},
		{`{"services":[{"servers":[{"address":"198.18.0.11","check":{"interval":"2"}}]}]}`, false},
		// Left to encoding/json, which gives the same result or the diagnostic.
		{`{"Services":[]}`, false},
		{`{"services":[{"Name":"web"}]}`, false},
		{`{"services":[],"services":[]}`, false},
		{`{"services":[{"port":80,"port":81}]}`, false},
		{`{"services":[{"port":80.0}]}`, false},
		{`{"services":[{"port":1e2}]}`, false},
		{`{"services":[{"port":012}]}`, false},
		{`{"services":[{"port":"80"}]}`, false},
		{`{"services":[{"port":null}]}`, false},
		{`{"services":[null]}`, false},
		{`{"services":[{"fwmark":-1}]}`, false},
		{`{"services":[{"fwmark":4294967296}]}`, false},
		{`{"services":[{"weight":1}]}`, false},
		{`{"settings":{"networks":"dr"}}`, false},
		{`{"services":[]} {}`, false},
		{`{"services":[]}]`, false},
		{`null`, false},
		{`{"services":[{"name":"a` + "\x01" + `"}]}`, false},
		{`{"services":[{"name":"\xff"}]}`, false}, // not a JSON escape
		{"{\"services\":[{\"name\":\"a\xffb\",\"address\":\"198.18.0.1\",\"servers\":[]}]}", true}, // invalid UTF-8, replaced as encoding/json does
		{`{"services":[{"servers":[{"address":"198.18.0.11",}]}]}`, false},
		{`{"services":[`, false},
	} {
		if got := checkFastDecode(t, []byte(tc.doc)); got != tc.fast {
			t.Errorf("fast decoder took it: %v, want %v: %s", got, tc.fast, tc.doc)
		}
		// Whichever decoder takes it, DecodeState agrees with encoding/json.
		st, err := ipvsmgr.DecodeState(strings.NewReader(tc.doc))
		slow, slowErr := slowDecode([]byte(tc.doc))
		if (err == nil) != (slowErr == nil) {
			t.Errorf("DecodeState error %v, encoding/json error %v: %s", err, slowErr, tc.doc)
		} else if err == nil && !cmp.Equal(st, slow) {
			t.Errorf("DecodeState differs from encoding/json: %s", tc.doc)
		}
	}
}

// Only the stored form splits: the keys in Join's order, no white space.
func TestSplitStored(t *testing.T) {
	for _, doc := range []string{`{"settings":{},"services":null}`, `{"settings":{"network":"dr"},"services":[{"address":"198.18.0.1"},{}],"imported":[]}`} {
		p, ok := ipvsmgr.SplitStored([]byte(doc))
		if !ok || p.Len() != len(doc) || string(p.Join()) != doc {
			t.Errorf("split %v, joined %s: %s", ok, p.Join(), doc)
		}
	}
	for _, doc := range []string{`{"services":[]}`, `{"services":[],"settings":{}}`, `{"settings":{}, "services":[]}`, `{"settings":{},"services":[ ]}`,
		`{"settings":{},"imported":[],"services":[]}`, `{"settings":{},"services":[]} `, `{"settings":{},"services":[],"x":1}`} {
		if _, ok := ipvsmgr.SplitStored([]byte(doc)); ok {
			t.Errorf("split, not in the stored form: %s", doc)
		}
	}
}

// Whatever json.Marshal writes for a state, the fast decoder takes, and
// AppendService writes the same bytes.
func TestFastCodecRoundTrip(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	for range 200 {
		st := ipvsmgrtest.RandomState(r, 1+r.IntN(5))
		doc, err := json.Marshal(st)
		if err != nil {
			t.Fatal(err)
		}
		if !checkFastDecode(t, doc) {
			t.Fatalf("fast decoder gave up on json.Marshal's output:\n%s", doc)
		}
		var indented bytes.Buffer
		_ = st.Encode(&indented)
		if !checkFastDecode(t, indented.Bytes()) {
			t.Fatalf("fast decoder gave up on an indented document:\n%s", indented.Bytes())
		}
	}
}

// A large document takes the fast path; an error in it still names its line.
func TestLargeDocumentErrors(t *testing.T) {
	var b strings.Builder
	b.WriteString(`{"settings":{"network":"nat","tcp_timeout":900},"services":[`)
	for i := range 600 {
		if i > 0 {
			b.WriteString(",\n")
		}
		fmt.Fprintf(&b, `{"name":"s%d","address":"198.18.%d.%d","port":80,"servers":[{"address":"198.18.0.11","weight":%d},{"address":"198.18.0.12"}]}`, i, 100+i/250, 1+i%250, i%7)
	}
	b.WriteString("]}")
	doc := b.String()
	if !checkFastDecode(t, []byte(doc)) {
		t.Fatal("fast decoder gave up on a valid document")
	}
	bad := strings.Replace(doc, `"name":"s500",`, `"name":"s500","weight":2,`, 1)
	if _, err := ipvsmgr.DecodeState(strings.NewReader(bad)); err == nil || !strings.Contains(err.Error(), `unknown field "weight"`) {
		t.Fatalf("unknown field in a large document: %v", err)
	}
	bad = strings.Replace(doc, `{"name":"s7","address":"198.18.100.8","port":80`, `{"name":"s7","address":"198.18.100.8","port":"80"`, 1)
	if _, err := ipvsmgr.DecodeState(strings.NewReader(bad)); err == nil || !strings.Contains(err.Error(), `line 8: field "services.port"`) {
		t.Fatalf("type error in a large document: %v", err)
	}
}

// The fast decoder never accepts a document with a result encoding/json
// would not give.
func FuzzDecodeFast(f *testing.F) {
	f.Add([]byte(`{"settings":{"network":"dr"},"services":[{"name":"web","address":"198.18.0.100","port":80,"scheduler_flags":["sh-port"],"match":[{"protocol":"tcp","ports":[80]}],"enabled":true,"servers":[{"address":"198.18.0.11","weight":3,"enabled":null}]}],"imported":[{"source":"x","line":1,"key":"k","value":"v"}]}`))
	f.Add([]byte(`{"services":[{"name":"caf\u00e9 <&>","fwmark":7,"servers":null}]}`))
	f.Add([]byte(`{"services":[{"port":1e2,"port":0}]}`))
	f.Add([]byte(`{"$schema":"./state.schema.json","services":[],"$schema":null}`))
	f.Add([]byte(`{"services":[{"check":{"type":"exec","command":"/bin/x %h","interval":0.5},"sorry_server":{"address":"198.18.0.5"},"quorum":2,"servers":[{"address":"198.18.0.11","health":"up","check":{"port":81}}]}]}`))
	f.Fuzz(func(t *testing.T, data []byte) {
		checkFastDecode(t, data)
	})
}

// An editor's "$schema" key is accepted and dropped by both decoders, the
// same way (a string or null; anything else refused); every other unknown
// key stays an error.
func TestSchemaKeyIsAcceptedAndDropped(t *testing.T) {
	plain := `{"services":[{"name":"web","address":"198.18.0.100","port":80,"servers":[{"address":"198.18.0.11"}]}]}`
	want, err := ipvsmgr.DecodeState(strings.NewReader(plain))
	if err != nil {
		t.Fatal(err)
	}
	for _, doc := range []string{
		`{"$schema":"https://example.org/state.schema.json",` + plain[1:],
		`{"$schema":"./docs/state.schema.json","services":[{"name":"web","address":"198.18.0.100","port":80,"servers":[{"address":"198.18.0.11"}]}],"settings":{}}`,
		`{"services":[{"name":"web","address":"198.18.0.100","port":80,"servers":[{"address":"198.18.0.11"}]}],"$schema":null}`,
	} {
		fast, ok := ipvsmgr.DecodeFast([]byte(doc))
		if !ok {
			t.Errorf("fast decoder gave up on %s", doc)
		}
		slow, err := ipvsmgr.DecodeJSON([]byte(doc))
		if err != nil {
			t.Fatalf("encoding/json path refused %s: %v", doc, err)
		}
		got, err := ipvsmgr.DecodeState(strings.NewReader(doc))
		if err != nil {
			t.Fatal(err)
		}
		for name, st := range map[string]*ipvsmgr.State{"fast": fast, "json": slow, "DecodeState": got} {
			if d := cmp.Diff(want, st); d != "" {
				t.Errorf("%s decoding of %s differs from the document without $schema:\n%s", name, doc, d)
			}
			var out bytes.Buffer
			if err := st.Encode(&out); err != nil || strings.Contains(out.String(), "$schema") {
				t.Errorf("%s: re-encoded %q (%v): $schema kept", name, out.String(), err)
			}
		}
	}
	for _, doc := range []string{
		`{"$schema":5,"services":[]}`,
		`{"$schema":{"a":1},"services":[]}`,
		`{"$id":"x","services":[]}`,
		`{"services":[{"$schema":"x","address":"198.18.0.100","port":80,"servers":[]}]}`,
		`{"settings":{"$schema":"x"},"services":[]}`,
	} {
		if _, ok := ipvsmgr.DecodeFast([]byte(doc)); ok {
			t.Errorf("fast decoder accepted %s", doc)
		}
		_, err := ipvsmgr.DecodeState(strings.NewReader(doc))
		var ve *ipvsmgr.ValidationError
		if !errors.As(err, &ve) || ve.Problems[0].Field != "document" {
			t.Errorf("%s: got %v, want a document error", doc, err)
		}
	}
}
