package vrrp

import (
	"context"
	"errors"
	"fmt"
	"net/netip"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/google/go-cmp/cmp"
)

// fakeClock is moved by hand; its timers fire when it passes them.
type fakeClock struct {
	mu     sync.Mutex
	now    time.Time
	timers []*fakeTimer
}

type fakeTimer struct {
	c  chan time.Time
	at time.Time
	cl *fakeClock
}

func (f *fakeClock) Now() time.Time {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.now
}

func (f *fakeClock) NewTimer(d time.Duration) Timer {
	f.mu.Lock()
	defer f.mu.Unlock()
	t := &fakeTimer{c: make(chan time.Time, 1), at: f.now.Add(d), cl: f}
	f.timers = append(f.timers, t)
	return t
}

func (t *fakeTimer) C() <-chan time.Time { return t.c }
func (t *fakeTimer) Stop() bool {
	t.cl.mu.Lock()
	defer t.cl.mu.Unlock()
	for i, x := range t.cl.timers {
		if x == t {
			t.cl.timers = append(t.cl.timers[:i], t.cl.timers[i+1:]...)
			return true
		}
	}
	return false
}

// advance moves the clock by d, firing each timer at its time and letting
// the instance settle (synctest.Wait) after each.
func (f *fakeClock) advance(d time.Duration) {
	f.mu.Lock()
	end := f.now.Add(d)
	f.mu.Unlock()
	for range 100000 {
		synctest.Wait()
		f.mu.Lock()
		var next *fakeTimer
		for _, t := range f.timers {
			if !t.at.After(end) && (next == nil || t.at.Before(next.at)) {
				next = t
			}
		}
		if next == nil {
			f.now = end
			f.mu.Unlock()
			synctest.Wait()
			return
		}
		if next.at.After(f.now) {
			f.now = next.at
		}
		for i, x := range f.timers {
			if x == next {
				f.timers = append(f.timers[:i], f.timers[i+1:]...)
				break
			}
		}
		next.c <- f.now
		f.mu.Unlock()
	}
}

// events records what the instance did, as "TIME WHAT", time since t0.
type events struct {
	mu    sync.Mutex
	clock *fakeClock
	log   []string
}

func (e *events) add(format string, args ...any) {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.log = append(e.log, fmt.Sprintf("%s %s", e.clock.Now().Sub(t0), fmt.Sprintf(format, args...)))
}

func (e *events) take() []string {
	e.mu.Lock()
	defer e.mu.Unlock()
	l := e.log
	e.log = nil
	return l
}

type fakeConn struct {
	ev     *events
	in     chan Received
	closed chan struct{}
	once   sync.Once
	fail   chan error
}

func newFakeConn(ev *events) *fakeConn {
	return &fakeConn{ev: ev, in: make(chan Received), closed: make(chan struct{}), fail: make(chan error)}
}

func (c *fakeConn) Receive() (Received, error) {
	select {
	case r := <-c.in:
		return r, nil
	case err := <-c.fail:
		return Received{}, err
	case <-c.closed:
		return Received{}, errors.New("closed")
	}
}

func (c *fakeConn) Send(a *Advert) error {
	c.ev.add("send %d", a.Priority)
	return nil
}

func (c *fakeConn) Primary() netip.Addr { return self }
func (c *fakeConn) Close() error {
	c.once.Do(func() { close(c.closed); c.ev.add("closed") })
	return nil
}

type fakeAnnouncer struct{ ev *events }

func (a fakeAnnouncer) Announce(addrs []netip.Addr) error {
	a.ev.add("announce %v", addrs)
	return nil
}

type harness struct {
	clock *fakeClock
	ev    *events
	conn  *fakeConn
	inst  *Instance
	done  chan error
	stop  context.CancelFunc
}

func startInstance(t *testing.T, cfg Config) *harness {
	clock := &fakeClock{now: t0}
	ev := &events{clock: clock}
	h := &harness{clock: clock, ev: ev, conn: newFakeConn(ev), done: make(chan error, 1)}
	var err error
	h.inst, err = New(cfg, Options{Conn: h.conn, Announcer: fakeAnnouncer{ev}, Clock: clock,
		OnMaster:    func(tr Transition) { ev.add("OnMaster (%s)", tr.Reason) },
		OnBackup:    func(tr Transition) { ev.add("OnBackup (%s)", tr.Reason) },
		OnFault:     func(tr Transition) { ev.add("OnFault (%s)", tr.Reason) },
		OnAnnounced: func(tr Transition) { ev.add("OnAnnounced (to %s)", tr.To) }})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	h.stop = cancel
	go func() { h.done <- h.inst.Run(ctx) }()
	synctest.Wait()
	return h
}

func (h *harness) receive(prio uint8, src netip.Addr) {
	h.conn.in <- Received{Advert: &Advert{VRID: 51, Priority: prio, MaxAdvertInterval: 100, Addrs: []netip.Addr{vip}}, Src: src}
	synctest.Wait()
}

func (h *harness) expect(t *testing.T, what string, want ...string) {
	t.Helper()
	if diff := cmp.Diff(want, h.ev.take()); diff != "" {
		t.Errorf("%s (-want +got):\n%s", what, diff)
	}
}

func TestInstanceTakeoverAnnounceResign(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		cfg := testConfig()
		cfg.Addrs = []netip.Addr{vip}
		cfg.GARPCount, cfg.GARPRepeatDelay = 2, 5*time.Second
		h := startInstance(t, cfg)
		h.expect(t, "start", "0s OnBackup (startup)")
		h.clock.advance(time.Second)
		h.receive(200, upper)
		h.clock.advance(3 * time.Second) // 4 s: 3.609375 s after the last advert is 4.609375 s
		h.expect(t, "backup hearing a master")
		h.clock.advance(time.Second)
		h.expect(t, "takeover: OnMaster, then the advert, then the announcements, then OnAnnounced",
			"4.609375s OnMaster (no advert from the master for the master down interval (3.609375s))",
			"4.609375s send 100", "4.609375s announce [198.18.0.100]", "4.609375s announce [198.18.0.100]",
			"4.609375s OnAnnounced (to master)")
		h.clock.advance(5 * time.Second)
		h.expect(t, "adverts and the repeated announcements (no OnAnnounced: no takeover)",
			"5.609375s send 100", "6.609375s send 100", "7.609375s send 100", "8.609375s send 100", "9.609375s send 100",
			"9.609375s announce [198.18.0.100]", "9.609375s announce [198.18.0.100]")
		st := h.inst.Status()
		if st.State != Master || st.Master != self || len(st.Transitions) != 2 || st.Transitions[1].To != Master {
			t.Errorf("status %+v", st)
		}
		h.stop()
		if err := <-h.done; err != nil {
			t.Fatal(err)
		}
		h.expect(t, "shutdown", "10s send 0", "10s OnBackup (shutdown)", "10s closed")
	})
}

// node set --priority reaches a running instance: no restart (no
// resignation, no closed conn, no transition), the backup's master down
// timer follows the new skew, and a master's next advert carries it.
func TestInstanceLivePriorityChange(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		cfg := testConfig()
		cfg.GARPCount = 0
		h := startInstance(t, cfg)
		h.expect(t, "start", "0s OnBackup (startup)")
		h.clock.advance(500 * time.Millisecond)
		h.receive(200, upper) // down at 0.5 + 3.609375 s at priority 100
		h.clock.advance(500 * time.Millisecond)
		if err := h.inst.SetPriority(150); err != nil {
			t.Fatal(err)
		}
		synctest.Wait()
		if st := h.inst.Status(); st.State != Backup || st.Priority != 150 || st.MasterDownInterval != 3414062500*time.Nanosecond {
			t.Fatalf("after the change: %+v", st)
		}
		h.clock.advance(500 * time.Millisecond)
		h.receive(200, upper) // 1.5 s: still below the master
		h.clock.advance(3414 * time.Millisecond)
		h.expect(t, "a backup still, nothing sent, no restart")
		h.clock.advance(time.Millisecond) // 1.5 + 3.4140625 s
		h.expect(t, "takeover at the new priority's master down interval",
			"4.9140625s OnMaster (no advert from the master for the master down interval (3.4140625s))", "4.9140625s send 150",
			"4.9140625s OnAnnounced (to master)")
		h.clock.advance(300 * time.Millisecond)
		if err := h.inst.SetPriority(120); err != nil {
			t.Fatal(err)
		}
		synctest.Wait()
		h.clock.advance(2 * time.Second)
		h.expect(t, "the master's next adverts carry the new priority, no transition", "5.9140625s send 120", "6.9140625s send 120")
		if err := h.inst.SetPriority(0); err == nil {
			t.Error("priority 0 accepted")
		}
		if st := h.inst.Status(); st.State != Master || st.Priority != 120 || st.MasterPriority != 120 || len(st.Transitions) != 2 {
			t.Errorf("status %+v", st)
		}
		h.stop()
		<-h.done
		h.expect(t, "shutdown", "7.215s send 0", "7.215s OnBackup (shutdown)", "7.215s closed")
	})
}

func TestInstanceFault(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		cfg := testConfig()
		cfg.Priority = 255
		cfg.GARPCount = 0
		h := startInstance(t, cfg)
		h.expect(t, "owner", "0s OnMaster (startup: address owner (priority 255))", "0s send 255", "0s OnAnnounced (to master)")
		h.clock.advance(1500 * time.Millisecond)
		h.inst.SetFault("eth1 down")
		synctest.Wait()
		h.clock.advance(10 * time.Second)
		h.expect(t, "fault", "1s send 255", "1.5s send 0", "1.5s OnFault (eth1 down)")
		if st := h.inst.Status(); st.State != Fault || st.Fault != "eth1 down" {
			t.Errorf("status %+v", st)
		}
		h.inst.SetFault("")
		synctest.Wait()
		h.expect(t, "fault cleared", "11.5s OnMaster (fault cleared: address owner (priority 255))", "11.5s send 255",
			"11.5s OnAnnounced (to master)")
		h.stop()
		<-h.done
	})
}

func TestInstanceFaultBeforeRun(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		clock := &fakeClock{now: t0}
		ev := &events{clock: clock}
		conn := newFakeConn(ev)
		inst, err := New(testConfig(), Options{Conn: conn, Clock: clock, OnFault: func(tr Transition) { ev.add("OnFault (%s)", tr.Reason) }})
		if err != nil {
			t.Fatal(err)
		}
		inst.SetFault("ip_vs missing")
		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan error)
		go func() { done <- inst.Run(ctx) }()
		synctest.Wait()
		clock.advance(10 * time.Second)
		cancel()
		<-done
		if diff := cmp.Diff([]string{"0s OnFault (ip_vs missing)", "10s closed"}, ev.take()); diff != "" {
			t.Error(diff)
		}
	})
}

func TestInstanceConnFailure(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		cfg := testConfig()
		cfg.Priority = 255
		h := startInstance(t, cfg)
		h.ev.take()
		h.conn.fail <- errors.New("interface gone")
		err := <-h.done
		if err == nil || err.Error() != "vrrp: receive: interface gone" {
			t.Fatalf("Run returned %v", err)
		}
		h.expect(t, "resigned", "0s send 0", "0s OnBackup (shutdown)", "0s closed")
	})
}

func TestNewChecksConfig(t *testing.T) {
	cfg := testConfig()
	cfg.VRID = 0
	if _, err := New(cfg, Options{Conn: newFakeConn(nil)}); err == nil {
		t.Fatal("vrid 0 accepted")
	}
	if _, err := New(testConfig(), Options{}); err == nil {
		t.Fatal("no conn accepted")
	}
}
