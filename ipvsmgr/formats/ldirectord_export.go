package formats

import (
	"bufio"
	"cmp"
	"fmt"
	"io"
	"slices"
	"strconv"
	"strings"
	"unicode"

	"github.com/ipvsctl/ipvsctl/ipvsmgr"
)

var ldForwardingBack = map[string]string{"dr": "gate", "nat": "masq", "tun": "ipip"}

// exportLdirectord writes st as an ldirectord.cf that ldirectord's
// read_config loads: the kept globals, then one virtual per service with its
// keys indented by four spaces, its kept keys last.
func exportLdirectord(st *ipvsmgr.State, w io.Writer) error {
	bw := bufio.NewWriter(w)
	kept := map[string][]ipvsmgr.ImportedKey{}
	var fork string
	for _, k := range st.Imported {
		if k.Source != FormatLdirectord {
			continue
		}
		kept[k.Scope] = append(kept[k.Scope], k)
		if k.Scope == "" && k.Key == "fork" {
			fork = k.Value
		}
	}
	tcp := ldTCP(st.Services)
	intervals := map[float64]bool{}
	for _, svc := range st.Services {
		if svc.Check != nil {
			intervals[svc.Check.Interval] = true
		}
	}
	perVirtual := fork == "yes" || len(intervals) > 1
	fmt.Fprintln(bw, "# ldirectord.cf written by ipvsctl")
	for _, k := range kept[""] {
		if k.Key == "fork" && perVirtual && len(intervals) > 1 {
			continue
		}
		fmt.Fprintf(bw, "%s=%s\n", k.Key, ldKeptValue(k))
	}
	if perVirtual && fork != "yes" {
		fmt.Fprintln(bw, "fork=yes")
	}
	if !perVirtual {
		for iv := range intervals {
			fmt.Fprintf(bw, "checkinterval=%s\n", ldSeconds(iv))
		}
	}
	if d := st.Settings.MaintenanceDir; d != "" {
		fmt.Fprintf(bw, "maintenancedir=%s\n", d)
	}
	for i := range st.Services {
		if err := ldExportService(bw, &st.Services[i], kept, tcp, perVirtual); err != nil {
			return err
		}
	}
	return bw.Flush()
}

func ldSeconds(f float64) string {
	n := int(f + 0.999)
	if n < 1 {
		n = 1
	}
	return strconv.Itoa(n)
}

func ldHostPort(addr string, port int) string {
	if strings.Contains(addr, ":") {
		return "[" + addr + "]:" + strconv.Itoa(port)
	}
	return addr + ":" + strconv.Itoa(port)
}

func ldExportService(bw *bufio.Writer, svc *ipvsmgr.Service, kept map[string][]ipvsmgr.ImportedKey, tcp map[string]bool, perVirtual bool) error {
	six := strings.Contains(svc.Address, ":")
	head := ldVirtualHead(svc, kept, six)
	scope := ldScope(svc, tcp)
	mine := map[string]string{}
	for _, k := range kept[scope] {
		mine[k.Key] = k.Value
	}
	if svc.Protocol == "sctp" {
		return fmt.Errorf("service %s: ldirectord has no sctp", scope)
	}
	if svc.FWMark > 0 && svc.Address != "" {
		return fmt.Errorf("service %s: ldirectord's fwmark virtual has no address (%s)", scope, svc.Address)
	}
	if err := ldVerifies(svc, scope); err != nil {
		return err
	}
	fmt.Fprintf(bw, "\n%s\n", head)
	if err := ldExportReals(bw, svc, kept, scope, six); err != nil {
		return err
	}
	ldExportScheduling(bw, svc)
	if svc.SorryServer != nil {
		ldExportFallback(bw, svc, mine, six)
	}
	ldExportCheck(bw, svc, mine, perVirtual)
	if err := ldExportFallbackCommand(bw, svc, scope); err != nil {
		return err
	}
	for _, k := range kept[scope] {
		if k.Key == "fallback-forward" || k.Key == "virtual6" || strings.HasPrefix(k.Key, "request-receive") {
			continue
		}
		fmt.Fprintf(bw, "    %s=%s\n", k.Key, ldKeptValue(k))
	}
	return nil
}

// ldKeptValue is a kept key's value as it goes out: a secret's placeholder
// and a virtual's fallbackcommand in double quotes (the import kept the
// command without them, and read_config takes what is between the first and
// the last, spaces at either end included; the global one it takes as
// written, quotes and all).
func ldKeptValue(k ipvsmgr.ImportedKey) string {
	if ldSecretKeys[k.Key] || k.Key == "fallbackcommand" && k.Scope != "" {
		return `"` + k.Value + `"`
	}
	return k.Value
}

// ldVerifies refuses a check that verifies its server's certificate:
// ldirectord's https, ldaps, imaps and pops checks take any (Net::LDAP's
// verify => 'none', LWP without verification), so an export would check
// less than the document asks, silently.
func ldVerifies(svc *ipvsmgr.Service, scope string) error {
	if c := svc.Check; c != nil && c.TLSVerify != nil && *c.TLSVerify {
		return fmt.Errorf("service %s: check.tls_verify: ldirectord checks no certificate (its %s check takes any); set tls_verify false to export", scope, c.Type)
	}
	for j, rs := range svc.Servers {
		if c := rs.Check; c != nil && c.TLSVerify != nil && *c.TLSVerify {
			return fmt.Errorf("service %s: servers[%d].check.tls_verify: ldirectord checks no certificate; set tls_verify false to export", scope, j)
		}
	}
	return nil
}

// ldVirtualHead is the service's virtual= or virtual6= line; a fwmark's is
// virtual6 when it was read so.
func ldVirtualHead(svc *ipvsmgr.Service, kept map[string][]ipvsmgr.ImportedKey, six bool) string {
	switch {
	case svc.FWMark > 0:
		mark := strconv.FormatUint(uint64(svc.FWMark), 10)
		if ldKept(kept["virtual "+mark], "virtual6") {
			return "virtual6=" + mark
		}
		return "virtual=" + mark
	case six:
		return "virtual6=" + ldHostPort(svc.Address, svc.Port)
	default:
		return "virtual=" + ldHostPort(svc.Address, svc.Port)
	}
}

// ldExportReals writes a real= (or real6=) line for each real server, with
// its request and receive, kept or its own, and its thresholds.
func ldExportReals(bw *bufio.Writer, svc *ipvsmgr.Service, kept map[string][]ipvsmgr.ImportedKey, scope string, six bool) error {
	real := "real"
	if six {
		real = "real6"
	}
	for _, rs := range svc.Servers {
		f := cmp.Or(rs.Forwarding, svc.Forwarding, "dr")
		if rs.Tunnel != "" && rs.Tunnel != "ipip" {
			return fmt.Errorf("service %s: real server %s: ldirectord has no %s tunnel", scope, rs.Address, rs.Tunnel)
		}
		line := fmt.Sprintf("    %s=%s %s %d", real, ldHostPort(rs.Address, rs.Port), ldForwardingBack[f], rs.EffectiveWeight())
		if rs.Port == 0 {
			line = fmt.Sprintf("    %s=%s %s %d", real, bracket(rs.Address), ldForwardingBack[f], rs.EffectiveWeight())
		}
		if rs.Check != nil && (rs.Check.Path != "" || rs.Check.ExpectBody != "") {
			line += ` "` + strings.TrimPrefix(rs.Check.Path, "/") + `", "` + rs.Check.ExpectBody + `"`
		}
		for _, k := range kept[scope+" real "+ldHostPort(rs.Address, rs.Port)] {
			if k.Key == "request-receive" {
				line += " " + k.Value
			}
		}
		if rs.LowerThreshold > 0 {
			line += fmt.Sprintf(" l:%d", rs.LowerThreshold)
		}
		if rs.UpperThreshold > 0 {
			line += fmt.Sprintf(" u:%d", rs.UpperThreshold)
		}
		fmt.Fprintln(bw, line)
	}
	return nil
}

// ldExportScheduling writes the protocol, the scheduler and its flags, and
// the persistence.
func ldExportScheduling(bw *bufio.Writer, svc *ipvsmgr.Service) {
	if svc.FWMark == 0 {
		fmt.Fprintf(bw, "    protocol=%s\n", svc.Protocol)
	}
	if svc.Scheduler != "" {
		fmt.Fprintf(bw, "    scheduler=%s\n", svc.Scheduler)
	}
	if len(svc.SchedulerFlags) > 0 {
		fl := make([]string, len(svc.SchedulerFlags))
		for i, f := range svc.SchedulerFlags {
			fl[i] = "sh-" + f
		}
		fmt.Fprintf(bw, "    schedflags=%s\n", strings.Join(fl, ","))
	}
	if svc.OnePacket {
		fmt.Fprintln(bw, "    ops=yes")
	}
	if svc.Persistence > 0 {
		fmt.Fprintf(bw, "    persistent=%d\n", svc.Persistence)
	}
	if svc.PersistenceNetmask != "" {
		fmt.Fprintf(bw, "    netmask=%s\n", svc.PersistenceNetmask)
	}
}

// ldExportFallback writes the sorry server as fallback= (or fallback6=),
// with the forwarding method it was read with (gate if none).
func ldExportFallback(bw *bufio.Writer, svc *ipvsmgr.Service, mine map[string]string, six bool) {
	port := svc.SorryServer.Port
	if port == 0 {
		port = svc.Port
	}
	fb := ldHostPort(svc.SorryServer.Address, port)
	if port == 0 {
		fb = bracket(svc.SorryServer.Address)
	}
	f := "gate"
	if v, ok := mine["fallback-forward"]; ok {
		f = v
	}
	name := "fallback"
	if six {
		name = "fallback6"
	}
	fmt.Fprintf(bw, "    %s=%s %s\n", name, fb, f)
}

func bracket(a string) string {
	if strings.Contains(a, ":") {
		return "[" + a + "]"
	}
	return a
}

// ldExportCheck writes the check keys. A kept checktype (a number, or
// external-perl) goes out with the kept keys instead.
func ldExportCheck(bw *bufio.Writer, svc *ipvsmgr.Service, mine map[string]string, perVirtual bool) {
	c := svc.Check
	_, keptType := mine["checktype"]
	keptService := mine["service"]
	ct := func(t string) {
		if t == "negotiate" && c != nil && c.ConnectChecks > 0 {
			t = strconv.Itoa(c.ConnectChecks) // N connects, then one negotiate
		}
		if !keptType {
			fmt.Fprintf(bw, "    checktype=%s\n", t)
		}
	}
	if c == nil {
		down := len(svc.Servers) > 0
		for _, rs := range svc.Servers {
			down = down && rs.Health == "down"
		}
		if down {
			ct("off")
		} else {
			ct("on")
		}
		return
	}
	checktype, timeout := ldCheckType(c, keptService)
	ct(checktype)
	ldExportCheckService(bw, c)
	if keptType {
		timeout = "negotiatetimeout"
	}
	if c.Timeout > 0 {
		fmt.Fprintf(bw, "    %s=%s\n", timeout, ldSeconds(c.Timeout))
	}
	if perVirtual && c.Interval > 0 {
		fmt.Fprintf(bw, "    checkinterval=%s\n", ldSeconds(c.Interval))
	}
	if c.Fall > 0 {
		fmt.Fprintf(bw, "    failurecount=%d\n", c.Fall)
	}
	if c.Port > 0 {
		fmt.Fprintf(bw, "    checkport=%d\n", c.Port)
	}
	q := "no"
	if c.OnFailure == "quiesce" {
		q = "yes"
	}
	fmt.Fprintf(bw, "    quiescent=%s\n", q)
}

// ldSpoken are the services of ldirectord's negotiate check that ipvsctl's
// checks speak, each as the check type of its name.
var ldSpoken = []string{"http", "https", "dns", "smtp", "mysql", "pgsql", "ldap", "ldaps", "imap", "imaps", "pop", "pops", "ftp", "radius", "sip", "nntp"}

// ldCheckType is the checktype a check goes out as, and the key of its
// timeout. A tcp check with a kept service was read from a negotiate check
// of a service ipvsctl does not speak, or of mysql or pgsql without a login
// or a request (check_sql's refusal): it goes back as negotiate. Another
// service kept was read beside another checktype, which no negotiate used.
func ldCheckType(c *ipvsmgr.Check, keptService string) (checktype, timeout string) {
	negotiated := keptService == "mysql" || keptService == "pgsql" || !slices.Contains(ldSpoken, keptService)
	switch {
	case c.Type == "tcp" && keptService != "" && keptService != "none" && negotiated:
		return "negotiate", "negotiatetimeout"
	case c.Type == "ping":
		return "ping", "checktimeout"
	case c.Type == "exec":
		return "external", "checktimeout"
	case slices.Contains(ldSpoken, c.Type):
		return "negotiate", "negotiatetimeout"
	}
	return "connect", "checktimeout"
}

// ldExportCheckService writes what the check's type adds to its checktype:
// an external check's command, a negotiate check's service and its keys.
func ldExportCheckService(bw *bufio.Writer, c *ipvsmgr.Check) {
	switch c.Type {
	case "exec":
		if len(c.Command) > 0 {
			fmt.Fprintf(bw, "    checkcommand=\"%s\"\n", c.Command[0])
		}
	case "http", "https":
		fmt.Fprintf(bw, "    service=%s\n", c.Type)
		if c.Path != "" && c.Path != "/" {
			fmt.Fprintf(bw, "    request=\"%s\"\n", strings.TrimPrefix(c.Path, "/"))
		}
		if c.ExpectBody != "" {
			fmt.Fprintf(bw, "    receive=\"%s\"\n", c.ExpectBody)
		}
		if c.Method != "" {
			fmt.Fprintf(bw, "    httpmethod=%s\n", c.Method)
		}
		if c.Host != "" {
			fmt.Fprintf(bw, "    virtualhost=%s\n", c.Host)
		}
	case "dns":
		fmt.Fprintf(bw, "    service=%s\n", c.Type)
		if c.Name != "" {
			fmt.Fprintf(bw, "    request=\"%s\"\n", c.Name)
		}
	case "smtp":
		fmt.Fprintf(bw, "    service=%s\n", c.Type)
	case "mysql", "pgsql", "ldap", "ldaps", "imap", "imaps", "pop", "pops", "ftp", "radius", "sip", "nntp":
		fmt.Fprintf(bw, "    service=%s\n", c.Type)
		ldExportNegotiate(bw, c)
	}
}

// ldExportNegotiate writes a negotiate check's keys. The password and the
// secret are in files on the directors, never in the document: what goes
// out is a placeholder and a comment that names the file.
func ldExportNegotiate(bw *bufio.Writer, c *ipvsmgr.Check) {
	for _, kv := range [...][2]string{{"login", c.Login}, {"database", c.Database}, {"request", c.Request}, {"receive", c.Receive}} {
		if kv[1] != "" {
			fmt.Fprintf(bw, "    %s=\"%s\"\n", kv[0], kv[1])
		}
	}
	for _, kv := range [...][2]string{{"passwd", c.PasswordFile}, {"secret", c.SecretFile}} {
		if kv[1] != "" {
			fmt.Fprintf(bw, "    # %s: the one in %s on the director\n", kv[0], kv[1])
			fmt.Fprintf(bw, "    %s=\"%s\"\n", kv[0], ipvsmgr.SecretNotKept)
		}
	}
}

// ldExportFallbackCommand writes quorum programs that are a fallbackcommand
// (the same program and arguments, then "start" and "stop" with the
// virtual's ADDRESS:PORT and protocol, as the import makes them) as one;
// ldirectord has no other.
func ldExportFallbackCommand(bw *bufio.Writer, svc *ipvsmgr.Service, scope string) error {
	if svc.QuorumUp == nil && svc.QuorumDown == nil {
		return nil
	}
	down, up := svc.QuorumDown, svc.QuorumUp
	where, proto := ldFallbackArgs(svc)
	n := len(down) - 3
	if n < 1 || len(up) != len(down) || !slices.Equal(down[:n], up[:n]) || !slices.Equal(down[n:], []string{"start", where, proto}) ||
		!slices.Equal(up[n:], []string{"stop", where, proto}) || slices.ContainsFunc(down, func(w string) bool { return strings.ContainsAny(w, "#\"\n\t") }) {
		// A tab too: read_config reads a virtual's lines with each tab made four spaces.
		return fmt.Errorf("service %s: ldirectord runs no quorum_up/quorum_down but its fallbackcommand (the same program, then start or stop, %s and %s; no #, double quote or tab in a word)", scope, where, proto)
	}
	words := make([]string, n)
	for i, w := range down[:n] {
		words[i] = shellQuote(w)
	}
	// Inside a virtual, ldirectord reads the value between the double quotes and runs it with a shell.
	fmt.Fprintf(bw, "    fallbackcommand=\"%s\"\n", strings.Join(words, " "))
	return nil
}

// shellQuote is w as one word for sh.
func shellQuote(w string) string {
	if w != "" && !strings.ContainsFunc(w, func(r rune) bool {
		return !strings.ContainsRune("/._-+=,:@%", r) && !unicode.IsLetter(r) && !unicode.IsDigit(r)
	}) {
		return w
	}
	return "'" + strings.ReplaceAll(w, "'", `'\''`) + "'"
}

func ldKept(ks []ipvsmgr.ImportedKey, key string) bool {
	for _, k := range ks {
		if k.Key == key {
			return true
		}
	}
	return false
}
