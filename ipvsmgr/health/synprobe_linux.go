//go:build linux

package health

import (
	"container/heap"
	"context"
	"errors"
	"math/rand/v2"
	"os"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"golang.org/x/sys/unix"

	"github.com/ipvsctl/ipvsctl/ipvsmgr"
)

// synProber runs tcp checks as half-open handshakes, as nmap's SYN scan
// does: a SYN from a raw socket, a SYN-ACK passes (the director's kernel
// resets it, as no socket owns the 4-tuple), a reset fails "connection
// refused", nothing fails at the timeout, an ICMP error with its reason.
// No connection is made: the real server's application is never woken,
// and neither side keeps any state. A full connect's handshake, child
// socket and reset cost both sides several times the CPU of a SYN, a
// SYN-ACK and a reset; keepalived pays them. It needs CAP_NET_RAW.
type synProber struct {
	// waiter's epoll holds both raw sockets and is itself waited for by
	// the Go runtime's poller (a read deadline on it is the earliest
	// probe's timeout): one goroutine for both families, and an ICMP error
	// on a raw socket (EPOLLERR) reaches us as the epoll's readability,
	// which the runtime's poller does not mistake for a broken descriptor.
	waiter
	epfd    int // epoll's descriptor, for hold and release
	raw     syscall.RawConn
	v4, v6  *synSocket // nil: that family is not probed here
	sources *sources

	// sendMu is held for reading while a SYN is sent, and for writing
	// while run closes the sockets.
	sendMu sync.RWMutex
	shut   bool

	mu      sync.Mutex
	pending map[synKey]*synProbe
	byTime  deadlines[*synProbe]
	closed  bool // run has ended

	// recvMu is held while a socket is read (by run, or by release): the
	// sockets' receive vectors are shared.
	recvMu   sync.Mutex
	flush    settlement   // release's
	received atomic.Int64 // segments the filter let through (tests)
}

// settlement is one pass over the probes under way: the answers read, then
// the probes they end (and those past their deadline) with their results,
// matched under the lock and told outside it. Each goroutine that settles
// has its own.
type settlement struct {
	answers []synAnswer
	done    []*synProbe
	results []Result
}

// synProbe is one check under way.
type synProbe struct {
	due
	key   synKey
	seq   uint32
	spec  *ipvsmgr.CheckSpec
	start time.Time
	done  func(Result)
}

// newSynProber opens the raw sockets; an error (no CAP_NET_RAW) means tcp
// checks connect instead.
func newSynProber() (_ *synProber, err error) {
	p := &synProber{pending: map[synKey]*synProbe{}}
	defer func() {
		if err != nil {
			p.closeSockets()
		}
	}()
	if p.v4, err = openSynSocket(unix.AF_INET); err != nil {
		return nil, err
	}
	if p.sources, err = newSources(); err != nil {
		return nil, err
	}
	if p.v6, err = openSynSocket(unix.AF_INET6); err != nil {
		p.v6 = nil // no IPv6 here: its targets connect
	}
	epfd, err := unix.EpollCreate1(unix.EPOLL_CLOEXEC)
	if err != nil {
		return nil, err
	}
	if err := unix.SetNonblock(epfd, true); err != nil {
		unix.Close(epfd)
		return nil, err
	}
	p.epoll, p.epfd = os.NewFile(uintptr(epfd), "tcp check raw sockets"), epfd
	for _, s := range []*synSocket{p.v4, p.v6} {
		if s == nil {
			continue
		}
		ev := unix.EpollEvent{Events: unix.EPOLLIN, Fd: int32(s.fd)}
		if err := unix.EpollCtl(epfd, unix.EPOLL_CTL_ADD, s.fd, &ev); err != nil {
			return nil, err
		}
	}
	if p.raw, err = p.epoll.SyscallConn(); err != nil {
		return nil, err
	}
	if err := p.epoll.SetReadDeadline(time.Time{}); err != nil {
		return nil, err // not in the runtime's poller: run could not wait on it
	}
	return p, nil
}

func (p *synProber) closeSockets() {
	for _, s := range []*synSocket{p.v4, p.v6} {
		if s != nil {
			s.close()
		}
	}
	if p.sources != nil {
		p.sources.close()
	}
	if p.epoll != nil {
		p.epoll.Close()
	}
}

// start sends spec's SYN (begin: now, as the caller last read the clock;
// the timeout and the result's duration count from it); done is called
// once with the result, from start when it is known at once (no route),
// else from run's goroutine (or release's). false: this check cannot be
// made here (no socket of its family, a probe of the same target under
// way, run has ended), done is not called, and the caller connects
// instead.
func (p *synProber) start(spec *ipvsmgr.CheckSpec, begin time.Time, done func(Result)) bool {
	p.sendMu.RLock()
	defer p.sendMu.RUnlock()
	if p.shut {
		return false
	}
	finish := func(r Result) {
		r.Duration = time.Since(begin)
		done(r)
	}
	target := spec.Target
	a := target.Addr().Unmap()
	key := synKey{port: target.Port()}
	var s *synSocket
	var src [4]byte
	if a.Is4() {
		s = p.v4
		a4 := a.As4()
		copy(key.addr[:], a4[:])
		var err error
		if src, err = p.sources.lookup(key, begin); err != nil {
			finish(describe(context.Background(), spec, err))
			return true
		}
	} else {
		if s = p.v6; s == nil {
			return false
		}
		key.addr, key.v6 = a.As16(), true
		if a.IsLinkLocalUnicast() {
			zone, err := s.zoneIndex(a.Zone())
			if a.Zone() == "" || err != nil {
				return false // the connector says what is wrong with it
			}
			key.scope = zone
		}
	}
	pr := &synProbe{due: due{deadline: begin.Add(spec.Timeout)}, key: key, seq: rand.Uint32(), spec: spec, start: begin, done: done}
	p.mu.Lock()
	if p.closed || p.pending[key] != nil {
		// Two SYNs from one port to one target would be one connection
		// to it: the second check connects.
		p.mu.Unlock()
		return false
	}
	p.pending[key] = pr
	heap.Push(&p.byTime, pr)
	p.sooner(pr.deadline)
	p.mu.Unlock()
	var err error
	if s == p.v4 {
		err = s.sendSYN4(src, [4]byte(key.addr[:4]), key.port, pr.seq)
	} else {
		err = s.sendSYN6(key.addr, key.scope, key.port, pr.seq)
	}
	if err == nil {
		return true
	}
	p.mu.Lock()
	mine := p.pending[key] == pr
	if mine {
		delete(p.pending, key)
		heap.Remove(&p.byTime, pr.index)
	}
	p.mu.Unlock()
	if mine {
		p.sources.forget(key)
		finish(describe(context.Background(), spec, err))
	}
	return true
}

// run reads the replies and times the probes out until ctx ends; then
// every probe still under way is told "check cancelled", and the sockets
// are closed.
func (p *synProber) run(ctx context.Context) {
	defer p.stopOn(ctx, &p.mu)()
	events := make([]unix.EpollEvent, 2)
	var st settlement
	for p.arm(&p.mu, p.byTime.soonest) {
		err := p.raw.Read(func(epfd uintptr) bool {
			n := rawEpollPoll(int(epfd), events)
			p.recvMu.Lock()
			for _, ev := range events[:max(n, 0)] {
				s := p.v4
				if p.v6 != nil && ev.Fd == int32(p.v6.fd) {
					s = p.v6
				}
				st.answers = p.receive(s, st.answers, ev.Events&unix.EPOLLERR != 0)
			}
			p.recvMu.Unlock()
			return n > 0
		})
		if err != nil && !errors.Is(err, os.ErrDeadlineExceeded) {
			break
		}
		burst := len(st.answers) > 0
		if p.settle(&st, true) && burst {
			// Replies come in bursts, as a batch's SYNs went out together:
			// the first of one wakes run, and the rest queue up for a
			// moment rather than each waking it (and the thread asleep in
			// the runtime's poller) again. A result is read up to
			// replyGather after it came; a lone check is never held.
			time.Sleep(replyGather)
		}
	}
	p.mu.Lock()
	p.closed = true
	left := make([]*synProbe, 0, len(p.pending))
	for _, pr := range p.pending {
		left = append(left, pr)
	}
	p.pending, p.byTime = nil, nil
	p.mu.Unlock()
	for _, pr := range left {
		pr.done(fault("check cancelled"))
	}
	p.sendMu.Lock()
	p.shut = true
	p.closeSockets()
	p.sendMu.Unlock()
}

// receive reads s's queue into answers; p.recvMu is held.
func (p *synProber) receive(s *synSocket, answers []synAnswer, errs bool) []synAnswer {
	answers, n := s.receive(answers, errs)
	p.received.Add(int64(n))
	return answers
}

// replyGather is how long run lets a burst of replies queue up after its
// first: a tcp check's duration is the time to its reply's reading, up to
// this much more than the round trip.
const replyGather = time.Millisecond

// settle ends the probes st.answers answer and (timeouts) those past their
// deadline, and tells their results; true when probes are still under way.
func (p *synProber) settle(st *settlement, timeouts bool) (waiting bool) {
	st.done, st.results = st.done[:0], st.results[:0]
	now := time.Now()
	p.mu.Lock()
	for _, a := range st.answers {
		pr := p.pending[a.key]
		if pr == nil || pr.seq != a.seq {
			continue // late, or not ours
		}
		delete(p.pending, pr.key)
		heap.Remove(&p.byTime, pr.index)
		st.done = append(st.done, pr)
		switch {
		case a.errno != 0:
			st.results = append(st.results, icmpResult(pr.spec, a))
		case a.reset:
			st.results = append(st.results, fail("connection refused"))
		default:
			st.results = append(st.results, pass("SYN-ACK"))
		}
	}
	for timeouts && len(p.byTime) > 0 && !p.byTime[0].deadline.After(now) {
		pr := heap.Pop(&p.byTime).(*synProbe)
		delete(p.pending, pr.key)
		st.done = append(st.done, pr)
		st.results = append(st.results, fail("timeout after "+pr.spec.Timeout.String()))
	}
	waiting = len(p.pending) > 0
	p.mu.Unlock()
	st.answers = st.answers[:0]
	for i, pr := range st.done {
		r := st.results[i]
		if r.Outcome != Pass {
			p.sources.forget(pr.key)
		}
		r.Duration = now.Sub(pr.start)
		pr.done(r)
		st.done[i] = nil
	}
	return waiting
}

// hold keeps the replies that come while the caller sends a batch of SYNs
// in the sockets' queues, without waking run for each: on a local or veth
// peer the kernel answers within the send itself, and a wake-up of run
// (and of the thread asleep in the runtime's poller) per reply cost more
// than the check. release reads what came, tells its results in the
// caller's goroutine, and lets run be woken again. One caller at a time
// (the runner's loop); a held batch should be short (its replies wait in
// the socket's buffer, and its probes' deadlines run).
func (p *synProber) hold() {
	p.sendMu.RLock()
	defer p.sendMu.RUnlock()
	if !p.shut {
		p.watch(0)
	}
}

func (p *synProber) release() {
	p.sendMu.RLock()
	defer p.sendMu.RUnlock()
	if p.shut {
		return
	}
	p.recvMu.Lock()
	for _, s := range []*synSocket{p.v4, p.v6} {
		if s != nil {
			p.flush.answers = p.receive(s, p.flush.answers, false)
		}
	}
	p.recvMu.Unlock()
	p.settle(&p.flush, false)
	// Level-triggered: what came since the read above wakes run at once.
	p.watch(unix.EPOLLIN)
}

// watch sets the events epoll waits for on the sockets (0: none but
// errors); p.sendMu is held for reading, and the sockets are open.
func (p *synProber) watch(events uint32) {
	for _, s := range []*synSocket{p.v4, p.v6} {
		if s != nil {
			ev := unix.EpollEvent{Events: events, Fd: int32(s.fd)}
			rawEpollCtl(p.epfd, unix.EPOLL_CTL_MOD, s.fd, &ev)
		}
	}
}

// icmpResult is what an ICMP error about a check's SYN says: the network's
// verdict on the way to the real server, so a failure (the director's own
// missing route is found before the SYN is sent: a fault).
func icmpResult(spec *ipvsmgr.CheckSpec, a synAnswer) Result {
	switch {
	case a.prohibited:
		return fail("administratively prohibited")
	case a.errno == unix.ENETUNREACH:
		return fail("network unreachable")
	}
	r := describe(context.Background(), spec, a.errno)
	r.Outcome = Fail
	return r
}
