package kernel

import (
	"context"
	"errors"
	"fmt"
	"syscall"
	"time"

	"golang.org/x/sys/unix"

	"github.com/ipvsctl/ipvsctl/ipvsmgr"
)

// Requests per sendmsg. Each request is acked by its own skb; the receive
// buffer must hold a whole chunk's acks or the kernel drops them (ENOBUFS).
const (
	chunkOps      = 256
	recvBufForce  = 8 << 20
	recvTimeout   = 500 * time.Millisecond
	solNetlink    = 270
	netlinkCapAck = 10
)

// batchSocket sends many IPVS requests per sendmsg and matches each ack to its
// request. keepalived and ipvsadm send one request and wait for its ack every
// time; the kernel's netlink_rcv_skb walks every message of one send and acks
// each, so a batch costs one round trip per chunk instead of one per change.
type batchSocket struct {
	fd     int
	family uint16
	seq    uint32
	buf    []byte
}

func newBatchSocket(family uint16) (*batchSocket, error) {
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
	return &batchSocket{fd: fd, family: family, buf: make([]byte, 1<<20)}, nil
}

func (b *batchSocket) close() { unix.Close(b.fd) }

// apply sends ops in chunks and returns one error per op.
func (b *batchSocket) apply(ctx context.Context, ops []ipvsmgr.Op, deadline time.Duration) []error {
	errs := make([]error, len(ops))
	for lo := 0; lo < len(ops); lo += chunkOps {
		hi := min(lo+chunkOps, len(ops))
		if err := b.chunk(ctx, ops[lo:hi], errs[lo:hi], deadline); err != nil {
			for i := lo; i < len(ops); i++ {
				if errs[i] == nil {
					errs[i] = err
				}
			}
			return errs
		}
	}
	return errs
}

// chunk sends ops in one sendmsg and waits for every ack. It returns an error
// when the socket failed as a whole; per-request errors go to errs.
func (b *batchSocket) chunk(ctx context.Context, ops []ipvsmgr.Op, errs []error, deadline time.Duration) error {
	enc := encoder{buf: make([]byte, 0, len(ops)*128)}
	first := b.seq + 1
	for _, op := range ops {
		b.seq++
		enc.op(b.family, b.seq, op)
	}
	if err := unix.Sendto(b.fd, enc.buf, 0, &unix.SockaddrNetlink{Family: unix.AF_NETLINK}); err != nil {
		return fmt.Errorf("send %d IPVS requests: %w", len(ops), err)
	}
	pending := len(ops)
	done := make([]bool, len(ops))
	stop := time.Now().Add(deadline)
	for pending > 0 {
		if err := ctx.Err(); err != nil {
			return fmt.Errorf("waiting for kernel acks: %w", err)
		}
		if time.Now().After(stop) {
			return fmt.Errorf("no answer from the kernel to %d of %d IPVS requests within %s", pending, len(ops), deadline)
		}
		n, _, err := unix.Recvfrom(b.fd, b.buf, 0)
		if errors.Is(err, unix.EAGAIN) || errors.Is(err, unix.EINTR) {
			continue
		}
		if err != nil {
			return fmt.Errorf("receive IPVS acks: %w", err)
		}
		for msg := b.buf[:n]; len(msg) >= nlmsgHdrLen; {
			l := int(native.Uint32(msg[0:]))
			if l < nlmsgHdrLen || l > len(msg) {
				break
			}
			typ := native.Uint16(msg[4:])
			seq := native.Uint32(msg[8:])
			idx := int(seq - first)
			if typ == nlmsgTypeErr && idx >= 0 && idx < len(ops) && !done[idx] && l >= nlmsgHdrLen+4 {
				done[idx] = true
				pending--
				if code := int32(native.Uint32(msg[nlmsgHdrLen:])); code != 0 {
					errs[idx] = explain(ops[idx], syscall.Errno(-code))
				}
			}
			msg = msg[min(align4(l), len(msg)):]
		}
	}
	return nil
}

// explain turns an IPVS errno into a reason an operator can act on.
func explain(op ipvsmgr.Op, errno syscall.Errno) error {
	hint := ""
	switch {
	case errno == unix.ENOENT && (op.Kind == ipvsmgr.OpAddService || op.Kind == ipvsmgr.OpEditService):
		hint = fmt.Sprintf("scheduler %q is not available in this kernel (module ip_vs_%s)", op.Service.Scheduler, op.Service.Scheduler)
	case errno == unix.EINVAL && (op.Kind == ipvsmgr.OpAddDest || op.Kind == ipvsmgr.OpEditDest) && op.Dest.Forward != ipvsmgr.ForwardNAT:
		hint = "for dr/tun the real server's address must be reachable unicast from the director (give its subnet a route)"
	case errno == unix.EEXIST:
		hint = "already exists"
	case errno == unix.ESRCH:
		hint = "no such virtual service"
	case errno == unix.ENOENT && op.Dest != nil:
		hint = "no such real server"
	case errno == unix.ERANGE:
		hint = "lower threshold above upper threshold"
	}
	if hint != "" {
		return fmt.Errorf("%w: %s", errno, hint)
	}
	return errno
}
