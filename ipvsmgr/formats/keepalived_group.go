package formats

import (
	"fmt"
	"net/netip"
	"strconv"
	"strings"
)

// virtual_server_group NAME { ... }: each line an address with an optional
// port (a range A-B, A-N on the last octet or hextet, or A/LEN), or
// `fwmark MARK [inet|inet6]`, read as keepalived's alloc_vsg_entry does. A
// `virtual_server group NAME` becomes one service per address and mark, all
// with its real servers and checks. The group's text is kept (imported), so
// that the way back to keepalived's format can write it again.

// maxGroupMembers bounds what one group expands to (a /16 is 65,536).
const maxGroupMembers = 1 << 16

type kaGroup struct {
	name    string
	n       *kaNode
	targets []kaTarget
}

func (k *kaImporter) group(n *kaNode) error {
	if !n.block || len(n.words) != 2 {
		return k.errf(n.line, "want `virtual_server_group NAME {`")
	}
	g := &kaGroup{name: n.word(1), n: n}
	if k.groups[g.name] != nil {
		return k.errf(n.line, "virtual_server_group %s is defined twice (first on line %d)", g.name, k.groups[g.name].n.line)
	}
	for _, e := range n.children {
		if e.block {
			return k.errf(e.line, "virtual_server_group %s: a group holds addresses and fwmarks, not blocks", g.name)
		}
		ts, err := k.groupEntry(e)
		if err != nil {
			return err
		}
		g.targets = append(g.targets, ts...)
		if len(g.targets) > maxGroupMembers {
			return k.errf(e.line, "virtual_server_group %s expands to more than %d services", g.name, maxGroupMembers)
		}
	}
	if len(g.targets) == 0 {
		k.warnf(n.line, "virtual server group %s has no entries - removing", g.name)
	} else {
		k.groups[g.name] = g
	}
	return nil
}

func (k *kaImporter) groupEntry(e *kaNode) ([]kaTarget, error) {
	if e.word(0) == "fwmark" {
		m, err := strconv.ParseUint(e.word(1), 10, 32)
		if err != nil || m == 0 || len(e.words) > 3 {
			return nil, k.errf(e.line, "want `fwmark MARK [inet|inet6]` with MARK 1..4294967295")
		}
		if f := e.word(2); f != "" && f != "inet" && f != "inet6" {
			return nil, k.errf(e.line, "fwmark %d family %q: want inet or inet6", m, f)
		}
		return []kaTarget{{fwmark: uint32(m), line: e.line}}, nil
	}
	if len(e.words) > 2 {
		return nil, k.errf(e.line, "want `ADDRESS[-END|/LEN] [PORT]`, got %d words", len(e.words))
	}
	port := 0
	if len(e.words) == 2 {
		var err error
		if port, err = kaPort(e.word(1)); err != nil {
			return nil, k.errf(e.line, "port %q: %v", e.word(1), err)
		}
	}
	first, last, err := kaRange(e.word(0))
	if err != nil {
		return nil, k.errf(e.line, "%s: %v", e.word(0), err)
	}
	var ts []kaTarget
	for a := first; ; a = a.Next() {
		ts = append(ts, kaTarget{addr: a.Unmap().String(), port: port, line: e.line})
		if a == last || len(ts) > maxGroupMembers {
			break
		}
	}
	return ts, nil
}

// kaRange reads A, A-B, A-N or A/LEN into its first and last address.
func kaRange(s string) (netip.Addr, netip.Addr, error) {
	if pfx, err := netip.ParsePrefix(s); err == nil {
		if pfx.Masked() != pfx {
			return netip.Addr{}, netip.Addr{}, fmt.Errorf("address mask bits not empty")
		}
		b := pfx.Addr().AsSlice()
		for i := pfx.Bits(); i < len(b)*8; i++ {
			b[i/8] |= 0x80 >> (i % 8)
		}
		last, _ := netip.AddrFromSlice(b)
		return pfx.Addr(), last, nil
	}
	lo, hi, isRange := strings.Cut(s, "-")
	first, err := netip.ParseAddr(lo)
	if err != nil {
		return netip.Addr{}, netip.Addr{}, fmt.Errorf("not an IP address")
	}
	if !isRange {
		return first, first, nil
	}
	var last netip.Addr
	if strings.ContainsAny(hi, ".:") {
		if last, err = netip.ParseAddr(hi); err != nil || last.Is4() != first.Is4() {
			return netip.Addr{}, netip.Addr{}, fmt.Errorf("invalid range end %q", hi)
		}
		if last.Less(first) {
			return netip.Addr{}, netip.Addr{}, fmt.Errorf("address range end is less than address range start")
		}
		return first, last, nil
	}
	// The end replaces the last octet (IPv4) or hextet (IPv6).
	b := first.AsSlice()
	base := 10
	if first.Is6() {
		base = 16
	}
	n, err := strconv.ParseUint(hi, base, 16)
	var start uint64
	if first.Is4() {
		start = uint64(b[3])
	} else {
		start = uint64(b[14])<<8 | uint64(b[15])
	}
	if err != nil || (first.Is4() && n > 255) {
		return netip.Addr{}, netip.Addr{}, fmt.Errorf("invalid range end %q", hi)
	}
	if start >= n {
		return netip.Addr{}, netip.Addr{}, fmt.Errorf("address range end is not greater than address range start")
	}
	if first.Is4() {
		b[3] = byte(n)
	} else {
		b[14], b[15] = byte(n>>8), byte(n)
	}
	last, _ = netip.AddrFromSlice(b)
	return first, last, nil
}
