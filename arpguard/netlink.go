package arpguard

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io/fs"
	"net"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/vishvananda/netlink"
	"golang.org/x/sys/unix"
)

// NetlinkSystem is the System of the network namespace it was created in:
// addresses, links and routes through netlink, sysctls through /proc/sys,
// arptables and modprobe run as commands (no shell).
type NetlinkSystem struct {
	h *netlink.Handle
	// ProcSys and SysModule are /proc/sys and /sys/module.
	ProcSys, SysModule string
}

// NewNetlinkSystem opens a netlink handle in the caller's network namespace.
func NewNetlinkSystem() (*NetlinkSystem, error) {
	h, err := netlink.NewHandle()
	if err != nil {
		return nil, fmt.Errorf("open netlink handle: %w", err)
	}
	return &NetlinkSystem{h: h, ProcSys: "/proc/sys", SysModule: "/sys/module"}, nil
}

// Close releases the netlink handle.
func (s *NetlinkSystem) Close() { s.h.Close() }

func (s *NetlinkSystem) ReadSysctl(key string) (string, error) {
	b, err := os.ReadFile(filepath.Join(s.ProcSys, key))
	if err != nil {
		return "", fmt.Errorf("read sysctl: %w", err)
	}
	return strings.TrimSpace(string(b)), nil
}

func (s *NetlinkSystem) WriteSysctl(key, value string) error {
	if err := os.WriteFile(filepath.Join(s.ProcSys, key), []byte(value+"\n"), 0o644); err != nil {
		return fmt.Errorf("write sysctl: %w", err)
	}
	return nil
}

func (s *NetlinkSystem) ModuleLoaded(name string) (bool, error) {
	_, err := os.Stat(filepath.Join(s.SysModule, name))
	if errors.Is(err, fs.ErrNotExist) {
		return false, nil
	}
	return err == nil, err
}

func (s *NetlinkSystem) LoadModule(ctx context.Context, name string) error {
	return runCommand(ctx, "modprobe", name)
}

func (s *NetlinkSystem) UnloadModule(ctx context.Context, name string) error {
	return runCommand(ctx, "modprobe", "-r", name)
}

func (s *NetlinkSystem) link(dev string) (netlink.Link, error) {
	l, err := s.h.LinkByName(dev)
	if err != nil {
		return nil, fmt.Errorf("find link %s: %w", dev, err)
	}
	return l, nil
}

func (s *NetlinkSystem) LinkUp(dev string) (bool, error) {
	l, err := s.h.LinkByName(dev)
	var nf netlink.LinkNotFoundError
	if errors.As(err, &nf) {
		return false, nil
	}
	if err != nil {
		return false, fmt.Errorf("find link %s: %w", dev, err)
	}
	return l.Attrs().Flags&net.FlagUp != 0, nil
}

func (s *NetlinkSystem) SetLinkUp(dev string, up bool) error {
	l, err := s.link(dev)
	if err != nil {
		return err
	}
	if up {
		err = s.h.LinkSetUp(l)
	} else {
		err = s.h.LinkSetDown(l)
	}
	if err != nil {
		return fmt.Errorf("set link %s up=%t: %w", dev, up, err)
	}
	return nil
}

func (s *NetlinkSystem) HasAddress(p netip.Prefix, dev string) (bool, error) {
	l, err := s.link(dev)
	if err != nil {
		return false, err
	}
	addrs, err := s.h.AddrList(l, netlink.FAMILY_ALL)
	if err != nil {
		return false, fmt.Errorf("list addresses of %s: %w", dev, err)
	}
	for _, a := range addrs {
		if a.IPNet != nil && prefixOf(*a.IPNet) == p {
			return true, nil
		}
	}
	return false, nil
}

func (s *NetlinkSystem) AddAddress(p netip.Prefix, dev string) error {
	l, err := s.link(dev)
	if err != nil {
		return err
	}
	if err := s.h.AddrAdd(l, &netlink.Addr{IPNet: ipNet(p)}); err != nil {
		return fmt.Errorf("add address %s to %s: %w", p, dev, err)
	}
	return nil
}

func (s *NetlinkSystem) DelAddress(p netip.Prefix, dev string) error {
	l, err := s.link(dev)
	if err != nil {
		return err
	}
	if err := s.h.AddrDel(l, &netlink.Addr{IPNet: ipNet(p)}); err != nil {
		return fmt.Errorf("delete address %s from %s: %w", p, dev, err)
	}
	return nil
}

// HasArpRule uses arptables -C, which the nf_tables arptables (Debian's and
// RHEL's default) has and the legacy one lacks.
func (s *NetlinkSystem) HasArpRule(ctx context.Context, chain string, args []string) (bool, error) {
	err := runCommand(ctx, "arptables", append([]string{"-C", chain}, args...)...)
	var ee *exec.ExitError
	if errors.As(err, &ee) && ee.ExitCode() == 1 {
		return false, nil
	}
	return err == nil, err
}

func (s *NetlinkSystem) AppendArpRule(ctx context.Context, chain string, args []string) error {
	return runCommand(ctx, "arptables", append([]string{"-A", chain}, args...)...)
}

func (s *NetlinkSystem) DeleteArpRule(ctx context.Context, chain string, args []string) error {
	return runCommand(ctx, "arptables", append([]string{"-D", chain}, args...)...)
}

func (s *NetlinkSystem) RouteAt(dst netip.Prefix, metric int) (RouteSpec, bool, error) {
	fam := netlink.FAMILY_V4
	if dst.Addr().Is6() {
		fam = netlink.FAMILY_V6
	}
	routes, err := s.h.RouteListFiltered(fam, &netlink.Route{Table: unix.RT_TABLE_MAIN}, netlink.RT_FILTER_TABLE)
	if err != nil {
		return RouteSpec{}, false, fmt.Errorf("list routes: %w", err)
	}
	for _, r := range routes {
		rd := netip.PrefixFrom(unspecifiedOf(dst.Addr()), 0)
		if r.Dst != nil {
			rd = prefixOf(*r.Dst)
		}
		if rd != dst || r.Priority != metric || r.Type != unix.RTN_UNICAST {
			continue
		}
		spec := RouteSpec{Dst: dst, Metric: r.Priority, OnLink: r.Flags&unix.RTNH_F_ONLINK != 0}
		if gw, ok := netip.AddrFromSlice(r.Gw); ok {
			spec.Gateway = gw.Unmap()
		}
		if src, ok := netip.AddrFromSlice(r.Src); ok {
			spec.Src = src.Unmap()
		}
		if l, err := s.h.LinkByIndex(r.LinkIndex); err == nil {
			spec.Dev = l.Attrs().Name
		}
		spec.Proto = protoName(int(r.Protocol))
		if r.Scope != netlink.SCOPE_UNIVERSE {
			spec.Scope = scopeName(r.Scope)
		}
		return spec, true, nil
	}
	return RouteSpec{}, false, nil
}

func (s *NetlinkSystem) route(r RouteSpec) (*netlink.Route, error) {
	nr := &netlink.Route{Dst: ipNet(r.Dst), Priority: r.Metric, Table: unix.RT_TABLE_MAIN}
	if r.Gateway.IsValid() {
		nr.Gw = r.Gateway.AsSlice()
	}
	if r.Src.IsValid() {
		nr.Src = r.Src.AsSlice()
	}
	if r.Dev != "" {
		l, err := s.link(r.Dev)
		if err != nil {
			return nil, err
		}
		nr.LinkIndex = l.Attrs().Index
	}
	if r.OnLink {
		nr.Flags |= unix.RTNH_F_ONLINK
	}
	if r.Proto != "" {
		p, err := protoNumber(r.Proto)
		if err != nil {
			return nil, err
		}
		nr.Protocol = netlink.RouteProtocol(p)
	}
	if r.Scope != "" {
		sc, err := scopeNumber(r.Scope)
		if err != nil {
			return nil, err
		}
		nr.Scope = sc
	}
	return nr, nil
}

func (s *NetlinkSystem) ReplaceRoute(r RouteSpec) error {
	nr, err := s.route(r)
	if err != nil {
		return fmt.Errorf("replace route %s: %w", r, err)
	}
	if err := s.h.RouteReplace(nr); err != nil {
		return fmt.Errorf("replace route %s: %w", r, err)
	}
	return nil
}

func (s *NetlinkSystem) DeleteRoute(r RouteSpec) error {
	nr, err := s.route(r)
	if err != nil {
		return fmt.Errorf("delete route %s: %w", r, err)
	}
	if err := s.h.RouteDel(nr); err != nil {
		return fmt.Errorf("delete route %s: %w", r, err)
	}
	return nil
}

// PrimaryAddress is the first global address of dev in a's family, for
// guessing the RIP of the machine apply runs on.
func (s *NetlinkSystem) PrimaryAddress(dev string, v4 bool) (netip.Addr, error) {
	l, err := s.link(dev)
	if err != nil {
		return netip.Addr{}, err
	}
	fam := netlink.FAMILY_V6
	if v4 {
		fam = netlink.FAMILY_V4
	}
	addrs, err := s.h.AddrList(l, fam)
	if err != nil {
		return netip.Addr{}, fmt.Errorf("list addresses of %s: %w", dev, err)
	}
	for _, a := range addrs {
		if a.Scope == int(netlink.SCOPE_UNIVERSE) {
			if ip, ok := netip.AddrFromSlice(a.IP); ok {
				return ip.Unmap(), nil
			}
		}
	}
	return netip.Addr{}, fmt.Errorf("interface %s has no global address", dev)
}

// DefaultRouteInterface names the interface of the IPv4 default route.
func (s *NetlinkSystem) DefaultRouteInterface() (string, error) {
	r, ok, err := s.RouteAt(netip.PrefixFrom(netip.IPv4Unspecified(), 0), 0)
	if err != nil {
		return "", err
	}
	if !ok || r.Dev == "" {
		return "", errors.New("no IPv4 default route to take the interface from")
	}
	return r.Dev, nil
}

func runCommand(ctx context.Context, name string, args ...string) error {
	var stderr bytes.Buffer
	cmd := exec.CommandContext(ctx, name, args...)
	cmd.Stderr = &stderr
	if err := cmd.Run(); err != nil {
		msg := strings.TrimSpace(stderr.String())
		if msg == "" {
			return fmt.Errorf("run %s %s: %w", name, strings.Join(args, " "), err)
		}
		return fmt.Errorf("run %s %s: %w: %s", name, strings.Join(args, " "), err, msg)
	}
	return nil
}

func ipNet(p netip.Prefix) *net.IPNet {
	return &net.IPNet{IP: p.Addr().AsSlice(), Mask: net.CIDRMask(p.Bits(), p.Addr().BitLen())}
}

func prefixOf(n net.IPNet) netip.Prefix {
	a, _ := netip.AddrFromSlice(n.IP)
	if ip4 := n.IP.To4(); ip4 != nil && len(n.Mask) == net.IPv4len {
		a, _ = netip.AddrFromSlice(ip4)
	}
	ones, _ := n.Mask.Size()
	return netip.PrefixFrom(a.Unmap(), ones)
}

func unspecifiedOf(a netip.Addr) netip.Addr { return unspecified(a) }

// routeProtos are the names iproute2 prints for route protocols.
func routeProtos() map[string]int {
	return map[string]int{"redirect": 1, "kernel": 2, "boot": 3, "static": 4, "ra": 9, "dhcp": 16}
}

func protoName(p int) string {
	for n, v := range routeProtos() {
		if v == p {
			return n
		}
	}
	if p == 0 {
		return ""
	}
	return strconv.Itoa(p)
}

func protoNumber(s string) (int, error) {
	if v, ok := routeProtos()[s]; ok {
		return v, nil
	}
	n, err := strconv.Atoi(s)
	if err != nil {
		return 0, fmt.Errorf("route protocol %q: unknown", s)
	}
	return n, nil
}

func scopeName(s netlink.Scope) string {
	switch s {
	case netlink.SCOPE_LINK:
		return "link"
	case netlink.SCOPE_HOST:
		return "host"
	case netlink.SCOPE_SITE:
		return "site"
	}
	return strconv.Itoa(int(s))
}

func scopeNumber(s string) (netlink.Scope, error) {
	switch s {
	case "link":
		return netlink.SCOPE_LINK, nil
	case "host":
		return netlink.SCOPE_HOST, nil
	case "site":
		return netlink.SCOPE_SITE, nil
	case "global":
		return netlink.SCOPE_UNIVERSE, nil
	}
	n, err := strconv.Atoi(s)
	if err != nil {
		return 0, fmt.Errorf("route scope %q: unknown", s)
	}
	return netlink.Scope(n), nil
}
