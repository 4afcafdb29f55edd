package kernel

import (
	"encoding/binary"
	"net/netip"

	"github.com/ipvsctl/ipvsctl/ipvsmgr"
)

// IPVS generic netlink commands and attributes (include/uapi/linux/ip_vs.h).
const (
	cmdNewService = 1
	cmdSetService = 2
	cmdDelService = 3
	cmdNewDest    = 5
	cmdSetDest    = 6
	cmdDelDest    = 7
	cmdGetService = 4
	cmdGetDest    = 8
	cmdSetConfig  = 12
	cmdGetConfig  = 13

	attrCmdService    = 1
	attrCmdDest       = 2
	attrCmdTimeoutTCP = 4
	attrCmdTimeoutFin = 5
	attrCmdTimeoutUDP = 6

	attrSvcAF       = 1
	attrSvcProtocol = 2
	attrSvcAddr     = 3
	attrSvcPort     = 4
	attrSvcFWMark   = 5
	attrSvcSched    = 6
	attrSvcFlags    = 7
	attrSvcTimeout  = 8
	attrSvcNetmask  = 9
	attrSvcStats    = 10
	attrSvcStats64  = 12

	attrDestAddr    = 1
	attrDestPort    = 2
	attrDestFwd     = 3
	attrDestWeight  = 4
	attrDestUThresh = 5
	attrDestLThresh = 6
	attrDestActive  = 7
	attrDestInact   = 8
	attrDestStats   = 10
	attrDestAF      = 11
	attrDestStats64 = 12
	attrDestTunType = 13 // kernel 5.2+
	attrDestTunPort = 14
	attrDestTunFlag = 15

	nlmsgHdrLen  = 16
	genlHdrLen   = 4
	nlmFRequest  = 0x1
	nlmFAck      = 0x4
	genlVersion  = 1
	nlaHdrLen    = 4
	nlmsgTypeErr = 2
)

var native = binary.NativeEndian

// encoder appends netlink messages to one buffer.
type encoder struct {
	buf []byte
}

func align4(n int) int { return (n + 3) &^ 3 }

// begin starts a generic netlink request that asks for an ack and returns its
// offset.
func (e *encoder) begin(family uint16, cmd uint8, seq uint32) int {
	return e.beginFlags(family, cmd, seq, nlmFRequest|nlmFAck)
}

func (e *encoder) beginFlags(family uint16, cmd uint8, seq uint32, flags uint16) int {
	start := len(e.buf)
	e.buf = append(e.buf, make([]byte, nlmsgHdrLen+genlHdrLen)...)
	h := e.buf[start:]
	native.PutUint16(h[4:], family)
	native.PutUint16(h[6:], flags)
	native.PutUint32(h[8:], seq)
	h[16] = cmd
	h[17] = genlVersion
	return start
}

// end writes the message length.
func (e *encoder) end(start int) {
	native.PutUint32(e.buf[start:], uint32(len(e.buf)-start))
}

func (e *encoder) attr(typ uint16, val []byte) {
	n := nlaHdrLen + len(val)
	var h [4]byte
	native.PutUint16(h[0:], uint16(n))
	native.PutUint16(h[2:], typ)
	e.buf = append(e.buf, h[:]...)
	e.buf = append(e.buf, val...)
	for range align4(n) - n {
		e.buf = append(e.buf, 0)
	}
}

func (e *encoder) u16(typ uint16, v uint16) {
	var b [2]byte
	native.PutUint16(b[:], v)
	e.attr(typ, b[:])
}

func (e *encoder) u32(typ uint16, v uint32) {
	var b [4]byte
	native.PutUint32(b[:], v)
	e.attr(typ, b[:])
}

func (e *encoder) be16(typ uint16, v uint16) {
	var b [2]byte
	binary.BigEndian.PutUint16(b[:], v)
	e.attr(typ, b[:])
}

// nest starts a nested attribute and returns its offset for endNest.
func (e *encoder) nest(typ uint16) int {
	start := len(e.buf)
	e.attr(typ, nil)
	return start
}

func (e *encoder) endNest(start int) {
	native.PutUint16(e.buf[start:], uint16(len(e.buf)-start))
}

// addrBytes is an address as the kernel's nf_inet_addr: 16 bytes, an IPv4
// address in the first four.
func addrBytes(a netip.Addr) []byte {
	if a.Is4() {
		var b [16]byte
		v4 := a.As4()
		copy(b[:], v4[:])
		return b[:]
	}
	b := a.As16()
	return b[:]
}

// service encodes a service attribute: the key, and the attributes an add or
// edit needs when full is set.
func (e *encoder) service(s *ipvsmgr.VirtualService, full bool) {
	n := e.nest(attrCmdService)
	k := s.Key
	e.u16(attrSvcAF, k.Family)
	if k.FWMark != 0 {
		e.u32(attrSvcFWMark, k.FWMark)
	} else {
		e.u16(attrSvcProtocol, k.Protocol)
		e.attr(attrSvcAddr, addrBytes(k.Addr))
		e.be16(attrSvcPort, k.Port)
	}
	if full {
		e.attr(attrSvcSched, append([]byte(s.Scheduler), 0))
		var flags [8]byte
		native.PutUint32(flags[0:], s.Flags&^ipvsmgr.FlagHashed)
		native.PutUint32(flags[4:], ^uint32(0))
		e.attr(attrSvcFlags, flags[:])
		e.u32(attrSvcTimeout, s.Timeout)
		e.attr(attrSvcNetmask, netmaskBytes(k.Family, s.Netmask))
	}
	e.endNest(n)
}

// netmaskBytes encodes the persistence netmask the way the kernel reads it: an
// IPv4 mask in network byte order, an IPv6 prefix length as a host-order u32.
// (moby/ipvs writes the IPv4 mask in host order, which the kernel misreads.)
func netmaskBytes(family uint16, m uint32) []byte {
	var b [4]byte
	if family == ipvsmgr.FamilyIPv6 {
		native.PutUint32(b[:], m)
	} else {
		binary.BigEndian.PutUint32(b[:], m)
	}
	return b[:]
}

// decodeNetmask undoes netmaskBytes for a value read as a host-order u32.
func decodeNetmask(family uint16, raw uint32) uint32 {
	if family == ipvsmgr.FamilyIPv6 {
		return raw
	}
	var b [4]byte
	native.PutUint32(b[:], raw)
	return binary.BigEndian.Uint32(b[:])
}

func (e *encoder) dest(d *ipvsmgr.Destination, full bool) {
	n := e.nest(attrCmdDest)
	family := ipvsmgr.FamilyIPv6
	if d.Key.Addr.Is4() {
		family = ipvsmgr.FamilyIPv4
	}
	e.attr(attrDestAddr, addrBytes(d.Key.Addr))
	e.be16(attrDestPort, d.Key.Port)
	e.u16(attrDestAF, family)
	if full {
		e.u32(attrDestFwd, uint32(d.Forward))
		e.u32(attrDestWeight, d.Weight)
		e.u32(attrDestUThresh, d.UpperThreshold)
		e.u32(attrDestLThresh, d.LowerThreshold)
		if d.Forward == ipvsmgr.ForwardTUN && (d.TunType != ipvsmgr.TunIPIP || d.TunFlags != 0) {
			// Only then: a kernel before 5.2 refuses the attributes.
			e.attr(attrDestTunType, []byte{d.TunType})
			e.be16(attrDestTunPort, d.TunPort)
			e.u16(attrDestTunFlag, d.TunFlags)
		}
	}
	e.endNest(n)
}

// op encodes one reconcile op as one request; with ack the kernel answers it
// even when it succeeds.
func (e *encoder) op(family uint16, seq uint32, op ipvsmgr.Op, ack bool) {
	flags := uint16(nlmFRequest)
	if ack {
		flags |= nlmFAck
	}
	begin := func(family uint16, cmd uint8, seq uint32) int { return e.beginFlags(family, cmd, seq, flags) }
	var start int
	switch op.Kind {
	case ipvsmgr.OpAddService:
		start = begin(family, cmdNewService, seq)
		e.service(op.Service, true)
	case ipvsmgr.OpEditService:
		start = begin(family, cmdSetService, seq)
		e.service(op.Service, true)
	case ipvsmgr.OpDelService:
		start = begin(family, cmdDelService, seq)
		e.service(op.Service, false)
	case ipvsmgr.OpAddDest:
		start = begin(family, cmdNewDest, seq)
		e.service(op.Service, false)
		e.dest(op.Dest, true)
	case ipvsmgr.OpEditDest:
		start = begin(family, cmdSetDest, seq)
		e.service(op.Service, false)
		e.dest(op.Dest, true)
	case ipvsmgr.OpDelDest:
		start = begin(family, cmdDelDest, seq)
		e.service(op.Service, false)
		e.dest(op.Dest, false)
	case ipvsmgr.OpSetTimeouts:
		start = begin(family, cmdSetConfig, seq)
		e.u32(attrCmdTimeoutTCP, op.Timeouts.TCP)
		e.u32(attrCmdTimeoutFin, op.Timeouts.TCPFin)
		e.u32(attrCmdTimeoutUDP, op.Timeouts.UDP)
	}
	e.end(start)
}
