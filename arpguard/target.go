package arpguard

import (
	"errors"
	"fmt"
	"net"
	"net/netip"
	"path"
	"strings"
)

// Mode is how a real server is prepared; it follows the forwarding method of
// the virtual services it serves.
type Mode string

const (
	// ModeDRSysctl hides the VIP from ARP with arp_ignore/arp_announce and holds it on lo.
	ModeDRSysctl Mode = "dr-sysctl"
	// ModeDRArptables holds the VIP on the real server's interface and filters ARP for it.
	ModeDRArptables Mode = "dr-arptables"
	// ModeTUN decapsulates IPIP from the director on tunl0, which holds the VIP.
	ModeTUN Mode = "tun"
	// ModeNAT routes the real server's replies back through the director.
	ModeNAT Mode = "nat"
)

// ParseMode parses a mode name as the CLI and the desired state spell it.
func ParseMode(s string) (Mode, error) {
	switch m := Mode(s); m {
	case ModeDRSysctl, ModeDRArptables, ModeTUN, ModeNAT:
		return m, nil
	case "dr":
		return ModeDRSysctl, nil
	}
	return "", fmt.Errorf("mode %q: want dr-sysctl, dr-arptables, tun or nat", s)
}

// RouteMode says how a NAT real server sends its replies to the director.
type RouteMode string

const (
	// RouteDefault makes the director's address the real server's default gateway.
	RouteDefault RouteMode = "default"
	// RouteHost routes only the listed client prefixes through the director,
	// leaving the real server's own default route alone.
	RouteHost RouteMode = "host"
)

// Target is one real server and what it must be prepared for.
type Target struct {
	// Name labels the real server in results; Host is used when empty.
	Name string `json:"name,omitempty"`
	// Host is the SSH address, host or host:port; RIP:22 when empty.
	Host string `json:"host,omitempty"`
	// RIP is the real server's own address, the one the director forwards to.
	RIP netip.Addr `json:"rip"`
	// Interface is the real server's interface that holds the RIP.
	Interface string `json:"interface,omitempty"`
	// VIPs are the virtual addresses of the services this real server serves.
	VIPs []netip.Addr `json:"vips"`
	Mode Mode         `json:"mode"`
	// Gateway is the director's address on the real servers' network (NAT only).
	Gateway netip.Addr `json:"gateway,omitzero"`
	// Route selects default-route or per-prefix routing for NAT; default when empty.
	Route RouteMode `json:"route,omitempty"`
	// ClientPrefixes are routed through Gateway when Route is RouteHost.
	ClientPrefixes []netip.Prefix `json:"client_prefixes,omitempty"`
}

// Label is how results name the real server.
func (t Target) Label() string {
	if t.Name != "" {
		return t.Name
	}
	return t.SSHAddress()
}

// SSHAddress is host:port to dial.
func (t Target) SSHAddress() string {
	h := t.Host
	if h == "" {
		h = t.RIP.String()
	}
	if _, _, err := net.SplitHostPort(h); err == nil {
		return h
	}
	if strings.Count(h, ":") > 1 && !strings.HasPrefix(h, "[") {
		return "[" + h + "]:22"
	}
	return h + ":22"
}

// Validate reports the first field that makes the target unusable, naming it and its value.
func (t Target) Validate() error {
	if !t.RIP.IsValid() {
		return errors.New("rip: missing")
	}
	if len(t.VIPs) == 0 && t.Mode != ModeNAT {
		return errors.New("vips: at least one VIP is needed")
	}
	seen := map[netip.Addr]bool{}
	for _, v := range t.VIPs {
		if !v.IsValid() || v.IsUnspecified() || v.IsMulticast() || v.IsLoopback() {
			return fmt.Errorf("vips: %q is not a unicast address", v)
		}
		if seen[v] {
			return fmt.Errorf("vips: %s listed twice", v)
		}
		seen[v] = true
	}
	switch t.Mode {
	case ModeDRSysctl:
		if err := checkIfname("interface", t.Interface); err != nil {
			return err
		}
	case ModeDRArptables, ModeTUN:
		if err := checkIfname("interface", t.Interface); err != nil {
			return err
		}
		if !t.RIP.Is4() {
			return fmt.Errorf("rip: %s: mode %s supports IPv4 only", t.RIP, t.Mode)
		}
		for _, v := range t.VIPs {
			if !v.Is4() {
				return fmt.Errorf("vips: %s: mode %s supports IPv4 VIPs only", v, t.Mode)
			}
		}
	case ModeNAT:
		if !t.Gateway.IsValid() {
			return errors.New("gateway: the director's address is needed in nat mode")
		}
		if t.Gateway.Is4() != t.RIP.Is4() {
			return fmt.Errorf("gateway: %s is not of the same family as rip %s", t.Gateway, t.RIP)
		}
		switch t.Route {
		case "", RouteDefault:
		case RouteHost:
			if len(t.ClientPrefixes) == 0 {
				return errors.New("client_prefixes: route mode host needs at least one prefix")
			}
			for _, p := range t.ClientPrefixes {
				if !p.IsValid() || p.Addr().Is4() != t.Gateway.Is4() {
					return fmt.Errorf("client_prefixes: %q is not a prefix of the gateway's family", p)
				}
			}
		default:
			return fmt.Errorf("route: %q: want default or host", t.Route)
		}
	default:
		return fmt.Errorf("mode: %q: want dr-sysctl, dr-arptables, tun or nat", t.Mode)
	}
	return nil
}

// checkIfname accepts what the kernel accepts as an interface name, which also
// keeps it safe to place in a shell script and a /proc/sys path.
func checkIfname(field, name string) error {
	if name == "" {
		return fmt.Errorf("%s: missing", field)
	}
	if len(name) > 15 || name == "." || name == ".." {
		return fmt.Errorf("%s: %q is not an interface name", field, name)
	}
	for _, r := range name {
		ok := r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || strings.ContainsRune("._-@", r)
		if !ok {
			return fmt.Errorf("%s: %q is not an interface name", field, name)
		}
	}
	return nil
}

// Paths are where persistence and the journal live on the real server.
// Tests point them into a temporary directory.
type Paths struct {
	Journal    string // one line per change an apply made
	SysctlConf string // sysctl.d file read at boot
	BootScript string // run by the unit at boot to restore addresses, rules, tunnel and routes
	Unit       string // systemd unit running BootScript
	UnitLink   string // the multi-user.target.wants link that enables Unit
}

// DefaultPaths are the locations on a real server.
func DefaultPaths() Paths {
	return Paths{
		Journal:    "/var/lib/ipvsctl/realserver.journal",
		SysctlConf: "/etc/sysctl.d/90-ipvsctl-realserver.conf",
		BootScript: "/etc/ipvsctl/realserver-boot.sh",
		Unit:       "/etc/systemd/system/ipvsctl-realserver.service",
		UnitLink:   "/etc/systemd/system/multi-user.target.wants/ipvsctl-realserver.service",
	}
}

// UnderRoot places every path under dir, for tests and image builds.
func (p Paths) UnderRoot(dir string) Paths {
	j := func(s string) string { return path.Join(dir, s) }
	return Paths{Journal: j(p.Journal), SysctlConf: j(p.SysctlConf), BootScript: j(p.BootScript), Unit: j(p.Unit), UnitLink: j(p.UnitLink)}
}

func (p Paths) validate() error {
	for _, f := range []struct{ name, v string }{
		{"journal", p.Journal}, {"sysctl conf", p.SysctlConf}, {"boot script", p.BootScript},
		{"unit", p.Unit}, {"unit link", p.UnitLink},
	} {
		if !path.IsAbs(f.v) || strings.ContainsAny(f.v, " \t\n'\"\\$`;&|<>*?()") {
			return fmt.Errorf("%s path %q: must be absolute and plain", f.name, f.v)
		}
	}
	return nil
}
