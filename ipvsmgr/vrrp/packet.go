// Package vrrp is VRRP version 3 (RFC 5798) for a pair of directors: the
// advertisement's wire format, the state machine of RFC 5798 section 6.4 as a
// pure function of events and time, and an instance that runs it over a raw
// IP socket and carries the virtual addresses.
package vrrp

import (
	"encoding/binary"
	"errors"
	"fmt"
	"net/netip"
	"time"
)

// Protocol is VRRP's IP protocol number.
const Protocol = 112

// The multicast groups adverts go to, with TTL / hop limit 255.
var (
	GroupIPv4 = netip.MustParseAddr("224.0.0.18")
	GroupIPv6 = netip.MustParseAddr("ff02::12")
)

const (
	version      = 3
	typeAdvert   = 1
	headerLen    = 8
	maxInterval  = 0xfff // centiseconds, 12 bits
	maxAddrCount = 255
)

// Decoding errors, each wrapped with the value that failed.
var (
	ErrTruncated   = errors.New("vrrp: packet shorter than its header")
	ErrVersion     = errors.New("vrrp: not version 3")
	ErrType        = errors.New("vrrp: not an advertisement")
	ErrVRID        = errors.New("vrrp: virtual router id 0")
	ErrAddrCount   = errors.New("vrrp: address count does not match the packet length")
	ErrNoAddrs     = errors.New("vrrp: no addresses")
	ErrInterval    = errors.New("vrrp: advertisement interval out of range 1..4095 centiseconds")
	ErrChecksum    = errors.New("vrrp: bad checksum")
	ErrAddrFamily  = errors.New("vrrp: address family does not match the packet's")
	ErrTooManyAddr = errors.New("vrrp: more than 255 addresses")
)

// Advert is a VRRPv3 advertisement.
type Advert struct {
	VRID     uint8
	Priority uint8 // 255 the address owner, 0 the master resigning
	// MaxAdvertInterval in centiseconds (12 bits, 1..4095).
	MaxAdvertInterval uint16
	// Addrs are the virtual router's addresses, all IPv4 or all IPv6.
	Addrs []netip.Addr
	// LegacyChecksum: an IPv4 advert whose checksum leaves out the
	// pseudo-header, as RFC 9568 notes some implementations send.
	LegacyChecksum bool
}

// Interval is the advert interval as a duration.
func (a *Advert) Interval() time.Duration {
	return time.Duration(a.MaxAdvertInterval) * 10 * time.Millisecond
}

// Centiseconds rounds d to the advert interval's unit, within 1..4095.
func Centiseconds(d time.Duration) uint16 {
	cs := (d + 5*time.Millisecond) / (10 * time.Millisecond)
	return uint16(max(1, min(cs, maxInterval)))
}

func (a *Advert) String() string {
	return fmt.Sprintf("vrid %d priority %d interval %dcs addrs %v", a.VRID, a.Priority, a.MaxAdvertInterval, a.Addrs)
}

// Marshal encodes the advert sent from src to dst (both are in the checksum's
// pseudo-header).
func (a *Advert) Marshal(src, dst netip.Addr) ([]byte, error) {
	b, err := a.body(src)
	if err != nil {
		return nil, err
	}
	return a.finish(b, nil, src, dst), nil
}

// MarshalAuth encodes the advert from src to dst with an authentication
// trailer from auth (a new sequence each call); without a signing auth it
// is Marshal.
func (a *Advert) MarshalAuth(src, dst netip.Addr, auth *Auth) ([]byte, error) {
	b, err := a.body(src)
	if err != nil {
		return nil, err
	}
	var tr []byte
	if auth != nil && auth.Signs() {
		tr = auth.seal(b, src)
	}
	return a.finish(b, tr, src, dst), nil
}

// body is the advert without its checksum (zero), of src's family.
func (a *Advert) body(src netip.Addr) ([]byte, error) {
	if a.VRID == 0 {
		return nil, ErrVRID
	}
	if a.MaxAdvertInterval == 0 || a.MaxAdvertInterval > maxInterval {
		return nil, fmt.Errorf("%w: %d", ErrInterval, a.MaxAdvertInterval)
	}
	if len(a.Addrs) == 0 {
		return nil, ErrNoAddrs
	}
	if len(a.Addrs) > maxAddrCount {
		return nil, fmt.Errorf("%w: %d", ErrTooManyAddr, len(a.Addrs))
	}
	v4 := src.Unmap().Is4()
	alen := 16
	if v4 {
		alen = 4
	}
	b := make([]byte, headerLen, headerLen+alen*len(a.Addrs)+TrailerLen)
	b[0] = version<<4 | typeAdvert
	b[1] = a.VRID
	b[2] = a.Priority
	b[3] = uint8(len(a.Addrs))
	binary.BigEndian.PutUint16(b[4:], a.MaxAdvertInterval)
	for _, addr := range a.Addrs {
		addr = addr.Unmap()
		if addr.Is4() != v4 {
			return nil, fmt.Errorf("%w: %s", ErrAddrFamily, addr)
		}
		b = append(b, addr.AsSlice()...)
	}
	return b, nil
}

// finish is the packet to dst: the body, the trailer (nil: none) and the
// checksum, which for IPv4 covers the advert only and for IPv6 the trailer
// too (as keepalived's kernel-computed IPv6 checksum does).
func (a *Advert) finish(body, tr []byte, src, dst netip.Addr) []byte {
	b := make([]byte, 0, len(body)+len(tr))
	b = append(append(b, body...), tr...)
	covered := b
	v4 := src.Unmap().Is4()
	if v4 {
		covered = b[:len(body)]
	}
	var sum uint16
	if a.LegacyChecksum && v4 {
		sum = checksum(0, covered)
	} else {
		sum = checksum(pseudoSum(src, dst, len(covered)), covered)
	}
	binary.BigEndian.PutUint16(b[6:], sum)
	return b
}

// ParseAdvert decodes and checks a VRRP packet (the IP payload) received from
// src to dst. An IPv4 advert whose checksum leaves out the pseudo-header is
// accepted too, and marked LegacyChecksum.
func ParseAdvert(b []byte, src, dst netip.Addr) (*Advert, error) {
	return parse(b, src, dst, 0)
}

// ParseAuthAdvert is ParseAdvert for an instance that authenticates its
// adverts (auth nil: ParseAdvert): a packet 28 bytes longer than its
// addresses need ends with a trailer, which auth checks. The error of an
// advert refused by auth wraps one of the ErrAuth errors.
func ParseAuthAdvert(b []byte, src, dst netip.Addr, auth *Auth) (*Advert, error) {
	if auth == nil {
		return ParseAdvert(b, src, dst)
	}
	trailer := 0
	if len(b) >= headerLen && len(b) == advertLen(int(b[3]), src)+TrailerLen {
		trailer = TrailerLen
	}
	a, err := parse(b, src, dst, trailer)
	if err != nil {
		return nil, err
	}
	var tr []byte
	if trailer > 0 {
		tr = b[len(b)-TrailerLen:]
	}
	if err := auth.verify(b[:len(b)-trailer], tr, src.Unmap()); err != nil {
		return nil, err
	}
	return a, nil
}

func advertLen(count int, src netip.Addr) int {
	if src.Unmap().Is4() {
		return headerLen + 4*count
	}
	return headerLen + 16*count
}

func parse(b []byte, src, dst netip.Addr, trailer int) (*Advert, error) {
	if len(b) < headerLen {
		return nil, fmt.Errorf("%w: %d bytes", ErrTruncated, len(b))
	}
	if v := b[0] >> 4; v != version {
		return nil, fmt.Errorf("%w: version %d", ErrVersion, v)
	}
	if t := b[0] & 0xf; t != typeAdvert {
		return nil, fmt.Errorf("%w: type %d", ErrType, t)
	}
	a := &Advert{VRID: b[1], Priority: b[2], MaxAdvertInterval: binary.BigEndian.Uint16(b[4:]) & maxInterval}
	if a.VRID == 0 {
		return nil, ErrVRID
	}
	if a.MaxAdvertInterval == 0 {
		return nil, fmt.Errorf("%w: 0", ErrInterval)
	}
	count := int(b[3])
	if count == 0 {
		return nil, ErrNoAddrs
	}
	v4 := src.Unmap().Is4()
	alen := 16
	if v4 {
		alen = 4
	}
	if len(b) != headerLen+count*alen+trailer {
		return nil, fmt.Errorf("%w: %d addresses in %d bytes", ErrAddrCount, count, len(b))
	}
	covered := b
	if v4 {
		covered = b[:len(b)-trailer]
	}
	if checksum(pseudoSum(src, dst, len(covered)), covered) != 0 {
		if !v4 || checksum(0, covered) != 0 {
			return nil, fmt.Errorf("%w: %#04x", ErrChecksum, binary.BigEndian.Uint16(b[6:]))
		}
		a.LegacyChecksum = true
	}
	a.Addrs = make([]netip.Addr, count)
	for i := range count {
		raw := b[headerLen+i*alen : headerLen+(i+1)*alen]
		if v4 {
			a.Addrs[i] = netip.AddrFrom4([4]byte(raw))
		} else {
			a.Addrs[i] = netip.AddrFrom16([16]byte(raw))
		}
	}
	return a, nil
}

// pseudoSum is the one's complement sum of the IPv4 or IPv6 pseudo-header.
func pseudoSum(src, dst netip.Addr, length int) uint32 {
	src, dst = src.Unmap(), dst.Unmap()
	var sum uint32
	add := func(b []byte) {
		for i := 0; i+1 < len(b); i += 2 {
			sum += uint32(b[i])<<8 | uint32(b[i+1])
		}
	}
	add(src.AsSlice())
	add(dst.AsSlice())
	if src.Is4() {
		sum += Protocol + uint32(length) // zero, protocol, 16-bit length
	} else {
		sum += uint32(length)>>16 + uint32(length)&0xffff + Protocol // 32-bit length, 3 zeros, next header
	}
	return sum
}

// checksum folds the Internet checksum of b onto an initial sum.
func checksum(sum uint32, b []byte) uint16 {
	for i := 0; i+1 < len(b); i += 2 {
		sum += uint32(b[i])<<8 | uint32(b[i+1])
	}
	if len(b)%2 == 1 {
		sum += uint32(b[len(b)-1]) << 8
	}
	for sum>>16 != 0 {
		sum = sum&0xffff + sum>>16
	}
	return ^uint16(sum)
}
