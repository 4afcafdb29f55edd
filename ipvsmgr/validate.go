package ipvsmgr

import (
	"fmt"
	"net/netip"
	"strconv"
	"strings"
)

// Problem is one invalid value: the field's path in the document, and what is
// wrong with the value found there.
type Problem struct {
	Field   string `json:"field"`
	Message string `json:"message"`
}

func (p Problem) Error() string { return p.Field + ": " + p.Message }

// ValidationError lists every invalid value of a document.
type ValidationError struct {
	Problems []Problem
}

func (e *ValidationError) Error() string {
	msgs := make([]string, len(e.Problems))
	for i, p := range e.Problems {
		msgs[i] = p.Error()
	}
	return "invalid desired state: " + strings.Join(msgs, "; ")
}

// Schedulers lists the kernel's IPVS schedulers (each an ip_vs_NAME module).
func Schedulers() []string {
	return []string{"rr", "wrr", "lc", "wlc", "lblc", "lblcr", "dh", "sh", "sed", "nq", "mh", "fo", "ovf", "twos"}
}

const (
	maxWeight      = 65535
	maxThreshold   = 1<<31 - 1
	maxPersistence = 365 * 24 * 3600
	maxTimeout     = 2147483 // the kernel keeps timeouts as jiffies in an int
	maxDrain       = 7 * 24 * 3600
)

type validator struct {
	problems []Problem
}

func (v *validator) addf(field, format string, args ...any) {
	v.problems = append(v.problems, Problem{Field: field, Message: fmt.Sprintf(format, args...)})
}

func (v *validator) rangeCheck(field string, val, lo, hi int) {
	if val < lo || val > hi {
		v.addf(field, "%d is out of range %d..%d", val, lo, hi)
	}
}

func (v *validator) forwarding(field, val string) {
	if val != "" && val != "dr" && val != "nat" && val != "tun" {
		v.addf(field, "%q is not a forwarding method (want dr, nat or tun)", val)
	}
}

// parseAddr parses an IP address as the model accepts it (no zone, no CIDR).
func parseAddr(s string) (netip.Addr, error) {
	a, err := netip.ParseAddr(s)
	if err != nil {
		return netip.Addr{}, fmt.Errorf("%q is not an IP address", s)
	}
	if a.Zone() != "" {
		return netip.Addr{}, fmt.Errorf("%q: zoned addresses are not supported", s)
	}
	a = a.Unmap()
	if a.IsUnspecified() || a.IsMulticast() {
		return netip.Addr{}, fmt.Errorf("%q is not a unicast address", s)
	}
	return a, nil
}

func validInterfaceName(s string) bool {
	return len(s) > 0 && len(s) < 16 && !strings.ContainsAny(s, "/ \t\n:") && s != "." && s != ".."
}

func (v *validator) settings(s *Settings) {
	v.forwarding("settings.network", s.Network)
	v.rangeCheck("settings.tcp_timeout", s.TCPTimeout, 0, maxTimeout)
	v.rangeCheck("settings.tcpfin_timeout", s.TCPFinTimeout, 0, maxTimeout)
	v.rangeCheck("settings.udp_timeout", s.UDPTimeout, 0, maxTimeout)
	v.rangeCheck("settings.drain_timeout", s.DrainTimeout, 0, maxDrain)
}

func protocolNumber(s string) (uint16, bool) {
	switch s {
	case "tcp":
		return ProtoTCP, true
	case "udp":
		return ProtoUDP, true
	case "sctp":
		return ProtoSCTP, true
	}
	return 0, false
}

// parseNetmask reads a persistence netmask: a dotted IPv4 mask ("255.255.255.0")
// or, for IPv6, a prefix length ("64" or "/64").
func parseNetmask(family uint16, s string) (uint32, error) {
	if family == FamilyIPv6 {
		n, err := strconv.Atoi(strings.TrimPrefix(s, "/"))
		if err != nil || n < 1 || n > 128 {
			return 0, fmt.Errorf("%q is not an IPv6 prefix length (1..128)", s)
		}
		return uint32(n), nil
	}
	if n, err := strconv.Atoi(strings.TrimPrefix(s, "/")); err == nil && n >= 1 && n <= 32 {
		return ^uint32(0) << (32 - n), nil
	}
	a, err := netip.ParseAddr(s)
	if err != nil || !a.Is4() {
		return 0, fmt.Errorf("%q is not an IPv4 netmask", s)
	}
	b := a.As4()
	m := uint32(b[0])<<24 | uint32(b[1])<<16 | uint32(b[2])<<8 | uint32(b[3])
	if inv := ^m; m == 0 || inv&(inv+1) != 0 {
		return 0, fmt.Errorf("%q is not a contiguous netmask", s)
	}
	return m, nil
}
