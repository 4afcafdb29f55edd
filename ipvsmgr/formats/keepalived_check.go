package formats

import (
	"encoding/hex"
	"fmt"
	"math"
	"net/netip"
	"reflect"
	"strconv"
	"strings"

	"github.com/ipvsctl/ipvsctl/ipvsmgr"
)

// keepalived's checkers become checks. Where keepalived's behaviour differs
// from ipvsctl's defaults the check says keepalived's explicitly: a server
// is back at its first pass (rise 1), goes out after retry+1 failures, is
// checked every delay_loop (60 s unless set) with a 5 s connect timeout, and
// starts healthy unless the virtual_server says alpha. Its retries come
// delay_before_retry apart, ipvsctl's an interval apart: delay_before_retry
// is kept in imported, as is what a check cannot say (an HTTP digest, a
// second url, SMTP_CHECK...).

const (
	kaDefaultDelayLoop      = 60.0 // seconds
	kaDefaultConnectTimeout = 5.0  // seconds
)

// kaCheckers maps keepalived's checker blocks to check types and their
// default retry counts.
var kaCheckers = map[string]struct {
	typ   string
	retry int
}{
	"TCP_CHECK":  {"tcp", 1},
	"HTTP_GET":   {"http", 1},
	"SSL_GET":    {"https", 1},
	"MISC_CHECK": {"exec", 0},
	"DNS_CHECK":  {"dns", 3},
	"UDP_CHECK":  {"send_expect", 1},
}

// kaCheckSettings are the checker settings keepalived lets a virtual_server
// and a real_server set for the checkers under them.
type kaCheckSettings struct {
	delayLoop, connectTimeout, retry *kaNode
	inhibit, virtualhost             *kaNode
	alpha                            bool
}

// setting takes a virtual_server's or real_server's statement c if it is a
// checker setting.
func (s *kaCheckSettings) setting(c *kaNode) bool {
	switch c.word(0) {
	case "delay_loop":
		s.delayLoop = c
	case "connect_timeout":
		s.connectTimeout = c
	case "retry", "nb_get_retry":
		s.retry = c
	case "inhibit_on_failure":
		s.inhibit = c
	case "virtualhost":
		s.virtualhost = c
	default:
		return false
	}
	return true
}

// kaCheck is a real server's check as read, with the lines its fields came
// from ("" the check itself), to be placed on the service or the server.
type kaCheck struct {
	check *ipvsmgr.Check
	lines map[string]int
}

// checker maps one checker block; nil when it cannot be mapped (the caller
// keeps it whole).
func (k *kaImporter) checker(scope string, n *kaNode, inherited kaCheckSettings) (*kaCheck, error) {
	kind, ok := kaCheckers[n.word(0)]
	if !ok {
		return nil, nil
	}
	s := inherited
	c := &ipvsmgr.Check{Type: kind.typ}
	lines := map[string]int{"": n.line, "type": n.line}
	scope += " " + n.header()
	var misc struct{ timeout *kaNode }
	urls := 0
	for _, ch := range n.children {
		kw := ch.word(0)
		if s.setting(ch) {
			continue
		}
		switch {
		case kw == "connect_port":
			v, err := k.arg(ch)
			if err != nil {
				return nil, err
			}
			if c.Port, err = strconv.Atoi(v); err != nil {
				return nil, k.errf(ch.line, "connect_port %q is not a number", v)
			}
			lines["port"] = ch.line
		case kw == "connect_ip":
			v, err := k.arg(ch)
			if err != nil {
				return nil, err
			}
			a, err := netip.ParseAddr(v)
			if err != nil {
				return nil, k.errf(ch.line, "connect_ip %q is not an IP address", v)
			}
			c.Address = a.Unmap().String()
			lines["address"] = ch.line
		case kw == "url" && ch.block && (kind.typ == "http" || kind.typ == "https"):
			urls++
			if urls > 1 {
				// One path per check: the first url is checked.
				k.keep(scope, ch)
				continue
			}
			if err := k.url(scope, ch, c, lines); err != nil {
				return nil, err
			}
		case kw == "misc_path" && kind.typ == "exec":
			words, err := ipvsmgr.SplitCommand(ch.rest(k.data))
			if err == nil && len(words) == 1 && strings.ContainsAny(words[0], " \t") {
				// keepalived's "quoted command line": split what was quoted.
				words, err = ipvsmgr.SplitCommand(words[0])
			}
			if err != nil || len(words) == 0 {
				return nil, k.errf(ch.line, "misc_path: want a program and its arguments")
			}
			c.Command = words
			lines["command"] = ch.line
		case kw == "misc_timeout" && kind.typ == "exec":
			misc.timeout = ch
		case kw == "misc_dynamic" && kind.typ == "exec":
			c.DynamicWeight = boolPtr(true)
			lines["dynamic_weight"] = ch.line
		case kw == "name" && kind.typ == "dns":
			v, err := k.arg(ch)
			if err != nil {
				return nil, err
			}
			c.Name = v
			lines["name"] = ch.line
		case kw == "type" && kind.typ == "dns":
			v, err := k.arg(ch)
			if err != nil {
				return nil, err
			}
			c.QType = strings.ToUpper(v)
			lines["qtype"] = ch.line
		case (kw == "payload" || kw == "require_reply") && kind.typ == "send_expect":
			v, err := k.arg(ch)
			if err != nil {
				return nil, err
			}
			text, ok := kaPayloadText(v)
			if !ok {
				return nil, nil // bytes a send/expect string cannot carry
			}
			if kw == "payload" {
				c.Send = text
				lines["send"] = ch.line
			} else {
				c.Expect = text
				lines["expect"] = ch.line
			}
		default:
			// delay_before_retry, bindto, bind_port, warmup, user, enable_sni...
			k.keep(scope, ch)
		}
	}
	switch kind.typ {
	case "http", "https":
		if n := s.virtualhost; n != nil {
			v, err := k.arg(n)
			if err != nil {
				return nil, err
			}
			c.Host = v
			lines["host"] = n.line
		}
	case "exec":
		if c.Command == nil {
			return nil, k.errf(n.line, "MISC_CHECK without misc_path")
		}
	case "dns":
		if c.Name == "" {
			c.Name = "." // keepalived's default query
		}
	case "send_expect":
		if c.Send == "" {
			// keepalived sends an empty datagram and waits for an ICMP
			// error; a udp send_expect check must send something.
			return nil, nil
		}
		c.Protocol = "udp"
		lines["protocol"] = n.line
	}
	if err := k.timing(c, kind.retry, s, misc.timeout, n.line, lines); err != nil {
		return nil, err
	}
	return &kaCheck{check: c, lines: lines}, nil
}

// url maps an HTTP_GET's or SSL_GET's url block: its path, status codes and
// regex; a digest stays in imported.
func (k *kaImporter) url(scope string, n *kaNode, c *ipvsmgr.Check, lines map[string]int) error {
	scope += " url"
	for _, ch := range n.children {
		switch ch.word(0) {
		case "path":
			v, err := k.arg(ch)
			if err != nil {
				return err
			}
			// keepalived sends the path as written; a request line cannot
			// hold a blank, so one is escaped.
			c.Path = strings.NewReplacer(" ", "%20", "\t", "%09").Replace(v)
			lines["path"] = ch.line
		case "status_code":
			if len(ch.words) < 2 {
				return k.errf(ch.line, "status_code: want a code, a list or a range such as 200-299")
			}
			for _, w := range ch.words[1:] {
				codes, err := kaStatusCodes(w.text)
				if err != nil {
					return k.errf(ch.line, "status_code %q: %v", w.text, err)
				}
				c.ExpectStatus = append(c.ExpectStatus, codes...)
			}
			lines["expect_status"] = ch.line
		case "regex":
			v, err := k.arg(ch)
			if err != nil {
				return err
			}
			c.ExpectBody = v
			lines["expect_body"] = ch.line
		default:
			// digest, regex_no_match, regex_options...
			k.keep(scope, ch)
		}
	}
	return nil
}

// kaStatusCodes reads one status_code word: a code or a range of them.
func kaStatusCodes(w string) ([]int, error) {
	lo, hi, isRange := strings.Cut(w, "-")
	a, err := strconv.Atoi(lo)
	if err != nil {
		return nil, fmt.Errorf("not a status code")
	}
	if !isRange {
		return []int{a}, nil
	}
	b, err := strconv.Atoi(hi)
	if err != nil || b < a || a < 100 || b > 599 {
		return nil, fmt.Errorf("want a range of status codes within 100-599")
	}
	codes := make([]int, 0, b-a+1)
	for i := a; i <= b; i++ {
		codes = append(codes, i)
	}
	return codes, nil
}

// kaPayloadText decodes a UDP_CHECK hex payload into a send/expect string
// (printable text with \r \n \t escapes), false when it holds other bytes.
func kaPayloadText(h string) (string, bool) {
	b, err := hex.DecodeString(h)
	if err != nil || len(b) == 0 {
		return "", false
	}
	for _, c := range b {
		if (c < 0x20 || c > 0x7e) && c != '\r' && c != '\n' && c != '\t' {
			return "", false
		}
	}
	return ipvsmgr.EncodeEscapes(string(b)), true
}

// timing sets interval, timeout, rise, fall, on_failure and start_healthy
// the way keepalived behaves.
func (k *kaImporter) timing(c *ipvsmgr.Check, defaultRetry int, s kaCheckSettings, miscTimeout *kaNode, line int, lines map[string]int) error {
	seconds := func(n *kaNode, def float64) (float64, int, error) {
		if n == nil {
			return def, line, nil
		}
		v, err := k.arg(n)
		if err != nil {
			return 0, 0, err
		}
		f, err := strconv.ParseFloat(v, 64)
		if err != nil || math.IsNaN(f) || math.IsInf(f, 0) {
			return 0, 0, k.errf(n.line, "%s %q: want a number of seconds", n.word(0), v)
		}
		return f, n.line, nil
	}
	var err error
	if c.Interval, lines["interval"], err = seconds(s.delayLoop, kaDefaultDelayLoop); err != nil {
		return err
	}
	timeout, defTimeout := s.connectTimeout, kaDefaultConnectTimeout
	if c.Type == "exec" {
		// misc_timeout, keepalived's default the delay_loop.
		timeout, defTimeout = miscTimeout, c.Interval
	}
	if c.Timeout, lines["timeout"], err = seconds(timeout, defTimeout); err != nil {
		return err
	}
	retry := defaultRetry
	lines["fall"] = line
	if s.retry != nil {
		v, err := k.arg(s.retry)
		if err != nil {
			return err
		}
		if retry, err = strconv.Atoi(v); err != nil || retry < 0 {
			return k.errf(s.retry.line, "%s %q: want a number of retries", s.retry.word(0), v)
		}
		lines["fall"] = s.retry.line
	}
	c.Rise, c.Fall = 1, retry+1
	lines["rise"] = line
	if s.inhibit != nil {
		c.OnFailure = "quiesce"
		lines["on_failure"] = s.inhibit.line
	}
	if !s.alpha {
		c.StartHealthy = boolPtr(true)
		lines["start_healthy"] = line
	}
	return nil
}

// placeChecks puts the real servers' checks on the service when they are
// all the same, and leaves each on its server otherwise.
func (k *kaImporter) placeChecks(svc *ipvsmgr.Service, field string, checks []*kaCheck) {
	shared := len(checks) > 0
	for _, c := range checks {
		if c == nil || !reflect.DeepEqual(c.check, checks[0].check) {
			shared = false
			break
		}
	}
	setLines := func(prefix string, lines map[string]int) {
		for leaf, line := range lines {
			f := prefix
			if leaf != "" {
				f += "." + leaf
			}
			k.lines[f] = line
		}
	}
	if shared {
		svc.Check = checks[0].check
		setLines(field+".check", checks[0].lines)
		return
	}
	for j, c := range checks {
		if c != nil {
			svc.Servers[j].Check = c.check
			setLines(fmt.Sprintf("%s.servers[%d].check", field, j), c.lines)
		}
	}
}

// sorryServer maps `sorry_server ADDRESS PORT`. A DR or TUN sorry server
// gets the service's port whatever is written, so a port that differs is
// only kept.
func (k *kaImporter) sorryServer(svc *ipvsmgr.Service, field, scope string, n *kaNode) error {
	if len(n.words) != 3 {
		return k.errf(n.line, "want `sorry_server ADDRESS PORT`")
	}
	a, err := netip.ParseAddr(n.word(1))
	if err != nil {
		return k.errf(n.line, "sorry server %q is not an IP address", n.word(1))
	}
	port, err := strconv.Atoi(n.word(2))
	if err != nil {
		return k.errf(n.line, "sorry server port %q is not a number", n.word(2))
	}
	svc.SorryServer = &ipvsmgr.SorryServer{Address: a.Unmap().String(), Port: port}
	k.lines[field+".sorry_server"] = n.line
	k.lines[field+".sorry_server.address"] = n.line
	k.lines[field+".sorry_server.port"] = n.line
	if svc.Forwarding != "nat" && port != svc.Port {
		svc.SorryServer.Port = 0
		k.st.Imported = append(k.st.Imported, ipvsmgr.ImportedKey{Source: FormatKeepalived, Line: n.line, Scope: scope + " sorry_server", Key: "port", Value: n.word(2)})
	}
	return nil
}

// quorum maps keepalived's quorum, a sum of the live servers' weights, onto
// a number of servers when every server has the same weight; otherwise it
// is kept.
func (k *kaImporter) quorum(svc *ipvsmgr.Service, field, scope string, n *kaNode) error {
	v, err := k.arg(n)
	if err != nil {
		return err
	}
	q, err := strconv.Atoi(v)
	if err != nil || q < 0 {
		return k.errf(n.line, "quorum %q: want a number", v)
	}
	w := 0
	for i := range svc.Servers {
		sw := svc.Servers[i].EffectiveWeight()
		if i > 0 && sw != w || sw <= 0 {
			k.keep(scope, n)
			return nil
		}
		w = sw
	}
	if w == 0 {
		k.keep(scope, n)
		return nil
	}
	if count := (q + w - 1) / w; count > 1 {
		svc.Quorum = count
		k.lines[field+".quorum"] = n.line
	}
	return nil
}
