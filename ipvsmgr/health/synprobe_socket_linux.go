//go:build linux

package health

import (
	"encoding/binary"
	"errors"
	"fmt"
	"strconv"
	"sync"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"
)

// synSocket is one address family's raw TCP socket of the prober, and the
// port its SYNs come from.
type synSocket struct {
	family int
	fd     int // raw IPPROTO_TCP, non-blocking, filtered
	// reserve is an ordinary TCP socket bound to port on the wildcard
	// address and never listening: the kernel gives the port to no
	// connection, and answers a SYN-ACK to it with a reset, as no socket
	// owns the 4-tuple.
	reserve int
	port    uint16
	batch   *recvBatch
}

// synBuffer is each raw socket's receive and send buffer: a thousand
// replies can come while the runner is still sending a batch's SYNs.
const synBuffer = 4 << 20

func openSynSocket(family int) (_ *synSocket, err error) {
	s := &synSocket{family: family, fd: -1, reserve: -1}
	defer func() {
		if err != nil {
			s.close()
		}
	}()
	if s.fd, err = unix.Socket(family, unix.SOCK_RAW|unix.SOCK_NONBLOCK|unix.SOCK_CLOEXEC, unix.IPPROTO_TCP); err != nil {
		return nil, fmt.Errorf("raw tcp socket: %w", err)
	}
	if s.reserve, err = unix.Socket(family, unix.SOCK_STREAM|unix.SOCK_CLOEXEC, unix.IPPROTO_TCP); err != nil {
		return nil, fmt.Errorf("tcp socket to reserve a port: %w", err)
	}
	var wildcard unix.Sockaddr = &unix.SockaddrInet4{}
	if family == unix.AF_INET6 {
		if err := unix.SetsockoptInt(s.reserve, unix.IPPROTO_IPV6, unix.IPV6_V6ONLY, 1); err != nil {
			return nil, fmt.Errorf("reserve a port: IPV6_V6ONLY: %w", err)
		}
		wildcard = &unix.SockaddrInet6{}
	}
	if err := unix.Bind(s.reserve, wildcard); err != nil {
		return nil, fmt.Errorf("reserve a port: %w", err)
	}
	switch sa, err := unix.Getsockname(s.reserve); {
	case err != nil:
		return nil, fmt.Errorf("reserved port: %w", err)
	case family == unix.AF_INET:
		s.port = uint16(sa.(*unix.SockaddrInet4).Port)
	default:
		s.port = uint16(sa.(*unix.SockaddrInet6).Port)
	}
	prog, err := replyFilter(s.port, family == unix.AF_INET)
	if err != nil {
		return nil, err
	}
	fprog := unix.SockFprog{Len: uint16(len(prog)), Filter: (*unix.SockFilter)(unsafe.Pointer(&prog[0]))}
	if err := unix.SetsockoptSockFprog(s.fd, unix.SOL_SOCKET, unix.SO_ATTACH_FILTER, &fprog); err != nil {
		return nil, fmt.Errorf("attach the reply filter: %w", err)
	}
	if family == unix.AF_INET {
		err = unix.SetsockoptInt(s.fd, unix.IPPROTO_IP, unix.IP_RECVERR, 1)
	} else if err = unix.SetsockoptInt(s.fd, unix.IPPROTO_IPV6, unix.IPV6_RECVERR, 1); err == nil {
		// The kernel checksums each SYN with the source address it picks.
		err = unix.SetsockoptInt(s.fd, unix.IPPROTO_IPV6, unix.IPV6_CHECKSUM, 16)
	}
	if err != nil {
		return nil, fmt.Errorf("raw tcp socket options: %w", err)
	}
	for _, o := range [][2]int{{unix.SO_RCVBUFFORCE, unix.SO_RCVBUF}, {unix.SO_SNDBUFFORCE, unix.SO_SNDBUF}} {
		if unix.SetsockoptInt(s.fd, unix.SOL_SOCKET, o[0], synBuffer) != nil {
			unix.SetsockoptInt(s.fd, unix.SOL_SOCKET, o[1], synBuffer) // up to the sysctl's maximum
		}
	}
	s.batch = newRecvBatch()
	// What came before the filter was attached is anyone's traffic.
	for {
		if _, _, err := unix.Recvfrom(s.fd, s.batch.bufs[0][:], unix.MSG_DONTWAIT); err != nil {
			break
		}
	}
	return s, nil
}

func (s *synSocket) close() {
	for _, fd := range []int{s.fd, s.reserve} {
		if fd >= 0 {
			unix.Close(fd)
		}
	}
	s.fd, s.reserve = -1, -1
}

// sendSYN4 sends a SYN to dst:dport from src (the checksum's source, and
// the one the kernel must send from: IP_PKTINFO).
func (s *synSocket) sendSYN4(src, dst [4]byte, dport uint16, seq uint32) error {
	var seg [synLen]byte
	synSegment(&seg, s.port, dport, seq, 1460)
	binary.BigEndian.PutUint16(seg[16:], tcpChecksum4(src, dst, seg[:]))
	sa := unix.RawSockaddrInet4{Family: unix.AF_INET, Addr: dst}
	var ctl [32]byte // a cmsghdr and an in_pktinfo, aligned
	h := (*unix.Cmsghdr)(unsafe.Pointer(&ctl[0]))
	h.Level, h.Type = unix.IPPROTO_IP, unix.IP_PKTINFO
	h.SetLen(unix.CmsgLen(unix.SizeofInet4Pktinfo))
	(*unix.Inet4Pktinfo)(unsafe.Pointer(&ctl[unix.CmsgLen(0)])).Spec_dst = src
	iov := unix.Iovec{Base: &seg[0]}
	iov.SetLen(synLen)
	msg := unix.Msghdr{Name: (*byte)(unsafe.Pointer(&sa)), Namelen: unix.SizeofSockaddrInet4, Iov: &iov,
		Control: &ctl[0]}
	msg.SetIovlen(1)
	msg.SetControllen(unix.CmsgSpace(unix.SizeofInet4Pktinfo))
	_, _, e := unix.RawSyscall(unix.SYS_SENDMSG, uintptr(s.fd), uintptr(unsafe.Pointer(&msg)), 0)
	if e != 0 {
		return e
	}
	return nil
}

// sendSYN6 sends a SYN to dst:dport (scope: the interface of a link-local
// dst); the kernel picks the source and the checksum.
func (s *synSocket) sendSYN6(dst [16]byte, scope uint32, dport uint16, seq uint32) error {
	var seg [synLen]byte
	synSegment(&seg, s.port, dport, seq, 1440)
	sa := unix.RawSockaddrInet6{Family: unix.AF_INET6, Addr: dst, Scope_id: scope}
	_, _, e := unix.RawSyscall6(unix.SYS_SENDTO, uintptr(s.fd), uintptr(unsafe.Pointer(&seg[0])), synLen, 0,
		uintptr(unsafe.Pointer(&sa)), unix.SizeofSockaddrInet6)
	if e != 0 {
		return e
	}
	return nil
}

// zoneIndex is the interface index of an IPv6 zone (a name, or a number),
// asked of the prober's own socket: its network namespace's interfaces.
func (s *synSocket) zoneIndex(zone string) (uint32, error) {
	if n, err := strconv.ParseUint(zone, 10, 32); err == nil {
		return uint32(n), nil
	}
	ifr, err := unix.NewIfreq(zone)
	if err != nil {
		return 0, err
	}
	if err := unix.IoctlIfreq(s.fd, unix.SIOCGIFINDEX, ifr); err != nil {
		return 0, err
	}
	return ifr.Uint32(), nil
}

// synAnswer is a reply or an ICMP error read from a raw socket, before it
// is matched with a probe: key and seq (a reply's ack - 1, an error's copy
// of the SYN's sequence) find it.
type synAnswer struct {
	key        synKey
	seq        uint32
	reset      bool
	errno      unix.Errno // an ICMP error's
	prohibited bool       // the ICMP error says a filter refused the SYN
}

// synKey names a probe's target: address (IPv4 in the first four bytes),
// interface of a link-local IPv6 address, port.
type synKey struct {
	addr  [16]byte
	scope uint32
	port  uint16
	v6    bool
}

const recvBatchLen = 64

// recvBatch is a raw socket's recvmmsg vectors, made once.
type recvBatch struct {
	msgs  [recvBatchLen]unix.Mmsghdr
	iovs  [recvBatchLen]unix.Iovec
	names [recvBatchLen]unix.RawSockaddrInet6 // an IPv4 socket's are RawSockaddrInet4
	bufs  [recvBatchLen][replyKeep]byte
}

func newRecvBatch() *recvBatch {
	b := &recvBatch{}
	for i := range b.msgs {
		b.iovs[i].Base = &b.bufs[i][0]
		b.iovs[i].SetLen(replyKeep)
		h := &b.msgs[i].Hdr
		h.Name = (*byte)(unsafe.Pointer(&b.names[i]))
		h.Namelen = unix.SizeofSockaddrInet6
		h.Iov = &b.iovs[i]
		h.SetIovlen(1)
	}
	return b
}

// receive reads what the socket has queued, replies and (errs: the socket
// reported an error) ICMP errors, and adds them to got. It reads a bounded
// number of batches: what is left is there at the next call. n counts the
// segments read (tests: what the filter let through).
func (s *synSocket) receive(got []synAnswer, errs bool) (_ []synAnswer, n int) {
	b := s.batch
	for range 64 {
		if errs {
			got = s.receiveErrors(got)
			errs = false
		}
		r, _, e := unix.RawSyscall6(unix.SYS_RECVMMSG, uintptr(s.fd), uintptr(unsafe.Pointer(&b.msgs[0])),
			recvBatchLen, unix.MSG_DONTWAIT, 0, 0)
		if e == unix.EAGAIN {
			return got, n
		}
		if e != 0 {
			// An ICMP error's errno, given once before the queue (sk_err):
			// its details are in the error queue.
			errs = true
			continue
		}
		for i := range int(r) {
			m := &b.msgs[i]
			if a, ok := s.answer(b.bufs[i][:m.Len], &b.names[i]); ok {
				got = append(got, a)
			}
			m.Hdr.Namelen = unix.SizeofSockaddrInet6
		}
		n += int(r)
		if int(r) < recvBatchLen {
			return got, n
		}
	}
	return got, n
}

// answer reads one segment that passed the filter.
func (s *synSocket) answer(b []byte, name *unix.RawSockaddrInet6) (synAnswer, bool) {
	r, ok := parseReply(b, s.family == unix.AF_INET)
	if !ok || r.dport != s.port || r.flags&tcpACK == 0 {
		return synAnswer{}, false
	}
	return synAnswer{key: s.keyOf(name, r.sport), seq: r.ack - 1, reset: r.flags&tcpRST != 0}, true
}

// keyOf is the key of a peer's address in name and port.
func (s *synSocket) keyOf(name *unix.RawSockaddrInet6, port uint16) synKey {
	k := synKey{port: port}
	if s.family == unix.AF_INET {
		sa := (*unix.RawSockaddrInet4)(unsafe.Pointer(name))
		copy(k.addr[:], sa.Addr[:])
		return k
	}
	k.addr, k.v6 = name.Addr, true
	if k.addr[0] == 0xfe && k.addr[1]&0xc0 == 0x80 { // link-local: fe80::/10
		k.scope = name.Scope_id
	}
	return k
}

// receiveErrors reads the socket's error queue: the ICMP errors (IP_RECVERR)
// about SYNs the prober sent, each with its copy of the SYN's header.
func (s *synSocket) receiveErrors(got []synAnswer) []synAnswer {
	level, typ, origin := unix.IPPROTO_IP, unix.IP_RECVERR, uint8(unix.SO_EE_ORIGIN_ICMP)
	if s.family == unix.AF_INET6 {
		level, typ, origin = unix.IPPROTO_IPV6, unix.IPV6_RECVERR, unix.SO_EE_ORIGIN_ICMP6
	}
	for range recvBatchLen {
		var name unix.RawSockaddrInet6
		var seg [synLen]byte
		var ctl [128]byte
		iov := unix.Iovec{Base: &seg[0]}
		iov.SetLen(synLen)
		msg := unix.Msghdr{Name: (*byte)(unsafe.Pointer(&name)), Namelen: unix.SizeofSockaddrInet6, Iov: &iov, Control: &ctl[0]}
		msg.SetIovlen(1)
		msg.SetControllen(len(ctl))
		n, _, e := unix.RawSyscall(unix.SYS_RECVMSG, uintptr(s.fd), uintptr(unsafe.Pointer(&msg)), unix.MSG_ERRQUEUE|unix.MSG_DONTWAIT)
		if e != 0 {
			return got
		}
		if n < 8 || binary.BigEndian.Uint16(seg[0:]) != s.port {
			continue // about another socket's packet, or too short to say
		}
		cmsgs, err := unix.ParseSocketControlMessage(ctl[:msg.Controllen])
		if err != nil {
			continue
		}
		for _, c := range cmsgs {
			if int(c.Header.Level) != level || int(c.Header.Type) != typ || len(c.Data) < int(unsafe.Sizeof(unix.SockExtendedErr{})) {
				continue
			}
			ee := (*unix.SockExtendedErr)(unsafe.Pointer(&c.Data[0]))
			if ee.Origin != origin || ee.Errno == 0 {
				continue
			}
			got = append(got, synAnswer{key: s.keyOf(&name, binary.BigEndian.Uint16(seg[2:])),
				seq: binary.BigEndian.Uint32(seg[4:]), errno: unix.Errno(ee.Errno), prohibited: prohibited(origin, ee.Type, ee.Code)})
		}
	}
	return got
}

// prohibited says whether an ICMP error is a filter's "administratively
// prohibited" (the kernel gives it the errno of a host unreachable).
func prohibited(origin, typ, code uint8) bool {
	if origin == unix.SO_EE_ORIGIN_ICMP {
		return typ == 3 && (code == 9 || code == 10 || code == 13) // destination unreachable
	}
	return typ == 1 && code == 1 // ICMPv6 destination unreachable
}

// sources are the addresses the kernel sends from to IPv4 targets (the
// TCP checksum covers them), learnt by connecting a UDP socket (a route
// lookup; nothing is sent) and kept a while.
type sources struct {
	mu    sync.Mutex
	udp   int
	byDst map[synKey]source
	swept time.Time
}

type source struct {
	addr  [4]byte
	until time.Time
}

// sourceLifetime bounds how long a learnt source is trusted: a route or an
// address may change under a running daemon.
const sourceLifetime = time.Minute

func newSources() (*sources, error) {
	fd, err := unix.Socket(unix.AF_INET, unix.SOCK_DGRAM|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		return nil, fmt.Errorf("udp socket for source addresses: %w", err)
	}
	return &sources{udp: fd, byDst: map[synKey]source{}}, nil
}

// lookup is the source address toward k (an IPv4 target), or the error
// the route to it gives (no route, unreachable, prohibited).
func (c *sources) lookup(k synKey, now time.Time) ([4]byte, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if s, ok := c.byDst[k]; ok && now.Before(s.until) {
		return s.addr, nil
	}
	if now.Sub(c.swept) > sourceLifetime {
		for d, s := range c.byDst {
			if !now.Before(s.until) {
				delete(c.byDst, d)
			}
		}
		c.swept = now
	}
	if c.udp < 0 {
		return [4]byte{}, errors.New("prober closed")
	}
	dst := &unix.SockaddrInet4{Port: int(k.port), Addr: [4]byte(k.addr[:4])}
	if err := unix.Connect(c.udp, dst); err != nil {
		return [4]byte{}, err
	}
	sa, err := unix.Getsockname(c.udp)
	if err != nil {
		return [4]byte{}, err
	}
	addr := sa.(*unix.SockaddrInet4).Addr
	c.byDst[k] = source{addr: addr, until: now.Add(sourceLifetime)}
	return addr, nil
}

// forget drops k's source, to be learnt again (after a failed check).
func (c *sources) forget(k synKey) {
	c.mu.Lock()
	delete(c.byDst, k)
	c.mu.Unlock()
}

func (c *sources) close() {
	c.mu.Lock()
	if c.udp >= 0 {
		unix.Close(c.udp)
		c.udp = -1
	}
	c.mu.Unlock()
}
