package health

import (
	"cmp"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/ipvsctl/ipvsctl/ipvsmgr"
)

// Status is what the runner knows of one checked real server, for status
// displays ("going down 2/3", the last result and since when).
type Status struct {
	Ref         ipvsmgr.ServerRef
	ServiceName string
	ServerName  string
	Type        string
	Target      string
	State       ipvsmgr.HealthState
	Since       time.Time
	Reason      string // of the last transition
	Passes      int    // in a row
	Fails       int    // in a row
	Rise, Fall  int
	LastResult  string
	LastOutcome Outcome
	LastCheck   time.Time
	// LastAge is how long ago LastCheck was (by the runner's clock); Late
	// how far its round is behind schedule, when by more than its interval.
	LastAge    time.Duration
	Late       time.Duration
	LastTook   time.Duration
	Fault      string
	Flapping   bool
	Weight     uint32 // what the checks give it while up
	Configured uint32
}

// Phase says it in a word or three: up, down, going up 1/2, going down 2/3,
// unchecked.
func (s Status) Phase() string {
	switch s.State {
	case ipvsmgr.HealthUp:
		if s.Fails > 0 {
			return fmt.Sprintf("going down %d/%d", s.Fails, s.Fall)
		}
		return "up"
	case ipvsmgr.HealthDown:
		if s.Passes > 0 {
			return fmt.Sprintf("going up %d/%d", s.Passes, s.Rise)
		}
		return "down"
	}
	return "unchecked"
}

// Status lists every checked server, ordered by service and server.
func (r *Runner) Status() []Status {
	r.mu.Lock()
	defer r.mu.Unlock()
	now := r.clock.Now()
	out := make([]Status, 0, len(r.members))
	for _, m := range r.members {
		p := m.probe
		h := m.health(now)
		w := m.check.Weight
		if h.WeightSet {
			w = h.Weight
		}
		out = append(out, Status{
			Ref: m.check.Ref, ServiceName: m.check.ServiceName, ServerName: m.check.ServerName,
			Type: p.spec.Type, Target: p.spec.Target.String(), State: p.state, Since: p.since, Reason: p.reason,
			Passes: p.passes, Fails: p.fails, Rise: p.spec.Rise, Fall: p.spec.Fall,
			LastResult: p.last.Reason, LastOutcome: p.last.Outcome, LastCheck: p.lastAt, LastTook: p.last.Duration,
			LastAge: p.lastAge(now), Late: lateOver(p, now), Fault: p.fault, Flapping: len(p.changes) >= r.cfg.FlapCount && now.Sub(p.changes[len(p.changes)-1]) < r.flapWindow(p),
			Weight: w, Configured: m.check.Weight,
		})
	}
	slices.SortFunc(out, func(a, b Status) int {
		return cmp.Or(strings.Compare(a.Ref.Service.String(), b.Ref.Service.String()),
			a.Ref.Server.Addr.Compare(b.Ref.Server.Addr), cmp.Compare(a.Ref.Server.Port, b.Ref.Server.Port))
	})
	return out
}

// lastAge is how long ago p's last result came (0 before the first).
func (p *probe) lastAge(now time.Time) time.Duration {
	if p.lastAt.IsZero() {
		return 0
	}
	return now.Sub(p.lastAt)
}

// lateOver is p's lateness at now when it counts, else 0.
func lateOver(p *probe, now time.Time) time.Duration {
	if by := p.lateness(now); p.late(by) {
		return by
	}
	return 0
}
