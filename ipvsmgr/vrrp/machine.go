package vrrp

import (
	"fmt"
	"net/netip"
	"time"
)

// State is a virtual router's state (RFC 5798 section 6.4), plus Fault: the
// director itself is unhealthy and stays out of the election.
type State uint8

const (
	Initialize State = iota
	Backup
	Master
	Fault
)

func (s State) String() string {
	switch s {
	case Initialize:
		return "initialize"
	case Backup:
		return "backup"
	case Master:
		return "master"
	case Fault:
		return "fault"
	}
	return fmt.Sprintf("state(%d)", uint8(s))
}

// Transition is one change of state, kept for status.
type Transition struct {
	From, To State
	Reason   string
	At       time.Time
	// Priority is the router's own priority at the change.
	Priority uint8
}

func (t Transition) String() string {
	return fmt.Sprintf("%s %s -> %s: %s", t.At.Format(time.RFC3339Nano), t.From, t.To, t.Reason)
}

// OwnerPriority is the priority of the router that owns the virtual addresses:
// it takes over at once.
const OwnerPriority = 255

// Config is one virtual router as this director runs it.
type Config struct {
	VRID     uint8 // 1..255
	Priority uint8 // 1..255; 255 = address owner
	// AdvertInterval is sent in centiseconds: 10 ms .. 40.95 s.
	AdvertInterval time.Duration
	// Preempt lets this router take over from a master of lower priority
	// (RFC 5798's Preempt_Mode, true there by default); PreemptDelay holds it
	// back that long after it first hears such a master.
	Preempt      bool
	PreemptDelay time.Duration
	// Addrs are the virtual addresses, all of one family.
	Addrs []netip.Addr
	// Primary is this router's own address, the source of its adverts: ties
	// in priority go to the higher one. Instance fills it from the Conn.
	Primary netip.Addr
	// GARPCount gratuitous ARPs (unsolicited NAs) per address on becoming
	// master, and as many again GARPRepeatDelay later (0: no repeat).
	GARPCount       int
	GARPRepeatDelay time.Duration
}

// Validate checks the configuration, naming the field at fault.
func (c *Config) Validate() error {
	switch {
	case c.VRID == 0:
		return fmt.Errorf("vrid: 0 is out of range 1..255")
	case c.Priority == 0:
		return fmt.Errorf("priority: 0 is out of range 1..255 (0 is only sent on resigning)")
	case c.AdvertInterval < 10*time.Millisecond || c.AdvertInterval > maxInterval*10*time.Millisecond:
		return fmt.Errorf("advert_interval: %s is out of range 10ms..40.95s", c.AdvertInterval)
	case len(c.Addrs) == 0:
		return fmt.Errorf("addresses: a virtual router needs at least one")
	case len(c.Addrs) > maxAddrCount:
		return fmt.Errorf("addresses: %d is more than 255", len(c.Addrs))
	case c.PreemptDelay < 0:
		return fmt.Errorf("preempt_delay: %s is negative", c.PreemptDelay)
	case c.GARPCount < 0:
		return fmt.Errorf("garp_count: %d is negative", c.GARPCount)
	case c.GARPRepeatDelay < 0:
		return fmt.Errorf("garp_repeat_delay: %s is negative", c.GARPRepeatDelay)
	}
	v4 := c.Addrs[0].Unmap().Is4()
	for _, a := range c.Addrs {
		if !a.IsValid() || a.Unmap().Is4() != v4 {
			return fmt.Errorf("addresses: %s is not of the family of %s", a, c.Addrs[0])
		}
	}
	return nil
}

// ActionKind is what the machine asks its runner to do.
type ActionKind uint8

const (
	// ActTransition: run the callback of the new state (add or remove VIPs).
	ActTransition ActionKind = iota + 1
	// ActSend: send an advert with Priority.
	ActSend
	// ActAnnounce: gratuitous ARPs / unsolicited NAs for the addresses.
	ActAnnounce
)

// Action is one step for the runner, in the order given.
type Action struct {
	Kind       ActionKind
	Priority   uint8      // ActSend
	Transition Transition // ActTransition
}

func (a Action) String() string {
	switch a.Kind {
	case ActTransition:
		return fmt.Sprintf("%s -> %s (%s)", a.Transition.From, a.Transition.To, a.Transition.Reason)
	case ActSend:
		return fmt.Sprintf("send priority %d", a.Priority)
	case ActAnnounce:
		return "announce"
	}
	return "?"
}

// Machine is RFC 5798's state machine as a pure function of events and their
// times: each method takes the time of the event and returns the actions to
// carry out, and Deadline says when Expire is next due. It is not safe for
// concurrent use; Instance runs one.
type Machine struct {
	cfg   Config
	state State
	fault string

	masterAdverInterval time.Duration
	masterDown          time.Time // Master_Down_Timer (Backup)
	downCause           string    // why it would run out
	downFor             time.Duration
	downReason          string    // the takeover's reason when it runs out
	adver               time.Time // Adver_Timer (Master)
	garpRepeat          time.Time
	lowerSince          time.Time // first advert from a lower-priority master (preempt delay)
	// hold is why the runner holds a preemption back ("": it does not);
	// holding is what a due preemption waits for now ("": none waits),
	// waited what one waited for before it went (for its reason); holdMax
	// bounds the wait.
	hold, holding, waited string
	holdMax               time.Duration

	// What was last heard, for status.
	master         netip.Addr
	masterPriority uint8
	lastAdvert     time.Time
}

// NewMachine returns a machine in Initialize; cfg must be valid.
func NewMachine(cfg Config) *Machine {
	return &Machine{cfg: cfg, masterAdverInterval: cfg.AdvertInterval}
}

// SetPreemptHold holds a preemption back for why ("" lets it go), for at
// most max after it is due (PreemptDelay past; max 0: no hold). It is the
// runner's to say, as the preemption is due (Status.PreemptDue), what the
// preemption waits for (the sync daemon catching up with the master's
// connections); it takes effect at the master's next advert.
func (m *Machine) SetPreemptHold(max time.Duration, why string) {
	m.holdMax, m.hold = max, why
	if max <= 0 {
		m.hold = ""
	}
}

// State is the current state.
func (m *Machine) State() State { return m.state }

// SkewTime is ((256 - Priority) * Master_Adver_Interval) / 256.
func (m *Machine) SkewTime() time.Duration {
	return time.Duration(256-int64(m.cfg.Priority)) * m.masterAdverInterval / 256
}

// MasterDownInterval is 3 * Master_Adver_Interval + Skew_Time.
func (m *Machine) MasterDownInterval() time.Duration {
	return 3*m.masterAdverInterval + m.SkewTime()
}

// Deadline is when Expire must next run; zero when no timer runs.
func (m *Machine) Deadline() time.Time {
	var d time.Time
	for _, t := range []time.Time{m.masterDown, m.adver, m.garpRepeat} {
		if !t.IsZero() && (d.IsZero() || t.Before(d)) {
			d = t
		}
	}
	return d
}

func (m *Machine) transition(to State, reason string, now time.Time) Action {
	t := Transition{From: m.state, To: to, Reason: reason, At: now, Priority: m.cfg.Priority}
	m.state = to
	m.masterDown, m.adver, m.garpRepeat, m.lowerSince = time.Time{}, time.Time{}, time.Time{}, time.Time{}
	m.holding, m.waited = "", ""
	return Action{Kind: ActTransition, Transition: t}
}

func (m *Machine) becomeMaster(reason string, now time.Time) []Action {
	acts := []Action{m.transition(Master, reason, now), {Kind: ActSend, Priority: m.cfg.Priority}}
	m.adver = now.Add(m.cfg.AdvertInterval)
	if m.cfg.GARPCount > 0 {
		acts = append(acts, Action{Kind: ActAnnounce})
		if m.cfg.GARPRepeatDelay > 0 {
			m.garpRepeat = now.Add(m.cfg.GARPRepeatDelay)
		}
	}
	m.master, m.masterPriority = m.cfg.Primary, m.cfg.Priority
	return acts
}

func (m *Machine) becomeBackup(reason string, interval time.Duration, now time.Time) []Action {
	act := m.transition(Backup, reason, now)
	m.masterAdverInterval = interval
	m.armMasterDown(m.MasterDownInterval(), "no advert from the master for the master down interval", now)
	return []Action{act}
}

func (m *Machine) armMasterDown(d time.Duration, reason string, now time.Time) {
	m.masterDown = now.Add(d)
	m.downCause, m.downFor = reason, d
	m.downReason = fmt.Sprintf("%s (%s)", reason, d)
}

// SetPriority changes this router's priority as it runs (node set
// --priority), with no transition of its own: a master sends the new one in
// its next advert; a backup's Skew_Time, and so the Master_Down_Timer that
// runs, follow it at once (the timer keeps its start, the last advert
// heard, and its length takes the new skew). The election then goes on as
// RFC 5798 says: with Preempt, a backup raised above its master discards
// the master's next advert and takes over when the timer runs out; a master
// lowered below a backup that preempts is taken over from.
func (m *Machine) SetPriority(p uint8, now time.Time) []Action {
	if p == 0 || p == m.cfg.Priority {
		return nil
	}
	oldSkew := m.SkewTime()
	m.cfg.Priority = p
	switch m.state {
	case Master:
		m.masterPriority = p
	case Backup:
		if !m.masterDown.IsZero() {
			// Both lengths the timer is armed with, the master down interval
			// and the skew time alone (after a resignation), have one skew.
			d := m.downFor + m.SkewTime() - oldSkew
			m.armMasterDown(d, m.downCause, m.masterDown.Add(-m.downFor))
		}
	}
	return nil
}

// Start is RFC 5798's Startup event.
func (m *Machine) Start(now time.Time) []Action {
	if m.state != Initialize {
		return nil
	}
	return m.startup("startup", now)
}

func (m *Machine) startup(reason string, now time.Time) []Action {
	if m.fault != "" {
		return []Action{m.transition(Fault, m.fault, now)}
	}
	if m.cfg.Priority == OwnerPriority {
		return m.becomeMaster(reason+": address owner (priority 255)", now)
	}
	return m.becomeBackup(reason, m.cfg.AdvertInterval, now)
}

// Shutdown is RFC 5798's Shutdown event: a master resigns with priority 0.
func (m *Machine) Shutdown(now time.Time) []Action {
	var acts []Action
	switch m.state {
	case Initialize:
		return nil
	case Master:
		acts = append(acts, Action{Kind: ActSend, Priority: 0})
	}
	return append(acts, m.transition(Initialize, "shutdown", now))
}

// SetFault puts the router in Fault for reason (a master first resigns with
// priority 0); an empty reason clears the fault and starts it again.
func (m *Machine) SetFault(reason string, now time.Time) []Action {
	was := m.fault
	m.fault = reason
	switch {
	case m.state == Initialize, reason == was:
		return nil
	case reason == "":
		return m.startup("fault cleared", now)
	case m.state == Fault:
		return nil
	case m.state == Master:
		return []Action{{Kind: ActSend, Priority: 0}, m.transition(Fault, reason, now)}
	}
	return []Action{m.transition(Fault, reason, now)}
}

// Receive handles an advert for this VRID from src, already checked (TTL,
// version, checksum).
func (m *Machine) Receive(a *Advert, src netip.Addr, now time.Time) []Action {
	if a.VRID != m.cfg.VRID {
		return nil
	}
	m.master, m.masterPriority, m.lastAdvert = src, a.Priority, now
	switch m.state {
	case Backup:
		m.receiveBackup(a, now)
	case Master:
		return m.receiveMaster(a, src, now)
	}
	return nil
}

func (m *Machine) receiveBackup(a *Advert, now time.Time) {
	if a.Priority == 0 {
		m.armMasterDown(m.SkewTime(), "the master resigned (priority 0), skew time", now)
		return
	}
	lower := a.Priority < m.cfg.Priority
	if lower && m.cfg.Preempt {
		if m.lowerSince.IsZero() {
			m.lowerSince = now
		}
		if due := now.Sub(m.lowerSince) - m.cfg.PreemptDelay; due >= 0 {
			if m.hold != "" && due < m.holdMax {
				// Held: accepted, as within the delay.
				m.holding = m.hold
			} else {
				switch {
				case m.hold != "":
					m.waited = fmt.Sprintf(" after waiting %s (preempt_sync_wait) for %s", m.holdMax, m.hold)
				case m.holding != "":
					m.waited = fmt.Sprintf(" after waiting %s for %s", due.Round(10*time.Millisecond), m.holding)
				}
				// Discarded: the master down timer runs out and this
				// router takes over.
				m.holding = ""
				m.downCause = fmt.Sprintf("preempting a master of lower priority %d%s", a.Priority, m.waited)
				m.downReason = m.downCause
				return
			}
		}
	} else {
		m.lowerSince, m.holding, m.waited = time.Time{}, "", ""
	}
	m.masterAdverInterval = a.Interval()
	m.armMasterDown(m.MasterDownInterval(), "no advert from the master for the master down interval", now)
}

func (m *Machine) receiveMaster(a *Advert, src netip.Addr, now time.Time) []Action {
	if a.Priority == 0 {
		// Another master resigned: assert this one at once.
		m.adver = now.Add(m.cfg.AdvertInterval)
		return []Action{{Kind: ActSend, Priority: m.cfg.Priority}}
	}
	var reason string
	switch {
	case a.Priority > m.cfg.Priority:
		reason = fmt.Sprintf("advert of higher priority %d from %s", a.Priority, src)
	case a.Priority == m.cfg.Priority && src.Compare(m.cfg.Primary) > 0:
		reason = fmt.Sprintf("advert of equal priority %d from higher address %s", a.Priority, src)
	default:
		m.master, m.masterPriority = m.cfg.Primary, m.cfg.Priority
		return nil
	}
	return m.becomeBackup(reason, a.Interval(), now)
}

// Expire runs the timers due at now.
func (m *Machine) Expire(now time.Time) []Action {
	switch m.state {
	case Backup:
		if !m.masterDown.IsZero() && !now.Before(m.masterDown) {
			return m.becomeMaster(m.downReason, now)
		}
	case Master:
		var acts []Action
		if !m.adver.IsZero() && !now.Before(m.adver) {
			acts = append(acts, Action{Kind: ActSend, Priority: m.cfg.Priority})
			m.adver = m.adver.Add(m.cfg.AdvertInterval)
			if !m.adver.After(now) {
				m.adver = now.Add(m.cfg.AdvertInterval)
			}
		}
		if !m.garpRepeat.IsZero() && !now.Before(m.garpRepeat) {
			acts = append(acts, Action{Kind: ActAnnounce})
			m.garpRepeat = time.Time{}
		}
		return acts
	}
	return nil
}

// Status is what the machine knows, for `ipvsctl node show` and the API.
type Status struct {
	State    State
	Priority uint8
	// Fault is why the router is in Fault.
	Fault string
	// Master is the current master's address (this router's own when it is
	// master) and MasterPriority its priority; LastAdvert is when an advert
	// was last received.
	Master              netip.Addr
	MasterPriority      uint8
	LastAdvert          time.Time
	MasterAdverInterval time.Duration
	MasterDownInterval  time.Duration
	// PreemptDue: a master of lower priority is heard and this backup
	// would preempt it (now, or when PreemptDelay has passed): the time to
	// tell it whether to hold (SetPreemptHold). PreemptWait is what a
	// preemption that is due waits for ("" when none waits).
	PreemptDue  bool
	PreemptWait string
}

// Status reports the machine's state.
func (m *Machine) Status() Status {
	return Status{State: m.state, Priority: m.cfg.Priority, Fault: m.fault, Master: m.master,
		MasterPriority: m.masterPriority, LastAdvert: m.lastAdvert,
		MasterAdverInterval: m.masterAdverInterval, MasterDownInterval: m.MasterDownInterval(),
		PreemptDue: m.state == Backup && !m.lowerSince.IsZero(), PreemptWait: m.holding}
}
