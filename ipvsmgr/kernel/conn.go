package kernel

import (
	"context"
	"errors"
	"fmt"
	"syscall"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"
)

const (
	// Requests per sendmsg. Every reply is its own skb; the receive buffer must
	// hold a whole chunk's replies (at worst one failure per write) or the
	// kernel drops them, and the next read says ENOBUFS.
	chunkOps = 256
	// Sockets that read real servers in parallel (readDests).
	destReaders  = 2
	recvBufForce = 8 << 20
	recvTimeout  = 500 * time.Millisecond
	// A netlink datagram holds at most 32 KB (the kernel caps its dump
	// buffers there); one recvmmsg reads up to recvSlots of them.
	slotSize  = 32 << 10
	recvSlots = 32

	solNetlink    = 270
	netlinkCapAck = 10

	nlmFMulti   = 0x2
	nlmFDump    = 0x300
	nlmsgDone   = 3
	nlmsgTypeOK = 0x10 // first type that carries data
)

// conn is a generic netlink socket that sends many requests per sendmsg and
// matches every reply to its request by sequence number. keepalived and
// ipvsadm send one request and wait for its answer every time; the kernel's
// netlink_rcv_skb walks every message of one send and answers each, so a batch
// costs one round trip per chunk instead of one per request.
type conn struct {
	fd     int
	family uint16
	seq    uint32
	bufs   []byte // recvSlots slots of slotSize
	iovs   []unix.Iovec
	hdrs   []unix.Mmsghdr
}

func newConn(family uint16) (*conn, error) {
	fd, err := unix.Socket(unix.AF_NETLINK, unix.SOCK_RAW|unix.SOCK_CLOEXEC, unix.NETLINK_GENERIC)
	if err != nil {
		return nil, fmt.Errorf("open generic netlink socket: %w", err)
	}
	if err := unix.Bind(fd, &unix.SockaddrNetlink{Family: unix.AF_NETLINK}); err != nil {
		unix.Close(fd)
		return nil, fmt.Errorf("bind generic netlink socket: %w", err)
	}
	if unix.SetsockoptInt(fd, unix.SOL_SOCKET, unix.SO_RCVBUFFORCE, recvBufForce) != nil {
		_ = unix.SetsockoptInt(fd, unix.SOL_SOCKET, unix.SO_RCVBUF, recvBufForce)
	}
	// Acks then carry only the request's header, not the whole request.
	_ = unix.SetsockoptInt(fd, solNetlink, netlinkCapAck, 1)
	tv := unix.NsecToTimeval(recvTimeout.Nanoseconds())
	if err := unix.SetsockoptTimeval(fd, unix.SOL_SOCKET, unix.SO_RCVTIMEO, &tv); err != nil {
		unix.Close(fd)
		return nil, fmt.Errorf("set netlink receive timeout: %w", err)
	}
	c := &conn{fd: fd, family: family, bufs: make([]byte, recvSlots*slotSize),
		iovs: make([]unix.Iovec, recvSlots), hdrs: make([]unix.Mmsghdr, recvSlots)}
	for i := range recvSlots {
		c.iovs[i].Base = &c.bufs[i*slotSize]
		c.iovs[i].SetLen(slotSize)
		c.hdrs[i].Hdr.Iov = &c.iovs[i]
		c.hdrs[i].Hdr.SetIovlen(1)
	}
	return c, nil
}

// recv reads the datagrams waiting, at least one and up to recvSlots, in one
// system call (a dump's data and its DONE, a chunk's acks), and calls f with
// each.
func (c *conn) recv(f func(datagram []byte)) error {
	n, _, errno := unix.Syscall6(unix.SYS_RECVMMSG, uintptr(c.fd), uintptr(unsafe.Pointer(&c.hdrs[0])), recvSlots, unix.MSG_WAITFORONE, 0, 0)
	if errno != 0 {
		return errno
	}
	for i := range int(n) {
		h := &c.hdrs[i]
		if h.Hdr.Flags&unix.MSG_TRUNC != 0 {
			return fmt.Errorf("a netlink reply did not fit in %d bytes", slotSize)
		}
		f(c.bufs[i*slotSize : i*slotSize+int(h.Len)])
	}
	return nil
}

func (c *conn) close() { unix.Close(c.fd) }

// exchange sends the n requests that encode writes (it is called with the
// sequence number of each) in one sendmsg, then reads until every request is
// answered: onData gets each data message's payload (genl header and
// attributes) with the request's index, and the returned slice holds each
// request's error (nil on success). The error result means the socket failed
// or the kernel did not answer in time.
//
// With quiet, the requests are writes of which only the last asks for an
// ack: the kernel answers the others only when they fail, and answers in
// order, so the last one's answer ends the exchange. That spares the kernel
// an ack per write, and this side reading it.
func (c *conn) exchange(ctx context.Context, n int, quiet bool, encode func(e *encoder, i int, seq uint32), onData func(i int, payload []byte), deadline time.Duration) ([]error, error) {
	enc := encoder{buf: make([]byte, 0, n*128)}
	first := c.seq + 1
	for i := range n {
		c.seq++
		encode(&enc, i, c.seq)
	}
	if err := unix.Sendto(c.fd, enc.buf, 0, &unix.SockaddrNetlink{Family: unix.AF_NETLINK}); err != nil {
		return nil, fmt.Errorf("send %d IPVS requests: %w", n, err)
	}
	errs := make([]error, n)
	done := make([]bool, n)
	pending := n
	if quiet {
		pending = 1
	}
	stop := time.Now().Add(deadline)
	handle := func(datagram []byte) {
		for msg := datagram; len(msg) >= nlmsgHdrLen; {
			l := int(native.Uint32(msg[0:]))
			if l < nlmsgHdrLen || l > len(msg) {
				break
			}
			typ := native.Uint16(msg[4:])
			idx := int(native.Uint32(msg[8:]) - first)
			if idx >= 0 && idx < n && !done[idx] {
				switch {
				case typ == nlmsgTypeErr && l >= nlmsgHdrLen+4:
					done[idx] = true
					if !quiet || idx == n-1 {
						pending--
					}
					if code := int32(native.Uint32(msg[nlmsgHdrLen:])); code != 0 {
						errs[idx] = syscall.Errno(-code)
					}
				case typ == nlmsgDone:
					done[idx] = true
					pending--
				case typ >= nlmsgTypeOK && onData != nil:
					onData(idx, msg[nlmsgHdrLen:l])
				}
			}
			msg = msg[min(align4(l), len(msg)):]
		}
	}
	for pending > 0 {
		if err := ctx.Err(); err != nil {
			return nil, fmt.Errorf("waiting for the kernel: %w", err)
		}
		if time.Now().After(stop) {
			return nil, fmt.Errorf("no answer from the kernel to %d of %d IPVS requests within %s", pending, n, deadline)
		}
		err := c.recv(handle)
		if errors.Is(err, unix.EAGAIN) || errors.Is(err, unix.EINTR) {
			continue
		}
		if err != nil {
			return nil, fmt.Errorf("receive IPVS replies: %w", err)
		}
	}
	return errs, nil
}
