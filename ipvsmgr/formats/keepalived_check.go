package formats

import (
	"encoding/hex"
	"fmt"
	"math"
	"net/netip"
	"slices"
	"strconv"
	"strings"
	"sync"

	"github.com/ipvsctl/ipvsctl/ipvsmgr"
)

// keepalived's checkers become checks. Where keepalived's behaviour differs
// from ipvsctl's defaults the check says keepalived's explicitly: a server
// is back at its first pass (rise 1), goes out after retry+1 failures, is
// checked every delay_loop (60 s unless set) with a 5 s connect timeout, and
// starts healthy unless the virtual_server says alpha; its retries after a
// failure come delay_before_retry apart (the check's fast_interval). What a
// check cannot say (an HTTP digest, a second url, SMTP_CHECK...) is kept in
// imported.

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
	"SMTP_CHECK": {"smtp", 1},
	"PING_CHECK": {"ping", 1},
	"FILE_CHECK": {"file", 0}, // read by fileCheck: no timing of its own
}

// kaCheckerKeywords are what keepalived knows inside each checker block
// (check_api.c's common keywords and each check_*.c's own).
var kaCheckerKeywords = sync.OnceValue(func() map[string]map[string]bool {
	common := "connect_ip connect_port bindto bind_port bind_if connect_timeout fwmark retry delay_before_retry " +
		"warmup delay_loop alpha log_all_failures "
	http := common + "nb_get_retry virtualhost http_protocol enable_sni sni_name fast_recovery tls_compliant url"
	return map[string]map[string]bool{
		"TCP_CHECK":  wordSet(common),
		"HTTP_GET":   wordSet(http),
		"SSL_GET":    wordSet(http),
		"MISC_CHECK": wordSet(common + "misc_path misc_timeout misc_dynamic user"),
		"DNS_CHECK":  wordSet(common + "type name"),
		"UDP_CHECK":  wordSet(common + "payload require_reply min_reply_length max_reply_length"),
		"SMTP_CHECK": wordSet(common + "helo_name host"),
		"PING_CHECK": wordSet(common),
		"FILE_CHECK": wordSet("track_file weight"),
	}
})

// kaURLKeywords are what keepalived knows in an url block.
var kaURLKeywords = words("path digest status_code virtualhost regex regex_no_match regex_options regex_min_offset " +
	"regex_max_offset regex_stack tls_compliant")

// kaOtherCheckers are keepalived's checkers with no ipvsctl check yet: kept
// whole.
var kaOtherCheckers = words("BFD_CHECK")

// kaDropped is a checker keepalived ignores with a warning (an HTTP_GET
// with no url, a MISC_CHECK with no script): neither mapped nor kept.
var kaDropped = &kaCheck{}

// kaCheckSettings are the checker settings keepalived lets a virtual_server
// and a real_server set for the checkers under them.
type kaCheckSettings struct {
	delayLoop, connectTimeout, retry *kaNode
	delayBeforeRetry, warmup         *kaNode
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
	case "delay_before_retry":
		s.delayBeforeRetry = c
	case "warmup":
		s.warmup = c
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

// kaChecker is a checker block being read.
type kaChecker struct {
	k           *kaImporter
	n           *kaNode
	typ         string // the check type
	scope       string
	c           *ipvsmgr.Check
	lines       map[string]int
	s           kaCheckSettings // inherited, then the block's own
	miscTimeout *kaNode
	urls        int
	unmappable  bool // what it says a check cannot carry: kept whole
}

// checker maps one checker block; nil when it cannot be mapped (the caller
// keeps it whole), kaDropped when keepalived ignores it.
func (k *kaImporter) checker(scope string, n *kaNode, inherited kaCheckSettings) (*kaCheck, error) {
	kind, ok := kaCheckers[n.word(0)]
	if !ok {
		return nil, nil
	}
	if kind.typ == "file" {
		return k.fileCheck(scope, n)
	}
	r := &kaChecker{k: k, n: n, typ: kind.typ, scope: scope + " " + n.word(0), s: inherited,
		c: &ipvsmgr.Check{Type: kind.typ}, lines: map[string]int{"": n.line, "type": n.line}}
	for _, ch := range n.children {
		if err := r.statement(ch); err != nil {
			return nil, err
		}
	}
	if r.unmappable {
		return nil, nil
	}
	return r.finish(kind.retry)
}

// statement takes one statement of the block: a keyword keepalived does not
// know there is refused, a known one mapped or kept.
func (r *kaChecker) statement(ch *kaNode) error {
	k, kw := r.k, ch.word(0)
	if !kaCheckerKeywords()[r.n.word(0)][kw] || ch.block != (kw == "url" || kw == "host") {
		if kw == "nb_get_retry" && !ch.block {
			// keepalived 1.x files write it in every checker; keepalived 2
			// knows it only in HTTP_GET and SSL_GET.
			k.warnf(ch.line, "Unknown keyword 'nb_get_retry' in %s - ignored, as keepalived ignores it (retry is the keyword)", r.n.word(0))
			return nil
		}
		return k.unknownKeyword(r.scope, ch)
	}
	if kw == "nb_get_retry" {
		k.warnf(ch.line, "nb_get_retry is deprecated - please use 'retry'")
	}
	if kw == "alpha" {
		r.s.alpha = true
		return nil
	}
	if r.s.setting(ch) {
		return nil
	}
	return r.checkKeyword(ch)
}

// checkKeyword maps a keyword of the check's own, or keeps it.
func (r *kaChecker) checkKeyword(ch *kaNode) error {
	k, kw := r.k, ch.word(0)
	c, lines := r.c, r.lines
	arg := func(set func(string) error, leaf string) error {
		v, err := k.arg(ch)
		if err == nil {
			err = set(v)
		}
		if err == nil {
			lines[leaf] = ch.line
		}
		return err
	}
	switch {
	case kw == "connect_port":
		return arg(func(v string) (err error) {
			if c.Port, err = strconv.Atoi(v); err != nil {
				return k.errf(ch.line, "connect_port %q is not a number", v)
			}
			return nil
		}, "port")
	case kw == "connect_ip":
		return arg(func(v string) error {
			a, err := netip.ParseAddr(v)
			if err != nil {
				return k.errf(ch.line, "connect_ip %q is not an IP address", v)
			}
			c.Address = a.Unmap().String()
			return nil
		}, "address")
	case kw == "url":
		return r.url(ch)
	case kw == "misc_path" && r.typ == "exec":
		return r.miscPath(ch)
	case kw == "misc_timeout" && r.typ == "exec":
		r.miscTimeout = ch
	case kw == "misc_dynamic" && r.typ == "exec":
		c.DynamicWeight = boolPtr(true)
		lines["dynamic_weight"] = ch.line
	case kw == "helo_name" && r.typ == "smtp":
		return arg(func(v string) error { c.Name = v; return nil }, "name")
	case kw == "host":
		// The deprecated host blocks: each is a checker of its own in
		// keepalived, which one check cannot say.
		r.unmappable = true
	case kw == "name" && r.typ == "dns":
		return arg(func(v string) error { c.Name = v; return nil }, "name")
	case kw == "type" && r.typ == "dns":
		return arg(func(v string) error { c.QType = strings.ToUpper(v); return nil }, "qtype")
	case (kw == "payload" || kw == "require_reply") && r.typ == "send_expect":
		leaf := map[string]string{"payload": "send", "require_reply": "expect"}[kw]
		return arg(func(v string) error {
			text, ok := kaPayloadText(v)
			if !ok {
				r.unmappable = true // bytes a send/expect string cannot carry
			}
			*map[string]*string{"send": &c.Send, "expect": &c.Expect}[leaf] = text
			return nil
		}, leaf)
	default:
		// bindto, bind_port, warmup, user, enable_sni...
		k.keep(r.scope, ch)
	}
	return nil
}

// miscPath is an exec check's command. keepalived runs the first word,
// split again ("/bin/x %h" is the quoted command line); the words after it
// are ignored.
func (r *kaChecker) miscPath(ch *kaNode) error {
	words, ignored, err := r.k.script(ch)
	if err != nil {
		return r.k.errf(ch.line, "misc_path %s: want a program and its arguments: %v", ch.rest(), err)
	}
	if len(ignored) > 0 {
		r.k.warnf(ch.line, "misc_path: %q after the command ignored, as keepalived ignores it (quote the whole command line)", strings.Join(ignored, " "))
	}
	r.c.Command = words
	r.lines["command"] = ch.line
	return nil
}

// url takes a url block: the first with a path is the check's.
func (r *kaChecker) url(ch *kaNode) error {
	if !slices.ContainsFunc(ch.children, func(u *kaNode) bool { return u.word(0) == "path" }) {
		r.k.warnf(ch.line, "HTTP/SSL_GET checker url has no path - ignoring")
		return nil
	}
	if r.urls++; r.urls > 1 {
		// One path per check: the first url is checked.
		r.k.keep(r.scope, ch)
		return nil
	}
	return r.k.url(r.scope, ch, r.c, r.lines)
}

// finish settles what the block as a whole says: a checker keepalived
// ignores (no url, no script) is dropped; then the timing.
func (r *kaChecker) finish(defaultRetry int) (*kaCheck, error) {
	k, c, n := r.k, r.c, r.n
	switch r.typ {
	case "http", "https":
		if r.urls == 0 {
			k.warnf(n.line, "HTTP/SSL_GET checker has no urls specified - ignoring")
			return kaDropped, nil
		}
		if vh := r.s.virtualhost; vh != nil {
			v, err := k.arg(vh)
			if err != nil {
				return nil, err
			}
			c.Host = v
			r.lines["host"] = vh.line
		}
	case "exec":
		if c.Command == nil {
			k.warnf(n.line, "No script path has been specified for MISC_CHECKER - skipping")
			return kaDropped, nil
		}
	case "dns":
		if c.Name == "" {
			c.Name = "." // keepalived's default query
		}
	case "smtp":
		if c.Name == "" {
			c.Name = "smtpchecker.keepalived.org" // SMTP_DEFAULT_HELO
		}
	case "send_expect":
		if c.Send == "" {
			// keepalived sends an empty datagram and waits for an ICMP
			// error; a udp send_expect check must send something.
			return nil, nil
		}
		c.Protocol = "udp"
		r.lines["protocol"] = n.line
	}
	if err := k.timing(c, defaultRetry, r.s, r.miscTimeout, n.line, r.lines); err != nil {
		return nil, err
	}
	return &kaCheck{check: c, lines: r.lines}, nil
}

// url maps an HTTP_GET's or SSL_GET's url block: its path, status codes and
// regex; a digest stays in imported.
func (k *kaImporter) url(scope string, n *kaNode, c *ipvsmgr.Check, lines map[string]int) error {
	scope += " url"
	for _, ch := range n.children {
		if !kaURLKeywords()[ch.word(0)] || ch.block {
			if err := k.unknownKeyword(scope, ch); err != nil {
				return err
			}
			continue
		}
		switch ch.word(0) {
		case "path":
			v, err := k.arg(ch)
			if err != nil {
				return err
			}
			if v == "" {
				// A request line with no path: no server answers it as a
				// page, and an empty path reads here as "/".
				return k.errf(ch.line, `url path "": a check's path cannot be empty (write path /)`)
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
		if f < 0.000001 && n.word(0) != "warmup" {
			// keepalived's timers are 0.000001 s at least.
			k.warnf(n.line, "%s %s invalid - ignoring", n.word(0), v)
			return def, line, nil
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
	if s.delayBeforeRetry != nil {
		// The retries after a failure: ipvsctl's fast interval.
		if c.FastInterval, lines["fast_interval"], err = seconds(s.delayBeforeRetry, 0); err != nil {
			return err
		}
		if c.FastInterval == c.Interval {
			c.FastInterval = 0
			delete(lines, "fast_interval")
		}
	}
	if s.warmup != nil {
		// keepalived's default warmup is the delay_loop, as ipvsctl's.
		w, l, err := seconds(s.warmup, 0)
		if err != nil {
			return err
		}
		if w < 0 {
			return k.errf(s.warmup.line, "warmup %q: want a number of seconds", s.warmup.word(1))
		}
		c.Warmup, lines["warmup"] = &w, l
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
