package arpguard

import (
	"fmt"
	"io/fs"
	"net/netip"
	"strings"
)

// TunnelDevice is the ipip fallback device, the one that receives IPIP packets
// from any director; the kernel creates it when the ipip module loads.
const TunnelDevice = "tunl0"

// A Step is one change a real server needs. Each kind is applied, checked and
// undone the same way by the shell renderer and by the local executor.
type Step interface {
	// String is the step as one line, e.g. "address 198.18.0.100/32 dev lo".
	String() string
	// Drift says what is wrong when the step is found not in effect.
	Drift() string
	isStep()
}

// Sysctl sets /proc/sys/Key to Value. Key uses slashes so that interface names
// with dots (VLANs) stay unambiguous.
type Sysctl struct{ Key, Value string }

// Module is a kernel module that must be loaded.
type Module struct{ Name string }

// LinkUp is a device that must be administratively up.
type LinkUp struct{ Dev string }

// Address is a VIP held on a device.
type Address struct {
	Prefix netip.Prefix
	Dev    string
}

// ArpRule is an arptables rule in the filter table.
type ArpRule struct {
	Chain string
	Args  []string
}

// Route sends Dst through Gateway (metric 0 for IPv4, 1024 for IPv6: the
// kernel's defaults, so that "replace" swaps exactly the route an operator's
// "ip route add" would have made).
type Route struct {
	Dst     netip.Prefix
	Gateway netip.Addr
}

// File is a persistence file with exact content.
type File struct {
	Path    string
	Content string
	Perm    fs.FileMode
}

// Symlink is a link, such as the one systemctl enable makes.
type Symlink struct{ Path, Target string }

func (Sysctl) isStep()  {}
func (Module) isStep()  {}
func (LinkUp) isStep()  {}
func (Address) isStep() {}
func (ArpRule) isStep() {}
func (Route) isStep()   {}
func (File) isStep()    {}
func (Symlink) isStep() {}

func (s Sysctl) String() string  { return "sysctl " + s.Key + "=" + s.Value }
func (s Module) String() string  { return "module " + s.Name }
func (s LinkUp) String() string  { return "link " + s.Dev + " up" }
func (s Address) String() string { return "address " + s.Prefix.String() + " dev " + s.Dev }
func (s ArpRule) String() string { return "arptables -A " + s.Chain + " " + strings.Join(s.Args, " ") }
func (s Route) String() string   { return "route " + s.Dst.String() + " via " + s.Gateway.String() }
func (s File) String() string    { return "file " + s.Path }
func (s Symlink) String() string { return "symlink " + s.Path + " -> " + s.Target }

func (s Sysctl) Drift() string {
	return fmt.Sprintf("sysctl %s is not %s", strings.ReplaceAll(s.Key, "/", "."), s.Value)
}
func (s Module) Drift() string  { return "module " + s.Name + " not loaded" }
func (s LinkUp) Drift() string  { return s.Dev + " down or missing" }
func (s Address) Drift() string { return "VIP " + s.Prefix.Addr().String() + " missing on " + s.Dev }
func (s ArpRule) Drift() string {
	return "arptables rule missing: " + s.Chain + " " + strings.Join(s.Args, " ")
}
func (s Route) Drift() string {
	if s.Dst.Bits() == 0 {
		return "default route not via " + s.Gateway.String()
	}
	return "route " + s.Dst.String() + " not via " + s.Gateway.String()
}
func (s File) Drift() string    { return "persistence file " + s.Path + " missing or changed" }
func (s Symlink) Drift() string { return "unit not enabled: " + s.Path + " missing" }

// metric is the route metric the kernel gives a route added without one.
func (s Route) metric() int {
	if s.Dst.Addr().Is4() {
		return 0
	}
	return 1024
}

func sysctlKey(family, dev, name string) string {
	return "net/" + family + "/conf/" + dev + "/" + name
}

// Plan returns, in order, every change the target's real server needs,
// persistence included. Order matters: ARP hiding is in force before a VIP
// appears, and undo walks the journal backwards.
func Plan(t Target, p Paths) ([]Step, error) {
	if err := t.Validate(); err != nil {
		return nil, fmt.Errorf("plan for real server %s: %w", t.Label(), err)
	}
	if err := p.validate(); err != nil {
		return nil, fmt.Errorf("plan for real server %s: %w", t.Label(), err)
	}
	var steps []Step
	arpHiding := func() {
		for _, dev := range []string{"all", t.Interface} {
			steps = append(steps,
				Sysctl{sysctlKey("ipv4", dev, "arp_ignore"), "1"},
				Sysctl{sysctlKey("ipv4", dev, "arp_announce"), "2"})
		}
	}
	switch t.Mode {
	case ModeDRSysctl:
		// An IPv6 VIP on lo is not announced: Linux answers neighbour
		// solicitations only for addresses on the receiving interface.
		if hasV4(t.VIPs) {
			arpHiding()
		}
		for _, v := range t.VIPs {
			steps = append(steps, Address{hostPrefix(v), "lo"})
		}
	case ModeDRArptables:
		for _, v := range t.VIPs {
			steps = append(steps,
				ArpRule{"INPUT", []string{"-d", v.String(), "-j", "DROP"}},
				ArpRule{"OUTPUT", []string{"-s", v.String(), "-j", "mangle", "--mangle-ip-s", t.RIP.String()}})
		}
		for _, v := range t.VIPs {
			steps = append(steps, Address{hostPrefix(v), t.Interface})
		}
	case ModeTUN:
		// The VIP on tunl0 would still be answered for on the real
		// server's LAN: the ARP problem is the same as in DR.
		arpHiding()
		// Loose reverse-path filtering: effective rp_filter is the larger
		// of all and the device, so 2 on tunl0 is loose whatever all is.
		steps = append(steps,
			Module{"ipip"},
			Sysctl{sysctlKey("ipv4", TunnelDevice, "rp_filter"), "2"},
			LinkUp{TunnelDevice})
		for _, v := range t.VIPs {
			steps = append(steps, Address{hostPrefix(v), TunnelDevice})
		}
	case ModeNAT:
		if t.Route == RouteHost {
			for _, pfx := range t.ClientPrefixes {
				steps = append(steps, Route{pfx.Masked(), t.Gateway})
			}
		} else {
			steps = append(steps, Route{netip.PrefixFrom(unspecified(t.Gateway), 0), t.Gateway})
		}
	}
	return append(steps, persistence(t, steps, p)...), nil
}

// persistence returns the files that bring the runtime steps back after a
// reboot: a sysctl.d file, and a boot script run by an enabled systemd unit.
func persistence(t Target, runtime []Step, p Paths) []Step {
	var out []Step
	var conf strings.Builder
	for _, s := range runtime {
		if sc, ok := s.(Sysctl); ok {
			fmt.Fprintf(&conf, "%s = %s\n", sc.Key, sc.Value)
		}
	}
	if conf.Len() > 0 {
		out = append(out, File{p.SysctlConf, header(t, "#") + conf.String(), 0o644})
	}
	out = append(out,
		File{p.BootScript, renderBoot(t, runtime), 0o755},
		File{p.Unit, renderUnit(t, p), 0o644},
		Symlink{p.UnitLink, p.Unit})
	return out
}

func header(t Target, comment string) string {
	vips := make([]string, len(t.VIPs))
	for i, v := range t.VIPs {
		vips[i] = v.String()
	}
	h := fmt.Sprintf("%s Written by ipvsctl realserver for real server %s, mode %s", comment, t.RIP, t.Mode)
	if len(vips) > 0 {
		h += ", VIPs " + strings.Join(vips, ",")
	}
	if t.Mode == ModeNAT {
		h += ", gateway " + t.Gateway.String()
	}
	return h + ".\n" + comment + " Removed by ipvsctl realserver undo; do not edit.\n"
}

func renderUnit(t Target, p Paths) string {
	return "# " + strings.TrimPrefix(header(t, "#"), "# ") + `[Unit]
Description=ipvsctl real-server preparation (LVS ` + string(t.Mode) + `)
Wants=network-online.target
After=network-online.target

[Service]
Type=oneshot
RemainAfterExit=yes
ExecStart=/bin/sh ` + p.BootScript + `

[Install]
WantedBy=multi-user.target
`
}

func hasV4(addrs []netip.Addr) bool {
	for _, a := range addrs {
		if a.Is4() {
			return true
		}
	}
	return false
}

func hostPrefix(a netip.Addr) netip.Prefix {
	return netip.PrefixFrom(a, a.BitLen())
}

func unspecified(a netip.Addr) netip.Addr {
	if a.Is4() {
		return netip.IPv4Unspecified()
	}
	return netip.IPv6Unspecified()
}
