package formats

import (
	"bufio"
	"fmt"
	"math"
	"slices"
	"strconv"
	"strings"
	"unicode"
	"unicode/utf8"

	"github.com/ipvsctl/ipvsctl/ipvsmgr"
)

// Piranha's nanny checks each real server of a virtual: with send and
// expect it sends a string and compares the start of the reply (or a regular
// expression with use_regex), with send_program it runs a program, and
// otherwise it connects. timeout is how long it waits, reentry how long a
// server must answer before it is back, quiesce_server whether a dead
// server gets weight 0 rather than leaving the table. These map onto the
// virtual's check (send_program with an expect an exec check comparing the
// program's output); what does not stays in imported.

// nannyInterval is the check interval a reentry time is counted in:
// ipvsctl's default, since lvs.cf has none of its own.
const nannyInterval = ipvsmgr.DefaultCheckInterval

// stripComment cuts a trailing `# comment` outside quoted strings ("#" at
// the start of the line, after white space, or right after the =). White
// space is what the line's tokenizer (strings.Fields) splits on, form feeds
// and Unicode spaces too: a "#" that starts a word is never a value, which an
// export would write back as a comment.
func stripComment(text string) string {
	inQuote, escaped := false, false
	for i := 0; i < len(text); i++ {
		c := text[i]
		switch {
		case escaped:
			escaped = false
		case inQuote && c == '\\':
			escaped = true
		case c == '"':
			inQuote = !inQuote
		case c == '#' && !inQuote && (i == 0 || text[i-1] == '=' || startsWord(text[:i])):
			return text[:i]
		}
	}
	return text
}

// startsWord reports whether what follows before ends in white space.
func startsWord(before string) bool {
	r, _ := utf8.DecodeLastRuneInString(before)
	return unicode.IsSpace(r)
}

// nannyCheck turns a virtual block's nanny keys into its check.
func (p *lvsParser) nannyCheck(svc *ipvsmgr.Service, b *lvsBlock) error {
	h := b.health
	if len(h) == 0 {
		return nil
	}
	line := p.line
	defer func() { p.line = line }()
	field := fmt.Sprintf("services[%d].check", b.svc)
	c := &ipvsmgr.Check{}
	if svc.FWMark > 0 {
		// A fwmark service has no port: nanny checks the virtual's port.
		if b.port == nil {
			p.keepNanny(h, "send_program", "expect", "use_regex", "send", "timeout", "reentry", "quiesce_server")
			return nil
		}
		n, err := strconv.Atoi(unquote(b.port.Value))
		if err != nil || n < 1 || n > 65535 {
			p.line = b.port.Line
			return p.errf("port %q: want a number 1..65535", b.port.Value)
		}
		c.Port = n
		p.lines[field+".port"] = b.port.Line
	}
	p.lines[field] = firstNannyLine(h)
	var err error
	switch {
	case h["send_program"] != nil:
		err = p.nannyProgram(c, h, field)
	case h["send"] != nil || h["expect"] != nil:
		err = p.nannySendExpect(c, svc, h, field)
	default:
		c.Type = "tcp"
		if svc.Protocol == "udp" {
			c.Type = "none" // nanny has nothing to send a udp service
		}
		p.keepNanny(h, "use_regex")
	}
	if err == nil {
		err = p.nannyTiming(c, b, h, field)
	}
	if err != nil {
		return err
	}
	svc.Check = c
	return nil
}

// keepNanny moves nanny keys the check has no room for into imported.
func (p *lvsParser) keepNanny(h map[string]*ipvsmgr.ImportedKey, keys ...string) {
	for _, k := range keys {
		if h[k] != nil {
			p.st.Imported = append(p.st.Imported, *h[k])
			delete(h, k)
		}
	}
}

// firstNannyLine is the line of a block's first nanny key, where its check starts.
func firstNannyLine(h map[string]*ipvsmgr.ImportedKey) int {
	first := 0
	for _, k := range h {
		if first == 0 || k.Line < first {
			first = k.Line
		}
	}
	return first
}

// nannyProgram makes the exec check of send_program.
func (p *lvsParser) nannyProgram(c *ipvsmgr.Check, h map[string]*ipvsmgr.ImportedKey, field string) error {
	k := h["send_program"]
	p.line = k.Line
	words, err := ipvsmgr.SplitCommand(unquote(k.Value))
	if err != nil || len(words) == 0 {
		return p.errf("send_program %s: want a program and its arguments", k.Value)
	}
	c.Type, c.Command = "exec", words
	p.lines[field+".command"] = k.Line
	if k := h["expect"]; k != nil {
		// nanny compares the program's output (less its last
		// character) with expect, as strcmp does: no regex.
		c.Expect = unquote(k.Value)
		p.lines[field+".expect"] = k.Line
	}
	p.keepNanny(h, "use_regex", "send")
	return nil
}

// nannySendExpect makes the send_expect check of send, expect and use_regex.
func (p *lvsParser) nannySendExpect(c *ipvsmgr.Check, svc *ipvsmgr.Service, h map[string]*ipvsmgr.ImportedKey, field string) error {
	c.Type = "send_expect"
	if svc.Protocol == "udp" {
		c.Protocol = "udp"
	}
	if k := h["send"]; k != nil {
		c.Send = unquote(k.Value)
		p.lines[field+".send"] = k.Line
	}
	if k := h["expect"]; k != nil {
		c.Expect = unquote(k.Value)
		p.lines[field+".expect"] = k.Line
	}
	if k := h["use_regex"]; k != nil {
		p.line = k.Line
		on, err := lvsActive(unquote(k.Value))
		if err != nil {
			return p.errf("use_regex %q: %v", k.Value, err)
		}
		c.UseRegex = &on
		p.lines[field+".use_regex"] = k.Line
	}
	return nil
}

// nannyTiming reads timeout, reentry and quiesce_server, whatever the probe.
func (p *lvsParser) nannyTiming(c *ipvsmgr.Check, b *lvsBlock, h map[string]*ipvsmgr.ImportedKey, field string) error {
	if k := h["timeout"]; k != nil {
		p.line = k.Line
		v, err := strconv.ParseFloat(unquote(k.Value), 64)
		if err != nil || math.IsNaN(v) || math.IsInf(v, 0) {
			return p.errf("timeout %q: want a number of seconds", k.Value)
		}
		c.Timeout = v
		p.lines[field+".timeout"] = k.Line
	}
	if k := h["reentry"]; k != nil {
		p.line = k.Line
		v, err := strconv.Atoi(unquote(k.Value))
		if err != nil || v < 0 {
			return p.errf("reentry %q: want a number of seconds", k.Value)
		}
		c.Rise = max(1, int(math.Ceil(float64(v)/nannyInterval)))
		p.lines[field+".rise"] = k.Line
		if float64(c.Rise)*nannyInterval != float64(v) {
			// The exact time, which rise intervals cannot say, for the
			// way back.
			p.st.Imported = append(p.st.Imported, ipvsmgr.ImportedKey{Source: FormatLVSCF, Line: k.Line, Scope: b.scope(nil), Key: lvsReentryKey, Value: strconv.Itoa(v)})
		}
	}
	if k := h["quiesce_server"]; k != nil {
		p.line = k.Line
		on, err := lvsActive(unquote(k.Value))
		if err != nil {
			return p.errf("quiesce_server %q: %v", k.Value, err)
		}
		c.OnFailure = "remove"
		if on {
			c.OnFailure = "quiesce"
		}
		p.lines[field+".on_failure"] = k.Line
	}
	return nil
}

// lvsCheckProblems lists what of a service's health checks lvs.cf cannot say.
func lvsCheckProblems(svc *ipvsmgr.Service, f string, bad func(string, ...any)) {
	if c := svc.Check; c != nil && svc.FWMark > 0 && c.Port == 0 {
		bad("%s.check.port: lvs.cf checks a fwmark virtual at its port; set one", f)
	}
	for j := range svc.Servers {
		rs := &svc.Servers[j]
		if rs.Check != nil {
			bad("%s.servers[%d].check: lvs.cf has one check per virtual, not per server", f, j)
		}
		if rs.Health != "" && rs.Health != "auto" {
			bad("%s.servers[%d].health: lvs.cf cannot force a server's health", f, j)
		}
	}
	if svc.SorryServer != nil {
		bad("%s.sorry_server: lvs.cf has no sorry server", f)
	}
	if svc.Quorum > 1 || svc.Hysteresis > 0 {
		bad("%s.quorum: lvs.cf has no quorum or hysteresis", f)
	}
	if svc.QuorumUp != nil {
		bad("%s.quorum_up: lvs.cf has no quorum programs", f)
	}
	if svc.QuorumDown != nil {
		bad("%s.quorum_down: lvs.cf has no quorum programs", f)
	}
	c := svc.Check
	if c == nil {
		return
	}
	cf := f + ".check"
	switch c.Type {
	case "tcp", "none", "send_expect", "exec":
	default:
		bad("%s.type: nanny has no %s check (lvs.cf says send/expect, send_program, or a connect)", cf, c.Type)
	}
	if c.Interval != 0 && c.Interval != nannyInterval {
		bad("%s.interval: lvs.cf has no check interval", cf)
	}
	if c.Fall > 1 {
		bad("%s.fall: nanny takes a server out at its first failure", cf)
	}
	if c.Address != "" || c.Port != 0 && svc.FWMark == 0 {
		bad("%s: lvs.cf checks the real server's own address and port", cf)
	}
	if c.SlowStart != nil || c.StartHealthy != nil || c.DynamicWeight != nil || c.Warmup != nil {
		bad("%s: lvs.cf has no slow_start, start_healthy, dynamic_weight or warmup", cf)
	}
	if c.Protocol == "udp" && svc.Protocol != "udp" || c.Protocol == "tcp" && svc.Protocol == "udp" {
		bad("%s.protocol: nanny checks with the service's protocol", cf)
	}
	if strings.ContainsRune(c.Send+c.Expect, '"') || strings.ContainsAny(c.Send+c.Expect, "\r\n") {
		bad("%s: send and expect must be written with escapes and no double quote for lvs.cf", cf)
	}
	if c.Type == "send_expect" && c.Send == "" && c.Expect == "" {
		bad("%s: a send_expect check needs send or expect in lvs.cf", cf)
	}
	if c.Type == "exec" && c.UseRegex != nil && *c.UseRegex {
		bad("%s.use_regex: nanny compares send_program's output exactly", cf)
	}
	if c.Type != "exec" && len(c.Command) > 0 {
		bad("%s.command: only for exec checks", cf)
	}
}

// writeLVSCheck writes a virtual's check as nanny's keys; a fwmark
// virtual's port is where nanny checks (unless an imported port says it).
func writeLVSCheck(bw *bufio.Writer, svc *ipvsmgr.Service, imported []ipvsmgr.ImportedKey) {
	c := svc.Check
	if c == nil {
		return
	}
	if svc.FWMark > 0 && c.Port != 0 && !slices.ContainsFunc(imported, func(k ipvsmgr.ImportedKey) bool { return k.Key == "port" }) {
		writeKV(bw, "    ", "port", strconv.Itoa(c.Port))
	}
	written := false
	switch c.Type {
	case "send_expect":
		if c.Send != "" {
			writeKV(bw, "    ", "send", `"`+c.Send+`"`)
		}
		if c.Expect != "" {
			writeKV(bw, "    ", "expect", `"`+c.Expect+`"`)
		}
		if c.UseRegex != nil {
			writeKV(bw, "    ", "use_regex", activeValue(*c.UseRegex))
		}
		written = true
	case "exec":
		writeKV(bw, "    ", "send_program", `"`+joinCommand(c.Command)+`"`)
		if c.Expect != "" {
			writeKV(bw, "    ", "expect", `"`+c.Expect+`"`)
		}
		written = true
	}
	if c.Timeout != 0 {
		writeKV(bw, "    ", "timeout", strconv.FormatFloat(c.Timeout, 'f', -1, 64))
		written = true
	}
	if c.Rise != 0 {
		reentry := strconv.Itoa(int(math.Round(float64(c.Rise) * nannyInterval)))
		for _, k := range imported {
			if v, err := strconv.Atoi(k.Value); k.Key == lvsReentryKey && err == nil && max(1, int(math.Ceil(float64(v)/nannyInterval))) == c.Rise {
				reentry = k.Value // as imported: the same rise
			}
		}
		writeKV(bw, "    ", "reentry", reentry)
		written = true
	}
	if c.OnFailure != "" || !written {
		// A check with nothing else to say still says that there is one.
		writeKV(bw, "    ", "quiesce_server", activeValue(c.OnFailure == "quiesce"))
	}
}

// joinCommand writes argv as one line that SplitCommand splits back.
func joinCommand(argv []string) string {
	words := make([]string, len(argv))
	for i, a := range argv {
		if a == "" {
			words[i] = "''"
			continue
		}
		var b strings.Builder
		for _, r := range a {
			if strings.ContainsRune(" \t\r\n\v\f'\"\\#", r) {
				b.WriteByte('\\')
			}
			b.WriteRune(r)
		}
		words[i] = b.String()
	}
	return strings.Join(words, " ")
}

// Imported keys that only carry lvs.cf details back to an lvs.cf export.
const (
	lvsAliasKey   = "address alias" // the ifconfig alias of the VIP's device (eth0:1)
	lvsReentryKey = "reentry seconds"
)

// lvsAliases numbers the VIPs' device aliases on export: each VIP keeps the
// alias it was imported with, the others take numbers no VIP of that device
// holds.
type lvsAliases struct {
	of   map[string]string // "dev vip" -> "dev:n"
	used map[string]bool   // "dev:n"
}

func newLVSAliases(st *ipvsmgr.State, scoped map[string][]ipvsmgr.ImportedKey) *lvsAliases {
	a := &lvsAliases{of: map[string]string{}, used: map[string]bool{}}
	names := blockNames(len(st.Services), func(i int) string { return st.Services[i].Name }, "vs")
	for i := range st.Services {
		svc := &st.Services[i]
		for _, k := range scoped["virtual "+names[i]] {
			key := svc.Interface + " " + svc.Address
			if k.Key == lvsAliasKey && svc.Interface != "" && a.of[key] == "" {
				a.of[key] = svc.Interface + ":" + k.Value
				a.used[a.of[key]] = true
			}
		}
	}
	return a
}

// address is the virtual's address line: the VIP and its device alias.
func (a *lvsAliases) address(svc *ipvsmgr.Service, _ []ipvsmgr.ImportedKey) string {
	if svc.Interface == "" {
		return svc.Address
	}
	key := svc.Interface + " " + svc.Address
	if a.of[key] == "" {
		for n := 1; ; n++ {
			if alias := fmt.Sprintf("%s:%d", svc.Interface, n); !a.used[alias] {
				a.of[key], a.used[alias] = alias, true
				break
			}
		}
	}
	return svc.Address + " " + a.of[key]
}
