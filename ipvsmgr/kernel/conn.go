package kernel

import (
	"context"
	"errors"
	"fmt"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
)

const (
	// Requests per sendmsg. Every reply is its own skb; the receive buffer must
	// hold a whole chunk's replies or the kernel drops them (ENOBUFS).
	chunkOps     = 256
	chunkDumps   = 256
	recvBufForce = 8 << 20
	recvTimeout  = 500 * time.Millisecond

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
	buf    []byte
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
	return &conn{fd: fd, family: family, buf: make([]byte, 1<<20)}, nil
}

func (c *conn) close() { unix.Close(c.fd) }

// exchange sends the n requests that encode writes (it is called with the
// sequence number of each) in one sendmsg, then reads until every request is
// answered: onData gets each data message's payload (genl header and
// attributes) with the request's index, and the returned slice holds each
// request's error (nil on success). The error result means the socket failed
// or the kernel did not answer in time.
func (c *conn) exchange(ctx context.Context, n int, encode func(e *encoder, i int, seq uint32), onData func(i int, payload []byte), deadline time.Duration) ([]error, error) {
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
	stop := time.Now().Add(deadline)
	for pending > 0 {
		if err := ctx.Err(); err != nil {
			return nil, fmt.Errorf("waiting for the kernel: %w", err)
		}
		if time.Now().After(stop) {
			return nil, fmt.Errorf("no answer from the kernel to %d of %d IPVS requests within %s", pending, n, deadline)
		}
		got, _, err := unix.Recvfrom(c.fd, c.buf, 0)
		if errors.Is(err, unix.EAGAIN) || errors.Is(err, unix.EINTR) {
			continue
		}
		if err != nil {
			return nil, fmt.Errorf("receive IPVS replies: %w", err)
		}
		for msg := c.buf[:got]; len(msg) >= nlmsgHdrLen; {
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
					pending--
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
	return errs, nil
}
