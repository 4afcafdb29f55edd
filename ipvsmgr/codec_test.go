package ipvsmgr

import (
	"bytes"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// slowDecode is DecodeState without the fast path: encoding/json, strict.
func slowDecode(data []byte) (*State, error) {
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	var st State
	if err := dec.Decode(&st); err != nil {
		return nil, err
	}
	if dec.More() {
		return nil, fmt.Errorf("trailing data")
	}
	return &st, nil
}

// checkFastDecode fails if the fast decoder accepted data with a result
// encoding/json would not give, or if a service it decoded does not encode
// back to what json.Marshal writes.
func checkFastDecode(t *testing.T, data []byte) (ok bool) {
	t.Helper()
	fast, ok := decodeFast(data)
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
	// its services' bytes.
	parts, ok := splitDocument(data)
	if stored, _ := json.Marshal(fast); !bytes.Equal(stored, data) {
		return true
	}
	raw := parts.services
	if !ok || len(raw) != len(fast.Services) {
		t.Fatalf("split: ok %v, %d services for %d: %s", ok, len(raw), len(fast.Services), data)
	}
	// Against itself, a document's reverse delta is all indexes, and undoing it gives the document back.
	if delta, err := ReverseDelta(data, data); err != nil {
		t.Fatalf("reverse delta of a stored document: %v", err)
	} else if back, err := UndoDelta(delta, data); err != nil || !bytes.Equal(back, data) {
		t.Fatalf("undo of its own delta %s gave %s (%v)", delta, back, err)
	}
	for i := range fast.Services {
		want, _ := json.Marshal(&fast.Services[i])
		if got := AppendService(nil, &fast.Services[i]); !bytes.Equal(got, want) {
			t.Fatalf("AppendService:\n got %s\nwant %s", got, want)
		}
		var back Service
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
		st, err := DecodeState(strings.NewReader(tc.doc))
		slow, slowErr := slowDecode([]byte(tc.doc))
		if (err == nil) != (slowErr == nil) {
			t.Errorf("DecodeState error %v, encoding/json error %v: %s", err, slowErr, tc.doc)
		} else if err == nil && !cmp.Equal(st, slow) {
			t.Errorf("DecodeState differs from encoding/json: %s", tc.doc)
		}
	}
}

// randomState covers every field, with strings json.Marshal escapes.
func randomState(r *rand.Rand, services int) *State {
	words := []string{"", "web", "dr", "wlc", "198.18.0.11", "2001:db8::1", "a<b>&c", `q"u\o`, "tab\there", "é", "\u2028", "\x7f"}
	w := func() string { return words[r.IntN(len(words))] }
	n := func() int { return []int{0, 1, -1, 80, 65535, 1 << 40}[r.IntN(6)] }
	st := &State{Services: []Service{}}
	for range services {
		s := Service{Name: w(), Protocol: w(), Address: w(), Port: n(), FWMark: uint32(r.IntN(3)), Interface: w(), Scheduler: w(),
			OnePacket: r.IntN(2) == 0, Persistence: n(), PersistenceNetmask: w(), Forwarding: w()}
		if r.IntN(2) == 0 {
			s.Match = []Match{{Protocol: w(), Ports: []int{n(), n()}}, {Protocol: w()}}
		}
		if r.IntN(2) == 0 {
			s.SchedulerFlags = []string{w(), w()}
		}
		if r.IntN(3) > 0 {
			e := r.IntN(2) == 0
			s.Enabled = &e
		}
		if r.IntN(3) == 0 {
			s.Check = randomCheck(r, w, n)
		}
		if r.IntN(3) == 0 {
			s.SorryServer = &SorryServer{Address: w(), Port: n()}
		}
		s.Quorum = []int{0, 0, 1, 2}[r.IntN(4)]
		if r.IntN(4) > 0 {
			s.Servers = []Server{}
		}
		for range r.IntN(4) {
			sv := Server{Name: w(), Address: w(), Port: n(), Forwarding: w(), UpperThreshold: n(), LowerThreshold: n()}
			if r.IntN(2) == 0 {
				wt := n()
				sv.Weight = &wt
			}
			if r.IntN(2) == 0 {
				e := r.IntN(2) == 0
				sv.Enabled = &e
			}
			if r.IntN(3) == 0 {
				sv.Health = w()
			}
			if r.IntN(3) == 0 {
				sv.Check = randomCheck(r, w, n)
			}
			s.Servers = append(s.Servers, sv)
		}
		st.Services = append(st.Services, s)
	}
	return st
}

// randomCheck sets each field of a check or leaves it unset, at random.
func randomCheck(r *rand.Rand, w func() string, n func() int) *Check {
	f := func() float64 { return []float64{0, 0.1, 1, 2.5, 1e-7, 1e21, 123456789.125, -3}[r.IntN(8)] }
	b := func() *bool {
		if r.IntN(3) == 0 {
			return nil
		}
		v := r.IntN(2) == 0
		return &v
	}
	c := &Check{Type: w(), Interval: f(), Timeout: f(), Rise: n(), Fall: n(), Address: w(), Port: n(), OnFailure: w(),
		StartHealthy: b(), Method: w(), Path: w(), Host: w(), ExpectBody: w(), TLSVerify: b(), SNI: w(), Send: w(),
		Expect: w(), UseRegex: b(), Protocol: w(), Name: w(), QType: w(), RCode: w(), DynamicWeight: b()}
	if r.IntN(2) == 0 {
		v := f()
		c.SlowStart = &v
	}
	if r.IntN(2) == 0 {
		c.ExpectStatus = []int{n(), 200}
	}
	if r.IntN(2) == 0 {
		c.Command = Argv{w(), w(), "%h:%p"}
	}
	return c
}

// Whatever json.Marshal writes for a state, the fast decoder takes, and
// AppendService writes the same bytes.
func TestFastCodecRoundTrip(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	for range 200 {
		st := randomState(r, 1+r.IntN(5))
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
	if _, err := DecodeState(strings.NewReader(bad)); err == nil || !strings.Contains(err.Error(), `unknown field "weight"`) {
		t.Fatalf("unknown field in a large document: %v", err)
	}
	bad = strings.Replace(doc, `{"name":"s7","address":"198.18.100.8","port":80`, `{"name":"s7","address":"198.18.100.8","port":"80"`, 1)
	if _, err := DecodeState(strings.NewReader(bad)); err == nil || !strings.Contains(err.Error(), `line 8: field "services.port"`) {
		t.Fatalf("type error in a large document: %v", err)
	}
}

// The fast decoder never accepts a document with a result encoding/json
// would not give.
func FuzzDecodeFast(f *testing.F) {
	f.Add([]byte(`{"settings":{"network":"dr"},"services":[{"name":"web","address":"198.18.0.100","port":80,"scheduler_flags":["sh-port"],"match":[{"protocol":"tcp","ports":[80]}],"enabled":true,"servers":[{"address":"198.18.0.11","weight":3,"enabled":null}]}],"imported":[{"source":"x","line":1,"key":"k","value":"v"}]}`))
	f.Add([]byte(`{"services":[{"name":"caf\u00e9 <&>","fwmark":7,"servers":null}]}`))
	f.Add([]byte(`{"services":[{"port":1e2,"port":0}]}`))
	f.Add([]byte(`{"services":[{"check":{"type":"exec","command":"/bin/x %h","interval":0.5},"sorry_server":{"address":"198.18.0.5"},"quorum":2,"servers":[{"address":"198.18.0.11","health":"up","check":{"port":81}}]}]}`))
	f.Fuzz(func(t *testing.T, data []byte) {
		checkFastDecode(t, data)
	})
}
