//go:build linux

package health

import (
	"container/heap"
	"context"
	"errors"
	"net"
	"net/netip"
	"os"
	"sync"
	"syscall"
	"time"

	"golang.org/x/sys/unix"

	"github.com/ipvsctl/ipvsctl/ipvsmgr"
)

// tcpConnector runs tcp checks without a goroutine or a Go dial each: a
// non-blocking connect, one epoll for all of them, SO_ERROR read when the
// socket is writable, and a close that resets an established connection (no
// TIME_WAIT on the director for a thousand checks a second). On a thousand
// targets a Go dial costs about twice the CPU: a goroutine, the runtime's
// poller registration, timers, and socket options a check does not need.
type tcpConnector struct {
	// waiter's epoll holds the connects, and is itself waited for by the Go
	// runtime's poller: no thread sleeps in epoll_wait, and a read deadline
	// on it is the earliest connect's timeout.
	waiter
	raw syscall.RawConn

	mu      sync.Mutex
	pending map[int32]*connect
	byTime  deadlines[*connect]
	closed  bool // run has ended: start dials instead
}

// connect is one check under way.
type connect struct {
	due
	fd    int32
	spec  *ipvsmgr.CheckSpec
	start time.Time
	done  func(Result)
}

func newTCPConnector() (*tcpConnector, error) {
	epfd, err := unix.EpollCreate1(unix.EPOLL_CLOEXEC)
	if err != nil {
		return nil, err
	}
	if err := unix.SetNonblock(epfd, true); err != nil {
		unix.Close(epfd)
		return nil, err
	}
	f := os.NewFile(uintptr(epfd), "tcp check epoll")
	raw, err := f.SyscallConn()
	if err != nil {
		f.Close()
		return nil, err
	}
	if err := f.SetReadDeadline(time.Time{}); err != nil {
		// Not in the runtime's poller: run could not wait on it.
		f.Close()
		return nil, err
	}
	return &tcpConnector{waiter: waiter{epoll: f}, raw: raw, pending: map[int32]*connect{}}, nil
}

// start begins a connect to spec's target (start: now, as the caller last
// read the clock; the timeout and the result's duration count from it);
// done is called once with the result, from start itself when it is known
// at once, else from run's goroutine. false: this connect cannot be made
// here (no such address family, the epoll refused the socket, run has
// ended), done is not called, and the caller dials instead.
func (c *tcpConnector) start(spec *ipvsmgr.CheckSpec, start time.Time, done func(Result)) bool {
	finish := func(r Result) {
		r.Duration = time.Since(start)
		done(r)
	}
	target := spec.Target
	family := unix.AF_INET6
	if a := target.Addr(); a.Is4() || a.Is4In6() {
		family = unix.AF_INET
	}
	fd, err := rawSocket(family)
	if err != nil {
		if isResourceErr(err) {
			finish(describe(context.Background(), spec, err))
			return true
		}
		return false
	}
	switch err := rawConnect(fd, target, zoneID(target.Addr())); {
	case err == nil:
		rawResetClose(fd)
		finish(pass("connected"))
		return true
	case errors.Is(err, unix.EINPROGRESS):
	default:
		rawClose(fd)
		finish(describe(context.Background(), spec, err))
		return true
	}
	cn := &connect{due: due{deadline: start.Add(spec.Timeout)}, fd: int32(fd), spec: spec, start: start, done: done}
	// Registered with the lock held: run looks the event's socket up under
	// it, so an event that comes at once finds it pending.
	c.mu.Lock()
	if c.closed {
		c.mu.Unlock()
		rawClose(fd)
		return false
	}
	ev := unix.EpollEvent{Events: unix.EPOLLOUT | unix.EPOLLONESHOT, Fd: cn.fd}
	var ctlErr error
	c.raw.Control(func(epfd uintptr) {
		ctlErr = rawEpollCtl(int(epfd), unix.EPOLL_CTL_ADD, fd, &ev)
	})
	if ctlErr != nil {
		c.mu.Unlock()
		rawClose(fd)
		return false
	}
	c.pending[cn.fd] = cn
	heap.Push(&c.byTime, cn)
	c.sooner(cn.deadline)
	c.mu.Unlock()
	return true
}

func zoneID(a netip.Addr) uint32 {
	if a.Zone() == "" {
		return 0
	}
	ifi, err := net.InterfaceByName(a.Zone())
	if err != nil {
		return 0
	}
	return uint32(ifi.Index)
}

func isResourceErr(err error) bool {
	return errors.Is(err, unix.EMFILE) || errors.Is(err, unix.ENFILE) || errors.Is(err, unix.ENOBUFS) || errors.Is(err, unix.ENOMEM)
}

// run waits for the connects to finish or time out until ctx ends; then
// every connect still under way is told "check cancelled", and the epoll is
// closed.
func (c *tcpConnector) run(ctx context.Context) {
	defer c.stopOn(ctx, &c.mu)()
	events := make([]unix.EpollEvent, 256)
	var done []*connect
	var results []Result
	for c.arm(&c.mu, c.byTime.soonest) {
		n := 0
		err := c.raw.Read(func(epfd uintptr) bool {
			n = rawEpollPoll(int(epfd), events)
			return n > 0
		})
		if err != nil && !errors.Is(err, os.ErrDeadlineExceeded) {
			break
		}
		done, results = done[:0], results[:0]
		c.mu.Lock()
		for _, ev := range events[:max(n, 0)] {
			cn := c.pending[ev.Fd]
			if cn == nil {
				continue
			}
			delete(c.pending, cn.fd)
			heap.Remove(&c.byTime, cn.index)
			done = append(done, cn)
			results = append(results, Result{}) // read below, without the lock
		}
		now := time.Now()
		for len(c.byTime) > 0 && !c.byTime[0].deadline.After(now) {
			cn := heap.Pop(&c.byTime).(*connect)
			delete(c.pending, cn.fd)
			rawClose(int(cn.fd))
			done = append(done, cn)
			results = append(results, fail("timeout after "+cn.spec.Timeout.String()))
		}
		c.mu.Unlock()
		for i, cn := range done {
			if results[i].Outcome == 0 {
				results[i] = c.outcome(cn)
			}
		}
		for i, cn := range done {
			r := results[i]
			r.Duration = time.Since(cn.start)
			cn.done(r)
		}
	}
	c.mu.Lock()
	c.closed = true
	left := make([]*connect, 0, len(c.pending))
	for _, cn := range c.pending {
		rawClose(int(cn.fd))
		left = append(left, cn)
	}
	c.pending, c.byTime = nil, nil
	c.mu.Unlock()
	for _, cn := range left {
		cn.done(fault("check cancelled"))
	}
	c.epoll.Close()
}

// outcome reads a writable socket's connect result and closes it.
func (c *tcpConnector) outcome(cn *connect) Result {
	fd := int(cn.fd)
	errno, err := rawSocketError(fd)
	if err != nil {
		rawClose(fd)
		return fault("connect result unreadable: " + err.Error())
	}
	if errno != 0 {
		rawClose(fd)
		return describe(context.Background(), cn.spec, errno)
	}
	rawResetClose(fd)
	return pass("connected")
}
