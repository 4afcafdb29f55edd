package kernel

import (
	"context"
	"fmt"
	"syscall"
	"time"

	"golang.org/x/sys/unix"

	"github.com/ipvsctl/ipvsctl/ipvsmgr"
)

// apply sends ops in chunks and returns one error per op.
func (c *conn) apply(ctx context.Context, ops []ipvsmgr.Op, deadline time.Duration) []error {
	errs := make([]error, len(ops))
	for lo := 0; lo < len(ops); lo += chunkOps {
		chunk := ops[lo:min(lo+chunkOps, len(ops))]
		got, err := c.exchange(ctx, len(chunk), true, func(e *encoder, i int, seq uint32) {
			e.op(c.family, seq, chunk[i], i == len(chunk)-1)
		}, nil, deadline)
		if err != nil {
			err = fmt.Errorf("%w: %w", ipvsmgr.ErrTransport, err)
			for i := lo; i < len(ops); i++ {
				errs[i] = err
			}
			return errs
		}
		for i, err := range got {
			if err != nil {
				errs[lo+i] = explain(chunk[i], err.(syscall.Errno))
			}
		}
	}
	return errs
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
