package formats

import (
	"cmp"
	"fmt"
	"net"
	"net/netip"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"

	"github.com/ipvsctl/ipvsctl/ipvsmgr"
)

// ldirectord.cf as ldirectord 1.186's read_config reads it: `key=value`
// lines at the top level (no leading white space), and `virtual=` lines
// followed by their keys indented by at least four spaces (a tab counts as
// four). The first line that is not indented ends a virtual, so a blank line
// inside one ends it too. Inside a virtual `#` starts a comment anywhere;
// at the top level only at the start of a line. Keys are matched as
// read_config matches them, by regular expression on the start of the line,
// so `key = value` is valid and a trailing blank is part of a value.

var (
	ldVirtualIPv4  = lazyRegexp(`^(\d+\.\d+\.\d+\.\d+):([0-9A-Za-z_-]+)`)
	ldVirtualName  = lazyRegexp(`^([0-9A-Za-z._+-]+):([0-9A-Za-z_-]+)`)
	ldVirtualMark  = lazyRegexp(`^(\d+)`)
	ldVirtualIPv6  = lazyRegexp(`^\[([0-9A-Fa-f:]+)\]:([0-9A-Za-z_-]+)`)
	ldIndented     = lazyRegexp(`^ {4,}(.+)`)
	ldKeyValue     = lazyRegexp(`^([a-z0-9]+)\s*=\s*(.*)`)
	ldQuoted       = lazyRegexp(`^"(.*)"`)
	ldDigits       = lazyRegexp(`(\d+)`)
	ldReal         = lazyRegexp(`(\d+\.\d+\.\d+\.\d+|[A-Za-z0-9.-]+|\[[0-9A-fa-f:]+\])(->(\d+\.\d+\.\d+\.\d+|[A-Za-z0-9.-]+|\[[0-9A-fa-f:]+\]))?(:(\d+|[A-Za-z0-9_-]+))?\s+(.*)`)
	ldRealFlags    = lazyRegexp(`^(\w+)(.*)`)
	ldRealWeight   = lazyRegexp(`^\s+(\d+)(.*)`)
	ldRealCheck    = lazyRegexp(`^\s+"(.*)"[, ]\s*"(.*)"(.*)`)
	ldRealLower    = lazyRegexp(`^\s+l:(\d+)(.*)`)
	ldRealUpper    = lazyRegexp(`^\s+u:(\d+)(.*)`)
	ldPortSuffix   = lazyRegexp(`(:(\d+|[A-Za-z0-9_-]+))?$`)
	ldFallbackWord = lazyRegexp(`(\S+)(\s+(\S+))?\s*$`)
)

// ldServices are the services read_config takes; ldServicePorts its
// ld_port_to_service table, which gives a virtual without `service` one.
var ldServices = []string{"dns", "ftp", "http", "https", "http_proxy", "imap", "imaps", "ldap", "ldaps", "nntp", "mysql",
	"none", "oracle", "pop", "pops", "radius", "pgsql", "sip", "smtp", "submission", "simpletcp"}

var ldServicePorts = map[int]string{21: "ftp", 25: "smtp", 53: "dns", 80: "http", 110: "pop", 119: "nntp", 143: "imap",
	389: "ldap", 443: "https", 587: "submission", 636: "ldaps", 995: "pops", 993: "imaps", 1521: "oracle", 1812: "radius",
	3128: "http_proxy", 3306: "mysql", 5060: "sip", 5432: "pgsql"}

var ldForwarding = map[string]string{"gate": "dr", "masq": "nat", "ipip": "tun"}

// ldSecretKeys are kept without their value.
var ldSecretKeys = map[string]bool{"passwd": true, "secret": true}

// ldSecret is the value kept in place of a secret's.
const ldSecret = "(secret)"

// ldGlobals is what the top level set that virtuals inherit.
type ldGlobals struct {
	checkTimeout, negotiateTimeout, checkInterval, failureCount int
	quiescent, fork                                             string
	fallback                                                    *ldFallback
	fallbackLine                                                int
	fallbackCommand                                             ldValue
}

// ldValue is a key's value and its line (0: not set).
type ldValue struct {
	text string
	line int
}

type ldFallback struct {
	server, port, forward string
}

// ldVirtual is one virtual while its keys are read.
type ldVirtual struct {
	line, svc                      int
	scope                          string
	keptFrom                       int    // p.st.Imported's length at the virtual's line: what is kept for it follows
	family                         string // "4" or "6"
	host, port                     string
	fwmark                         bool
	checktype                      string
	connects, checktypeLine        int
	service                        string
	request, receive, httpmethod   string
	virtualhost                    *string
	checkcommand                   string
	checkport                      int
	checkTimeout, negotiateTimeout int
	checkInterval, failureCount    int
	quiescent                      string
	fallback                       *ldFallback
	fallbackLine                   int
	fallbackCommand                ldValue
	reals                          [][2]any // text, line
	netmask                        string
	netmaskLine                    int
	serviceLine                    int // of a service= line
	// login and database as given; passwd and secret are never kept,
	// only the lines that set them (ldSecretFile says where they go).
	login, database         string
	loginLine, databaseLine int
	passwdLine, secretLine  int
}

type ldParser struct {
	im    *importer
	st    *ipvsmgr.State
	lines lineIndex
	g     ldGlobals
	vs    []*ldVirtual
	seen  map[string]int
	// named holds the names resolved, warned about once each.
	named map[string]bool
}

func (p *ldParser) errf(line int, format string, args ...any) error {
	return &ParseError{Format: FormatLdirectord, Line: line, Msg: fmt.Sprintf(format, args...)}
}

func (p *ldParser) keep(line int, scope, key, value string) {
	if ldSecretKeys[key] {
		value = ldSecret
	}
	p.st.Imported = append(p.st.Imported, ipvsmgr.ImportedKey{Source: FormatLdirectord, Line: line, Scope: scope, Key: key, Value: value})
}

func parseLdirectord(data []byte, im *importer) (*ipvsmgr.State, lineIndex, error) {
	p := &ldParser{im: im, st: &ipvsmgr.State{Services: []ipvsmgr.Service{}}, lines: lineIndex{}, seen: map[string]int{}, named: map[string]bool{},
		g: ldGlobals{checkTimeout: -1, negotiateTimeout: -1, checkInterval: 10, failureCount: 1, quiescent: "no", fork: "no"}}
	text := strings.Split(string(data), "\n")
	if len(text) > 0 && text[len(text)-1] == "" {
		text = text[:len(text)-1]
	}
	for i := 0; i < len(text); {
		line := text[i]
		if m := regexp.MustCompile(`^virtual(6)?\s*=\s*(.*)`).FindStringSubmatch(line); m != nil {
			next, err := p.virtual(text, i, m[1] == "6", m[2])
			if err != nil {
				return nil, nil, err
			}
			i = next
			continue
		}
		i++
		if strings.TrimSpace(line) == "" || strings.HasPrefix(strings.TrimLeft(line, " \t\r\v\f"), "#") {
			continue
		}
		if err := p.global(i, line); err != nil {
			return nil, nil, err
		}
	}
	if err := p.finish(); err != nil {
		return nil, nil, err
	}
	return p.st, p.lines, nil
}

// virtual reads the virtual at text[i] and its indented keys; it returns
// the index of the first line after them.
func (p *ldParser) virtual(text []string, i int, six bool, vattr string) (int, error) {
	line := i + 1
	v := &ldVirtual{line: line, family: "4", checktype: "negotiate", request: "/", httpmethod: "GET", checkcommand: "/bin/true",
		checkTimeout: -1, negotiateTimeout: -1, checkInterval: -1, failureCount: -1, scope: "virtual " + strings.TrimSpace(vattr)}
	if six {
		v.family = "6"
	}
	switch m4, mn, mf, m6 := ldVirtualIPv4().FindStringSubmatch(vattr), ldVirtualName().FindStringSubmatch(vattr), ldVirtualMark().FindStringSubmatch(vattr), ldVirtualIPv6().FindStringSubmatch(vattr); {
	case m4 != nil && !six:
		v.host, v.port = m4[1], m4[2]
	case mn != nil:
		v.host, v.port = mn[1], mn[2]
	case mf != nil:
		v.fwmark, v.port = true, mf[1]
		if mf[1] != strings.TrimSpace(vattr) {
			p.im.warnf(line, "virtual=%s is read as firewall mark %s, as ldirectord reads it", strings.TrimSpace(vattr), mf[1])
		}
	case m6 != nil && !six:
		return 0, p.errf(line, "virtual=%s: an IPv6 address needs virtual6=", vattr)
	case m6 != nil:
		if _, err := netip.ParseAddr(m6[1]); err != nil {
			return 0, p.errf(line, "virtual6=%s: invalid IPv6 address %q", vattr, m6[1])
		}
		v.host, v.port = m6[1], m6[2]
	default:
		return 0, p.errf(line, "virtual=%s: invalid address for virtual server", vattr)
	}
	protocol := "tcp"
	if v.fwmark {
		protocol, v.service = "fwm", "none"
	} else if v.port == "53" || v.port == "domain" {
		protocol = "udp"
	}
	p.im.declare(1, 0)
	v.svc = len(p.st.Services)
	p.st.Services = append(p.st.Services, ipvsmgr.Service{Protocol: protocol, Scheduler: "wrr", Servers: []ipvsmgr.Server{}})
	p.lines[fmt.Sprintf("services[%d]", v.svc)] = line
	p.vs = append(p.vs, v)
	v.keptFrom = len(p.st.Imported)
	for i++; i < len(text); i++ {
		raw := text[i]
		if strings.HasPrefix(strings.TrimLeft(raw, " \t\r\v\f"), "#") {
			continue
		}
		if c := strings.IndexByte(raw, '#'); c >= 0 {
			raw = raw[:c]
		}
		raw = strings.ReplaceAll(raw, "\t", "    ")
		m := ldIndented().FindStringSubmatch(raw)
		if m == nil {
			break
		}
		if err := p.virtualKey(v, i+1, m[1]); err != nil {
			return 0, err
		}
	}
	return i, p.resolve(v, i)
}

// virtualKey is one indented line of a virtual.
func (p *ldParser) virtualKey(v *ldVirtual, line int, rcmd string) error {
	svc := &p.st.Services[v.svc]
	kv := ldKeyValue().FindStringSubmatch(rcmd)
	if kv == nil {
		return p.im.unknown(line, "unknown key %q in %s", rcmd, v.scope)
	}
	k := ldKey{p: p, v: v, svc: svc, scope: v.scope, line: line, key: kv[1], val: kv[2]}
	set, ok := ldVirtualKeys[k.key]
	if !ok {
		return p.im.unknown(line, "unknown key %s=%s in %s", k.key, k.val, v.scope)
	}
	return set(k)
}

// ldKey is one key=value line, of the top level (v and svc nil, scope "")
// or of a virtual, read into the virtual or its service.
type ldKey struct {
	p        *ldParser
	v        *ldVirtual
	svc      *ipvsmgr.Service
	scope    string
	line     int
	key, val string
}

// ldVirtualKeys are the keys of a virtual, each with what reads it.
var ldVirtualKeys = map[string]func(ldKey) error{
	"real":             ldKey.real,
	"real6":            ldKey.real,
	"request":          ldKey.request,
	"receive":          ldKey.receive,
	"checktype":        ldKey.checktype,
	"checkcommand":     ldKey.checkcommand,
	"checktimeout":     ldKey.checkTimeout,
	"negotiatetimeout": ldKey.negotiateTimeout,
	"connecttimeout":   ldKey.connectTimeout,
	"failurecount":     ldKey.failureCount,
	"checkinterval":    ldKey.checkInterval,
	"checkport":        ldKey.checkport,
	"login":            ldKey.credential,
	"database":         ldKey.credential,
	"passwd":           ldKey.secret,
	"secret":           ldKey.secret,
	"load":             ldKey.load,
	"checkcount":       ldKey.checkcount,
	"scheduler":        ldKey.scheduler,
	"persistent":       ldKey.persistent,
	"schedflags":       ldKey.schedflags,
	"netmask":          ldKey.netmask,
	"protocol":         ldKey.protocol,
	"ops":              ldKey.ops,
	"service":          ldKey.service,
	"httpmethod":       ldKey.httpmethod,
	"virtualhost":      ldKey.virtualhost,
	"fallback":         ldKey.fallback,
	"fallback6":        ldKey.fallback,
	"quiescent":        ldKey.quiescent,
	"cleanstop":        ldKey.keptYesNo,
	"emailalertfreq":   ldKey.emailalertfreq,
	"emailalertstatus": ldKey.emailalertstatus,
	"fallbackcommand":  ldKey.fallbackcommand,
	"emailalert":       ldKey.kept,
	"monitorfile":      ldKey.kept,
	"smtp":             ldKey.kept,
	"servicename":      ldKey.kept,
	"comment":          ldKey.kept,
}

// errf is a parse error on the key's line.
func (k ldKey) errf(format string, args ...any) error {
	return k.p.errf(k.line, format, args...)
}

// keep records the key as imported, not used.
func (k ldKey) keep() {
	k.p.keep(k.line, k.scope, k.key, k.val)
}

// quoted is the value in double quotes, which must not be empty.
func (k ldKey) quoted(what string) (string, error) {
	q := ldQuoted().FindStringSubmatch(k.val)
	if q == nil {
		return "", k.p.im.unknown(k.line, "%s=%s in %s: ldirectord reads %s only in double quotes", k.key, k.val, k.scope, k.key)
	}
	if q[1] == "" {
		return "", k.errf("%s=%s: no %s", k.key, k.val, what)
	}
	return q[1], nil
}

// positive is the number the value starts with, which must be over 0.
func (k ldKey) positive(what string) (int, error) {
	d := ldDigits().FindString(k.val)
	n, _ := strconv.Atoi(d)
	if n <= 0 {
		return 0, k.errf("%s=%s: invalid %s", k.key, k.val, what)
	}
	return n, nil
}

// yesNo refuses a value other than yes or no.
func (k ldKey) yesNo() error {
	if k.val != "yes" && k.val != "no" {
		return k.errf("%s=%q: must be yes or no", k.key, k.val)
	}
	return nil
}

// sameFamily refuses a real6 or fallback6 in a virtual, or the other way round.
func (k ldKey) sameFamily(six bool, takes string) error {
	if six != (k.v.family == "6") {
		suffix := map[string]string{"4": "", "6": "6"}[k.v.family]
		return k.errf("%s=%s: a virtual%s takes %s%s", k.key, k.val, suffix, takes, suffix)
	}
	return nil
}

// command is a command given in double quotes or as it is.
func (k ldKey) command() string {
	if q := ldQuoted().FindStringSubmatch(k.val); q != nil {
		return q[1]
	}
	return k.val
}

// real is a real server line, read when the virtual ends (real6 in a virtual6).
func (k ldKey) real() error {
	if err := k.sameFamily(k.key == "real6", "real"); err != nil {
		return err
	}
	k.v.reals = append(k.v.reals, [2]any{k.val, k.line})
	return nil
}

// request is the check's request, a path that starts with /.
func (k ldKey) request() error {
	var err error
	if k.v.request, err = k.quoted("request string"); err == nil && !strings.HasPrefix(k.v.request, "/") {
		k.v.request = "/" + k.v.request
	}
	return err
}

// receive is what the check expects back.
func (k ldKey) receive() (err error) {
	k.v.receive, err = k.quoted("receive string")
	return err
}

// checktype is the kind of check, or a number: its connects between full checks.
func (k ldKey) checktype() error {
	if d := ldDigits().FindString(k.val); d != "" {
		k.v.connects, _ = strconv.Atoi(d)
		k.v.checktype = "combined"
		k.v.checktypeLine = k.line
		return nil
	}
	w := regexp.MustCompile(`[\w-]+`).FindString(k.val)
	switch w {
	case "connect", "negotiate", "ping", "off", "on", "external", "external-perl":
		k.v.checktype = w
		if w == "external-perl" {
			k.keep()
		}
		return nil
	}
	return k.errf("checktype=%s: must be connect, negotiate, on, off, ping, external, external-perl or a number", k.val)
}

// checkcommand is an external check's program.
func (k ldKey) checkcommand() error {
	c := k.command()
	if c == "" {
		return k.errf("checkcommand=%s: invalid check command", k.val)
	}
	k.v.checkcommand = c
	return nil
}

// checkTimeout is the virtual's connect timeout.
func (k ldKey) checkTimeout() (err error) {
	k.v.checkTimeout, err = k.positive("check timeout")
	return err
}

// negotiateTimeout is the virtual's negotiate timeout.
func (k ldKey) negotiateTimeout() (err error) {
	k.v.negotiateTimeout, err = k.positive("negotiate timeout")
	return err
}

// connectTimeout is refused, as ldirectord refuses it.
func (k ldKey) connectTimeout() error {
	return k.errf("connecttimeout=%s: deprecated in favour of negotiatetimeout (ldirectord refuses it)", k.val)
}

// failureCount is the failed checks that take a real server out.
func (k ldKey) failureCount() (err error) {
	k.v.failureCount, err = k.positive("failure count")
	return err
}

// checkInterval is the seconds between checks (used with fork=yes).
func (k ldKey) checkInterval() (err error) {
	k.v.checkInterval, err = k.positive("check interval")
	return err
}

// checkport is the port the check connects to.
func (k ldKey) checkport() error {
	d := ldDigits().FindString(k.val)
	if d == "" {
		return k.errf("checkport=%s: invalid port", k.val)
	}
	n, _ := strconv.Atoi(d)
	if n <= 0 || n >= 65536 {
		return k.errf("checkport=%s: must be in range 1..65535", k.val)
	}
	k.v.checkport = n
	return nil
}

// credential is login or database, kept with its line.
func (k ldKey) credential() error {
	q, err := k.quoted(k.key)
	if err != nil {
		return err
	}
	if k.key == "login" {
		k.v.login, k.v.loginLine = q, k.line
	} else {
		k.v.database, k.v.databaseLine = q, k.line
	}
	return nil
}

// secret is passwd or secret, of which only the line is kept.
func (k ldKey) secret() error {
	if _, err := k.quoted(k.key); err != nil {
		return err
	}
	if k.key == "passwd" {
		k.v.passwdLine = k.line
	} else {
		k.v.secretLine = k.line
	}
	return nil
}

// load is a load check ipvsctl does not run, kept.
func (k ldKey) load() error {
	if _, err := k.quoted(k.key); err != nil {
		return err
	}
	k.keep()
	return nil
}

// checkcount is deprecated in ldirectord, kept with a warning.
func (k ldKey) checkcount() error {
	if _, err := k.positive("check count"); err != nil {
		return err
	}
	k.p.im.warnf(k.line, "checkcount is deprecated in ldirectord (see failurecount); kept, not used")
	k.keep()
	return nil
}

// scheduler is the service's scheduler.
func (k ldKey) scheduler() error {
	s := regexp.MustCompile(`[a-z]+`).FindString(k.val)
	if s == "" {
		return k.errf("scheduler=%s: invalid scheduler, should be only lowercase letters (a-z)", k.val)
	}
	k.svc.Scheduler = s
	return nil
}

// persistent is the service's persistence; 0 is ipvsadm's default.
func (k ldKey) persistent() error {
	d := ldDigits().FindString(k.val)
	if d == "" {
		return k.errf("persistent=%s: invalid persistent timeout", k.val)
	}
	k.svc.Persistence, _ = strconv.Atoi(d)
	if k.svc.Persistence == 0 {
		// ipvsadm -p 0 is its default timeout, 300 s.
		k.svc.Persistence = 300
		k.p.im.warnf(k.line, "persistent=0 is ipvsadm's default persistence, 300 s")
	}
	return nil
}

// schedflags is the scheduler's flags, without their sh- prefix.
func (k ldKey) schedflags() error {
	f := strings.Fields(k.val)
	if len(f) == 0 {
		return k.errf("schedflags=%s: invalid sched-flags", k.val)
	}
	for _, x := range strings.Split(f[0], ",") {
		k.svc.SchedulerFlags = append(k.svc.SchedulerFlags, strings.TrimPrefix(x, "sh-"))
	}
	return nil
}

// netmask is the persistence netmask: a dotted quad, or a prefix length in a virtual6.
func (k ldKey) netmask() error {
	if k.v.family == "6" {
		n, err := strconv.Atoi(k.val)
		if err != nil || n < 1 || n > 128 {
			return k.errf("netmask=%s: a prefix length between 1 and 128 is required", k.val)
		}
	} else if !regexp.MustCompile(`^\d+\.\d+\.\d+\.\d+$`).MatchString(k.val) {
		return k.errf("netmask=%s: dotted quad notation is required", k.val)
	}
	k.v.netmask, k.v.netmaskLine = k.val, k.line
	return nil
}

// protocol is the service's protocol; fwm for a fwmark virtual.
func (k ldKey) protocol() error {
	w := regexp.MustCompile(`\w+`).FindString(k.val)
	switch {
	case w == "":
		return k.errf("protocol=%s: invalid protocol", k.val)
	case k.v.fwmark && w != "fwm":
		return k.errf("protocol=%s: must be fwm if the virtual service is a fwmark (a number)", k.val)
	case !k.v.fwmark && w != "tcp" && w != "udp":
		return k.errf("protocol=%s: must be tcp or udp if the virtual service is an address and port", k.val)
	case !k.v.fwmark:
		k.svc.Protocol = w
	}
	return nil
}

// ops is one-packet scheduling.
func (k ldKey) ops() error {
	if err := k.yesNo(); err != nil {
		return err
	}
	k.svc.OnePacket = k.val == "yes"
	return nil
}

// service is the protocol a negotiate check speaks.
func (k ldKey) service() error {
	w := regexp.MustCompile(`\w+`).FindString(k.val)
	if !slices.Contains(ldServices, w) {
		return k.errf("service=%s: must be one of %s", k.val, strings.Join(ldServices, ", "))
	}
	k.v.service, k.v.serviceLine = w, k.line
	return nil
}

// httpmethod is an http check's method, GET or HEAD.
func (k ldKey) httpmethod() error {
	w := strings.ToUpper(regexp.MustCompile(`\w+`).FindString(k.val))
	if w != "GET" && w != "HEAD" {
		return k.errf("httpmethod=%s: must be GET or HEAD", k.val)
	}
	k.v.httpmethod = w
	return nil
}

// virtualhost is an http check's Host, quotes taken off.
func (k ldKey) virtualhost() error {
	h := regexp.MustCompile(`"?([^"]*)"?`).FindStringSubmatch(k.val)[1]
	k.v.virtualhost = &h
	return nil
}

// fallback is the virtual's sorry server (fallback6 in a virtual6).
func (k ldKey) fallback() error {
	if err := k.sameFamily(k.key == "fallback6", "fallback"); err != nil {
		return err
	}
	fb, err := k.p.parseFallback(k.line, k.val, k.v.port)
	if err != nil {
		return err
	}
	k.v.fallback, k.v.fallbackLine = fb, k.line
	return nil
}

// quiescent is whether a failed real server is quiesced rather than removed.
func (k ldKey) quiescent() error {
	if err := k.yesNo(); err != nil {
		return err
	}
	k.v.quiescent = k.val
	return nil
}

// keptYesNo is a yes or no ipvsctl does not use, kept.
func (k ldKey) keptYesNo() error {
	if err := k.yesNo(); err != nil {
		return err
	}
	k.keep()
	return nil
}

// emailalertfreq is a number ipvsctl does not use, kept.
func (k ldKey) emailalertfreq() error {
	if ldDigits().FindString(k.val) == "" {
		return k.errf("emailalertfreq=%s: invalid email alert frequency", k.val)
	}
	k.keep()
	return nil
}

// emailalertstatus is the states mailed about, kept.
func (k ldKey) emailalertstatus() error {
	if err := k.p.alertStatus(k.line, k.val); err != nil {
		return err
	}
	k.keep()
	return nil
}

// fallbackcommand takes the value in double quotes, or as it is, as ldirectord does.
func (k ldKey) fallbackcommand() error {
	c := k.command()
	if c == "" {
		return k.errf("%s=%s: invalid fallback command", k.key, k.val)
	}
	k.v.fallbackCommand = ldValue{c, k.line}
	return nil
}

// kept is a key ipvsctl does not use, kept; only servicename and comment may be empty.
func (k ldKey) kept() error {
	if strings.Trim(k.val, `"`) == "" && k.key != "servicename" && k.key != "comment" {
		return k.errf("%s=%s: no value", k.key, k.val)
	}
	k.keep()
	return nil
}

func (p *ldParser) alertStatus(line int, val string) error {
	parts := regexp.MustCompile(`\s*,\s*`).Split(val, -1)
	none := false
	for _, s := range parts {
		none = none || s == "none"
	}
	for _, s := range parts {
		switch s {
		case "none":
			continue
		case "all", "starting", "stopping", "running", "reloading":
		default:
			return p.errf(line, "emailalertstatus=%s: invalid email alert status at %q", val, s)
		}
		if none {
			return p.errf(line, "emailalertstatus=%s: %q specified with none", val, s)
		}
	}
	return nil
}

// parseFallback is read_config's parse_fallback: HOST[:PORT] [gate|masq|ipip].
func (p *ldParser) parseFallback(line int, val, vport string) (*ldFallback, error) {
	fb := &ldFallback{forward: "gate"}
	s := val
	if m := ldFallbackWord().FindStringSubmatch(s); m != nil {
		s, fb.forward = m[1], m[3]
	}
	if m := ldPortSuffix().FindStringSubmatchIndex(s); m != nil {
		if m[4] >= 0 {
			fb.port = s[m[4]:m[5]]
		}
		fb.server = s[:m[0]]
	}
	if fb.port == "" {
		fb.port = vport
	}
	if fb.forward == "" {
		fb.forward = "gate"
	}
	if _, ok := ldForwarding[fb.forward]; !ok {
		return nil, p.errf(line, "fallback=%s: forward method must be gate, masq or ipip", val)
	}
	return fb, nil
}

// global is one line at the top level.
func (p *ldParser) global(line int, text string) error {
	kv := ldKeyValue().FindStringSubmatch(text)
	if kv == nil {
		if text == "supervised" {
			p.im.warnf(line, "a bare supervised is supervised=yes")
			p.keep(line, "", "supervised", "yes")
			return nil
		}
		return p.im.unknown(line, "unknown command %q", text)
	}
	k := ldKey{p: p, line: line, key: kv[1], val: kv[2]}
	set, ok := ldGlobalKeys[k.key]
	if !ok {
		return p.im.unknown(line, "unknown command %s=%s", k.key, k.val)
	}
	return set(k)
}

// ldGlobalKeys are the keys of the top level, each with what reads it.
var ldGlobalKeys = map[string]func(ldKey) error{
	"checktimeout":     ldKey.globalCheckTimeout,
	"negotiatetimeout": ldKey.globalNegotiateTimeout,
	"checkinterval":    ldKey.globalCheckInterval,
	"failurecount":     ldKey.globalFailureCount,
	"connecttimeout":   ldKey.connectTimeout,
	"timeout":          ldKey.globalTimeout,
	"checkcount":       ldKey.globalCheckcount,
	"fallback":         ldKey.globalFallback,
	"fallback6":        ldKey.globalFallback,
	"quiescent":        ldKey.globalQuiescent,
	"fork":             ldKey.globalFork,
	"autoreload":       ldKey.keptYesNo,
	"readdquiescent":   ldKey.keptYesNo,
	"cleanstop":        ldKey.keptYesNo,
	"supervised":       ldKey.keptYesNo,
	"callback":         ldKey.keptQuoted,
	"logfile":          ldKey.keptQuoted,
	"emailalertfreq":   ldKey.emailalertfreq,
	"emailalertstatus": ldKey.emailalertstatus,
	"fallbackcommand":  ldKey.globalFallbackcommand,
	"maintenancedir":   ldKey.maintenancedir,
	"execute":          ldKey.kept,
	"emailalert":       ldKey.kept,
	"emailalertfrom":   ldKey.kept,
	"smtp":             ldKey.kept,
}

// globalCheckTimeout is the virtuals' default connect timeout.
func (k ldKey) globalCheckTimeout() (err error) {
	k.p.g.checkTimeout, err = k.positive("check timeout value")
	return err
}

// globalNegotiateTimeout is the virtuals' default negotiate timeout.
func (k ldKey) globalNegotiateTimeout() (err error) {
	k.p.g.negotiateTimeout, err = k.positive("negotiate timeout value")
	return err
}

// globalCheckInterval is the seconds between checks.
func (k ldKey) globalCheckInterval() (err error) {
	k.p.g.checkInterval, err = k.positive("check interval value")
	return err
}

// globalFailureCount is the virtuals' default failure count.
func (k ldKey) globalFailureCount() (err error) {
	k.p.g.failureCount, err = k.positive("failure count value")
	return err
}

// globalTimeout is refused, as ldirectord refuses it.
func (k ldKey) globalTimeout() error {
	return k.errf("timeout=%s: deprecated in favour of checktimeout and negotiatetimeout (ldirectord refuses it)", k.val)
}

// globalCheckcount is deprecated in ldirectord, kept with a warning.
func (k ldKey) globalCheckcount() error {
	if _, err := k.positive("check count value"); err != nil {
		return err
	}
	k.p.im.warnf(k.line, "checkcount is deprecated in ldirectord (see failurecount); kept, not used")
	k.keep()
	return nil
}

// globalFallback is the virtuals' fallback; a virtual6's default is kept.
func (k ldKey) globalFallback() error {
	fb, err := k.p.parseFallback(k.line, k.val, "")
	if err != nil {
		return err
	}
	if k.key == "fallback6" {
		k.keep()
		return nil
	}
	k.p.g.fallback, k.p.g.fallbackLine = fb, k.line
	return nil
}

// globalQuiescent is the virtuals' default quiescent.
func (k ldKey) globalQuiescent() error {
	if err := k.yesNo(); err != nil {
		return err
	}
	k.p.g.quiescent = k.val
	return nil
}

// globalFork is whether each virtual is checked in a process of its own, kept; a virtual's checkinterval needs it.
func (k ldKey) globalFork() error {
	if err := k.yesNo(); err != nil {
		return err
	}
	k.p.g.fork = k.val
	k.keep()
	return nil
}

// keptQuoted is a value in double quotes ipvsctl does not use, kept.
func (k ldKey) keptQuoted() error {
	if ldQuoted().FindStringSubmatch(k.val) == nil {
		return k.p.im.unknown(k.line, "%s=%s: ldirectord reads %s only in double quotes", k.key, k.val, k.key)
	}
	k.keep()
	return nil
}

// globalFallbackcommand is read as it is (quotes and all): ldirectord's shell takes them off.
func (k ldKey) globalFallbackcommand() error {
	if k.val == "" {
		return k.errf("%s=%s: invalid fallback command", k.key, k.val)
	}
	k.p.g.fallbackCommand = ldValue{k.val, k.line}
	return nil
}

// maintenancedir is used when a clean absolute path, else kept.
func (k ldKey) maintenancedir() error {
	if k.val == "" {
		return k.errf("%s=%s: maintenance directory not specified", k.key, k.val)
	}
	if !strings.HasPrefix(k.val, "/") || filepath.Clean(k.val) != k.val {
		// ldirectord takes it as it is, quotes included, relative to where it runs.
		k.p.im.warnf(k.line, "maintenancedir=%s: not a clean absolute path; kept, not used", k.val)
		k.keep()
		return nil
	}
	k.p.st.Settings.MaintenanceDir = k.val
	k.p.lines["settings.maintenance_dir"] = k.line
	return nil
}

// resolveHost is ld_gethostbyname: an address as it is, a name through
// the resolver, with a warning that names what it became.
func (p *ldParser) resolveHost(line int, host, family string) (string, bool) {
	host = strings.TrimSuffix(strings.TrimPrefix(host, "["), "]")
	if a, err := netip.ParseAddr(host); err == nil {
		if (family == "6") != a.Is6() {
			return "", false
		}
		return a.String(), true
	}
	lookup := p.im.opts.LookupHost
	if lookup == nil {
		lookup = net.LookupHost
	}
	addrs, err := lookup(host)
	if err != nil {
		return "", false
	}
	for _, s := range addrs {
		if a, err := netip.ParseAddr(s); err == nil && (family == "6") == (a.Is6() && !a.Is4In6()) {
			p.im.warnf(line, "%s resolved to %s", host, a.String())
			return a.String(), true
		}
	}
	return "", false
}

// resolvePort is ld_getservbyname: a number below 65536 as it is, a name
// from the services file for proto ("" for any).
func (p *ldParser) resolvePort(line int, port, proto string) (int, bool) {
	if regexp.MustCompile(`^[0-9]+$`).MatchString(port) {
		n, err := strconv.Atoi(port)
		return n, err == nil && n < 65536
	}
	protos := []string{proto}
	if proto == "" {
		protos = []string{"tcp", "udp"}
	}
	for _, pr := range protos {
		if n, ok := p.im.servicePort(port, pr); ok {
			if !p.named["port "+port] {
				p.named["port "+port] = true
				p.im.warnf(line, "port %s resolved to %d (and so wherever it is named again)", port, n)
			}
			return n, true
		}
	}
	return 0, false
}

// resolve finishes a virtual once its keys are read, as read_config does:
// its address, fallback and real servers, now that the protocol is known.
func (p *ldParser) resolve(v *ldVirtual, endLine int) error {
	svc := &p.st.Services[v.svc]
	if v.fwmark {
		n, err := strconv.ParseUint(v.port, 10, 32)
		if err != nil || n == 0 {
			return p.errf(v.line, "virtual=%s: invalid firewall mark", v.port)
		}
		svc.FWMark, svc.Protocol = uint32(n), ""
		if v.family == "6" {
			p.keep(v.line, v.scope, "virtual6", v.port)
		}
	} else {
		addr, ok := p.resolveHost(v.line, v.host, v.family)
		port, ok2 := p.resolvePort(v.line, v.port, svc.Protocol)
		if !ok || !ok2 || port == 0 {
			return p.errf(v.line, "virtual=%s:%s: invalid address for virtual service (could not resolve)", v.host, v.port)
		}
		svc.Address, svc.Port = addr, port
		if v.service == "" {
			v.service = ldServicePorts[port]
			if v.service == "" {
				v.service = "none"
			}
		}
	}
	// Kept keys name the virtual as an export writes it, resolved: only
	// this virtual's (a tcp and a udp virtual may share its text), and a udp
	// virtual's as shared until rescope knows.
	scope := ldScope(svc, map[string]bool{ldHostPort(svc.Address, svc.Port): true})
	for i := v.keptFrom; i < len(p.st.Imported); i++ {
		if p.st.Imported[i].Scope == v.scope {
			p.st.Imported[i].Scope = scope
		}
	}
	v.scope = scope
	if v.fallback != nil {
		if err := p.resolveFallback(v.fallbackLine, v.fallback, svc.Protocol, v.family); err != nil {
			return err
		}
	}
	for _, r := range v.reals {
		if err := p.real(v, r[0].(string), r[1].(int)); err != nil {
			return err
		}
	}
	id := fmt.Sprintf("%s:%s:%d:%d", svc.Protocol, svc.Address, svc.Port, svc.FWMark)
	if _, dup := p.seen[id]; dup {
		return p.errf(endLine, "%s: duplicate virtual server", v.scope)
	}
	p.seen[id] = v.line
	return nil
}

func (p *ldParser) resolveFallback(line int, fb *ldFallback, proto, family string) error {
	addr, ok := p.resolveHost(line, fb.server, family)
	if !ok {
		return p.errf(line, "fallback %s: invalid IPv%s address or could not resolve", fb.server, family)
	}
	fb.server = addr
	if fb.port != "" {
		n, ok := p.resolvePort(line, fb.port, proto)
		if !ok || n == 0 {
			return p.errf(line, "fallback %s:%s: invalid port for fallback server", addr, fb.port)
		}
		fb.port = strconv.Itoa(n)
	}
	return nil
}

// real is read_config's _ld_read_config_real_resolve and add_real_server:
// HOST[->HOST][:PORT] gate|masq|ipip [WEIGHT] ["REQUEST", "RECEIVE"] [l:N] [u:N].
func (p *ldParser) real(v *ldVirtual, text string, line int) error {
	m := ldReal().FindStringSubmatch(text)
	if m == nil {
		return p.errf(line, "real=%s: invalid address for real server (wrong format)", text)
	}
	first, ok := p.resolveHost(line, m[1], v.family)
	if !ok {
		return p.errf(line, "real=%s: invalid address (%s) for real server (could not resolve host)", text, m[1])
	}
	port := 0
	if m[5] != "" {
		if port, ok = p.resolvePort(line, m[5], ""); !ok {
			return p.errf(line, "real=%s: invalid port (%s) for real server (could not resolve port)", text, m[5])
		}
	}
	addrs := []string{first}
	if m[3] != "" {
		var err error
		if addrs, err = p.realRange(line, text, first, m[3], v.family); err != nil {
			return err
		}
	}
	rs, check, err := p.realOptions(line, text, m[6])
	if err != nil {
		return err
	}
	if port != 0 {
		rs.Port = port
	}
	svc := &p.st.Services[v.svc]
	p.im.declare(0, len(addrs))
	for _, a := range addrs {
		r := rs
		r.Address = a
		if check != nil {
			req := check[0]
			if !strings.HasPrefix(req, "/") {
				req = "/" + req
			}
			r.Check = &ipvsmgr.Check{Path: req, ExpectBody: check[1]}
		}
		p.lines[fmt.Sprintf("services[%d].servers[%d]", v.svc, len(svc.Servers))] = line
		svc.Servers = append(svc.Servers, r)
	}
	return nil
}

// realRange is the addresses of a real's HOST->HOST, first to last (IPv4 only).
func (p *ldParser) realRange(line int, text, first, lastHost, family string) ([]string, error) {
	last, ok := p.resolveHost(line, lastHost, family)
	if !ok {
		return nil, p.errf(line, "real=%s: invalid address (%s) for real server (could not resolve end host)", text, lastHost)
	}
	if family == "6" {
		return nil, p.errf(line, "real=%s: address range for IPv6 is not supported (by ldirectord)", text)
	}
	a, b := netip.MustParseAddr(first), netip.MustParseAddr(last)
	if b.Less(a) {
		return nil, p.errf(line, "real=%s: invalid range %s-%s: the first must not be above the last", text, first, last)
	}
	if n := ipv4Int(b) - ipv4Int(a); n >= 65536 {
		return nil, p.errf(line, "real=%s: a range of %d real servers", text, n+1)
	}
	var addrs []string
	for x := a; ; x = x.Next() {
		addrs = append(addrs, x.String())
		if x == b {
			return addrs, nil
		}
	}
}

// realOptions reads what follows a real's address: the forwarding method,
// the weight, the request and receive of its check, the thresholds.
func (p *ldParser) realOptions(line int, text, opts string) (ipvsmgr.Server, *[2]string, error) {
	flags := ldRealFlags().FindStringSubmatch(opts)
	if flags == nil || ldForwarding[flags[1]] == "" {
		return ipvsmgr.Server{}, nil, p.errf(line, "real=%s: forward method must be gate, masq or ipip", text)
	}
	rs := ipvsmgr.Server{Forwarding: ldForwarding[flags[1]], Weight: intPtr(1)}
	rest := flags[2]
	if w := ldRealWeight().FindStringSubmatch(rest); w != nil {
		n, err := strconv.Atoi(w[1])
		if err != nil {
			return ipvsmgr.Server{}, nil, p.errf(line, "real=%s: invalid weight %s", text, w[1])
		}
		rs.Weight, rest = intPtr(n), w[2]
	}
	var check *[2]string
	if c := ldRealCheck().FindStringSubmatch(rest); c != nil {
		check, rest = &[2]string{c[1], c[2]}, c[3]
	}
	if l := ldRealLower().FindStringSubmatch(rest); l != nil {
		rs.LowerThreshold, _ = strconv.Atoi(l[1])
		rest = l[2]
	}
	if u := ldRealUpper().FindStringSubmatch(rest); u != nil {
		rs.UpperThreshold, _ = strconv.Atoi(u[1])
		rest = u[2]
	}
	if strings.TrimSpace(rest) != "" {
		return ipvsmgr.Server{}, nil, p.errf(line, "real=%s: invalid real server line, around %q", text, rest)
	}
	return rs, check, nil
}

func ipv4Int(a netip.Addr) int {
	b := a.As4()
	return int(b[0])<<24 | int(b[1])<<16 | int(b[2])<<8 | int(b[3])
}

// finish applies what the top level sets to every virtual (ldirectord
// reads it at start-up, after the whole file): timeouts, interval, failure
// count, quiescent and the global fallback, and makes each virtual's check.
func (p *ldParser) finish() error {
	p.rescope()
	for _, v := range p.vs {
		svc := &p.st.Services[v.svc]
		if v.netmask != "" {
			// ldirectord gives ipvsadm -M only with -p.
			if svc.Persistence > 0 {
				svc.PersistenceNetmask = v.netmask
				p.lines[fmt.Sprintf("services[%d].persistence_netmask", v.svc)] = v.netmaskLine
			} else {
				p.keep(v.netmaskLine, v.scope, "netmask", v.netmask)
			}
		}
		if v.fallback == nil && p.g.fallback != nil && !v.fwmark && v.family == "4" {
			fb := *p.g.fallback
			if err := p.resolveFallback(p.g.fallbackLine, &fb, svc.Protocol, "4"); err != nil {
				return err
			}
			v.fallback = &fb
		}
		if v.fallback != nil {
			port, _ := strconv.Atoi(v.fallback.port)
			svc.SorryServer = &ipvsmgr.SorryServer{Address: v.fallback.server, Port: port}
			if port != svc.Port && v.fallback.forward != "masq" {
				// Direct routing and tunnels keep the destination port.
				p.im.warnf(p.g.fallbackLine, "fallback %s:%d (%s) in %s: %s forwarding keeps the port, the sorry server is reached on %d",
					v.fallback.server, port, v.fallback.forward, v.scope, v.fallback.forward, svc.Port)
				port = svc.Port
			}
			if port == svc.Port {
				svc.SorryServer.Port = 0
			}
			if v.fallback.forward != "gate" {
				p.keep(v.line, v.scope, "fallback-forward", v.fallback.forward)
			}
		}
		p.check(v, svc)
		p.fallbackCommand(v, svc)
	}
	return nil
}

// fallbackCommand makes the virtual's fallbackcommand (its own, else the
// global one) the service's quorum programs: ldirectord runs it with
// "start" when no real server is left (do_fallback_command from
// fallback_on) and "stop" when the first is back, each time with the
// virtual's ADDRESS:PORT and protocol, which is the quorum of 1 lost and
// regained. ldirectord runs it through the shell; a command that needs one
// (or does not name its program in full) is kept instead.
func (p *ldParser) fallbackCommand(v *ldVirtual, svc *ipvsmgr.Service) {
	fc := v.fallbackCommand
	if fc.line == 0 {
		fc = p.g.fallbackCommand
	}
	if fc.line == 0 {
		return
	}
	argv, err := ipvsmgr.SplitCommand(fc.text)
	switch {
	case err != nil || len(argv) == 0 || strings.ContainsAny(fc.text, "|&;<>()$`*?[~\n"):
		p.im.warnf(fc.line, "fallbackcommand=%s in %s needs a shell (ipvsctl runs no shell); kept, not run", fc.text, v.scope)
	case !strings.HasPrefix(argv[0], "/"):
		p.im.warnf(fc.line, "fallbackcommand=%s in %s: %s is not an absolute path (ipvsctl runs programs by their full path); kept, not run", fc.text, v.scope, argv[0])
	default:
		where, proto := ldFallbackArgs(svc)
		svc.QuorumDown = append(slices.Clone(argv), "start", where, proto)
		svc.QuorumUp = append(slices.Clone(argv), "stop", where, proto)
		p.lines[fmt.Sprintf("services[%d].quorum_down", v.svc)] = fc.line
		p.lines[fmt.Sprintf("services[%d].quorum_up", v.svc)] = fc.line
		return
	}
	p.keep(fc.line, map[bool]string{true: v.scope, false: ""}[fc == v.fallbackCommand], "fallbackcommand", fc.text)
}

// ldTimeouts is ld_setup's choice of the connect and negotiate timeouts.
func (p *ldParser) timeouts(v *ldVirtual) (connect, negotiate int) {
	first := func(xs ...int) int {
		for _, x := range xs {
			if x >= 0 {
				return x
			}
		}
		return -1
	}
	connect = first(v.checkTimeout, v.negotiateTimeout, p.g.checkTimeout, p.g.negotiateTimeout, 5)
	negotiate = first(v.negotiateTimeout, v.checkTimeout, p.g.negotiateTimeout, p.g.checkTimeout, 30)
	return connect, negotiate
}

// ldFallbackArgs are the virtual's words after "start" or "stop" in
// ldirectord's fallbackcommand call: "$v->{server}:$v->{port}" and
// "$v->{protocol}" (a fwmark virtual has no server, port 0, protocol fwm).
func ldFallbackArgs(svc *ipvsmgr.Service) (where, proto string) {
	if svc.FWMark > 0 {
		return ":0", "fwm"
	}
	return ldHostPort(svc.Address, svc.Port), cmp.Or(svc.Protocol, "tcp")
}

// connectChecks gives c checktype = N's connects between full checks
// (ldirectord's "combined"), where c is a check that connects; elsewhere
// the key is kept, with a warning.
func (p *ldParser) connectChecks(v *ldVirtual, c *ipvsmgr.Check) {
	switch {
	case v.checktype != "combined" || v.connects == 0:
		// checktype = 0: ldirectord's count is never below 0: every run is the full check.
	case c != nil && slices.Contains(ipvsmgr.ConnectCheckTypes(), c.Type) && c.Protocol != "udp":
		c.ConnectChecks = v.connects
		p.lines[fmt.Sprintf("services[%d].check.connect_checks", v.svc)] = v.checktypeLine
	default:
		what := "no check"
		if c != nil {
			what = "a " + c.Type + " check"
		}
		p.im.warnf(v.checktypeLine, "checktype=%d in %s: the connects between its full checks are not made on %s; every run is the full check, checktype kept", v.connects, v.scope, what)
		p.keep(v.checktypeLine, v.scope, "checktype", strconv.Itoa(v.connects))
	}
}

// check makes the service's check from the virtual's checktype and service.
func (p *ldParser) check(v *ldVirtual, svc *ipvsmgr.Service) {
	connect, negotiate := p.timeouts(v)
	c := p.checkSchedule(v)
	kind := v.checktype
	if kind == "combined" {
		kind = "negotiate" // the full check; its connects in between are kept with checktype
	}
	if kind != "negotiate" && v.serviceLine > 0 {
		// Only a negotiate check speaks the service; kept for one.
		p.keep(v.serviceLine, v.scope, "service", v.service)
	}
	switch kind {
	case "on":
		c = nil
	case "off":
		c = nil
		for i := range svc.Servers {
			svc.Servers[i].Health = "down"
		}
	case "connect":
		c.Type, c.Timeout = "tcp", float64(connect)
	case "ping":
		c.Type, c.Timeout = "ping", float64(connect)
	case "external", "external-perl":
		c.Type, c.Timeout = "exec", float64(connect)
		// ldirectord runs it with the virtual's and the real server's address and port.
		vip, vport := svc.Address, strconv.Itoa(svc.Port)
		if v.fwmark {
			vip, vport = strconv.FormatUint(uint64(svc.FWMark), 10), "0" // the mark as a number: 02 is 2
		}
		c.Command = ipvsmgr.Argv{v.checkcommand, vip, vport, "%h", "%p"}
	case "negotiate":
		c.Timeout = float64(negotiate)
		c = p.negotiateCheck(v, svc, c)
	}
	if c != nil && (kind == "negotiate" && v.service != "http" && v.service != "https") {
		if v.virtualhost != nil {
			p.keepCheck(v, "virtualhost", *v.virtualhost)
		}
	}
	c = p.fwmarkCheckPort(v, c)
	if c == nil || !slices.Contains(ipvsmgr.NegotiateTypes(), c.Type) {
		p.keepCredentials(v) // only a negotiate check logs in
	}
	p.connectChecks(v, c)
	svc.Check = c
	p.keepServerChecks(v, svc, c)
}

// checkSchedule is the check's interval, fall and failure action, from the
// virtual or the globals; its type is set by the checktype.
func (p *ldParser) checkSchedule(v *ldVirtual) *ipvsmgr.Check {
	interval := p.g.checkInterval
	if v.checkInterval > 0 {
		if p.g.fork == "yes" {
			interval = v.checkInterval
		} else {
			p.im.warnf(v.line, "checkinterval in %s is ignored when fork=no (ldirectord ignores it)", v.scope)
		}
	}
	fall := p.g.failureCount
	if v.failureCount > 0 {
		fall = v.failureCount
	}
	quiescent := p.g.quiescent
	if v.quiescent != "" {
		quiescent = v.quiescent
	}
	c := &ipvsmgr.Check{Interval: float64(interval), Rise: 1, Fall: fall, Port: v.checkport, OnFailure: "remove"}
	if quiescent == "yes" {
		c.OnFailure = "quiesce"
	}
	return c
}

// negotiateCheck gives c the virtual's service; nil for service=none.
func (p *ldParser) negotiateCheck(v *ldVirtual, svc *ipvsmgr.Service, c *ipvsmgr.Check) *ipvsmgr.Check {
	switch v.service {
	case "http", "https":
		c.Type, c.Method, c.Path, c.ExpectBody = v.service, v.httpmethod, v.request, v.receive
		if v.virtualhost != nil {
			c.Host = *v.virtualhost
		}
		if v.service == "https" {
			c.TLSVerify = boolPtr(false)
		}
	case "dns":
		c.Type, c.Name = "dns", strings.TrimPrefix(v.request, "/")
		p.keepCheck(v, "receive", v.receive)
	case "smtp":
		c.Type = "smtp"
	case "mysql", "pgsql", "ldap", "ldaps", "imap", "imaps", "pop", "pops", "ftp", "radius", "sip":
		p.negotiate(v, svc, c)
	case "nntp":
		// check_nntp reads the greeting; it sends no request and reads no receive.
		c.Type = "nntp"
		p.keepCheck(v, "request", v.request)
		p.keepCheck(v, "receive", v.receive)
	case "none":
		return nil
	default:
		// A negotiate check ipvsctl does not speak yet: a connect
		// check in its place, the service kept.
		c.Type = "tcp"
		p.keep(v.line, v.scope, "service", v.service)
		p.im.warnf(v.line, "service=%s in %s: no %s check in ipvsctl; checked by a connect (tcp), the service kept", v.service, v.scope, v.service)
		p.keepCheck(v, "request", v.request)
		p.keepCheck(v, "receive", v.receive)
	}
	return c
}

// fwmarkCheckPort gives a fwmark virtual's check the service's port when
// no checkport names one; with neither there is no check (nil).
func (p *ldParser) fwmarkCheckPort(v *ldVirtual, c *ipvsmgr.Check) *ipvsmgr.Check {
	if c == nil || !v.fwmark || c.Port != 0 || c.Type == "ping" || c.Type == "exec" {
		return c
	}
	if n, ok := ldServiceToPort(v.service); ok {
		c.Port = n
		return c
	}
	// ldirectord's ld_checkport has no port either: its check cannot pass.
	p.im.warnf(v.line, "%s: checktype=%s with no checkport and no port to check: no check here, checktype kept", v.scope, v.checktype)
	if v.checktype != "combined" && v.checktype != "external-perl" {
		p.keep(v.line, v.scope, "checktype", v.checktype)
	}
	return nil
}

// keepServerChecks keeps the real servers' request and receive, and takes
// their checks away, unless the service's check is http or https.
func (p *ldParser) keepServerChecks(v *ldVirtual, svc *ipvsmgr.Service, c *ipvsmgr.Check) {
	for i := range svc.Servers {
		rc := svc.Servers[i].Check
		if rc == nil {
			continue
		}
		if c == nil || (c.Type != "http" && c.Type != "https") {
			rs := &svc.Servers[i]
			p.keep(p.lines[fmt.Sprintf("services[%d].servers[%d]", v.svc, i)], v.scope+" real "+ldHostPort(rs.Address, rs.Port), "request-receive",
				`"`+strings.TrimPrefix(rc.Path, "/")+`", "`+rc.ExpectBody+`"`)
			svc.Servers[i].Check = nil
		}
	}
}

// negotiate makes one of ldirectord's negotiate checks that ipvsctl
// speaks. The password and the secret cannot be kept (every viewer reads
// the document): the check names the file each director reads them from,
// by ldSecretFile's convention, and a warning at the line says to write it.
func (p *ldParser) negotiate(v *ldVirtual, svc *ipvsmgr.Service, c *ipvsmgr.Check) {
	c.Type, c.Login, c.Database = v.service, v.login, v.database
	switch v.service {
	case "mysql", "pgsql", "ldap", "ldaps", "ftp":
		c.Request = strings.TrimPrefix(v.request, "/")
	default:
		p.keepCheck(v, "request", v.request)
	}
	switch v.service {
	case "ldap", "ldaps", "ftp":
		c.Receive = v.receive
	default:
		p.keepCheck(v, "receive", v.receive)
	}
	if v.service == "sip" {
		c.Protocol = cmp.Or(svc.Protocol, "tcp") // check_sip speaks the virtual's protocol
	}
	if v.database != "" && v.service != "mysql" && v.service != "pgsql" {
		c.Database = ""
		p.keep(v.databaseLine, v.scope, "database", `"`+v.database+`"`)
	}
	if v.passwdLine > 0 {
		if v.service == "sip" {
			p.keep(v.passwdLine, v.scope, "passwd", ldSecret) // check_sip sends none
		} else {
			c.PasswordFile = ldSecretFile(v, svc, "passwd")
			p.im.warnf(v.passwdLine, "passwd in %s is not kept (secrets never live in the document): write it to %s (mode 0600) on each director",
				v.scope, c.PasswordFile)
		}
	}
	if v.secretLine > 0 {
		if v.service == "radius" {
			c.SecretFile = ldSecretFile(v, svc, "secret")
			p.im.warnf(v.secretLine, "secret in %s is not kept (secrets never live in the document): write it to %s (mode 0600) on each director",
				v.scope, c.SecretFile)
		} else {
			p.keep(v.secretLine, v.scope, "secret", ldSecret)
		}
	}
	if v.service == "radius" && c.SecretFile == "" {
		c.SecretFile = ldSecretFile(v, svc, "secret")
		p.im.warnf(v.line, "service=radius in %s has no secret: the check reads it from %s (mode 0600), to be written on each director",
			v.scope, c.SecretFile)
	}
	if (v.service == "mysql" || v.service == "pgsql") && (c.Login == "" || c.Request == "") {
		// check_sql refuses it too ("Must specify a login and request string"): never up.
		p.im.warnf(v.line, "service=%s in %s without login and request: ldirectord never brings its real servers up; a connect (tcp) check in its place",
			v.service, v.scope)
		c.Type, c.Login, c.Database, c.Request, c.PasswordFile = "tcp", "", "", "", ""
		p.keep(v.line, v.scope, "service", v.service)
	}
}

// ldSecretFile is where an imported check's password or RADIUS secret is
// to be written on each director: /var/lib/ipvsctl/secrets/check-ADDRESS_PORT.passwd
// (or .secret), fwmark-N for a fwmark virtual, IPv6 colons as dashes.
func ldSecretFile(v *ldVirtual, svc *ipvsmgr.Service, key string) string {
	base := strings.NewReplacer(":", "-", "[", "", "]", "").Replace(svc.Address) + "_" + strconv.Itoa(svc.Port)
	if v.fwmark {
		base = "fwmark-" + v.port
	}
	return "/var/lib/ipvsctl/secrets/check-" + base + "." + key
}

// keepCredentials keeps the login keys of a virtual whose check does not
// log in (the values of passwd and secret never).
func (p *ldParser) keepCredentials(v *ldVirtual) {
	if v.loginLine > 0 {
		p.keep(v.loginLine, v.scope, "login", `"`+v.login+`"`)
	}
	if v.databaseLine > 0 {
		p.keep(v.databaseLine, v.scope, "database", `"`+v.database+`"`)
	}
	if v.passwdLine > 0 {
		p.keep(v.passwdLine, v.scope, "passwd", ldSecret)
	}
	if v.secretLine > 0 {
		p.keep(v.secretLine, v.scope, "secret", ldSecret)
	}
}

// keepCheck keeps a check key that has no field here, unless it is
// ldirectord's default.
func (p *ldParser) keepCheck(v *ldVirtual, key, val string) {
	if (key == "request" && val == "/") || val == "" {
		return
	}
	p.keep(v.line, v.scope, key, `"`+val+`"`)
}

// ldScope names a virtual in the keys kept for it: its virtual= as an
// export writes it, and protocol=udp after it for a udp virtual that shares
// its address and port with a tcp virtual (tcp in ldTCP), so that the two
// keep their keys apart.
func ldScope(svc *ipvsmgr.Service, tcp map[string]bool) string {
	if svc.FWMark > 0 {
		return "virtual " + strconv.FormatUint(uint64(svc.FWMark), 10)
	}
	hp := ldHostPort(svc.Address, svc.Port)
	if svc.Protocol == "udp" && tcp[hp] {
		return "virtual " + hp + " protocol=udp"
	}
	return "virtual " + hp
}

// ldTCP holds the address and port of every tcp virtual.
func ldTCP(services []ipvsmgr.Service) map[string]bool {
	tcp := map[string]bool{}
	for _, svc := range services {
		if svc.FWMark == 0 && svc.Protocol != "udp" {
			tcp[ldHostPort(svc.Address, svc.Port)] = true
		}
	}
	return tcp
}

// rescope names each virtual's kept keys by ldScope once every virtual is
// read (resolve named every udp virtual's as shared, which kept them apart).
func (p *ldParser) rescope() {
	tcp := ldTCP(p.st.Services)
	for _, v := range p.vs {
		scope := ldScope(&p.st.Services[v.svc], tcp)
		for i := range p.st.Imported {
			k := &p.st.Imported[i]
			if k.Scope == v.scope || strings.HasPrefix(k.Scope, v.scope+" real ") {
				k.Scope = scope + strings.TrimPrefix(k.Scope, v.scope)
			}
		}
		v.scope = scope
	}
}

// ldServiceToPort is read_config's ld_service_to_port.
func ldServiceToPort(service string) (int, bool) {
	for port, s := range ldServicePorts {
		if s == service {
			return port, true
		}
	}
	return 0, false
}
