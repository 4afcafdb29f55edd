package ipvsmgr

import (
	"cmp"
	"encoding/json"
	"fmt"
	"math"
	"net/netip"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"
)

// CheckSpec is one real server's effective check: its service's check with
// the server's overrides, defaults filled in, escapes decoded and the target
// resolved. Two servers with equal specs are the same check (the same real
// server in two services is checked once).
type CheckSpec struct {
	Type     string
	Target   netip.AddrPort // address and port the check talks to
	Interval time.Duration
	Timeout  time.Duration
	// FastInterval while the state is changing, DownInterval while down;
	// 0: Interval.
	FastInterval time.Duration `json:",omitempty"`
	DownInterval time.Duration `json:",omitempty"`
	// Warmup bounds the random delay of the first check; nil: Interval.
	Warmup *time.Duration `json:",omitempty"`
	Rise   int
	Fall   int
	// ConnectChecks tcp connects between two full checks (ldirectord's
	// checktype = N); 0: every run is the full check.
	ConnectChecks int `json:",omitempty"`

	Method       string
	Path         string
	Host         string
	ExpectStatus []int // empty: any 2xx or 3xx
	ExpectBody   string
	TLS          bool // https, ldaps, imaps, pops: TLS from the first byte
	TLSVerify    bool
	SNI          string

	Send     string // escapes decoded
	Expect   string // escapes decoded unless UseRegex
	UseRegex bool
	Protocol string // tcp or udp (send_expect and dns)

	Name  string
	QType string
	RCode string

	Command       []string // %h and %p substituted
	DynamicWeight bool

	File        string `json:",omitempty"`
	FileWeight  int    `json:",omitempty"`
	FileReverse bool   `json:",omitempty"`

	// The negotiate checks (NegotiateTypes): the password and the secret
	// are named by their files, read at each run, never held here.
	Request      string `json:",omitempty"`
	Receive      string `json:",omitempty"`
	Login        string `json:",omitempty"`
	PasswordFile string `json:",omitempty"`
	Database     string `json:",omitempty"`
	SecretFile   string `json:",omitempty"`
}

// Key is a canonical text of the spec: equal specs have equal keys.
func (c *CheckSpec) Key() string {
	b, _ := json.Marshal(c)
	return string(b)
}

// ServerRef names a real server of a virtual service.
type ServerRef struct {
	Service ServiceKey
	Server  DestKey
}

func (r ServerRef) String() string { return r.Service.String() + " -r " + r.Server.String() }

// HealthState is what the checks say of a real server.
type HealthState uint8

const (
	// HealthUnknown: not checked yet (a new server, before its first result).
	HealthUnknown HealthState = iota
	HealthUp
	HealthDown
)

func (s HealthState) String() string {
	switch s {
	case HealthUp:
		return "up"
	case HealthDown:
		return "down"
	}
	return "unknown"
}

// ServerCheck is what the health runner needs for one real server of one
// enabled service: its check and what to do with its result.
type ServerCheck struct {
	Ref         ServerRef
	ServiceName string
	ServerName  string // the server's name, or its address:port
	Weight      uint32 // configured
	// Drained keeps the server at weight 0 in the kernel while it is up.
	Drained bool
	Spec    CheckSpec
	// OnFailure is quiesce or remove.
	OnFailure    string
	SlowStart    time.Duration
	StartHealthy bool
	// HoldPlace keeps a server not checked yet in the kernel at weight 0
	// instead of out (BGP mode): every director then adds a service's
	// real servers at once in the canonical order, whatever order their
	// first checks pass in, and builds the same Maglev table.
	HoldPlace bool
	// Forced is the operator's "health": up or down; HealthUnknown = auto.
	Forced HealthState
	// NotifyUp and NotifyDown are the server's programs to run when its
	// checks find it up and down.
	NotifyUp, NotifyDown Argv
	// SMTPAlert is the server's smtp_alert (SMTPAlerts.ForServer).
	SMTPAlert *bool
}

// Checked reports whether checks run for the server.
func (c *ServerCheck) Checked() bool { return c.Spec.Type != "" && c.Spec.Type != "none" }

// SorryPolicy is a service's sorry server and quorum.
type SorryPolicy struct {
	Service ServiceKey
	Dest    *Destination // nil: no sorry server
	Quorum  int
	// Hysteresis widens the quorum both ways once the sorry server is in
	// or out (ApplyHealthTo).
	Hysteresis int
	// QuorumUp and QuorumDown are the programs to run when the service
	// gains or loses its quorum (QuorumHeld); nil: none.
	QuorumUp, QuorumDown Argv
	// SMTPAlert is the service's smtp_alert (SMTPAlerts.ForService).
	SMTPAlert *bool
}

// checks validates the check-related fields of a service and its servers
// and compiles them into d. vs is the service's kernel form (its key and
// enabled servers); enabled says whether the service is in the kernel;
// defaultFwd is settings.network.
func (v *validator) checks(field string, svc *Service, vs *VirtualService, d *Desired, enabled bool, defaultFwd string) {
	if svc.Check != nil {
		v.checkFields(field+".check", svc.Check, svc.Check.Type)
	}
	if svc.Quorum < 0 || svc.Quorum > 65535 {
		v.rangeCheck(field+".quorum", svc.Quorum, 0, 65535)
	}
	if q := max(svc.Quorum, 1); svc.Hysteresis < 0 || svc.Hysteresis >= q {
		v.addf(field+".hysteresis", "%d is out of range 0..%d (below the quorum, %d)", svc.Hysteresis, q-1, q)
	}
	v.program(field+".quorum_up", svc.QuorumUp)
	v.program(field+".quorum_down", svc.QuorumDown)
	var sorry *Destination
	if svc.SorryServer != nil {
		sorry = v.sorryServer(field+".sorry_server", svc, vs, cmp.Or(svc.Forwarding, defaultFwd, "dr"))
	}
	hasServerCheck := false
	for j := range svc.Servers {
		rs := &svc.Servers[j]
		f := fmt.Sprintf("%s.servers[%d]", field, j)
		v.program(f+".notify_up", rs.NotifyUp)
		v.program(f+".notify_down", rs.NotifyDown)
		switch rs.Health {
		case "", "auto", "up", "down":
		default:
			v.addf(f+".health", "%q is not a forced health (want up or down; omit it, or auto, to follow the checks)", rs.Health)
		}
		if rs.Check == nil && svc.Check == nil && (rs.Health == "" || rs.Health == "auto") {
			continue
		}
		hasServerCheck = hasServerCheck || rs.Check != nil
		merged := mergeChecks(svc.Check, rs.Check)
		if rs.Check != nil {
			v.checkFields(f+".check", rs.Check, merged.Type)
			if merged.Type == "" {
				v.addf(f+".check.type", "missing: the service has no check to inherit a type from")
			}
		}
		if !enabled || !rs.IsEnabled() {
			continue
		}
		key, ok := destKeyOf(rs, vs)
		if !ok {
			continue
		}
		sc := ServerCheck{Ref: ServerRef{Service: vs.Key, Server: key}, Weight: uint32(max(min(rs.EffectiveWeight(), maxWeight), 0)), Drained: rs.Drained,
			NotifyUp: rs.NotifyUp, NotifyDown: rs.NotifyDown, SMTPAlert: rs.SMTPAlert}
		sc.ServerName, sc.ServiceName = serverID(rs), serviceName(svc, vs.Key)
		switch rs.Health {
		case "up":
			sc.Forced = HealthUp
		case "down":
			sc.Forced = HealthDown
		}
		if merged.Type != "" && merged.Type != "none" {
			if !v.compileCheck(f, &merged, key, &sc) {
				continue
			}
		} else {
			sc.Spec.Type = "none"
			sc.OnFailure = merged.OnFailure
			if sc.OnFailure == "" {
				sc.OnFailure = DefaultOnFailure
			}
		}
		d.Checks = append(d.Checks, sc)
	}
	if enabled && (svc.Check != nil || hasServerCheck || sorry != nil || svc.Quorum > 0 || svc.QuorumUp != nil || svc.QuorumDown != nil) {
		q := svc.Quorum
		if q == 0 {
			q = 1
		}
		d.Sorry = append(d.Sorry, SorryPolicy{Service: vs.Key, Dest: sorry, Quorum: q, Hysteresis: svc.Hysteresis,
			QuorumUp: svc.QuorumUp, QuorumDown: svc.QuorumDown, SMTPAlert: svc.SMTPAlert})
	}
}

// program validates a program the daemon runs (quorum_up, notify_down...):
// an absolute path (it runs as root from the daemon, with no shell and no
// PATH to trust) and its arguments.
func (v *validator) program(field string, cmd Argv) {
	if cmd == nil {
		return
	}
	if len(cmd) == 0 || cmd[0] == "" {
		v.addf(field, "empty: want a program and its arguments (omit it for none)")
		return
	}
	v.absoluteProgram(field+"[0]", cmd[0])
	for i, a := range cmd {
		if strings.IndexByte(a, 0) >= 0 {
			v.addf(fmt.Sprintf("%s[%d]", field, i), "%q holds a NUL byte", a)
		}
	}
}

// absoluteProgram refuses a program named other than by its absolute path:
// quorum programs and exec checks run as root from the daemon, with no
// shell, and root's PATH is not to be searched for them.
func (v *validator) absoluteProgram(field, prog string) {
	if !strings.HasPrefix(prog, "/") {
		v.addf(field, "%q is not an absolute path (the program runs as root: name it in full)", prog)
	}
}

// destKeyOf is the kernel key of a real server that validated.
func destKeyOf(rs *Server, vs *VirtualService) (DestKey, bool) {
	a, err := parseAddr(rs.Address)
	if err != nil || rs.Port < 0 || rs.Port > 65535 {
		return DestKey{}, false
	}
	k := DestKey{Addr: a, Port: uint16(rs.Port)}
	if k.Port == 0 {
		k.Port = vs.Key.Port
	}
	return k, true
}

func (v *validator) sorryServer(field string, svc *Service, vs *VirtualService, fwd string) *Destination {
	s := svc.SorryServer
	a, err := parseAddr(s.Address)
	if err != nil {
		v.addf(field+".address", "%v", err)
		return nil
	}
	if vs.Key.Family != 0 && familyOf(a) != vs.Key.Family {
		v.addf(field+".address", "%s: an %s service cannot have an %s sorry server", s.Address, familyName(vs.Key.Family), familyName(familyOf(a)))
		return nil
	}
	if s.Port < 0 || s.Port > 65535 {
		v.rangeCheck(field+".port", s.Port, 0, 65535)
		return nil
	}
	d := &Destination{Key: DestKey{Addr: a, Port: uint16(s.Port)}, Weight: 1, Forward: ForwardDR}
	if d.Key.Port == 0 {
		d.Key.Port = vs.Key.Port
	}
	if fwd == "nat" {
		d.Forward = ForwardNAT
	} else if fwd == "tun" {
		d.Forward = ForwardTUN
	}
	if d.Key.Port != vs.Key.Port && d.Forward != ForwardNAT {
		v.addf(field+".port", "%d differs from the service port %d: only nat forwarding can change the port", s.Port, vs.Key.Port)
	}
	// A sorry server at a real server's address and port is what keepalived
	// calls s_svr_duplicates_rs: one destination in the kernel, which the
	// sorry server brings back (at its own weight) once the real server is
	// out and the quorum is lost (ApplyHealthTo).
	return d
}

var (
	qtypes = []string{"A", "AAAA", "CNAME", "MX", "NS", "PTR", "SOA", "SRV", "TXT", "ANY"}
	rcodes = []string{"NOERROR", "FORMERR", "SERVFAIL", "NXDOMAIN", "NOTIMP", "REFUSED"}
)

// DNSQueryTypes lists the query types a dns check may ask (its qtype).
func DNSQueryTypes() []string { return slices.Clone(qtypes) }

// DNSResponseCodes lists the response codes a dns check may wait for (its rcode).
func DNSResponseCodes() []string { return slices.Clone(rcodes) }

// checkFields validates the fields one check object sets; typ is the type
// in effect where it is written (a server's may come from its service).
func (v *validator) checkFields(field string, c *Check, typ string) {
	if c.Type != "" && !slices.Contains(CheckTypes(), c.Type) {
		v.addf(field+".type", "%q is not a check type (want one of %s)", c.Type, strings.Join(CheckTypes(), " "))
	}
	v.checkTiming(field, c)
	only := func(leaf string, set bool, types ...string) {
		if set && typ != "" && !slices.Contains(types, typ) {
			v.addf(field+"."+leaf, "only for %s checks, not %s", strings.Join(types, " and "), typ)
		}
	}
	only("connect_checks", c.ConnectChecks != 0, ConnectCheckTypes()...)
	if c.ConnectChecks != 0 {
		v.rangeCheck(field+".connect_checks", c.ConnectChecks, 1, maxConnectChecks)
	}
	v.httpFields(field, c, only)
	v.sendExpectFields(field, c, only)
	v.nameFields(field, c, typ, only)
	v.execFields(field, c, only)
	v.fileFields(field, c, only)
	v.negotiateFields(field, c, only)
}

// checkTiming validates the check's timing, counts, target and failure action.
func (v *validator) checkTiming(field string, c *Check) {
	seconds := func(leaf string, val float64, hi float64) {
		if val != 0 && (val < 0.1 || val > hi || math.IsNaN(val)) {
			v.addf(field+"."+leaf, "%v is out of range 0.1..%v seconds", val, hi)
		}
	}
	seconds("interval", c.Interval, 86400)
	seconds("fast_interval", c.FastInterval, 86400)
	seconds("down_interval", c.DownInterval, 86400)
	seconds("timeout", c.Timeout, 3600)
	if c.Rise != 0 {
		v.rangeCheck(field+".rise", c.Rise, 1, 1000)
	}
	if c.Fall != 0 {
		v.rangeCheck(field+".fall", c.Fall, 1, 1000)
	}
	if c.Address != "" {
		if _, err := parseAddr(c.Address); err != nil {
			v.addf(field+".address", "%v", err)
		}
	}
	if c.Port != 0 {
		v.rangeCheck(field+".port", c.Port, 1, 65535)
	}
	switch c.OnFailure {
	case "", "quiesce", "remove":
	default:
		v.addf(field+".on_failure", "%q is not a failure action (want quiesce or remove)", c.OnFailure)
	}
	if c.SlowStart != nil && (*c.SlowStart < 0 || *c.SlowStart > 86400) {
		v.addf(field+".slow_start", "%v is out of range 0..86400 seconds", *c.SlowStart)
	}
	if c.Warmup != nil && (*c.Warmup < 0 || *c.Warmup > 86400 || math.IsNaN(*c.Warmup)) {
		v.addf(field+".warmup", "%v is out of range 0..86400 seconds", *c.Warmup)
	}
}

// httpFields validates the fields of an http or https check.
func (v *validator) httpFields(field string, c *Check, only func(string, bool, ...string)) {
	only("method", c.Method != "", "http", "https")
	if c.Method != "" && !isHTTPMethod(c.Method) {
		v.addf(field+".method", "%q is not an HTTP method", c.Method)
	}
	only("path", c.Path != "", "http", "https")
	if c.Path != "" && (!strings.HasPrefix(c.Path, "/") || strings.ContainsAny(c.Path, " \t\r\n")) {
		v.addf(field+".path", "%q is not a request path (it starts with / and has no white space)", c.Path)
	}
	only("host", c.Host != "", "http", "https")
	if strings.ContainsAny(c.Host, " \t\r\n/") {
		v.addf(field+".host", "%q is not a host name", c.Host)
	}
	only("expect_status", len(c.ExpectStatus) > 0, "http", "https")
	for i, s := range c.ExpectStatus {
		v.rangeCheck(fmt.Sprintf("%s.expect_status[%d]", field, i), s, 100, 599)
	}
	only("expect_body", c.ExpectBody != "", "http", "https")
	if c.ExpectBody != "" {
		if _, err := regexp.Compile(c.ExpectBody); err != nil {
			v.addf(field+".expect_body", "%q is not a regular expression: %v", c.ExpectBody, err)
		}
	}
	only("tls_verify", c.TLSVerify != nil, "https", "ldaps", "imaps", "pops")
	only("sni", c.SNI != "", "https")
	if strings.ContainsAny(c.SNI, " \t\r\n/") {
		v.addf(field+".sni", "%q is not a server name", c.SNI)
	}
}

// sendExpectFields validates what a send_expect (or exec) check sends and expects, and its protocol.
func (v *validator) sendExpectFields(field string, c *Check, only func(string, bool, ...string)) {
	only("send", c.Send != "", "send_expect")
	only("expect", c.Expect != "", "send_expect", "exec")
	only("use_regex", c.UseRegex != nil, "send_expect", "exec")
	if c.UseRegex != nil && *c.UseRegex && c.Expect != "" {
		if _, err := regexp.Compile(c.Expect); err != nil {
			v.addf(field+".expect", "%q is not a regular expression: %v", c.Expect, err)
		}
	}
	only("protocol", c.Protocol != "", "send_expect", "dns", "sip")
	if c.Protocol != "" && c.Protocol != "tcp" && c.Protocol != "udp" {
		v.addf(field+".protocol", "%q is not a check protocol (want tcp or udp)", c.Protocol)
	}
}

// nameFields validates a dns check's name, query type and response code, or an smtp check's HELO name.
func (v *validator) nameFields(field string, c *Check, typ string, only func(string, bool, ...string)) {
	only("name", c.Name != "", "dns", "smtp")
	switch {
	case c.Name == "":
	case typ == "smtp" && (strings.ContainsAny(c.Name, " \t\r\n") || !utf8.ValidString(c.Name)):
		v.addf(field+".name", "%q: a HELO name is one word", c.Name)
	case typ != "smtp" && !validDNSName(c.Name):
		v.addf(field+".name", "%q is not a domain name", c.Name)
	}
	only("qtype", c.QType != "", "dns")
	if c.QType != "" && !slices.Contains(qtypes, c.QType) {
		v.addf(field+".qtype", "%q is not a query type (want one of %s)", c.QType, strings.Join(qtypes, " "))
	}
	only("rcode", c.RCode != "", "dns")
	if c.RCode != "" && !slices.Contains(rcodes, c.RCode) {
		v.addf(field+".rcode", "%q is not a response code (want one of %s)", c.RCode, strings.Join(rcodes, " "))
	}
}

// execFields validates an exec check's command.
func (v *validator) execFields(field string, c *Check, only func(string, bool, ...string)) {
	only("command", c.Command != nil, "exec")
	if c.Command != nil && (len(c.Command) == 0 || c.Command[0] == "") {
		v.addf(field+".command", "empty: want a program and its arguments")
	} else if c.Command != nil {
		v.absoluteProgram(field+".command[0]", c.Command[0])
	}
	for i, a := range c.Command {
		if strings.IndexByte(a, 0) >= 0 {
			v.addf(fmt.Sprintf("%s.command[%d]", field, i), "%q holds a NUL byte", a)
		}
	}
	only("dynamic_weight", c.DynamicWeight != nil, "exec")
}

// fileFields validates a file check's fields.
func (v *validator) fileFields(field string, c *Check, only func(string, bool, ...string)) {
	only("file", c.File != "", "file")
	if c.File != "" && (!strings.HasPrefix(c.File, "/") || strings.IndexByte(c.File, 0) >= 0) {
		v.addf(field+".file", "%q is not an absolute path", c.File)
	}
	only("file_weight", c.FileWeight != nil, "file")
	if c.FileWeight != nil {
		v.rangeCheck(field+".file_weight", *c.FileWeight, -65535, 65535)
	}
	only("file_reverse", c.FileReverse != nil, "file")
}

// maxConnectChecks bounds connect_checks (ldirectord's "never again" is
// 999999).
const maxConnectChecks = 999999

// ConnectCheckTypes lists the check types that take connect_checks: those
// that talk to their target over a tcp connection.
func ConnectCheckTypes() []string {
	return []string{"http", "https", "send_expect", "smtp", "mysql", "pgsql", "ldap", "ldaps", "imap", "imaps", "pop", "pops", "ftp", "nntp"}
}

// negotiateFields validates the fields of ldirectord's negotiate checks.
func (v *validator) negotiateFields(field string, c *Check, only func(string, bool, ...string)) {
	only("request", c.Request != "", "mysql", "pgsql", "ldap", "ldaps", "ftp")
	only("receive", c.Receive != "", "ldap", "ldaps", "ftp")
	if c.Receive != "" {
		if _, err := regexp.Compile(c.Receive); err != nil {
			v.addf(field+".receive", "%q is not a regular expression: %v", c.Receive, err)
		}
	}
	only("login", c.Login != "", "mysql", "pgsql", "ldap", "ldaps", "imap", "imaps", "pop", "pops", "ftp", "radius", "sip")
	only("password_file", c.PasswordFile != "", "mysql", "pgsql", "ldap", "ldaps", "imap", "imaps", "pop", "pops", "ftp", "radius")
	only("database", c.Database != "", "mysql", "pgsql")
	only("secret_file", c.SecretFile != "", "radius")
	if strings.ContainsAny(c.Login, "\r\n\x00") {
		v.addf(field+".login", "%q holds a line end or a NUL byte", c.Login)
	}
	if strings.ContainsAny(c.Request, "\r\n\x00") && c.Type != "mysql" && c.Type != "pgsql" {
		v.addf(field+".request", "%q holds a line end or a NUL byte", c.Request)
	}
	if strings.ContainsAny(c.Database, "\x00;") {
		v.addf(field+".database", "%q holds a NUL byte or a semicolon", c.Database)
	}
	for _, f := range [...]struct{ leaf, path string }{{"password_file", c.PasswordFile}, {"secret_file", c.SecretFile}} {
		switch leaf, pf := f.leaf, f.path; {
		case pf == "":
		case !filepath.IsAbs(pf) || filepath.Clean(pf) != pf || strings.ContainsRune(pf, 0):
			v.addf(field+"."+leaf, "%q is not a clean absolute path (the file the director reads the secret from)", pf)
		case !inSecretDir(pf):
			v.addf(field+"."+leaf, "%q is not in %s: the daemon sends what it reads there to the real server, so it reads only files put there for that",
				pf, strings.Join(CheckSecretDirs(), " or "))
		}
	}
}

// CheckSecretDirs are where a check's password_file and secret_file may
// be. The daemon runs as root and sends the file's content to the server
// the check names: anywhere else, whoever may edit a check could have a
// root-only file (an SSH or TLS key) sent to a server of theirs.
func CheckSecretDirs() []string {
	return []string{"/etc/ipvsctl/secrets/", "/var/lib/ipvsctl/secrets/"}
}

func inSecretDir(path string) bool {
	for _, d := range CheckSecretDirs() {
		if strings.HasPrefix(path, d) && len(path) > len(d) {
			return true
		}
	}
	return false
}

func validDNSName(s string) bool {
	s = strings.TrimSuffix(s, ".")
	if s == "" || len(s) > 253 {
		return s == "" // the root
	}
	for l := range strings.SplitSeq(s, ".") {
		if l == "" || len(l) > 63 || strings.ContainsAny(l, " \t\r\n\\\"") {
			return false
		}
	}
	return true
}

// compileCheck fills sc's spec and policy from a merged, validated check;
// false when something it needs is missing (reported).
func (v *validator) compileCheck(field string, c *Check, key DestKey, sc *ServerCheck) bool {
	where := field + ".check"
	spec := &sc.Spec
	spec.Type = c.Type
	compileTiming(c, spec)
	addr, ok := v.compileTarget(where, c, key, spec)
	switch c.Type {
	case "http", "https":
		spec.TLS = c.Type == "https"
		spec.Method = cmp.Or(c.Method, "GET")
		spec.Path = cmp.Or(c.Path, "/")
		spec.Host = c.Host
		if len(c.ExpectStatus) > 0 { // [] is any status, as absent: one key for both (shared probes)
			spec.ExpectStatus = slices.Clone(c.ExpectStatus)
		}
		spec.ExpectBody = c.ExpectBody
		spec.TLSVerify = c.TLSVerify != nil && *c.TLSVerify
		spec.SNI = c.SNI
	case "send_expect":
		ok = v.compileSendExpect(where, c, spec) && ok
	case "dns":
		spec.Protocol = cmp.Or(c.Protocol, "udp")
		spec.Name = c.Name
		spec.QType = cmp.Or(c.QType, "A")
		spec.RCode = c.RCode
		if c.Name == "" {
			v.addf(where+".name", "missing: a dns check needs the name to query")
			ok = false
		}
	case "smtp":
		spec.Name = cmp.Or(c.Name, "localhost")
	case "mysql", "pgsql", "ldap", "ldaps", "imap", "imaps", "pop", "pops", "ftp", "radius", "sip":
		ok = v.compileNegotiate(where, c, spec) && ok
	case "ping":
		spec.Target = netip.AddrPortFrom(addr, 0) // one echo per address
	case "file":
		if c.File == "" {
			v.addf(where+".file", "missing: a file check needs the file to read")
			ok = false
		}
		spec.File, spec.FileWeight = c.File, 1
		if c.FileWeight != nil {
			spec.FileWeight = *c.FileWeight
		}
		spec.FileReverse = c.FileReverse != nil && *c.FileReverse
	case "exec":
		ok = v.compileExec(where, c, spec) && ok
	}
	sc.OnFailure = cmp.Or(c.OnFailure, DefaultOnFailure)
	if c.SlowStart != nil {
		sc.SlowStart = seconds(*c.SlowStart, 0)
	}
	sc.StartHealthy = c.StartHealthy != nil && *c.StartHealthy
	return ok
}

// compileTiming fills the spec's intervals, timeout, counts and warmup,
// with the defaults for what the check does not set.
func compileTiming(c *Check, spec *CheckSpec) {
	spec.Interval = seconds(c.Interval, DefaultCheckInterval)
	spec.FastInterval = seconds(c.FastInterval, 0)
	spec.DownInterval = seconds(c.DownInterval, 0)
	spec.Timeout = seconds(c.Timeout, DefaultCheckTimeout)
	spec.Rise, spec.Fall = cmp.Or(c.Rise, DefaultCheckRise), cmp.Or(c.Fall, DefaultCheckFall)
	spec.ConnectChecks = c.ConnectChecks
	if c.Warmup != nil {
		w := time.Duration(math.Round(*c.Warmup * float64(time.Second)))
		spec.Warmup = &w
	}
}

// compileTarget sets the spec's target, the real server's address and port
// unless the check names its own, and returns its address; false when the
// check needs a port and has none (reported).
func (v *validator) compileTarget(where string, c *Check, key DestKey, spec *CheckSpec) (netip.Addr, bool) {
	addr := key.Addr
	if c.Address != "" {
		if a, err := parseAddr(c.Address); err == nil {
			addr = a
		}
	}
	port := uint16(key.Port)
	if c.Port > 0 && c.Port <= 65535 {
		port = uint16(c.Port)
	}
	spec.Target = netip.AddrPortFrom(addr, port)
	switch c.Type {
	case "agent":
		if c.Port == 0 {
			v.addf(where+".port", "missing: an agent check needs the agent's port")
			return addr, false
		}
	case "exec", "ping", "file":
	default:
		if port == 0 {
			v.addf(where+".port", "missing: a fwmark service's real servers have no port to check; set one")
			return addr, false
		}
	}
	return addr, true
}

// compileSendExpect fills a send_expect check's spec; false when a udp one
// has connect_checks or nothing to send (reported).
func (v *validator) compileSendExpect(where string, c *Check, spec *CheckSpec) bool {
	ok := true
	spec.UseRegex = c.UseRegex != nil && *c.UseRegex
	spec.Send = DecodeEscapes(c.Send)
	spec.Expect = c.Expect
	if !spec.UseRegex {
		spec.Expect = DecodeEscapes(c.Expect)
	}
	spec.Protocol = cmp.Or(c.Protocol, "tcp")
	if spec.Protocol == "udp" && c.ConnectChecks != 0 {
		v.addf(where+".connect_checks", "%d: a udp send_expect check has no connection to make between its runs", c.ConnectChecks)
		ok = false
	}
	if spec.Protocol == "udp" && spec.Send == "" {
		v.addf(where+".send", "missing: a udp send_expect check must send something to get a reply")
		ok = false
	}
	return ok
}

// compileExec fills an exec check's spec, its command's %h and %p the
// target's; false without a command (reported).
func (v *validator) compileExec(where string, c *Check, spec *CheckSpec) bool {
	ok := true
	if len(c.Command) == 0 {
		v.addf(where+".command", "missing: an exec check needs a command")
		ok = false
	}
	spec.Command = substituteArgs(c.Command, spec.Target)
	spec.DynamicWeight = c.DynamicWeight != nil && *c.DynamicWeight
	spec.UseRegex = c.UseRegex != nil && *c.UseRegex
	spec.Expect = c.Expect
	if !spec.UseRegex {
		spec.Expect = DecodeEscapes(c.Expect)
	}
	return ok
}

// compileNegotiate fills the spec of one of ldirectord's negotiate checks,
// with ldirectord's defaults (read_config and its check_* subs).
func (v *validator) compileNegotiate(where string, c *Check, spec *CheckSpec) bool {
	ok := true
	spec.Request, spec.Receive = c.Request, c.Receive
	spec.Login, spec.PasswordFile = c.Login, c.PasswordFile
	spec.Database, spec.SecretFile = c.Database, c.SecretFile
	spec.TLS = c.Type == "ldaps" || c.Type == "imaps" || c.Type == "pops"
	spec.TLSVerify = c.TLSVerify != nil && *c.TLSVerify
	switch c.Type {
	case "mysql", "pgsql":
		// check_sql: "Must specify a login and request string".
		spec.Request = strings.TrimPrefix(c.Request, "/")
		if c.Login == "" {
			v.addf(where+".login", "missing: a %s check logs in (ldirectord's login)", c.Type)
			ok = false
		}
		if spec.Request == "" {
			v.addf(where+".request", "missing: a %s check runs a query that must return a row (ldirectord's request)", c.Type)
			ok = false
		}
	case "ldap", "ldaps":
		spec.Request = strings.TrimPrefix(c.Request, "/") // check_ldap's substr($request, 1)
	case "ftp":
		spec.Login = cmp.Or(c.Login, "anonymous")
		spec.Request = strings.TrimPrefix(c.Request, "/")
	case "radius":
		if c.SecretFile == "" {
			v.addf(where+".secret_file", "missing: a radius check signs its request with the shared secret in this file")
			ok = false
		}
		if c.Login == "" {
			v.addf(where+".login", "missing: a radius check asks for this user's Access-Accept")
			ok = false
		}
	case "sip":
		spec.Login = cmp.Or(c.Login, "ipvsctl@localhost") // ldirectord's ldirectord@HOSTNAME
		spec.Protocol = cmp.Or(c.Protocol, "udp")         // check_sip speaks the virtual's protocol
	}
	return ok
}

func seconds(v, def float64) time.Duration {
	if v == 0 {
		v = def
	}
	return time.Duration(math.Round(v * float64(time.Second)))
}

// substituteArgs replaces %h (address) and %p (port) in each argument; %%
// is a percent sign.
func substituteArgs(argv []string, target netip.AddrPort) []string {
	out := make([]string, len(argv))
	host, port := target.Addr().String(), strconv.Itoa(int(target.Port()))
	for i, a := range argv {
		if !strings.Contains(a, "%") {
			out[i] = a
			continue
		}
		var b strings.Builder
		for j := 0; j < len(a); j++ {
			if a[j] != '%' || j+1 == len(a) {
				b.WriteByte(a[j])
				continue
			}
			switch a[j+1] {
			case 'h':
				b.WriteString(host)
			case 'p':
				b.WriteString(port)
			case '%':
				b.WriteByte('%')
			default:
				b.WriteByte('%')
				continue
			}
			j++
		}
		out[i] = b.String()
	}
	return out
}

// isHTTPMethod says whether m is a method token as checks send them: 1 to 16
// capital letters.
func isHTTPMethod(m string) bool {
	if len(m) < 1 || len(m) > 16 {
		return false
	}
	for _, c := range []byte(m) {
		if c < 'A' || c > 'Z' {
			return false
		}
	}
	return true
}
