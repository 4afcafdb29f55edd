package panel

import (
	"math"
	"net/http"
	"reflect"
	"strconv"
	"strings"

	"github.com/ipvsctl/ipvsctl/ipvsmgr"
)

// The health-check part of the virtual-service and real-server forms
// (Piranha's MONITORING SCRIPTS), and its summary on their pages. One list
// of rows drives the form, reading it back and the summary, so that a field
// cannot be shown and then forgotten when the form is saved.

// health is what the check rows edit: a check and, on a service, its sorry
// server and quorum.
type health struct {
	Check      ipvsmgr.Check
	Sorry      ipvsmgr.SorryServer
	Quorum     int
	Hysteresis int
	// QuorumUp and QuorumDown are the service's quorum programs.
	QuorumUp, QuorumDown ipvsmgr.Argv
}

// checkRow is one field of the check form. For lists the check types that
// read it ("" for a field read whatever the type): panel.js hides the
// others, and reading the form ignores them, so that changing a check's
// type leaves nothing of the old type behind.
type checkRow struct {
	Name    string // the form field: check_path, sorry_server_port
	Label   string
	Hint    string
	For     string
	Options []option // a select; nil for a text input
	Raw     bool     // kept as typed: white space may matter
	field   func(h *health) any
}

type option struct{ Value, Label string }

// typeless is the form's type of a service check that sets no type (each
// real server sets its own).
const typeless = "-"

// probing is every check type that talks to the server ("none" does not).
const probing = "tcp http https send_expect dns exec agent smtp ping file mysql pgsql ldap ldaps imap imaps pop pops ftp radius sip nntp"

var checkTypeLabels = map[string]string{
	"tcp": "tcp — connect", "http": "http — a request", "https": "https — a request over TLS",
	"send_expect": "send_expect — send, expect a reply", "dns": "dns — a query", "exec": "exec — run a command",
	"agent": "agent — HAProxy's agent-check", "smtp": "smtp — greeting and HELO", "ping": "ping — ICMP echo",
	"file": "file — a number in a file (keepalived's FILE_CHECK)", "none": "none — in, unchecked",
	"mysql": "mysql — log in, a query returns a row", "pgsql": "pgsql — log in, a query returns a row",
	"ldap": "ldap — bind, read an entry", "ldaps": "ldaps — ldap over TLS", "imap": "imap — greeting and LOGIN", "imaps": "imaps — imap over TLS",
	"pop": "pop — greeting, USER and PASS", "pops": "pops — pop over TLS", "ftp": "ftp — log in, fetch a file",
	"radius": "radius — an Access-Request accepted", "sip": "sip — OPTIONS answered 200",
	"nntp": "nntp — a 200 or 201 greeting",
}

// checkRows are the check form's rows: a service's (with its sorry server
// and quorum), or a real server's overrides of inherit, its service's type.
// current is the form's type, for the option of a typeless service check.
func checkRows(serverForm bool, inherit, current string) []checkRow {
	o := rowOptions{serverForm}
	types := []option{{"", o.def("no health check", "the service's ("+orNone(inherit)+")")}}
	if current == typeless && !serverForm {
		types = append(types, option{typeless, "not set here (each real server sets its own)"})
	}
	for _, t := range ipvsmgr.CheckTypes() {
		types = append(types, option{t, checkTypeLabels[t]})
	}
	rows := []checkRow{
		{Name: "check_type", Label: "Check type", Options: types,
			Hint: o.def("what says a real server is up; its servers inherit the check", "empty: the service's type; other fields override the service's one by one")},
	}
	for _, group := range [][]checkRow{o.timingRows(), o.httpRows(), o.sendExpectRows(), o.dnsRows(), o.programRows(), credentialRows()} {
		rows = append(rows, group...)
	}
	if serverForm {
		for i := range rows {
			if rows[i].field != nil && rows[i].Options == nil { // a select has its "the service's"
				rows[i].Hint = "empty: the service's; " + rows[i].Hint
			}
		}
		return rows
	}
	return append(rows, sorryRows()...)
}

// rowOptions words a row's default for the form it is in: a service's
// default, or "the service's" on a real server's form.
type rowOptions struct{ serverForm bool }

func (o rowOptions) def(service, server string) string {
	if o.serverForm {
		return server
	}
	return service
}

// tri is a yes/no select whose empty choice is service (the default).
func (o rowOptions) tri(service string) []option {
	return []option{{"", o.def(service, "the service's")}, {"yes", "yes"}, {"no", "no"}}
}

// choice is a select of values whose empty choice is service.
func (o rowOptions) choice(service string, values ...string) []option {
	out := []option{{"", o.def(service, "the service's")}}
	for _, v := range values {
		out = append(out, option{v, v})
	}
	return out
}

// timingRows say when and how often a check runs, and what a failure does.
func (o rowOptions) timingRows() []checkRow {
	return []checkRow{
		{Name: "check_interval", Label: "Interval (s)", For: probing, Hint: "default 2; 0.1 at least",
			field: func(h *health) any { return &h.Check.Interval }},
		{Name: "check_timeout", Label: "Timeout (s)", For: probing, Hint: "default 1; 0.1 at least",
			field: func(h *health) any { return &h.Check.Timeout }},
		{Name: "check_fast_interval", Label: "Fast interval (s)", For: probing, Hint: "while a server changes state (after a failure while in, a pass while out); default: the interval",
			field: func(h *health) any { return &h.Check.FastInterval }},
		{Name: "check_down_interval", Label: "Down interval (s)", For: probing, Hint: "while a server is out; default: the interval",
			field: func(h *health) any { return &h.Check.DownInterval }},
		{Name: "check_rise", Label: "Rise", For: probing, Hint: "passes in a row that bring a server back (default 2)",
			field: func(h *health) any { return &h.Check.Rise }},
		{Name: "check_fall", Label: "Fall", For: probing, Hint: "failures in a row that take it out (default 3)",
			field: func(h *health) any { return &h.Check.Fall }},
		{Name: "check_address", Label: "Check address", For: probing, Hint: "default: each real server's own",
			field: func(h *health) any { return &h.Check.Address }},
		{Name: "check_port", Label: "Check port", For: probing, Hint: "default: the real server's; an agent check's agent port",
			field: func(h *health) any { return &h.Check.Port }},
		{Name: "check_on_failure", Label: "On failure", For: probing + " none", Options: o.choice("remove (default)", "remove", "quiesce"),
			Hint:  "remove takes it out of the kernel; quiesce keeps it at weight 0 (established connections go on)",
			field: func(h *health) any { return &h.Check.OnFailure }},
		{Name: "check_slow_start", Label: "Slow start (s)", For: probing, Hint: "a server coming back ramps up to its weight over this",
			field: func(h *health) any { return &h.Check.SlowStart }},
		{Name: "check_start_healthy", Label: "Start healthy", For: probing, Options: o.tri("no (default)"),
			Hint: "yes: a new server is in before its first pass", field: func(h *health) any { return &h.Check.StartHealthy }},
		{Name: "check_connect_checks", Label: "Connects between", For: "http https send_expect smtp mysql pgsql ldap ldaps imap imaps pop pops ftp nntp",
			Hint:  "ldirectord's checktype = N: N tcp connects after each full check that passes; default 0 (every run is the full check)",
			field: func(h *health) any { return &h.Check.ConnectChecks }},
		{Name: "check_warmup", Label: "Warmup (s)", For: probing, Hint: "a new server's first check comes at a random time within this; default: the interval; 0: at once",
			field: func(h *health) any { return &h.Check.Warmup }},
	}
}

// httpRows are the http and https checks' request and TLS.
func (o rowOptions) httpRows() []checkRow {
	return []checkRow{
		{Name: "check_method", Label: "HTTP method", For: "http https", Hint: "default GET",
			field: func(h *health) any { return &h.Check.Method }},
		{Name: "check_path", Label: "Path", For: "http https", Hint: "default /",
			field: func(h *health) any { return &h.Check.Path }},
		{Name: "check_host", Label: "Host header", For: "http https", Hint: "default: the check's address",
			field: func(h *health) any { return &h.Check.Host }},
		{Name: "check_expect_status", Label: "Expected status", For: "http https", Hint: "e.g. 200, 301; default: any 2xx or 3xx (redirects are not followed)",
			field: func(h *health) any { return &h.Check.ExpectStatus }},
		{Name: "check_expect_body", Label: "Body matches", For: "http https", Raw: true, Hint: "a regular expression",
			field: func(h *health) any { return &h.Check.ExpectBody }},
		{Name: "check_tls_verify", Label: "Verify the certificate", For: "https ldaps imaps pops", Options: o.tri("no (default)"),
			field: func(h *health) any { return &h.Check.TLSVerify }},
		{Name: "check_sni", Label: "TLS server name", For: "https", Hint: "SNI; default: none",
			field: func(h *health) any { return &h.Check.SNI }},
	}
}

// sendExpectRows are what send_expect and exec checks send and expect.
func (o rowOptions) sendExpectRows() []checkRow {
	return []checkRow{
		{Name: "check_send", Label: "Send", For: "send_expect", Raw: true, Hint: `\r \n \t escapes; default: send nothing`,
			field: func(h *health) any { return &h.Check.Send }},
		{Name: "check_expect", Label: "Expect", For: "send_expect exec", Raw: true, Hint: "a prefix of the reply (exec: the whole output less its newline), * for any, or a regular expression",
			field: func(h *health) any { return &h.Check.Expect }},
		{Name: "check_use_regex", Label: "Expect is a regular expression", For: "send_expect exec", Options: o.tri("no (default)"),
			field: func(h *health) any { return &h.Check.UseRegex }},
		{Name: "check_protocol", Label: "Check protocol", For: "send_expect dns sip", Options: o.choice("default (send_expect tcp, dns and sip udp)", "tcp", "udp"),
			field: func(h *health) any { return &h.Check.Protocol }},
	}
}

// dnsRows are the dns check's query (and the smtp check's HELO name).
func (o rowOptions) dnsRows() []checkRow {
	return []checkRow{
		{Name: "check_name", Label: "Query name", For: "dns smtp", Hint: "the name a dns check asks for; smtp: the HELO name (default localhost)",
			field: func(h *health) any { return &h.Check.Name }},
		{Name: "check_qtype", Label: "Query type", For: "dns", Options: o.choice("A (default)", ipvsmgr.DNSQueryTypes()...),
			field: func(h *health) any { return &h.Check.QType }},
		{Name: "check_rcode", Label: "Response code", For: "dns", Options: o.choice("none: pass on an answer", ipvsmgr.DNSResponseCodes()...),
			Hint: "pass on this response code instead (e.g. NXDOMAIN)", field: func(h *health) any { return &h.Check.RCode }},
	}
}

// programRows are the exec and file checks'.
func (o rowOptions) programRows() []checkRow {
	return []checkRow{
		{Name: "check_command", Label: "Command", For: "exec", Raw: true,
			Hint:  "a program and its arguments, never run by a shell; %h %p the address and port; exit 0 passes",
			field: func(h *health) any { return &h.Check.Command }},
		{Name: "check_dynamic_weight", Label: "Dynamic weight", For: "exec", Options: o.tri("no (default)"),
			Hint: "yes: exit 2..255 passes with weight exit-2", field: func(h *health) any { return &h.Check.DynamicWeight }},
		{Name: "check_file", Label: "File", For: "file", Hint: "an absolute path; the number in it is read every interval (missing or empty: 0)",
			field: func(h *health) any { return &h.Check.File }},
		{Name: "check_file_weight", Label: "File weight", For: "file",
			Hint:  "multiplies the number (default 1, -65535..65535): the product is added to the weight, -65535 or less is down; 0: any number but 0 is down",
			field: func(h *health) any { return &h.Check.FileWeight }},
		{Name: "check_file_reverse", Label: "Reverse", For: "file", Options: o.tri("no (default)"),
			Hint: "yes: the product is negated (with file weight 0: 0 is down)", field: func(h *health) any { return &h.Check.FileReverse }},
	}
}

// credentialRows are the application checks' requests, logins and secrets.
func credentialRows() []checkRow {
	return []checkRow{
		{Name: "check_request", Label: "Request", For: "mysql pgsql ldap ldaps ftp", Raw: true,
			Hint:  "mysql, pgsql: the query, which must return a row; ldap: the DN of the entry to read; ftp: the file to fetch (none: log in only)",
			field: func(h *health) any { return &h.Check.Request }},
		{Name: "check_receive", Label: "Receive", For: "ldap ldaps ftp", Raw: true,
			Hint:  "a regular expression the entry's DN (ldap) or the file (ftp) must match; empty: any",
			field: func(h *health) any { return &h.Check.Receive }},
		{Name: "check_login", Label: "Login", For: "mysql pgsql ldap ldaps imap imaps pop pops ftp radius sip",
			Hint:  "the user (ldap: the DN to bind as; sip: the request URI's user@host); imap, pop: empty checks the greeting only; ftp: default anonymous",
			field: func(h *health) any { return &h.Check.Login }},
		{Name: "check_password_file", Label: "Password file", For: "mysql pgsql ldap ldaps imap imaps pop pops ftp radius",
			Hint:  "a file under /etc/ipvsctl/secrets/ or /var/lib/ipvsctl/secrets/ on each director, mode 0600, read at each check: the password never goes in the configuration",
			field: func(h *health) any { return &h.Check.PasswordFile }},
		{Name: "check_database", Label: "Database", For: "mysql pgsql",
			field: func(h *health) any { return &h.Check.Database }},
		{Name: "check_secret_file", Label: "Secret file", For: "radius",
			Hint:  "the RADIUS shared secret's file on each director (under /etc/ipvsctl/secrets/ or /var/lib/ipvsctl/secrets/, mode 0600)",
			field: func(h *health) any { return &h.Check.SecretFile }},
	}
}

// sorryRows are a service's sorry server, quorum and quorum programs.
func sorryRows() []checkRow {
	return []checkRow{
		{Name: "sorry_server_address", Label: "Sorry server", Hint: "answers while fewer than the quorum of real servers are up; empty: none",
			field: func(h *health) any { return &h.Sorry.Address }},
		{Name: "sorry_server_port", Label: "Sorry server port", Hint: "default: the service's port",
			field: func(h *health) any { return &h.Sorry.Port }},
		{Name: "quorum", Label: "Quorum", Hint: "real servers up below which the sorry server comes in (default 1)",
			field: func(h *health) any { return &h.Quorum }},
		{Name: "hysteresis", Label: "Hysteresis", Hint: "servers: the sorry server comes in below quorum-hysteresis and leaves at quorum+hysteresis (below the quorum)",
			field: func(h *health) any { return &h.Hysteresis }},
		{Name: "quorum_up", Label: "Quorum up program", Raw: true,
			Hint:  "run as root when the service regains its quorum: an absolute path and its arguments, never run by a shell; empty: none",
			field: func(h *health) any { return &h.QuorumUp }},
		{Name: "quorum_down", Label: "Quorum down program", Raw: true,
			Hint:  "run as root when the service loses its quorum (below quorum-hysteresis); empty: none",
			field: func(h *health) any { return &h.QuorumDown }},
	}
}

// Only names the check types a type-specific row is for ("" for the rest).
func (r checkRow) Only() string {
	if r.For == "" || r.For == probing || r.For == probing+" none" {
		return ""
	}
	return strings.ReplaceAll(r.For, " ", ", ")
}

func orNone(t string) string {
	if t == "" {
		return "none set"
	}
	return t
}

// checkFieldNames are the form fields of the check rows.
func checkFieldNames(serverForm bool) []string {
	var out []string
	for _, r := range checkRows(serverForm, "", "") {
		out = append(out, r.Name)
	}
	return out
}

// reads reports whether the row is read for a check of type eff.
func (r *checkRow) reads(eff string, serverForm bool) bool {
	if r.For == "" || eff == typeless || serverForm && eff == "" {
		return true // nothing to judge by: the core names what does not fit
	}
	return contains(strings.Fields(r.For), eff)
}

// healthOf is what the check rows of a service (check, sorry server and
// quorum) or of a real server (check) show.
func healthOf(c *ipvsmgr.Check, sorry *ipvsmgr.SorryServer, quorum int) *health {
	h := &health{Quorum: quorum}
	if c != nil {
		h.Check = *c
	}
	if sorry != nil {
		h.Sorry = *sorry
	}
	return h
}

// formType is the form's check type for a check: typeless for a service
// check that sets fields but no type.
func formType(c *ipvsmgr.Check, serverForm bool) string {
	if c != nil && c.Type == "" && !serverForm {
		return typeless
	}
	if c == nil {
		return ""
	}
	return c.Type
}

// fillHealth puts h in the form, each row's field as the form writes it.
func (f *form) fillHealth(h *health, rows []checkRow, typ string) {
	f.Values["check_type"] = typ
	for _, row := range rows {
		if row.field != nil {
			f.Values[row.Name] = fieldText(row.field(h))
		}
	}
}

// fieldText is a check field as its input shows it ("" for not set).
func fieldText(p any) string {
	switch v := p.(type) {
	case *string:
		// An input cannot hold a line break: a control character becomes
		// its escape, which send and expect decode and a regexp reads alike.
		return strings.NewReplacer("\r", `\r`, "\n", `\n`, "\t", `\t`).Replace(*v)
	case *int:
		if *v != 0 {
			return strconv.Itoa(*v)
		}
	case *float64:
		if *v != 0 {
			return strconv.FormatFloat(*v, 'f', -1, 64)
		}
	case **float64:
		if *v != nil {
			return strconv.FormatFloat(**v, 'f', -1, 64)
		}
	case **int:
		if *v != nil {
			return strconv.Itoa(**v)
		}
	case **bool:
		if *v != nil {
			return map[bool]string{true: "yes", false: "no"}[**v]
		}
	case *[]int:
		s := make([]string, len(*v))
		for i, n := range *v {
			s[i] = strconv.Itoa(n)
		}
		return strings.Join(s, ", ")
	case *ipvsmgr.Argv:
		s := make([]string, len(*v))
		for i, w := range *v {
			s[i] = quoteWord(w)
		}
		return strings.Join(s, " ")
	}
	return ""
}

// quoteWord writes one word of a command so that SplitCommand reads it back.
func quoteWord(w string) string {
	if w != "" && !strings.ContainsAny(w, " \t\r\n'\"\\") {
		return w
	}
	return "'" + strings.ReplaceAll(w, "'", `'\''`) + "'"
}

// readHealth reads the check rows of a posted form. The check's type (a
// server's own, else inherit, its service's) says which rows count. Errors
// it can see without the core go beside their field.
func (f *form) readHealth(r *http.Request, rows []checkRow, serverForm bool, inherit string) *health {
	h := &health{}
	typ := strings.TrimSpace(r.PostFormValue("check_type"))
	f.Values["check_type"] = typ
	if typ != typeless {
		h.Check.Type = typ
	}
	eff := typ
	if eff == "" && serverForm {
		eff = inherit
	}
	for _, row := range rows {
		if row.field == nil {
			continue
		}
		v := r.PostFormValue(row.Name)
		if !row.Raw {
			v = strings.TrimSpace(v)
		}
		f.Values[row.Name] = v
		if v != "" && row.reads(eff, serverForm) {
			f.setField(row.Name, v, row.field(h))
		}
	}
	return h
}

// setField parses v into the field p points to.
func (f *form) setField(name, v string, p any) {
	switch dst := p.(type) {
	case *string:
		*dst = v
	case *int:
		*dst = f.intField(name)
	case *float64:
		*dst = f.secondsField(name, v)
	case **float64:
		s := f.secondsField(name, v)
		*dst = &s
	case **int:
		n := f.intField(name)
		*dst = &n
	case **bool:
		b, ok := map[string]bool{"yes": true, "no": false}[v]
		if !ok {
			f.set(name, strconv.Quote(v)+" is not yes or no")
		}
		*dst = &b
	case *[]int:
		for _, s := range strings.Fields(strings.ReplaceAll(v, ",", " ")) {
			n, err := strconv.Atoi(s)
			if err != nil {
				f.set(name, strconv.Quote(s)+" is not a status code (write: 200, 301)")
			}
			*dst = append(*dst, n)
		}
	case *ipvsmgr.Argv:
		words, err := ipvsmgr.SplitCommand(v)
		if err != nil {
			f.set(name, err.Error())
		}
		*dst = words
	}
}

func (f *form) secondsField(name, v string) float64 {
	s, err := strconv.ParseFloat(v, 64)
	if err != nil || math.IsNaN(s) || math.IsInf(s, 0) {
		f.set(name, strconv.Quote(v)+" is not a number of seconds")
		return 0
	}
	return s
}

// checkOf is the form's check: nil when it sets nothing.
func (h *health) checkOf() *ipvsmgr.Check {
	if reflect.ValueOf(h.Check).IsZero() {
		return nil
	}
	c := h.Check
	return &c
}

// sorryOf is the form's sorry server: nil for none.
func (h *health) sorryOf() *ipvsmgr.SorryServer {
	if h.Sorry == (ipvsmgr.SorryServer{}) {
		return nil
	}
	return &h.Sorry
}

// fact is one set field of a check, as a page shows it.
type fact struct{ Label, Value string }

// checkFacts lists the fields h sets, in the form's order.
func checkFacts(h *health, rows []checkRow) []fact {
	var out []fact
	if h.Check.Type != "" {
		out = append(out, fact{"Type", h.Check.Type})
	}
	for _, row := range rows {
		if row.field == nil {
			continue
		}
		if v := fieldText(row.field(h)); v != "" {
			out = append(out, fact{row.Label, v})
		}
	}
	return out
}
