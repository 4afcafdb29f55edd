package vrrp

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/netip"
	"sync"
	"time"
)

// Conn carries one virtual router's adverts.
type Conn interface {
	// Receive blocks until an advert for the router's VRID arrives, already
	// checked (TTL or hop limit 255, version, checksum, sender). It returns
	// an error once the conn is closed.
	Receive() (Received, error)
	// Send sends an advert to the multicast group or to each unicast peer.
	Send(a *Advert) error
	// Primary is this router's address, its adverts' source.
	Primary() netip.Addr
	Close() error
}

// Received is an advert and who sent it.
type Received struct {
	Advert *Advert
	Src    netip.Addr
}

// Announcer tells the link that addresses have moved here: gratuitous ARPs
// for IPv4, unsolicited neighbour advertisements for IPv6, one per address
// for each call.
type Announcer interface {
	Announce(addrs []netip.Addr) error
}

// Clock is the time source of an instance; tests give a fake one.
type Clock interface {
	Now() time.Time
	NewTimer(d time.Duration) Timer
}

// Timer is a one-shot timer from a Clock.
type Timer interface {
	C() <-chan time.Time
	Stop() bool
}

type systemClock struct{}

func (systemClock) Now() time.Time { return time.Now() }
func (systemClock) NewTimer(d time.Duration) Timer {
	return systemTimer{time.NewTimer(d)}
}

type systemTimer struct{ t *time.Timer }

func (t systemTimer) C() <-chan time.Time { return t.t.C }
func (t systemTimer) Stop() bool          { return t.t.Stop() }

// Options are an instance's collaborators and callbacks. The callbacks run on
// the instance's goroutine, in order, before the advert that follows them:
// they should be quick (a netlink call, not a reconcile).
type Options struct {
	Conn      Conn      // required
	Announcer Announcer // nil: no gratuitous ARPs
	Clock     Clock     // nil: the system clock
	Logger    *slog.Logger
	// OnMaster runs on becoming master (add the VIPs), before the first
	// advert and the announcements.
	OnMaster func(Transition)
	// OnBackup runs on entering Backup, at start and on losing mastership,
	// and on stopping (Initialize): the VIPs must go.
	OnBackup func(Transition)
	// OnFault runs on entering Fault: the VIPs must go.
	OnFault func(Transition)
	// OnAnnounced runs after a transition to master has sent its first
	// advert and its gratuitous ARPs / unsolicited NAs: the place for
	// what the takeover must not hold back or compete with (a ledger
	// write, a reconcile), which OnMaster should leave to it.
	OnAnnounced func(Transition)
	// History is how many transitions Status keeps (default 64).
	History int
}

// InstanceStatus is a virtual router's state for status readers.
type InstanceStatus struct {
	Status
	VRID        uint8
	Transitions []Transition // oldest first
	SendErrors  int
	LastSendErr string
}

// Instance runs a Machine over a Conn: it calls the callbacks, sends the
// adverts and the announcements, and keeps the transitions.
type Instance struct {
	cfg  Config
	opt  Options
	log  *slog.Logger
	m    *Machine
	wake chan struct{} // a fault or priority change is pending

	mu       sync.Mutex
	fault    string        // wanted fault, "" for none
	priority uint8         // wanted priority
	hold     string        // wanted preemption hold (Machine.SetPreemptHold)
	holdMax  time.Duration // and its bound
	status   InstanceStatus
	running  bool
}

// New checks cfg and returns an instance ready to Run. cfg.Primary is taken
// from the Conn when unset.
func New(cfg Config, opt Options) (*Instance, error) {
	if opt.Conn == nil {
		return nil, errors.New("vrrp: no Conn")
	}
	if !cfg.Primary.IsValid() {
		cfg.Primary = opt.Conn.Primary()
	}
	if err := cfg.Validate(); err != nil {
		return nil, fmt.Errorf("vrrp: %w", err)
	}
	if opt.Clock == nil {
		opt.Clock = systemClock{}
	}
	if opt.Logger == nil {
		opt.Logger = slog.New(slog.DiscardHandler)
	}
	if opt.History <= 0 {
		opt.History = 64
	}
	i := &Instance{cfg: cfg, opt: opt, m: NewMachine(cfg), wake: make(chan struct{}, 1),
		log: opt.Logger.With("vrid", cfg.VRID), priority: cfg.Priority}
	i.status = InstanceStatus{Status: i.m.Status(), VRID: cfg.VRID}
	return i, nil
}

// SetFault puts the instance in Fault for reason (the director's own health:
// ip_vs missing, the reconcile failing, a tracked interface down); a master
// first resigns with priority 0. An empty reason clears the fault. It may be
// called from any goroutine, before or during Run.
func (i *Instance) SetFault(reason string) {
	i.mu.Lock()
	i.fault = reason
	i.mu.Unlock()
	i.poke()
}

// SetPriority changes the router's priority without restarting it (see
// Machine.SetPriority): the next advert carries it, and a backup's master
// down timer follows it. It may be called from any goroutine, before or
// during Run.
func (i *Instance) SetPriority(p uint8) error {
	if p == 0 {
		return errors.New("vrrp: priority 0 is only sent on resigning")
	}
	i.mu.Lock()
	i.priority = p
	i.mu.Unlock()
	i.poke()
	return nil
}

// SetPreemptHold holds a due preemption back for why, for at most max
// ("" lets it go: see Machine.SetPreemptHold). It may be called from any
// goroutine, before or during Run.
func (i *Instance) SetPreemptHold(max time.Duration, why string) {
	i.mu.Lock()
	changed := i.hold != why || i.holdMax != max
	i.hold, i.holdMax = why, max
	i.mu.Unlock()
	if changed {
		i.poke()
	}
}

func (i *Instance) poke() {
	select {
	case i.wake <- struct{}{}:
	default:
	}
}

// Status is the current state and the latest transitions.
func (i *Instance) Status() InstanceStatus {
	i.mu.Lock()
	defer i.mu.Unlock()
	s := i.status
	s.Transitions = append([]Transition(nil), s.Transitions...)
	return s
}

// Run runs the virtual router until ctx ends, then resigns (priority 0 when
// master), calls OnBackup, closes the Conn and returns nil. It returns an
// error when the Conn fails; it resigns first then too.
func (i *Instance) Run(ctx context.Context) error {
	i.mu.Lock()
	if i.running {
		i.mu.Unlock()
		return errors.New("vrrp: instance already ran")
	}
	i.running = true
	i.mu.Unlock()

	recv := make(chan Received)
	recvErr := make(chan error, 1)
	readerDone := make(chan struct{})
	stop := make(chan struct{})
	go func() {
		defer close(readerDone)
		for {
			r, err := i.opt.Conn.Receive()
			if err != nil {
				recvErr <- err
				return
			}
			select {
			case recv <- r:
			case <-stop:
				return
			}
		}
	}()
	finish := func(err error) error {
		i.do(i.m.Shutdown(i.opt.Clock.Now()))
		close(stop)
		cerr := i.opt.Conn.Close()
		<-readerDone
		if err == nil && cerr != nil {
			err = fmt.Errorf("vrrp: close: %w", cerr)
		}
		return err
	}

	i.applyWanted()
	i.do(i.m.Start(i.opt.Clock.Now()))
	for {
		var timer Timer
		var fire <-chan time.Time
		if dl := i.m.Deadline(); !dl.IsZero() {
			timer = i.opt.Clock.NewTimer(dl.Sub(i.opt.Clock.Now()))
			fire = timer.C()
		}
		select {
		case <-ctx.Done():
			stopTimer(timer)
			return finish(nil)
		case err := <-recvErr:
			stopTimer(timer)
			return finish(fmt.Errorf("vrrp: receive: %w", err))
		case r := <-recv:
			i.do(i.m.Receive(r.Advert, r.Src, i.opt.Clock.Now()))
		case <-fire:
			i.do(i.m.Expire(i.opt.Clock.Now()))
		case <-i.wake:
			i.applyWanted()
		}
		stopTimer(timer)
	}
}

func stopTimer(t Timer) {
	if t != nil {
		t.Stop()
	}
}

// applyWanted hands the machine the priority and fault asked for since.
func (i *Instance) applyWanted() {
	i.mu.Lock()
	reason, prio, hold, holdMax := i.fault, i.priority, i.hold, i.holdMax
	i.mu.Unlock()
	i.m.SetPreemptHold(holdMax, hold)
	now := i.opt.Clock.Now()
	if prio != i.m.Status().Priority {
		i.log.Info("vrrp priority changed", "from", i.m.Status().Priority, "to", prio, "state", i.m.State().String())
		i.do(i.m.SetPriority(prio, now))
	}
	i.do(i.m.SetFault(reason, now))
}

// do carries out the machine's actions in order and publishes the status.
func (i *Instance) do(acts []Action) {
	var tookOver *Transition
	for _, a := range acts {
		switch a.Kind {
		case ActTransition:
			i.transition(a.Transition)
			if a.Transition.To == Master {
				t := a.Transition
				tookOver = &t
			}
		case ActSend:
			i.send(a.Priority)
		case ActAnnounce:
			i.announce()
		}
	}
	if tookOver != nil && i.opt.OnAnnounced != nil {
		// The machine puts a takeover's advert and announcements in the
		// same batch as its transition: they are out now.
		i.opt.OnAnnounced(*tookOver)
	}
	i.mu.Lock()
	i.status.Status = i.m.Status()
	i.mu.Unlock()
}

func (i *Instance) transition(t Transition) {
	i.log.Info("vrrp transition", "from", t.From.String(), "to", t.To.String(), "reason", t.Reason)
	i.mu.Lock()
	h := append(i.status.Transitions, t)
	if len(h) > i.opt.History {
		h = append([]Transition(nil), h[len(h)-i.opt.History:]...)
	}
	i.status.Transitions = h
	i.mu.Unlock()
	var f func(Transition)
	switch t.To {
	case Master:
		f = i.opt.OnMaster
	case Backup, Initialize:
		f = i.opt.OnBackup
	case Fault:
		f = i.opt.OnFault
	}
	if f != nil {
		f(t)
	}
}

func (i *Instance) send(priority uint8) {
	a := &Advert{VRID: i.cfg.VRID, Priority: priority, MaxAdvertInterval: Centiseconds(i.cfg.AdvertInterval), Addrs: i.cfg.Addrs}
	if err := i.opt.Conn.Send(a); err != nil {
		i.mu.Lock()
		i.status.SendErrors++
		first := i.status.LastSendErr != err.Error()
		i.status.LastSendErr = err.Error()
		i.mu.Unlock()
		if first {
			i.log.Warn("vrrp advert not sent", "priority", priority, "err", err)
		}
	}
}

func (i *Instance) announce() {
	if i.opt.Announcer == nil {
		return
	}
	for range i.cfg.GARPCount {
		if err := i.opt.Announcer.Announce(i.cfg.Addrs); err != nil {
			i.log.Warn("vrrp announcement not sent", "err", err)
			return
		}
	}
}
