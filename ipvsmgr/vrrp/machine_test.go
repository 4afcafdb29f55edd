package vrrp

import (
	"fmt"
	"math/rand/v2"
	"net/netip"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

var (
	t0    = time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	self  = netip.MustParseAddr("198.18.0.2")
	lower = netip.MustParseAddr("198.18.0.1")
	upper = netip.MustParseAddr("198.18.0.3")
	vip   = netip.MustParseAddr("198.18.0.100")
)

func testConfig() Config {
	return Config{VRID: 51, Priority: 100, AdvertInterval: time.Second, Preempt: true,
		Addrs: []netip.Addr{vip}, Primary: self, GARPCount: 1}
}

// sim drives a Machine as Instance does (Expire at each Deadline) on a fake
// clock, logging every action as "TIME ACTION".
type sim struct {
	m    *Machine
	now  time.Duration
	log  []string
	last Transition
}

func (s *sim) at() time.Time { return t0.Add(s.now) }

func (s *sim) record(acts []Action) {
	for _, a := range acts {
		var what string
		switch a.Kind {
		case ActTransition:
			what = a.Transition.To.String()
			s.last = a.Transition
		case ActSend:
			what = fmt.Sprintf("send %d", a.Priority)
		case ActAnnounce:
			what = "announce"
		}
		s.log = append(s.log, fmt.Sprintf("%s %s", s.now, what))
	}
}

// advanceTo runs the timers due up to and including d.
func (s *sim) advanceTo(d time.Duration) {
	for i := 0; i < 100000; i++ {
		dl := s.m.Deadline()
		if dl.IsZero() || dl.Sub(t0) > d {
			break
		}
		s.now = dl.Sub(t0)
		s.record(s.m.Expire(dl))
	}
	s.now = d
}

// step is one event at a time since t0; the timers due before it run first.
type step struct {
	at time.Duration
	ev string // start, shutdown, fault:REASON, clear, prio:PRIORITY, hold:MAX:WHY (hold:MAX: lets go), recv:PRIORITY[@SRC][/INTERVAL_CS][#VRID]
}

func (s *sim) do(t *testing.T, st step) {
	t.Helper()
	s.advanceTo(st.at)
	kind, arg, _ := strings.Cut(st.ev, ":")
	switch kind {
	case "start":
		s.record(s.m.Start(s.at()))
	case "shutdown":
		s.record(s.m.Shutdown(s.at()))
	case "fault":
		s.record(s.m.SetFault(arg, s.at()))
	case "clear":
		s.record(s.m.SetFault("", s.at()))
	case "hold":
		max, why, _ := strings.Cut(arg, ":")
		d, err := time.ParseDuration(max)
		if err != nil {
			t.Fatal(err)
		}
		s.m.SetPreemptHold(d, why)
	case "prio":
		var p uint8
		fmt.Sscan(arg, &p)
		s.record(s.m.SetPriority(p, s.at()))
	case "recv":
		a := &Advert{VRID: 51, MaxAdvertInterval: 100, Addrs: []netip.Addr{vip}}
		src := upper
		var prio int
		rest := arg
		if i := strings.IndexAny(rest, "@/#"); i >= 0 {
			rest = arg[i:]
			fmt.Sscan(arg[:i], &prio)
		} else {
			fmt.Sscan(arg, &prio)
			rest = ""
		}
		for rest != "" {
			end := strings.IndexAny(rest[1:], "@/#") + 1
			if end == 0 {
				end = len(rest)
			}
			val := rest[1:end]
			switch rest[0] {
			case '@':
				src = netip.MustParseAddr(val)
			case '/':
				fmt.Sscan(val, &a.MaxAdvertInterval)
			case '#':
				var v uint8
				fmt.Sscan(val, &v)
				a.VRID = v
			}
			rest = rest[end:]
		}
		a.Priority = uint8(prio)
		s.record(s.m.Receive(a, src, s.at()))
	default:
		t.Fatalf("bad step %q", st.ev)
	}
}

// every returns recv steps of ev at from, from+interval, ... before until.
func every(from, interval, until time.Duration, ev string) []step {
	var out []step
	for at := from; at < until; at += interval {
		out = append(out, step{at, ev})
	}
	return out
}

func script(parts ...any) []step {
	var out []step
	for _, p := range parts {
		switch p := p.(type) {
		case step:
			out = append(out, p)
		case []step:
			out = append(out, p...)
		}
	}
	return out
}

// With priority 100 and a 1 s interval: Skew_Time = 156/256 s = 609.375 ms,
// Master_Down_Interval = 3.609375 s.
func TestMachineTransitions(t *testing.T) {
	const ms = time.Millisecond
	for _, tc := range []struct {
		name   string
		cfg    func(*Config)
		steps  []step
		until  time.Duration
		want   []string
		state  State
		reason string // in the last transition
	}{
		{name: "startup: backup, no master: takes over after Master_Down_Interval, adverts every interval",
			steps: script(step{0, "start"}), until: 5700 * ms,
			want:  []string{"0s backup", "3.609375s master", "3.609375s send 100", "3.609375s announce", "4.609375s send 100", "5.609375s send 100"},
			state: Master, reason: "no advert from the master for the master down interval (3.609375s)"},
		{name: "startup: priority 255 owner takes over at once",
			cfg: func(c *Config) { c.Priority = 255 }, steps: script(step{0, "start"}), until: 1500 * ms,
			want:  []string{"0s master", "0s send 255", "0s announce", "1s send 255"},
			state: Master, reason: "startup: address owner (priority 255)"},
		{name: "backup: a master of higher priority keeps it backup; its silence hands over",
			steps: script(step{0, "start"}, every(500*ms, time.Second, 10*time.Second, "recv:200")), until: 15 * time.Second,
			want:  []string{"0s backup", "13.109375s master", "13.109375s send 100", "13.109375s announce", "14.109375s send 100"},
			state: Master},
		{name: "backup: learns Master_Adver_Interval from the master's adverts (20 cs: down after 721.875 ms)",
			steps: script(step{0, "start"}, every(100*ms, 200*ms, 2*time.Second, "recv:200/20")), until: 3 * time.Second,
			want:  []string{"0s backup", "2.621875s master", "2.621875s send 100", "2.621875s announce"},
			state: Master},
		{name: "backup: equal priority is a master too (ties are for masters to break)",
			steps: script(step{0, "start"}, every(500*ms, time.Second, 10*time.Second, "recv:100@198.18.0.1")), until: 10 * time.Second,
			want: []string{"0s backup"}, state: Backup},
		{name: "backup: priority 0 resignation: takes over after Skew_Time only",
			steps: script(step{0, "start"}, step{500 * ms, "recv:200"}, step{1500 * ms, "recv:0"}), until: 3 * time.Second,
			want:  []string{"0s backup", "2.109375s master", "2.109375s send 100", "2.109375s announce"},
			state: Master, reason: "the master resigned (priority 0), skew time (609.375ms)"},
		{name: "backup: priority 0 with a learned interval of 10 cs: skew 60.9375 ms",
			steps: script(step{0, "start"}, step{500 * ms, "recv:200/10"}, step{600 * ms, "recv:0/10"}), until: time.Second,
			want:  []string{"0s backup", "660.9375ms master", "660.9375ms send 100", "660.9375ms announce"},
			state: Master},
		{name: "backup: preemption of a lower-priority master: its adverts are discarded",
			steps: script(step{0, "start"}, every(500*ms, time.Second, 10*time.Second, "recv:50")), until: 4 * time.Second,
			want:  []string{"0s backup", "3.609375s master", "3.609375s send 100", "3.609375s announce"},
			state: Master, reason: "preempting a master of lower priority 50"},
		{name: "backup: preemption off: a lower-priority master stays master",
			cfg:   func(c *Config) { c.Preempt = false },
			steps: script(step{0, "start"}, every(500*ms, time.Second, 10*time.Second, "recv:50")), until: 10 * time.Second,
			want: []string{"0s backup"}, state: Backup},
		{name: "backup: preempt_delay 5 s: the lower master is accepted for 5 s after it is first heard",
			cfg:   func(c *Config) { c.PreemptDelay = 5 * time.Second },
			steps: script(step{0, "start"}, every(500*ms, time.Second, 20*time.Second, "recv:50")), until: 9 * time.Second,
			// Last accepted at 4.5 s (4 s after 0.5 s); discarded from 5.5 s.
			want:  []string{"0s backup", "8.109375s master", "8.109375s send 100", "8.109375s announce"},
			state: Master},
		{name: "backup: preempt_delay restarts when a master of higher priority comes between",
			cfg: func(c *Config) { c.PreemptDelay = 3 * time.Second },
			steps: script(step{0, "start"}, step{500 * ms, "recv:50"}, step{1500 * ms, "recv:50"}, step{2500 * ms, "recv:200"},
				every(3500*ms, time.Second, 20*time.Second, "recv:50")), until: 9500 * ms,
			// Lower again from 3.5 s: accepted to 5.5 s, discarded from 6.5 s: down at 5.5 + 3.609375.
			want: []string{"0s backup", "9.109375s master", "9.109375s send 100", "9.109375s announce"}, state: Master},
		{name: "backup: another VRID is ignored",
			steps: script(step{0, "start"}, every(500*ms, time.Second, 10*time.Second, "recv:200#52")), until: 4 * time.Second,
			want: []string{"0s backup", "3.609375s master", "3.609375s send 100", "3.609375s announce"}, state: Master},
		{name: "master: an advert of higher priority makes it backup, with the sender's interval",
			steps: script(step{0, "start"}, step{4 * time.Second, "recv:200/50"}), until: 6 * time.Second,
			// Down interval with 50 cs: 1.5 s + 304.6875 ms.
			want:  []string{"0s backup", "3.609375s master", "3.609375s send 100", "3.609375s announce", "4s backup", "5.8046875s master", "5.8046875s send 100", "5.8046875s announce"},
			state: Master},
		{name: "master: equal priority from a higher address wins the tie",
			steps: script(step{0, "start"}, step{4 * time.Second, "recv:100@198.18.0.3"}), until: 5 * time.Second,
			want:  []string{"0s backup", "3.609375s master", "3.609375s send 100", "3.609375s announce", "4s backup"},
			state: Backup, reason: "advert of equal priority 100 from higher address 198.18.0.3"},
		{name: "master: equal priority from a lower address loses the tie",
			steps: script(step{0, "start"}, step{4 * time.Second, "recv:100@198.18.0.1"}), until: 5 * time.Second,
			want:  []string{"0s backup", "3.609375s master", "3.609375s send 100", "3.609375s announce", "4.609375s send 100"},
			state: Master},
		{name: "master: lower priority is discarded",
			steps: script(step{0, "start"}, step{4 * time.Second, "recv:50"}), until: 5 * time.Second,
			want:  []string{"0s backup", "3.609375s master", "3.609375s send 100", "3.609375s announce", "4.609375s send 100"},
			state: Master},
		{name: "master: another's priority 0 is answered by an advert at once",
			cfg:   func(c *Config) { c.Priority = 255 },
			steps: script(step{0, "start"}, step{300 * ms, "recv:0"}), until: 1500 * ms,
			want:  []string{"0s master", "0s send 255", "0s announce", "300ms send 255", "1.3s send 255"},
			state: Master},
		{name: "master: shutdown resigns with priority 0",
			cfg:   func(c *Config) { c.Priority = 255 },
			steps: script(step{0, "start"}, step{500 * ms, "shutdown"}), until: 5 * time.Second,
			want:  []string{"0s master", "0s send 255", "0s announce", "500ms send 0", "500ms initialize"},
			state: Initialize, reason: "shutdown"},
		{name: "backup: shutdown sends nothing",
			steps: script(step{0, "start"}, step{500 * ms, "shutdown"}), until: 5 * time.Second,
			want: []string{"0s backup", "500ms initialize"}, state: Initialize},
		{name: "master: fault resigns with priority 0 and stays out; cleared, it starts as backup",
			steps: script(step{0, "start"}, step{4 * time.Second, "fault:eth1 down"}, every(4500*ms, time.Second, 9*time.Second, "recv:50"),
				step{9 * time.Second, "clear"}, every(9500*ms, time.Second, 11*time.Second, "recv:200")), until: 11 * time.Second,
			want: []string{"0s backup", "3.609375s master", "3.609375s send 100", "3.609375s announce",
				"4s send 0", "4s fault", "9s backup"},
			state: Backup},
		{name: "backup: fault, then the same fault again, changes nothing more",
			steps: script(step{0, "start"}, step{time.Second, "fault:ip_vs missing"}, step{2 * time.Second, "fault:ip_vs missing"}), until: 10 * time.Second,
			want: []string{"0s backup", "1s fault"}, state: Fault, reason: "ip_vs missing"},
		{name: "fault before startup: starts in fault",
			steps: script(step{0, "fault:reconcile failing"}, step{0, "start"}), until: 10 * time.Second,
			want: []string{"0s fault"}, state: Fault, reason: "reconcile failing"},
		{name: "backup: a priority raised as it runs: the master down timer running takes the new skew, no transition of its own",
			// Armed at 0.5 s for 3.609375 s; at priority 200 the skew is 218.75 ms: down at 0.5 + 3.21875 s.
			steps: script(step{0, "start"}, step{500 * ms, "recv:200"}, step{time.Second, "prio:200"}), until: 4 * time.Second,
			want:  []string{"0s backup", "3.71875s master", "3.71875s send 200", "3.71875s announce"},
			state: Master, reason: "no advert from the master for the master down interval (3.21875s)"},
		{name: "backup: a priority lowered as it runs: the timer running lengthens",
			// At priority 1 the skew is 996.09375 ms: down at 0.5 + 3.99609375 s.
			steps: script(step{0, "start"}, step{500 * ms, "recv:200"}, step{time.Second, "prio:1"}), until: 4496 * ms,
			want: []string{"0s backup"}, state: Backup},
		{name: "backup: raised above its master, it preempts on the master's next advert",
			steps: script(step{0, "start"}, every(500*ms, time.Second, 2*time.Second, "recv:150"), step{2 * time.Second, "prio:200"},
				every(2500*ms, time.Second, 10*time.Second, "recv:150")), until: 5 * time.Second,
			// The advert of 1.5 s armed the timer (3.21875 s at 200); those from 2.5 s are discarded.
			want:  []string{"0s backup", "4.71875s master", "4.71875s send 200", "4.71875s announce"},
			state: Master, reason: "preempting a master of lower priority 150"},
		{name: "backup: a preemption held for the sync daemon waits until the hold lets go",
			// Due from 0.5 s; adverts accepted to 2.5 s, the one of 3.5 s discarded: down at 2.5 + 3.609375 s.
			steps: script(step{0, "start"}, step{100 * ms, "hold:30s:12 of 100 connections"}, every(500*ms, time.Second, 3*time.Second, "recv:50"),
				step{3 * time.Second, "hold:30s:"}, every(3500*ms, time.Second, 20*time.Second, "recv:50")), until: 7 * time.Second,
			want:  []string{"0s backup", "6.109375s master", "6.109375s send 100", "6.109375s announce"},
			state: Master, reason: "preempting a master of lower priority 50 after waiting 3s for 12 of 100 connections"},
		{name: "backup: a held preemption goes when preempt_sync_wait runs out after the preempt delay",
			cfg: func(c *Config) { c.PreemptDelay = 2 * time.Second },
			// Due at 2.5 s, held to 7.5 s: the advert of 7.5 s is discarded, down at 6.5 + 3.609375 s.
			steps: script(step{0, "hold:5s:the sync daemon's connections, not compared yet"}, step{0, "start"}, every(500*ms, time.Second, 20*time.Second, "recv:50")), until: 11 * time.Second,
			want:  []string{"0s backup", "10.109375s master", "10.109375s send 100", "10.109375s announce"},
			state: Master, reason: "preempting a master of lower priority 50 after waiting 5s (preempt_sync_wait) for the sync daemon's connections, not compared yet"},
		{name: "backup: a hold without preempt_sync_wait does nothing",
			steps: script(step{0, "start"}, step{100 * ms, "hold:0s:12 of 100 connections"}, every(500*ms, time.Second, 20*time.Second, "recv:50")), until: 4 * time.Second,
			// Discarded from the first advert: the startup's timer runs out.
			want:  []string{"0s backup", "3.609375s master", "3.609375s send 100", "3.609375s announce"},
			state: Master, reason: "preempting a master of lower priority 50"},
		{name: "backup: raised above its master without preemption, it stays backup",
			cfg: func(c *Config) { c.Preempt = false },
			steps: script(step{0, "start"}, every(500*ms, time.Second, 2*time.Second, "recv:150"), step{2 * time.Second, "prio:200"},
				every(2500*ms, time.Second, 10*time.Second, "recv:150")), until: 10 * time.Second,
			want: []string{"0s backup"}, state: Backup},
		{name: "master: a new priority goes in the next advert, with no transition",
			cfg:   func(c *Config) { c.Priority = 255 },
			steps: script(step{0, "start"}, step{1500 * ms, "prio:150"}, step{2500 * ms, "prio:0"}), until: 3500 * ms,
			want:  []string{"0s master", "0s send 255", "0s announce", "1s send 255", "2s send 150", "3s send 150"},
			state: Master},
		{name: "owner: fault cleared takes over at once",
			cfg:   func(c *Config) { c.Priority = 255 },
			steps: script(step{0, "fault:x"}, step{0, "start"}, step{time.Second, "clear"}), until: 1500 * ms,
			want: []string{"0s fault", "1s master", "1s send 255", "1s announce"}, state: Master,
			reason: "fault cleared: address owner (priority 255)"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cfg := testConfig()
			if tc.cfg != nil {
				tc.cfg(&cfg)
			}
			if err := cfg.Validate(); err != nil {
				t.Fatal(err)
			}
			s := &sim{m: NewMachine(cfg)}
			for _, st := range tc.steps {
				if st.at <= tc.until {
					s.do(t, st)
				}
			}
			s.advanceTo(tc.until)
			if diff := cmp.Diff(tc.want, s.log); diff != "" {
				t.Errorf("actions (-want +got):\n%s", diff)
			}
			if got := s.m.State(); got != tc.state {
				t.Errorf("state %s, want %s", got, tc.state)
			}
			if tc.reason != "" && s.last.Reason != tc.reason {
				t.Errorf("last transition's reason %q, want %q", s.last.Reason, tc.reason)
			}
		})
	}
}

func TestMachineReasons(t *testing.T) {
	cfg := testConfig()
	m := NewMachine(cfg)
	var ts []Transition
	keep := func(acts []Action) {
		for _, a := range acts {
			if a.Kind == ActTransition {
				ts = append(ts, a.Transition)
			}
		}
	}
	keep(m.Start(t0))
	keep(m.Receive(&Advert{VRID: 51, Priority: 200, MaxAdvertInterval: 100}, upper, t0.Add(time.Second)))
	keep(m.Receive(&Advert{VRID: 51, Priority: 0, MaxAdvertInterval: 100}, upper, t0.Add(2*time.Second)))
	keep(m.Expire(m.Deadline()))
	keep(m.Receive(&Advert{VRID: 51, Priority: 100, MaxAdvertInterval: 100}, upper, t0.Add(3*time.Second)))
	keep(m.Receive(&Advert{VRID: 51, Priority: 50, MaxAdvertInterval: 100}, upper, t0.Add(3500*time.Millisecond)))
	keep(m.Expire(m.Deadline()))
	keep(m.SetFault("eth1 down", t0.Add(10*time.Second)))
	keep(m.SetFault("", t0.Add(11*time.Second)))
	keep(m.Shutdown(t0.Add(12 * time.Second)))
	var got []string
	for _, tr := range ts {
		got = append(got, tr.String())
	}
	want := []string{
		"2026-01-02T03:04:05Z initialize -> backup: startup",
		"2026-01-02T03:04:07.609375Z backup -> master: the master resigned (priority 0), skew time (609.375ms)",
		"2026-01-02T03:04:08Z master -> backup: advert of equal priority 100 from higher address 198.18.0.3",
		"2026-01-02T03:04:11.609375Z backup -> master: preempting a master of lower priority 50",
		"2026-01-02T03:04:15Z master -> fault: eth1 down",
		"2026-01-02T03:04:16Z fault -> backup: fault cleared",
		"2026-01-02T03:04:17Z backup -> initialize: shutdown",
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("transitions (-want +got):\n%s", diff)
	}
	st := m.Status()
	if st.State != Initialize || st.MasterDownInterval != 3609375*time.Microsecond {
		t.Errorf("status %+v", st)
	}
}

func TestMachineGARPRepeat(t *testing.T) {
	cfg := testConfig()
	cfg.Priority, cfg.GARPCount, cfg.GARPRepeatDelay = 255, 5, 5*time.Second
	s := &sim{m: NewMachine(cfg)}
	s.do(t, step{0, "start"})
	s.advanceTo(6 * time.Second)
	if got := slices.DeleteFunc(s.log, func(l string) bool { return strings.Contains(l, "send") }); !slices.Equal(got, []string{"0s master", "0s announce", "5s announce"}) {
		t.Errorf("got %q", got)
	}
	// Leaving master before the repeat cancels it.
	cfg.Priority = 100
	s = &sim{m: NewMachine(cfg)}
	s.do(t, step{0, "start"})
	s.do(t, step{4 * time.Second, "recv:200"})
	s.advanceTo(7 * time.Second)
	if n := strings.Count(strings.Join(s.log, "\n"), "announce"); n != 1 {
		t.Errorf("%d announcements, want 1: %q", n, s.log)
	}
}

// routers elect among themselves over a lossless fake network: whatever the
// start times, exactly one master remains, of the highest priority. (Between
// equal priorities the higher address wins only when both are master at once:
// a backup accepts a master of its own priority.)
func TestMachineElection(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	for round := range 200 {
		n := 2 + r.IntN(3)
		type router struct {
			m     *Machine
			addr  netip.Addr
			start time.Time
		}
		var rs []*router
		for i := range n {
			cfg := testConfig()
			cfg.Priority = uint8(1 + r.IntN(3)*100) // ties are frequent
			cfg.Primary = netip.AddrFrom4([4]byte{198, 18, 0, byte(10 + i)})
			cfg.AdvertInterval = time.Duration(1+r.IntN(3)) * 100 * time.Millisecond
			rs = append(rs, &router{m: NewMachine(cfg), addr: cfg.Primary, start: t0.Add(time.Duration(r.IntN(3000)) * time.Millisecond)})
		}
		now := t0
		var deliver func(from *router, acts []Action)
		deliver = func(from *router, acts []Action) {
			for _, a := range acts {
				if a.Kind != ActSend {
					continue
				}
				adv := &Advert{VRID: 51, Priority: a.Priority, MaxAdvertInterval: Centiseconds(from.m.cfg.AdvertInterval)}
				for _, to := range rs {
					if to != from {
						deliver(to, to.m.Receive(adv, from.addr, now))
					}
				}
			}
		}
		for step := 0; step < 100000; step++ {
			// The next event: a start or a timer.
			var next *router
			var at time.Time
			for _, x := range rs {
				t := x.m.Deadline()
				if x.m.State() == Initialize {
					t = x.start
				}
				if !t.IsZero() && (next == nil || t.Before(at)) {
					next, at = x, t
				}
			}
			if at.After(t0.Add(20 * time.Second)) {
				break
			}
			now = at
			if next.m.State() == Initialize {
				deliver(next, next.m.Start(now))
			} else {
				deliver(next, next.m.Expire(now))
			}
		}
		best := rs[0]
		var masters []netip.Addr
		for _, x := range rs {
			if x.m.cfg.Priority > best.m.cfg.Priority {
				best = x
			}
			if x.m.State() == Master {
				masters = append(masters, x.addr)
			}
		}
		if len(masters) != 1 {
			t.Fatalf("round %d: masters %v, want one", round, masters)
		}
		for _, x := range rs {
			if x.addr == masters[0] && x.m.cfg.Priority != best.m.cfg.Priority {
				t.Fatalf("round %d: master %s has priority %d, not the highest %d", round, x.addr, x.m.cfg.Priority, best.m.cfg.Priority)
			}
		}
	}
}

func TestConfigValidate(t *testing.T) {
	for _, tc := range []struct {
		mod  func(*Config)
		want string
	}{
		{func(c *Config) { c.VRID = 0 }, "vrid:"},
		{func(c *Config) { c.Priority = 0 }, "priority:"},
		{func(c *Config) { c.AdvertInterval = 5 * time.Millisecond }, "advert_interval:"},
		{func(c *Config) { c.AdvertInterval = 41 * time.Second }, "advert_interval:"},
		{func(c *Config) { c.Addrs = nil }, "addresses:"},
		{func(c *Config) { c.Addrs = append(c.Addrs, netip.MustParseAddr("2001:db8::1")) }, "addresses:"},
		{func(c *Config) { c.PreemptDelay = -1 }, "preempt_delay:"},
		{func(c *Config) { c.GARPCount = -1 }, "garp_count:"},
	} {
		c := testConfig()
		tc.mod(&c)
		if err := c.Validate(); err == nil || !strings.HasPrefix(err.Error(), tc.want) {
			t.Errorf("got %v, want %s...", err, tc.want)
		}
	}
}
