package formats

import (
	"bufio"
	"bytes"
	"fmt"
	"net"
	"net/netip"
	"os"
	"strconv"
	"strings"
)

// Service names for ports, as ipvsadm (`ipvsadm -S` without -n writes
// them) and Piranha's nanny (`port = http`) resolve them: getservbyname,
// that is /etc/services. A machine without the file (a minimal container)
// or without the name falls back to the table below, IANA's assignments for
// the services load balancers carry, so that the same file imports the same
// way everywhere.

var fallbackServices = map[string]int{
	"ftp-data": 20, "ftp": 21, "ssh": 22, "telnet": 23, "smtp": 25, "domain": 53, "gopher": 70, "finger": 79,
	"http": 80, "www": 80, "kerberos": 88, "pop3": 110, "sunrpc": 111, "nntp": 119, "ntp": 123, "imap": 143,
	"imap2": 143, "snmp": 161, "ldap": 389, "https": 443, "microsoft-ds": 445, "isakmp": 500, "syslog": 514,
	"submission": 587, "ipp": 631, "ldaps": 636, "rsync": 873, "imaps": 993, "pop3s": 995, "socks": 1080,
	"openvpn": 1194, "ms-sql-s": 1433, "radius": 1812, "radius-acct": 1813, "nfs": 2049, "mysql": 3306,
	"sip": 5060, "sip-tls": 5061, "postgresql": 5432, "x11": 6000, "http-alt": 8080, "webcache": 8080,
	"tproxy": 8081, "squid": 3128, "mdns": 5353,
}

// servicePorts reads the services file: name (and alias) -> port, per
// protocol ("tcp/http").
func servicePorts(data []byte) map[string]int {
	m := map[string]int{}
	sc := bufio.NewScanner(bytes.NewReader(data))
	for sc.Scan() {
		line, _, _ := strings.Cut(sc.Text(), "#")
		f := strings.Fields(line)
		if len(f) < 2 {
			continue
		}
		ps, proto, ok := strings.Cut(f[1], "/")
		port, err := strconv.Atoi(ps)
		if !ok || err != nil || port < 0 || port > 65535 {
			continue
		}
		for _, name := range append([]string{f[0]}, f[2:]...) {
			if _, dup := m[proto+"/"+name]; !dup {
				m[proto+"/"+name] = port
			}
		}
	}
	return m
}

// servicePort resolves a service name for proto (tcp when "").
func (im *importer) servicePort(name, proto string) (int, bool) {
	if im.services == nil {
		read := im.opts.ServicesFile
		if read == nil {
			read = func() ([]byte, error) { return os.ReadFile("/etc/services") }
		}
		data, _ := read()
		im.services = servicePorts(data)
	}
	if proto == "" {
		proto = "tcp"
	}
	if p, ok := im.services[proto+"/"+name]; ok {
		return p, true
	}
	p, ok := fallbackServices[name]
	return p, ok
}

var hostName = lazyRegexp(`^[A-Za-z0-9]([A-Za-z0-9-]*[A-Za-z0-9])?(\.[A-Za-z0-9]([A-Za-z0-9-]*[A-Za-z0-9])?)*\.?$`)

// hostAddr is an address as written, or a host name resolved the way
// gethostbyname resolves it (its first IPv4 address), with a warning that
// names what it became: the state keeps the address, not the name.
func (im *importer) hostAddr(line int, s string) (netip.Addr, error) {
	if a, err := netip.ParseAddr(s); err == nil {
		return a, nil
	}
	if !hostName().MatchString(s) {
		return netip.Addr{}, fmt.Errorf("%q is neither an IP address nor a host name", s)
	}
	lookup := im.opts.LookupHost
	if lookup == nil {
		lookup = net.LookupHost
	}
	addrs, err := lookup(s)
	if err != nil {
		return netip.Addr{}, fmt.Errorf("host %q does not resolve: %w", s, err)
	}
	for _, x := range addrs {
		if a, err := netip.ParseAddr(x); err == nil && a.Unmap().Is4() {
			im.warnf(line, "%s resolved to %s", s, a.Unmap())
			return a.Unmap(), nil
		}
	}
	return netip.Addr{}, fmt.Errorf("host %q has no IPv4 address (%s)", s, strings.Join(addrs, ", "))
}
