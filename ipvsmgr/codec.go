package ipvsmgr

import (
	"bytes"
	"encoding/json"
	"strconv"
	"unicode/utf8"
)

// Why this decoder stays (measured against encoding/json/v2, Go 1.26 with
// GOEXPERIMENT=jsonv2, by BenchmarkCodecVersusJSONv2 in codec_v2_bench_test.go
// on 1,000 services x 10 real servers, the contenders taking turns in one
// run, on a shared 2-core machine at load 25-32): json/v2 with
// RejectUnknownMembers took 1.7x-3.0x the decoder's time (27,622 allocations
// here, 38,537 there), and json/v1 2.4x-3.6x. That is past the 1.5x a
// library would be allowed, so the decoder stays, with encoding/json
// behind it for the diagnostics (field paths come from Validate, not from
// here). Encoding needs no such help: json.Marshal writes the stored form
// (EncodeService). The bailout panic is the decoder's only way out of a
// deep walk; it never leaves run, which recovers it and re-panics anything
// else.
//
// A director's document has thousands of services, and every write decodes
// one: encoding/json's reflection made that most of the time of a
// one-weight change. The decoder is checked against encoding/json
// (FuzzDecodeFast, TestFastCodecRoundTrip): it gives up on anything it does
// not handle (nulls where encoding/json would leave a value alone, keys in
// another case, duplicate keys, floats, ...) and DecodeState then uses
// encoding/json, which also gives the diagnostic.

// decodeFast decodes a document; ok is false when it gave up.
func decodeFast(data []byte) (*State, bool) {
	st := &State{}
	ok := walkDocument(data, st, func(d *fastDecoder) {
		if d.null() {
			return
		}
		st.Services = []Service{}
		d.array(func() {
			st.Services = append(st.Services, Service{})
			d.service(&st.Services[len(st.Services)-1])
		})
	})
	return st, ok
}

// walkDocument decodes a document's settings and imported keys into st and
// calls services at the value of its services; ok is false when it gave up.
func walkDocument(data []byte, st *State, services func(d *fastDecoder)) bool {
	d := &fastDecoder{b: data}
	return d.run(func() {
		d.object(func(key []byte, seen *uint32) {
			switch string(key) {
			case "settings":
				d.once(seen, 0)
				d.strict(&st.Settings)
			case "services":
				d.once(seen, 1)
				services(d)
			case "imported":
				d.once(seen, 2)
				d.strict(&st.Imported)
			case SchemaKey:
				d.once(seen, 3)
				var ignored string // as stateDocument's: a string or null, then dropped
				d.strict(&ignored)
			default:
				d.fail()
			}
		})
		if d.ws() != len(d.b) {
			d.fail()
		}
	})
}

// bailout is what fail panics with; run recovers it.
type bailout struct{}

// run calls f, which reads d; ok is false when it gave up (fail).
func (d *fastDecoder) run(f func()) (ok bool) {
	defer func() {
		if r := recover(); r != nil {
			if _, bail := r.(bailout); !bail {
				panic(r)
			}
			ok = false
		}
	}()
	f()
	return true
}

type fastDecoder struct {
	b       []byte
	i       int
	intern  map[string]string // addresses, schedulers, ...: the same few strings recur across services
	ints    []int             // weights are allocated from here, a chunk at a time
	scratch []Server          // a service's servers are decoded here, then copied to a slice of their size
}

func (d *fastDecoder) fail() { panic(bailout{}) }

// ws skips white space and returns the offset of what follows.
func (d *fastDecoder) ws() int {
	for d.i < len(d.b) {
		switch d.b[d.i] {
		case ' ', '\t', '\n', '\r':
			d.i++
		default:
			return d.i
		}
	}
	return d.i
}

func (d *fastDecoder) peek() byte {
	if d.ws() >= len(d.b) {
		d.fail()
	}
	return d.b[d.i]
}

func (d *fastDecoder) expect(c byte) {
	if d.peek() != c {
		d.fail()
	}
	d.i++
}

func (d *fastDecoder) literal(s string) bool {
	d.ws()
	if bytes.HasPrefix(d.b[d.i:], []byte(s)) {
		d.i += len(s)
		return true
	}
	return false
}

func (d *fastDecoder) null() bool { return d.literal("null") }

// once refuses a key seen before in the same object.
func (d *fastDecoder) once(seen *uint32, bit uint) {
	if *seen&(1<<bit) != 0 {
		d.fail()
	}
	*seen |= 1 << bit
}

// object calls fn with each key, positioned at its value.
func (d *fastDecoder) object(fn func(key []byte, seen *uint32)) {
	d.expect('{')
	if d.peek() == '}' {
		d.i++
		return
	}
	var seen uint32
	for {
		key := d.strBytes()
		d.expect(':')
		fn(key, &seen)
		switch d.peek() {
		case ',':
			d.i++
		case '}':
			d.i++
			return
		default:
			d.fail()
		}
	}
}

// array calls fn for each element, positioned at it.
func (d *fastDecoder) array(fn func()) {
	d.expect('[')
	if d.peek() == ']' {
		d.i++
		return
	}
	for {
		fn()
		switch d.peek() {
		case ',':
			d.i++
		case ']':
			d.i++
			return
		default:
			d.fail()
		}
	}
}

// strBytes reads a string; one with escapes or bytes that are not ASCII
// is unquoted by encoding/json.
func (d *fastDecoder) strBytes() []byte {
	d.expect('"')
	start, plain := d.i, true
	for ; d.i < len(d.b); d.i++ {
		switch c := d.b[d.i]; {
		case c == '"':
			d.i++
			if plain {
				return d.b[start : d.i-1]
			}
			var s string
			if json.Unmarshal(d.b[start-1:d.i], &s) != nil {
				d.fail()
			}
			return []byte(s)
		case c == '\\':
			plain = false
			d.i++
		case c < 0x20:
			d.fail()
		case c >= utf8.RuneSelf:
			plain = false
		}
	}
	d.fail()
	return nil
}

func (d *fastDecoder) str() string {
	b := d.strBytes()
	if s, ok := d.intern[string(b)]; ok {
		return s
	}
	if d.intern == nil {
		d.intern = map[string]string{}
	}
	s := string(b)
	d.intern[s] = s
	return s
}

// integer reads an integer in [lo, hi]; a fraction or exponent gives up.
func (d *fastDecoder) integer(lo, hi int64) int64 {
	d.ws()
	start := d.i
	if d.i < len(d.b) && d.b[d.i] == '-' {
		d.i++
	}
	digits := d.i
	for d.i < len(d.b) && d.b[d.i] >= '0' && d.b[d.i] <= '9' {
		d.i++
	}
	n := d.i - digits
	if n == 0 || n > 18 || n > 1 && d.b[digits] == '0' {
		d.fail()
	}
	if d.i < len(d.b) {
		switch d.b[d.i] {
		case '.', 'e', 'E':
			d.fail()
		}
	}
	v, err := strconv.ParseInt(string(d.b[start:d.i]), 10, 64)
	if err != nil || v < lo || v > hi {
		d.fail()
	}
	return v
}

func (d *fastDecoder) int() int { return int(d.integer(-1<<62, 1<<62)) }

func (d *fastDecoder) bool() bool {
	switch {
	case d.literal("true"):
		return true
	case d.literal("false"):
		return false
	}
	d.fail()
	return false
}

func (d *fastDecoder) optInt() *int {
	if d.null() {
		return nil
	}
	if len(d.ints) == 0 {
		d.ints = make([]int, 256)
	}
	p := &d.ints[0]
	d.ints = d.ints[1:]
	*p = d.int()
	return p
}

func (d *fastDecoder) optBool() *bool {
	if d.null() {
		return nil
	}
	v := d.bool()
	return &v
}

// skip passes over any JSON value and returns its bytes, unchecked: strict
// checks what it decodes, and a stored service is either byte-equal to a new
// encoding or decoded by encoding/json (the store's ChangesTo).
func (d *fastDecoder) skip() []byte {
	start := d.ws()
	depth := 0
	for d.i < len(d.b) {
		switch d.b[d.i] {
		case '"':
			d.skipString()
			if depth == 0 {
				return d.b[start:d.i]
			}
		case '{', '[':
			depth++
			d.i++
		case '}', ']':
			if depth == 0 {
				return d.b[start:d.i] // the end of a number or literal
			}
			depth--
			d.i++
			if depth == 0 {
				return d.b[start:d.i]
			}
		case ',', ' ', '\t', '\n', '\r':
			if depth == 0 {
				return d.b[start:d.i]
			}
			d.i++
		default:
			d.i++
		}
	}
	d.fail()
	return nil
}

// skipString passes over a string, escapes and all.
func (d *fastDecoder) skipString() {
	d.i++
	for {
		j := bytes.IndexByte(d.b[d.i:], '"')
		if j < 0 {
			d.fail()
		}
		d.i += j + 1
		backslashes := 0
		for k := d.i - 2; d.b[k] == '\\'; k-- {
			backslashes++
		}
		if backslashes%2 == 0 {
			return
		}
	}
}

// strict decodes a small value with encoding/json, unknown fields refused.
func (d *fastDecoder) strict(v any) {
	if !decodeStrict(d.skip(), v) {
		d.fail()
	}
}

// decodeStrict decodes one whole JSON value, unknown fields refused.
func decodeStrict(raw []byte, v any) bool {
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.DisallowUnknownFields()
	return dec.Decode(v) == nil && dec.InputOffset() == int64(len(raw))
}

func (d *fastDecoder) strings() []string {
	if d.null() {
		return nil
	}
	out := []string{}
	d.array(func() { out = append(out, d.str()) })
	return out
}

// service reads a virtual service: its kernel fields and servers, then its
// health (two switches, each a screen).
func (d *fastDecoder) service(s *Service) {
	d.object(func(key []byte, seen *uint32) {
		if !d.serviceKernel(key, seen, s) && !d.serviceHealth(key, seen, s) {
			d.fail()
		}
	})
}

// serviceKernel reads the key if it is one of what the kernel is told of a
// service, or its servers.
func (d *fastDecoder) serviceKernel(key []byte, seen *uint32, s *Service) bool {
	switch string(key) {
	case "name":
		d.once(seen, 0)
		s.Name = d.str()
	case "protocol":
		d.once(seen, 1)
		s.Protocol = d.str()
	case "address":
		d.once(seen, 2)
		s.Address = d.str()
	case "port":
		d.once(seen, 3)
		s.Port = d.int()
	case "fwmark":
		d.once(seen, 4)
		s.FWMark = uint32(d.integer(0, 1<<32-1))
	case "match":
		d.once(seen, 5)
		if d.null() {
			return true
		}
		s.Match = []Match{}
		d.array(func() {
			s.Match = append(s.Match, Match{})
			d.match(&s.Match[len(s.Match)-1])
		})
	case "interface":
		d.once(seen, 6)
		s.Interface = d.str()
	case "scheduler":
		d.once(seen, 7)
		s.Scheduler = d.str()
	case "scheduler_flags":
		d.once(seen, 8)
		s.SchedulerFlags = d.strings()
	case "one_packet":
		d.once(seen, 9)
		s.OnePacket = d.bool()
	case "persistence":
		d.once(seen, 10)
		s.Persistence = d.int()
	case "persistence_netmask":
		d.once(seen, 11)
		s.PersistenceNetmask = d.str()
	case "forwarding":
		d.once(seen, 12)
		s.Forwarding = d.str()
	case "enabled":
		d.once(seen, 13)
		s.Enabled = d.optBool()
	case "servers":
		d.once(seen, 14)
		if d.null() {
			return true
		}
		d.scratch = d.scratch[:0]
		d.array(func() {
			d.scratch = append(d.scratch, Server{})
			d.server(&d.scratch[len(d.scratch)-1])
		})
		s.Servers = append(make([]Server, 0, len(d.scratch)), d.scratch...)
	default:
		return false
	}
	return true
}

// serviceHealth reads the key if it is one of a service's check, sorry
// server, quorum and alert fields.
func (d *fastDecoder) serviceHealth(key []byte, seen *uint32, s *Service) bool {
	switch string(key) {
	case "check":
		d.once(seen, 15)
		d.strict(&s.Check)
	case "sorry_server":
		d.once(seen, 16)
		d.strict(&s.SorryServer)
	case "quorum":
		d.once(seen, 17)
		s.Quorum = d.int()
	case "group":
		d.once(seen, 18)
		s.Group = d.str()
	case "hysteresis":
		d.once(seen, 19)
		s.Hysteresis = d.int()
	case "quorum_up":
		d.once(seen, 20)
		d.strict(&s.QuorumUp)
	case "quorum_down":
		d.once(seen, 21)
		d.strict(&s.QuorumDown)
	case "smtp_alert":
		d.once(seen, 22)
		s.SMTPAlert = d.optBool()
	default:
		return false
	}
	return true
}

func (d *fastDecoder) match(m *Match) {
	d.object(func(key []byte, seen *uint32) {
		switch string(key) {
		case "protocol":
			d.once(seen, 0)
			m.Protocol = d.str()
		case "ports":
			d.once(seen, 1)
			if d.null() {
				return
			}
			m.Ports = []int{}
			d.array(func() { m.Ports = append(m.Ports, d.int()) })
		default:
			d.fail()
		}
	})
}

func (d *fastDecoder) server(s *Server) {
	d.object(func(key []byte, seen *uint32) {
		switch string(key) {
		case "name":
			d.once(seen, 0)
			s.Name = d.str()
		case "address":
			d.once(seen, 1)
			s.Address = d.str()
		case "port":
			d.once(seen, 2)
			s.Port = d.int()
		case "weight":
			d.once(seen, 3)
			s.Weight = d.optInt()
		case "forwarding":
			d.once(seen, 4)
			s.Forwarding = d.str()
		case "upper_threshold":
			d.once(seen, 5)
			s.UpperThreshold = d.int()
		case "lower_threshold":
			d.once(seen, 6)
			s.LowerThreshold = d.int()
		case "enabled":
			d.once(seen, 7)
			s.Enabled = d.optBool()
		case "health":
			d.once(seen, 8)
			s.Health = d.str()
		case "check":
			d.once(seen, 9)
			d.strict(&s.Check)
		case "drained":
			d.once(seen, 10)
			s.Drained = d.bool()
		case "tunnel":
			d.once(seen, 11)
			s.Tunnel = d.str()
		case "tunnel_port":
			d.once(seen, 12)
			s.TunnelPort = d.int()
		case "tunnel_checksum":
			d.once(seen, 13)
			s.TunnelChecksum = d.str()
		case "notify_up":
			d.once(seen, 14)
			d.strict(&s.NotifyUp)
		case "notify_down":
			d.once(seen, 15)
			d.strict(&s.NotifyDown)
		case "smtp_alert":
			d.once(seen, 16)
			s.SMTPAlert = d.optBool()
		default:
			d.fail()
		}
	})
}

// EncodeService is one service's bytes in the stored form, as json.Marshal
// writes them: what the compile cache keys on and the store keeps.
func EncodeService(s *Service) []byte {
	b, err := json.Marshal(s)
	if err != nil { // a Service holds only strings, numbers, bools, lists and structs of them
		panic("ipvsmgr: encode a service: " + err.Error())
	}
	return b
}
