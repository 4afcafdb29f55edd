package ipvsmgr

import "slices"

// ServerHealth is what the checks say of one real server of one service.
type ServerHealth struct {
	State HealthState
	// Weight, when WeightSet, is the weight to give the server while it is
	// up instead of the configured one: the slow-start ramp, an agent's
	// percentage, an exec check's dynamic weight.
	Weight    uint32
	WeightSet bool
}

// HealthView is the health runner's current view, the input ApplyHealth
// lays over the desired table. A server with a check that the view does not
// list is unknown (not checked yet).
type HealthView struct {
	Servers map[ServerRef]ServerHealth
	// NoChecks says that no checks run (a reconcile without the daemon):
	// checked servers stay in as configured, and only forced health applies.
	NoChecks bool
	// Maintenance holds servers out at weight 0 whatever their checks say
	// (settings.maintenance_dir); nil: none.
	Maintenance *Maintenance
}

// ApplyHealth returns the table the kernel should get: t (the desired
// table, with any drains) with the health of d's checked servers laid over
// it. A server that is down, or forced down, is quiesced (weight 0) or
// removed as its on_failure says; a checked server not known yet is out
// unless it starts healthy; an up server takes the weight the checks give
// it; a service with fewer than quorum healthy servers gets its sorry
// server. t is not changed; services that need no change are shared.
func ApplyHealth(t *Table, d *Desired, view *HealthView) *Table {
	return ApplyHealthTo(t, d, view, nil)
}

// ApplyHealthTo is ApplyHealth for a kernel that has actual: a sorry server
// actual has (its quorum lost) stays until quorum+hysteresis servers are
// up, one it has not comes in below quorum-hysteresis, as keepalived's
// hysteresis (the kernel is the memory of which side the service is on).
// With no actual (nil), or no hysteresis, the sorry server is in below the
// quorum.
func ApplyHealthTo(t *Table, d *Desired, view *HealthView, actual *Table) *Table {
	if view == nil || len(d.Checks) == 0 && len(d.Sorry) == 0 && view.Maintenance.empty() {
		return t
	}
	var inKernel map[ServiceKey]*VirtualService
	if actual != nil {
		inKernel = make(map[ServiceKey]*VirtualService, len(actual.Services))
		for _, s := range actual.Services {
			inKernel[s.Key] = s
		}
	}
	checks := make(map[ServerRef]*ServerCheck, len(d.Checks))
	for i := range d.Checks {
		checks[d.Checks[i].Ref] = &d.Checks[i]
	}
	sorry := make(map[ServiceKey]*SorryPolicy, len(d.Sorry))
	for i := range d.Sorry {
		sorry[d.Sorry[i].Service] = &d.Sorry[i]
	}
	out := &Table{Timeouts: t.Timeouts, Services: make([]*VirtualService, 0, len(t.Services))}
	for _, s := range t.Services {
		pol := sorry[s.Key]
		var dests []*Destination
		changed := false
		healthy := 0
		for i, dst := range s.Dests {
			c := checks[ServerRef{Service: s.Key, Server: dst.Key}]
			want, in := healthOf(dst, c, view)
			if in && want.Weight > 0 {
				healthy++
			}
			if !changed && (!in || want != dst) {
				changed = true
				dests = append(make([]*Destination, 0, len(s.Dests)+1), s.Dests[:i]...)
			}
			if changed && in {
				dests = append(dests, want)
			}
		}
		cur := s.Dests
		if changed {
			cur = dests
		}
		// The sorry server may be one of the real servers (keepalived allows
		// it): it goes in where that server is out, or in at weight 0 (an
		// inhibited failure), in its place.
		at := -1
		if pol != nil && pol.Dest != nil {
			at = slices.IndexFunc(cur, func(d *Destination) bool { return d.Key == pol.Dest.Key })
		}
		serverIn := at >= 0 && cur[at].Weight > 0
		if pol != nil && pol.Dest != nil && healthy < sorryThreshold(pol, inKernel[s.Key], serverIn) && !serverIn {
			if !changed {
				changed = true
				dests = append(make([]*Destination, 0, len(s.Dests)+1), s.Dests...)
			}
			if at >= 0 {
				dests[at] = pol.Dest
			} else {
				dests = append(dests, pol.Dest)
			}
		}
		if !changed {
			out.Services = append(out.Services, s)
			continue
		}
		cp := *s
		cp.Dests = dests
		out.Services = append(out.Services, &cp)
	}
	return out
}

// healthOf is one real server as the kernel should have it, and whether it
// should be there at all.
func healthOf(dst *Destination, c *ServerCheck, view *HealthView) (*Destination, bool) {
	if view.Maintenance.File(dst.Key) != "" {
		return quiesced(dst), true // in maintenance, as ldirectord's "skipping the normal health check"
	}
	if c == nil {
		return dst, true // no check, no forced health: as configured
	}
	state := c.Forced
	var h ServerHealth
	if state == HealthUnknown {
		if !c.Checked() || view.NoChecks {
			return dst, true
		}
		h = view.Servers[c.Ref]
		state = h.State
		if state == HealthUnknown && c.StartHealthy {
			state = HealthUp
		}
	}
	switch state {
	case HealthUp:
		if c.Drained || !h.WeightSet || h.Weight == dst.Weight {
			// A drained server stays at weight 0 whatever its checks weigh.
			return dst, true
		}
		cp := *dst
		cp.Weight = h.Weight
		return &cp, true
	case HealthDown:
		if c.OnFailure == "quiesce" {
			return quiesced(dst), true
		}
		return nil, false
	}
	if c.HoldPlace {
		// Not checked yet, in BGP mode: in at weight 0. Added as its
		// first check passed, each server would join the kernel's list
		// (at its head) in an order of its own on each director, and mh
		// would build a different Maglev table on each.
		return quiesced(dst), true
	}
	return nil, false // not checked yet: out until its first pass
}

// quiesced is dst at weight 0.
func quiesced(dst *Destination) *Destination {
	if dst.Weight == 0 {
		return dst
	}
	cp := *dst
	cp.Weight = 0
	return &cp
}

func hasDest(ds []*Destination, k DestKey) bool {
	for _, d := range ds {
		if d.Key == k {
			return true
		}
	}
	return false
}

// sorryThreshold is the number of healthy servers below which the sorry
// server is in: the quorum, moved by the hysteresis away from the side the
// kernel is on. serverIn is whether a real server at the sorry server's
// address is in (then the kernel's destination there is that server's).
func sorryThreshold(pol *SorryPolicy, inKernel *VirtualService, serverIn bool) int {
	if pol.Hysteresis == 0 || inKernel == nil {
		return pol.Quorum
	}
	return QuorumThreshold(serverIn || !hasDest(inKernel.Dests, pol.Dest.Key), pol.Quorum, pol.Hysteresis)
}

// QuorumThreshold is keepalived's update_quorum_state threshold: the
// number of healthy servers a service needs to hold its quorum, the quorum
// moved by the hysteresis away from the side the service is on (held: it
// keeps it down to quorum-hysteresis; lost: it regains it at
// quorum+hysteresis).
func QuorumThreshold(held bool, quorum, hysteresis int) int {
	if held {
		return quorum - hysteresis
	}
	return quorum + hysteresis
}

// QuorumHeld is whether a service holds its quorum with healthy servers up,
// given whether it held it before (keepalived's update_quorum_state; none
// up is always lost).
func QuorumHeld(held bool, healthy, quorum, hysteresis int) bool {
	return healthy > 0 && healthy >= QuorumThreshold(held, quorum, hysteresis)
}

// QuorumAtStart is the side a service starts on (keepalived's
// set_quorum_states: held with quorum+hysteresis healthy servers).
func QuorumAtStart(healthy, quorum, hysteresis int) bool {
	return QuorumHeld(false, healthy, quorum, hysteresis)
}

// HealthyCounts is, for each service of t with a quorum policy in d, the
// number of its real servers the view has in with a weight (what the
// quorum counts), and whether every checked server of it has a known
// health yet (a quorum decided on servers not checked yet would be noise).
func HealthyCounts(t *Table, d *Desired, view *HealthView) map[ServiceKey]QuorumCount {
	out := make(map[ServiceKey]QuorumCount, len(d.Sorry))
	if view == nil {
		return out
	}
	checks := make(map[ServerRef]*ServerCheck, len(d.Checks))
	for i := range d.Checks {
		checks[d.Checks[i].Ref] = &d.Checks[i]
	}
	pols := make(map[ServiceKey]bool, len(d.Sorry))
	for i := range d.Sorry {
		pols[d.Sorry[i].Service] = true
	}
	for _, s := range t.Services {
		if !pols[s.Key] {
			continue
		}
		qc := QuorumCount{Known: true}
		for _, dst := range s.Dests {
			c := checks[ServerRef{Service: s.Key, Server: dst.Key}]
			if c != nil && c.Forced == HealthUnknown && c.Checked() && !view.NoChecks && !c.StartHealthy &&
				view.Servers[c.Ref].State == HealthUnknown {
				qc.Known = false
			}
			if want, in := healthOf(dst, c, view); in && want.Weight > 0 {
				qc.Healthy++
			}
		}
		out[s.Key] = qc
	}
	return out
}

// QuorumCount is one service's count for its quorum (HealthyCounts).
type QuorumCount struct {
	Healthy int
	Known   bool
}
