package ipvsmgr

import (
	"bytes"
	"encoding/json"
	"math"
	"strconv"
	"unicode/utf8"
)

// Why this codec stays (measured against encoding/json/v2, Go 1.26 with
// GOEXPERIMENT=jsonv2, by BenchmarkCodecVersusJSONv2 in codec_v2_bench_test.go
// on 1,000 services x 10 real servers, the contenders taking turns in one
// run, on a shared 2-core machine at load 25-32): decoding, json/v2 with
// RejectUnknownMembers took 1.7x-3.0x the decoder's time (27,622 allocations
// here, 38,537 there), and json/v1 2.4x-3.6x. That is past the 1.5x a
// library would be allowed, so the decoder stays, with encoding/json
// behind it for the diagnostics (field paths come from Validate, not from
// here). Encoding a whole document, json/v1 took 0.7x-0.9x the time of
// AppendService over every service and json/v2 0.95x-2.9x: the encoder is
// not kept for speed of a whole document but because the compile cache and
// the stored form need one service's bytes exactly as json.Marshal writes
// them, checked by TestFastCodecRoundTrip. The bailout panic is the
// decoder's only way out of a deep walk; it never leaves run, which
// recovers it and re-panics anything else.
//
// A director's document has thousands of services, and every write decodes
// one and encodes one: encoding/json's reflection made that most of the time
// of a one-weight change. This file decodes and encodes services directly.
// Both are checked against encoding/json (FuzzDecodeFast, TestFastCodecRoundTrip):
// the decoder gives up on anything it does not handle (nulls where
// encoding/json would leave a value alone, keys in another case, duplicate
// keys, floats, ...) and DecodeState then uses encoding/json, which also
// gives the diagnostic; the encoder writes exactly what json.Marshal writes.

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

func (d *fastDecoder) service(s *Service) {
	d.object(func(key []byte, seen *uint32) {
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
				return
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
		case "servers":
			d.once(seen, 14)
			if d.null() {
				return
			}
			d.scratch = d.scratch[:0]
			d.array(func() {
				d.scratch = append(d.scratch, Server{})
				d.server(&d.scratch[len(d.scratch)-1])
			})
			s.Servers = append(make([]Server, 0, len(d.scratch)), d.scratch...)
		default:
			d.fail()
		}
	})
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
		default:
			d.fail()
		}
	})
}

// object writes a JSON object's fields in order, as json.Marshal writes a
// struct whose fields have omitempty: a field's name, then its value.
type object struct {
	b     []byte
	comma bool
}

func (o *object) field(name string) {
	if o.comma {
		o.b = append(o.b, ',')
	}
	o.comma = true
	o.b = append(append(append(o.b, '"'), name...), `":`...)
}

func (o *object) str(name, v string) {
	if v != "" {
		o.field(name)
		o.b = appendString(o.b, v)
	}
}

func (o *object) num(name string, v int64) {
	if v != 0 {
		o.field(name)
		o.b = strconv.AppendInt(o.b, v, 10)
	}
}

func (o *object) boolean(name string, v *bool) {
	if v != nil {
		o.field(name)
		o.b = strconv.AppendBool(o.b, *v)
	}
}

// list writes a non-empty list field, each element by elem.
func list[T any](o *object, name string, vs []T, elem func(b []byte, v T) []byte) {
	if len(vs) == 0 {
		return
	}
	o.field(name)
	o.b = append(o.b, '[')
	for i, v := range vs {
		if i > 0 {
			o.b = append(o.b, ',')
		}
		o.b = elem(o.b, v)
	}
	o.b = append(o.b, ']')
}

// AppendService appends the service as json.Marshal writes it.
func AppendService(b []byte, s *Service) []byte {
	o := &object{b: append(b, '{')}
	o.str("name", s.Name)
	o.str("protocol", s.Protocol)
	o.str("address", s.Address)
	o.num("port", int64(s.Port))
	o.num("fwmark", int64(s.FWMark))
	if len(s.Match) > 0 {
		o.field("match")
		o.b = append(o.b, '[')
		for i := range s.Match {
			if i > 0 {
				o.b = append(o.b, ',')
			}
			o.b = appendMatch(o.b, &s.Match[i])
		}
		o.b = append(o.b, ']')
	}
	o.str("interface", s.Interface)
	o.str("scheduler", s.Scheduler)
	list(o, "scheduler_flags", s.SchedulerFlags, appendString)
	if s.OnePacket {
		o.field("one_packet")
		o.b = append(o.b, "true"...)
	}
	o.num("persistence", int64(s.Persistence))
	o.str("persistence_netmask", s.PersistenceNetmask)
	o.str("forwarding", s.Forwarding)
	o.boolean("enabled", s.Enabled)
	if s.Check != nil {
		o.field("check")
		o.b = appendCheck(o.b, s.Check)
	}
	if s.SorryServer != nil {
		o.field("sorry_server")
		o.b = appendString(append(o.b, `{"address":`...), s.SorryServer.Address)
		if s.SorryServer.Port != 0 {
			o.b = strconv.AppendInt(append(o.b, `,"port":`...), int64(s.SorryServer.Port), 10)
		}
		o.b = append(o.b, '}')
	}
	o.num("quorum", int64(s.Quorum))
	o.num("hysteresis", int64(s.Hysteresis))
	list(o, "quorum_up", s.QuorumUp, appendString)
	list(o, "quorum_down", s.QuorumDown, appendString)
	o.str("group", s.Group)
	o.field("servers")
	if s.Servers == nil {
		o.b = append(o.b, "null"...)
	} else {
		o.b = append(o.b, '[')
		for i := range s.Servers {
			if i > 0 {
				o.b = append(o.b, ',')
			}
			o.b = appendServer(o.b, &s.Servers[i])
		}
		o.b = append(o.b, ']')
	}
	return append(o.b, '}')
}

func appendMatch(b []byte, m *Match) []byte {
	b = appendString(append(b, `{"protocol":`...), m.Protocol)
	b = append(b, `,"ports":`...)
	if m.Ports == nil {
		return append(b, "null}"...)
	}
	b = append(b, '[')
	for i, p := range m.Ports {
		if i > 0 {
			b = append(b, ',')
		}
		b = strconv.AppendInt(b, int64(p), 10)
	}
	return append(b, "]}"...)
}

func appendServer(b []byte, s *Server) []byte {
	if s.Name != "" {
		b = appendString(append(b, `{"name":`...), s.Name)
		b = append(b, `,"address":`...)
	} else {
		b = append(b, `{"address":`...)
	}
	b = appendString(b, s.Address)
	if s.Port != 0 {
		b = strconv.AppendInt(append(b, `,"port":`...), int64(s.Port), 10)
	}
	if s.Weight != nil {
		b = strconv.AppendInt(append(b, `,"weight":`...), int64(*s.Weight), 10)
	}
	if s.Forwarding != "" {
		b = appendString(append(b, `,"forwarding":`...), s.Forwarding)
	}
	if s.Tunnel != "" {
		b = appendString(append(b, `,"tunnel":`...), s.Tunnel)
	}
	if s.TunnelPort != 0 {
		b = strconv.AppendInt(append(b, `,"tunnel_port":`...), int64(s.TunnelPort), 10)
	}
	if s.TunnelChecksum != "" {
		b = appendString(append(b, `,"tunnel_checksum":`...), s.TunnelChecksum)
	}
	if s.UpperThreshold != 0 {
		b = strconv.AppendInt(append(b, `,"upper_threshold":`...), int64(s.UpperThreshold), 10)
	}
	if s.LowerThreshold != 0 {
		b = strconv.AppendInt(append(b, `,"lower_threshold":`...), int64(s.LowerThreshold), 10)
	}
	if s.Enabled != nil {
		b = strconv.AppendBool(append(b, `,"enabled":`...), *s.Enabled)
	}
	if s.Drained {
		b = append(b, `,"drained":true`...)
	}
	if s.Health != "" {
		b = appendString(append(b, `,"health":`...), s.Health)
	}
	if s.Check != nil {
		b = appendCheck(append(b, `,"check":`...), s.Check)
	}
	return append(b, '}')
}

// appendString quotes s as json.Marshal does (HTML characters escaped).
func appendString(b []byte, s string) []byte {
	for i := 0; i < len(s); i++ {
		if c := s[i]; c < 0x20 || c >= utf8.RuneSelf || c == '"' || c == '\\' || c == '<' || c == '>' || c == '&' {
			q, _ := json.Marshal(s)
			return append(b, q...)
		}
	}
	return append(append(append(b, '"'), s...), '"')
}

// appendCheck appends a check as json.Marshal writes it.
func appendCheck(b []byte, c *Check) []byte {
	o := &object{b: append(b, '{')}
	flt := func(name string, v float64) {
		if v != 0 {
			o.field(name)
			o.b = appendFloat(o.b, v)
		}
	}
	o.str("type", c.Type)
	flt("interval", c.Interval)
	flt("timeout", c.Timeout)
	flt("fast_interval", c.FastInterval)
	flt("down_interval", c.DownInterval)
	o.num("rise", int64(c.Rise))
	o.num("fall", int64(c.Fall))
	o.str("address", c.Address)
	o.num("port", int64(c.Port))
	o.str("on_failure", c.OnFailure)
	if c.SlowStart != nil {
		o.field("slow_start")
		o.b = appendFloat(o.b, *c.SlowStart)
	}
	o.boolean("start_healthy", c.StartHealthy)
	if c.Warmup != nil {
		o.field("warmup")
		o.b = appendFloat(o.b, *c.Warmup)
	}
	o.str("method", c.Method)
	o.str("path", c.Path)
	o.str("host", c.Host)
	list(o, "expect_status", c.ExpectStatus, func(b []byte, v int) []byte { return strconv.AppendInt(b, int64(v), 10) })
	o.str("expect_body", c.ExpectBody)
	o.boolean("tls_verify", c.TLSVerify)
	o.str("sni", c.SNI)
	o.str("send", c.Send)
	o.str("expect", c.Expect)
	o.boolean("use_regex", c.UseRegex)
	o.str("protocol", c.Protocol)
	o.str("name", c.Name)
	o.str("qtype", c.QType)
	o.str("rcode", c.RCode)
	list(o, "command", c.Command, appendString)
	o.boolean("dynamic_weight", c.DynamicWeight)
	o.str("file", c.File)
	if c.FileWeight != nil {
		o.field("file_weight")
		o.b = strconv.AppendInt(o.b, int64(*c.FileWeight), 10)
	}
	o.boolean("file_reverse", c.FileReverse)
	return append(o.b, '}')
}

// appendFloat writes a float64 as encoding/json does (ES6 number form).
func appendFloat(b []byte, f float64) []byte {
	if math.IsNaN(f) || math.IsInf(f, 0) {
		q, _ := json.Marshal(f) // json.Marshal refuses these; so does the document
		return append(b, q...)
	}
	format := byte('f')
	if abs := math.Abs(f); abs != 0 && (abs < 1e-6 || abs >= 1e21) {
		format = 'e'
	}
	b = strconv.AppendFloat(b, f, format, -1, 64)
	if format == 'e' {
		// e-09 -> e-9, as encoding/json writes it
		if n := len(b); n >= 4 && b[n-4] == 'e' && b[n-3] == '-' && b[n-2] == '0' {
			b[n-2] = b[n-1]
			b = b[:n-1]
		}
	}
	return b
}
