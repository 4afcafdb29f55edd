package ipvsmgr

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/netip"
	"strconv"
	"strings"
)

// Address families and protocols as the kernel numbers them.
const (
	FamilyIPv4 uint16 = 2
	FamilyIPv6 uint16 = 10

	ProtoTCP  uint16 = 6
	ProtoUDP  uint16 = 17
	ProtoSCTP uint16 = 132
)

// Service flags (IP_VS_SVC_F_*).
const (
	FlagPersistent uint32 = 0x0001
	FlagHashed     uint32 = 0x0002 // set by the kernel on every listed service
	FlagOnePacket  uint32 = 0x0004
	FlagSched1     uint32 = 0x0008 // sh/mh fallback
	FlagSched2     uint32 = 0x0010 // sh/mh port
	FlagSched3     uint32 = 0x0020
)

// Forwarding is a real server's forwarding method (IP_VS_CONN_F_FWD_MASK bits).
type Forwarding uint32

const (
	ForwardNAT   Forwarding = 0 // masquerading
	ForwardLocal Forwarding = 1
	ForwardTUN   Forwarding = 2
	ForwardDR    Forwarding = 3
)

func (f Forwarding) String() string {
	switch f {
	case ForwardNAT:
		return "nat"
	case ForwardLocal:
		return "local"
	case ForwardTUN:
		return "tun"
	case ForwardDR:
		return "dr"
	}
	return "fwd(" + strconv.Itoa(int(f)) + ")"
}

// ErrIPVSUnavailable means the kernel has no IPVS: the ip_vs module is absent
// and could not be loaded.
var ErrIPVSUnavailable = errors.New("kernel IPVS is not available (ip_vs module not loaded)")

// ServiceKey identifies a virtual service in the kernel.
type ServiceKey struct {
	Family   uint16
	Protocol uint16 // 0 for a fwmark service
	Addr     netip.Addr
	Port     uint16
	FWMark   uint32
}

// String renders the key the way ipvsadm names a service: "-t 198.18.0.1:80".
func (k ServiceKey) String() string {
	if k.FWMark != 0 {
		s := "-f " + strconv.FormatUint(uint64(k.FWMark), 10)
		if k.Family == FamilyIPv6 {
			s += " -6"
		}
		return s
	}
	return protoFlag(k.Protocol) + " " + netip.AddrPortFrom(k.Addr, k.Port).String()
}

// MarshalText writes the key as String does: so it is kept in the ledger and
// shown in JSON results.
func (k ServiceKey) MarshalText() ([]byte, error) { return []byte(k.String()), nil }

// UnmarshalText reads what MarshalText writes.
func (k *ServiceKey) UnmarshalText(b []byte) error {
	f := strings.Fields(string(b))
	if len(f) >= 2 && f[0] == "-f" && (len(f) == 2 || len(f) == 3 && f[2] == "-6") {
		m, err := strconv.ParseUint(f[1], 10, 32)
		if err != nil || m == 0 {
			return fmt.Errorf("service %q: bad firewall mark", b)
		}
		*k = ServiceKey{Family: FamilyIPv4, FWMark: uint32(m)}
		if len(f) == 3 {
			k.Family = FamilyIPv6
		}
		return nil
	}
	if len(f) != 2 {
		return fmt.Errorf("service %q: want \"-t|-u|--sctp-service ADDRESS:PORT\" or \"-f MARK [-6]\"", b)
	}
	proto, ok := protoFromFlag(f[0])
	ap, err := netip.ParseAddrPort(f[1])
	if !ok || err != nil {
		return fmt.Errorf("service %q: want \"-t|-u|--sctp-service ADDRESS:PORT\" or \"-f MARK [-6]\"", b)
	}
	*k = ServiceKey{Family: FamilyIPv4, Protocol: proto, Addr: ap.Addr(), Port: ap.Port()}
	if ap.Addr().Is6() {
		k.Family = FamilyIPv6
	}
	return nil
}

// UnmarshalJSON reads the text form, and the object form ledgers were
// written in before it.
func (k *ServiceKey) UnmarshalJSON(b []byte) error {
	type fields ServiceKey
	return unmarshalKey(b, (*fields)(k), func(s string) error { return k.UnmarshalText([]byte(s)) })
}

// unmarshalKey reads a key written as text, or as the object (fields) it was
// written as before.
func unmarshalKey(b []byte, fields any, fromText func(string) error) error {
	if len(b) > 0 && b[0] == '{' {
		return json.Unmarshal(b, fields)
	}
	var s string
	if err := json.Unmarshal(b, &s); err != nil {
		return err
	}
	return fromText(s)
}

func protoFromFlag(f string) (uint16, bool) {
	switch f {
	case "-t":
		return ProtoTCP, true
	case "-u":
		return ProtoUDP, true
	case "--sctp-service":
		return ProtoSCTP, true
	}
	if n, ok := strings.CutPrefix(f, "-proto"); ok {
		p, err := strconv.ParseUint(n, 10, 16)
		return uint16(p), err == nil
	}
	return 0, false
}

func protoFlag(p uint16) string {
	switch p {
	case ProtoTCP:
		return "-t"
	case ProtoUDP:
		return "-u"
	case ProtoSCTP:
		return "--sctp-service"
	}
	return "-proto" + strconv.Itoa(int(p))
}

// ProtocolName is the model's name for a kernel protocol number.
func ProtocolName(p uint16) string {
	switch p {
	case ProtoTCP:
		return "tcp"
	case ProtoUDP:
		return "udp"
	case ProtoSCTP:
		return "sctp"
	}
	return strconv.Itoa(int(p))
}

// DestKey identifies a real server within a virtual service.
type DestKey struct {
	Addr netip.Addr
	Port uint16
}

func (k DestKey) String() string { return netip.AddrPortFrom(k.Addr, k.Port).String() }

// MarshalText writes the key as String does ("198.18.0.11:80").
func (k DestKey) MarshalText() ([]byte, error) { return []byte(k.String()), nil }

// UnmarshalJSON reads the text form, and the object form ledgers were
// written in before it.
func (k *DestKey) UnmarshalJSON(b []byte) error {
	type fields DestKey
	return unmarshalKey(b, (*fields)(k), func(s string) error {
		ap, err := netip.ParseAddrPort(s)
		if err != nil {
			return fmt.Errorf("real server %q: want ADDRESS:PORT", s)
		}
		*k = DestKey{Addr: ap.Addr(), Port: ap.Port()}
		return nil
	})
}

// Stats are IPVS counters and rates.
type Stats struct {
	Conns    uint64 `json:"conns"`
	InPkts   uint64 `json:"inpkts"`
	OutPkts  uint64 `json:"outpkts"`
	InBytes  uint64 `json:"inbytes"`
	OutBytes uint64 `json:"outbytes"`
	CPS      uint64 `json:"cps"`
	InPPS    uint64 `json:"inpps"`
	OutPPS   uint64 `json:"outpps"`
	InBPS    uint64 `json:"inbps"`
	OutBPS   uint64 `json:"outbps"`
}

// VirtualService is a service as the kernel holds it.
type VirtualService struct {
	Key       ServiceKey
	Scheduler string
	Flags     uint32 // without FlagHashed
	Timeout   uint32 // persistence, seconds
	// Netmask is the persistence granularity: for IPv4 the mask as a number
	// (0xffffff00 for /24), for IPv6 the prefix length.
	Netmask uint32
	Stats   Stats
	Dests   []*Destination
}

// Destination is a real server as the kernel holds it.
type Destination struct {
	Key            DestKey
	Forward        Forwarding
	Weight         uint32
	UpperThreshold uint32
	LowerThreshold uint32
	// Tunnel encapsulation of a TUN destination (IPVS_DEST_ATTR_TUN_*).
	TunType       uint8
	TunPort       uint16
	TunFlags      uint16
	ActiveConns   uint32
	InactiveConns uint32
	Stats         Stats
}

// Tunnel types and flags of a TUN destination, as the kernel numbers them.
const (
	TunIPIP        uint8  = 0
	TunGUE         uint8  = 1
	TunGRE         uint8  = 2
	TunFlagCsum    uint16 = 1 << 0
	TunFlagRemCsum uint16 = 1 << 1
)

// Timeouts are the global IPVS connection timeouts in seconds.
type Timeouts struct {
	TCP, TCPFin, UDP uint32
}

// Table is the kernel's IPVS table.
type Table struct {
	Services []*VirtualService
	Timeouts Timeouts
}

// OpKind is one kind of kernel change.
type OpKind int

const (
	OpAddService OpKind = iota + 1
	OpEditService
	OpDelService
	OpAddDest
	OpEditDest
	OpDelDest
	OpSetTimeouts
)

// Op is one kernel change. Service always carries the full desired service
// attributes (or at least its key); Dest is set for destination ops.
type Op struct {
	Kind     OpKind
	Service  *VirtualService
	Dest     *Destination
	Timeouts Timeouts
}

// String renders the op as the ipvsadm command that does the same.
func (o Op) String() string {
	switch o.Kind {
	case OpAddService, OpEditService:
		verb := "-A"
		if o.Kind == OpEditService {
			verb = "-E"
		}
		return "ipvsadm " + verb + " " + serviceArgs(o.Service)
	case OpDelService:
		return "ipvsadm -D " + o.Service.Key.String()
	case OpAddDest, OpEditDest:
		verb := "-a"
		if o.Kind == OpEditDest {
			verb = "-e"
		}
		return "ipvsadm " + verb + " " + o.Service.Key.String() + " " + destArgs(o.Dest)
	case OpDelDest:
		return "ipvsadm -d " + o.Service.Key.String() + " -r " + o.Dest.Key.String()
	case OpSetTimeouts:
		return fmt.Sprintf("ipvsadm --set %d %d %d", o.Timeouts.TCP, o.Timeouts.TCPFin, o.Timeouts.UDP)
	}
	return fmt.Sprintf("op(%d)", o.Kind)
}

func serviceArgs(s *VirtualService) string {
	var b strings.Builder
	b.WriteString(s.Key.String())
	b.WriteString(" -s " + s.Scheduler)
	if f := schedFlagNames(s.Scheduler, s.Flags); len(f) > 0 {
		b.WriteString(" -b " + strings.Join(f, ","))
	}
	if s.Flags&FlagOnePacket != 0 {
		b.WriteString(" -o")
	}
	if s.Flags&FlagPersistent != 0 {
		b.WriteString(" -p " + strconv.FormatUint(uint64(s.Timeout), 10))
		if m := netmaskString(s.Key.Family, s.Netmask); m != "" && !isFullMask(s.Key.Family, s.Netmask) {
			b.WriteString(" -M " + m)
		}
	}
	return b.String()
}

func destArgs(d *Destination) string {
	fwd := "-g"
	switch d.Forward {
	case ForwardNAT:
		fwd = "-m"
	case ForwardTUN:
		fwd = "-i"
	}
	s := "-r " + d.Key.String() + " " + fwd + " -w " + strconv.FormatUint(uint64(d.Weight), 10)
	if d.UpperThreshold != 0 {
		s += " -x " + strconv.FormatUint(uint64(d.UpperThreshold), 10)
	}
	if d.LowerThreshold != 0 {
		s += " -y " + strconv.FormatUint(uint64(d.LowerThreshold), 10)
	}
	if d.Forward == ForwardTUN && (d.TunType != TunIPIP || d.TunFlags != 0) {
		s += " --tun-type " + [...]string{"ipip", "gue", "gre"}[min(d.TunType, 2)]
		if d.TunType == TunGUE {
			s += " --tun-port " + strconv.FormatUint(uint64(d.TunPort), 10)
		}
		switch {
		case d.TunFlags&TunFlagRemCsum != 0:
			s += " --tun-remcsum"
		case d.TunFlags&TunFlagCsum != 0:
			s += " --tun-csum"
		}
	}
	return s
}

// schedFlagNames names the scheduler flags set in flags, as ipvsadm's -b does.
func schedFlagNames(sched string, flags uint32) []string {
	names := [3]string{"flag-1", "flag-2", "flag-3"}
	if sched == "sh" || sched == "mh" {
		names[0], names[1] = sched+"-fallback", sched+"-port"
	}
	var out []string
	for i, f := range []uint32{FlagSched1, FlagSched2, FlagSched3} {
		if flags&f != 0 {
			out = append(out, names[i])
		}
	}
	return out
}

func isFullMask(family uint16, m uint32) bool {
	if family == FamilyIPv6 {
		return m == 128
	}
	return m == 0xffffffff
}

func netmaskString(family uint16, m uint32) string {
	if family == FamilyIPv6 {
		return strconv.FormatUint(uint64(m), 10)
	}
	return netip.AddrFrom4([4]byte{byte(m >> 24), byte(m >> 16), byte(m >> 8), byte(m)}).String()
}

// ErrTransport marks an op whose request or answer the netlink socket lost
// (ENOBUFS, EINTR, no answer in time): the kernel may or may not have made
// the change, so the reconcile reads the kernel again rather than report it
// or send it twice.
var ErrTransport = errors.New("netlink transport failed, the change may or may not be made")

// Kernel is the IPVS driver the reconcile works through. The netlink driver
// implements it for the real kernel; tests use a fake that records ops.
type Kernel interface {
	// Table reads the whole IPVS table with counters.
	Table(ctx context.Context) (*Table, error)
	// Apply carries out ops in order and returns one error (or nil) per op.
	// A failed op does not stop the ones after it.
	Apply(ctx context.Context, ops []Op) []error
}

// SortedServices returns the services ordered by key (fwmark services first).
func SortedServices(in []*VirtualService) []*VirtualService { return sortedServices(in) }

// FlagNames names a service's flags as ipvsadm -Ln shows them.
func FlagNames(s *VirtualService) []string {
	out := schedFlagNames(s.Scheduler, s.Flags)
	if s.Flags&FlagOnePacket != 0 {
		out = append(out, "ops")
	}
	if s.Flags&FlagPersistent != 0 {
		out = append(out, "persistent "+strconv.FormatUint(uint64(s.Timeout), 10))
		if !isFullMask(s.Key.Family, s.Netmask) {
			out = append(out, "mask "+netmaskString(s.Key.Family, s.Netmask))
		}
	}
	return out
}
