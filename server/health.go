package server

import (
	"context"
	"fmt"
	"net/netip"
	"time"

	"github.com/ipvsctl/ipvsctl/ipvsmgr"
	"github.com/ipvsctl/ipvsctl/ipvsmgr/health"
)

// HealthStatus is what the checks say of one real server of one service.
type HealthStatus struct {
	Name string `json:"name"` // the server's name, or ADDRESS:PORT
	// Phase in a word or three: up, down, going up 1/2, going down 2/3,
	// unchecked, forced up, forced down, sorry server.
	Phase string `json:"phase"`
	// State is up (gets traffic by its health), down, or unknown (not
	// checked yet, or no daemon runs the checks).
	State      string     `json:"state"`
	Check      string     `json:"check,omitempty"`  // its type
	Target     string     `json:"target,omitempty"` // what the check talks to
	Since      *time.Time `json:"since,omitempty"`  // in this state since
	Reason     string     `json:"reason,omitempty"` // of the last transition
	LastResult string     `json:"last_result,omitempty"`
	LastCheck  *time.Time `json:"last_check,omitempty"`
	// LastCheckAge is how long ago LastCheck was, in seconds; Late how far
	// the check's round is behind its schedule, when by more than its
	// interval (the watchdog's checker.late).
	LastCheckAge *float64 `json:"last_check_age_seconds,omitempty"`
	Late         float64  `json:"late_seconds,omitempty"`
	Fault        string   `json:"fault,omitempty"` // the check cannot run at all
	Flapping     bool     `json:"flapping,omitempty"`
	// ConfiguredWeight is the document's; EffectiveWeight what the checks
	// give it (0 when down or out, a step of the slow-start ramp, an
	// agent's share).
	ConfiguredWeight uint32 `json:"configured_weight"`
	EffectiveWeight  uint32 `json:"effective_weight"`
	InKernel         bool   `json:"in_kernel"`
}

// noDaemon is the reason shown for checked servers when no daemon runs.
const noDaemon = "no daemon: checks run in ipvsctl serve"

// desiredFor is revision rev's compiled state: the daemon's when it has it.
func (c *Core) desiredFor(rev int64, st *ipvsmgr.State) (*ipvsmgr.Desired, error) {
	if r, d := c.known(); r == rev && d != nil {
		return d, nil
	}
	return ipvsmgr.Compile(st)
}

// healthStatuses is the health of every server of desired with a check or a
// forced health, and of the sorry servers, by server.
func (c *Core) healthStatuses(desired *ipvsmgr.Desired) map[ipvsmgr.ServerRef]*HealthStatus {
	var running map[ipvsmgr.ServerRef]*health.Status
	list, checking := c.checks()
	if checking {
		running = make(map[ipvsmgr.ServerRef]*health.Status, len(list))
		for i := range list {
			running[list[i].Ref] = &list[i]
		}
	}
	out := make(map[ipvsmgr.ServerRef]*HealthStatus, len(desired.Checks)+len(desired.Sorry))
	for i := range desired.Checks {
		sc := &desired.Checks[i]
		out[sc.Ref] = statusOf(sc, running, checking)
	}
	for _, p := range desired.Sorry {
		if p.Dest == nil {
			continue
		}
		ref := ipvsmgr.ServerRef{Service: p.Service, Server: p.Dest.Key}
		if out[ref] == nil {
			out[ref] = &HealthStatus{Name: p.Dest.Key.String(), Phase: "sorry server", State: "up", ConfiguredWeight: p.Dest.Weight,
				EffectiveWeight: p.Dest.Weight, Reason: fmt.Sprintf("in while fewer than %d real servers are up", p.Quorum)}
		}
	}
	if desired.Health != nil {
		maintenanceStatuses(out, desired.Table, desired.Health.Maintenance)
	}
	return out
}

// PhaseMaintenance is the phase of a real server that a file of
// settings.maintenance_dir holds out.
const PhaseMaintenance = "maintenance"

// maintenanceStatuses marks the servers of t that m holds out, checked or
// not: at weight 0 whatever their checks say, and why.
func maintenanceStatuses(out map[ipvsmgr.ServerRef]*HealthStatus, t *ipvsmgr.Table, m *ipvsmgr.Maintenance) {
	if m == nil || t == nil {
		return
	}
	for _, vs := range t.Services {
		for _, dst := range vs.Dests {
			f := m.File(dst.Key)
			if f == "" {
				continue
			}
			ref := ipvsmgr.ServerRef{Service: vs.Key, Server: dst.Key}
			hs := out[ref]
			if hs == nil {
				hs = &HealthStatus{Name: dst.Key.String(), ConfiguredWeight: dst.Weight}
				out[ref] = hs
			}
			hs.Phase, hs.State, hs.EffectiveWeight, hs.Reason, hs.Since = PhaseMaintenance, "down", 0, "maintenance file "+f, nil
		}
	}
}

func statusOf(sc *ipvsmgr.ServerCheck, running map[ipvsmgr.ServerRef]*health.Status, daemon bool) *HealthStatus {
	hs := &HealthStatus{Name: sc.ServerName, Check: sc.Spec.Type, ConfiguredWeight: sc.Weight, EffectiveWeight: sc.Weight,
		Phase: "unchecked", State: "up"}
	if sc.Checked() {
		hs.State = "unknown"
		hs.Target = sc.Spec.Target.String()
		if rs := running[sc.Ref]; rs != nil {
			hs.Phase, hs.Reason, hs.LastResult, hs.Fault, hs.Flapping = rs.Phase(), rs.Reason, rs.LastResult, rs.Fault, rs.Flapping
			hs.State = rs.State.String()
			if !rs.Since.IsZero() && rs.State != ipvsmgr.HealthUnknown {
				hs.Since = timePtr(rs.Since)
			}
			checkTimes(hs, rs)
			switch {
			case rs.State == ipvsmgr.HealthUp:
				hs.EffectiveWeight = rs.Weight
			case rs.State == ipvsmgr.HealthUnknown && sc.StartHealthy:
				hs.Phase, hs.State = "unchecked (starts healthy)", "up"
			default:
				hs.EffectiveWeight = 0
			}
			if rs.State == ipvsmgr.HealthUnknown && rs.LastCheck.IsZero() {
				hs.Phase = "not checked yet"
				if sc.StartHealthy {
					hs.Phase = "not checked yet (starts healthy)"
				}
			}
		} else if !daemon {
			hs.Reason = noDaemon
		}
	}
	switch sc.Forced {
	case ipvsmgr.HealthUp:
		hs.Phase, hs.State, hs.EffectiveWeight = "forced up", "up", sc.Weight
	case ipvsmgr.HealthDown:
		hs.Phase, hs.State, hs.EffectiveWeight = "forced down", "down", 0
	}
	return hs
}

func timePtr(t time.Time) *time.Time { return &t }

// checkTimes gives hs the check's last run, its age and its lateness.
func checkTimes(hs *HealthStatus, rs *health.Status) {
	if !rs.LastCheck.IsZero() {
		hs.LastCheck = timePtr(rs.LastCheck)
		age := rs.LastAge.Seconds()
		hs.LastCheckAge = &age
	}
	hs.Late = rs.Late.Seconds()
}

// attachHealth gives each kernel real server its health, and lists under
// their service the checked servers the kernel does not have.
func attachHealth(v *StatusView, desired *ipvsmgr.Desired, hs map[ipvsmgr.ServerRef]*HealthStatus) {
	seen := make(map[ipvsmgr.ServerRef]bool, len(hs))
	byKey := make(map[ipvsmgr.ServiceKey]int, len(v.Services))
	for i := range v.Services {
		s := &v.Services[i]
		key := statusKey(s)
		byKey[key] = i
		for j := range s.Servers {
			d := &s.Servers[j]
			a, err := netip.ParseAddr(d.Address)
			if err != nil {
				continue
			}
			ref := ipvsmgr.ServerRef{Service: key, Server: ipvsmgr.DestKey{Addr: a, Port: d.Port}}
			if h := hs[ref]; h != nil {
				cp := *h
				cp.InKernel = true
				d.Health = &cp
				seen[ref] = true
			}
		}
	}
	dests := map[ipvsmgr.ServerRef]*ipvsmgr.Destination{}
	for _, s := range desired.Table.Services {
		for _, d := range s.Dests {
			dests[ipvsmgr.ServerRef{Service: s.Key, Server: d.Key}] = d
		}
	}
	for i := range desired.Checks {
		ref := desired.Checks[i].Ref
		si, ok := byKey[ref.Service]
		if seen[ref] || !ok {
			continue
		}
		out := StatusServer{Address: ref.Server.Addr.String(), Port: ref.Server.Port, Health: hs[ref]}
		if d := dests[ref]; d != nil {
			out.Forwarding = d.Forward.String()
			out.UpperThreshold, out.LowerThreshold = d.UpperThreshold, d.LowerThreshold
		}
		v.Services[si].Servers = append(v.Services[si].Servers, out)
	}
}

// statusKey is the kernel key of a status service.
func statusKey(s *StatusService) ipvsmgr.ServiceKey {
	k := ipvsmgr.ServiceKey{Family: ipvsmgr.FamilyIPv4, FWMark: s.FWMark}
	if s.Family == "ipv6" {
		k.Family = ipvsmgr.FamilyIPv6
	}
	if s.FWMark == 0 {
		k.Protocol = map[string]uint16{"tcp": ipvsmgr.ProtoTCP, "udp": ipvsmgr.ProtoUDP, "sctp": ipvsmgr.ProtoSCTP}[s.Protocol]
		k.Addr, _ = netip.ParseAddr(s.Address)
		k.Port = s.Port
	}
	return k
}

// HealthQuery selects the servers `ipvsctl health` reports on.
type HealthQuery struct {
	Service string // a service's name, PROTO:ADDRESS:PORT or fwmark:N; "" for all
	Server  string // a server of Service: name, ADDRESS or ADDRESS:PORT; "" for all
	// Limit is how many recent transitions to give each server (default 20;
	// they are given only when Service is set).
	Limit int
}

// HealthReport is one real server's health and its recent transitions.
type HealthReport struct {
	Service     string             `json:"service"`
	Address     string             `json:"address"` // ADDRESS:PORT of the real server
	Transitions []HealthTransition `json:"transitions,omitempty"`
	HealthStatus
}

// HealthTransition is one kept change of a server's health.
type HealthTransition struct {
	At     time.Time `json:"at"`
	From   string    `json:"from"`
	To     string    `json:"to"`
	Reason string    `json:"reason"`
	Weight *uint32   `json:"weight,omitempty"` // set by the checks (slow start, agent, exec)
	Fault  string    `json:"fault,omitempty"`
}

// Health reports the health of the checked real servers (of one service, or
// one server), with their recent transitions when a service is named.
func (c *Core) Health(ctx context.Context, q HealthQuery) ([]HealthReport, error) {
	st, rev, err := c.store.Current(ctx)
	if err != nil {
		return nil, err
	}
	desired, err := c.desiredFor(rev, st)
	if err != nil {
		return nil, err
	}
	checks := desired.Checks
	if q.Service != "" {
		if checks, err = selectChecks(st, q.Service, q.Server); err != nil {
			return nil, err
		}
	} else if q.Server != "" {
		return nil, errorf(CodeBadInput, "a server needs its service: health SERVICE SERVER")
	}
	limit := q.Limit
	if limit <= 0 {
		limit = 20
	}
	hs := c.healthStatuses(desired)
	inKernel := c.kernelRefs()
	_, checking := c.checks()
	out := []HealthReport{}
	for i := range checks {
		sc := &checks[i]
		h := hs[sc.Ref]
		if h == nil { // a server not in the daemon's revision yet
			h = statusOf(sc, nil, checking)
		}
		r := HealthReport{Service: sc.ServiceName, Address: sc.Ref.Server.String(), HealthStatus: *h}
		if inKernel != nil {
			r.InKernel = inKernel[sc.Ref]
		}
		if q.Service != "" {
			trs, err := c.store.HealthHistory(ctx, sc.Ref.Service, sc.Ref.Server, limit)
			if err != nil {
				return nil, err
			}
			for _, tr := range trs {
				t := HealthTransition{At: tr.At, From: tr.From.String(), To: tr.To.String(), Reason: tr.Reason, Fault: tr.Fault}
				if tr.WeightSet {
					w := tr.Weight
					t.Weight = &w
				}
				r.Transitions = append(r.Transitions, t)
			}
		}
		out = append(out, r)
	}
	return out, nil
}

// kernelRefs is every real server of the daemon's kernel snapshot (nil
// without a daemon).
func (c *Core) kernelRefs() map[ipvsmgr.ServerRef]bool {
	snap := c.Snapshot()
	if snap == nil || snap.Table == nil {
		return nil
	}
	out := map[ipvsmgr.ServerRef]bool{}
	for _, s := range snap.Table.Services {
		for _, d := range s.Dests {
			out[ipvsmgr.ServerRef{Service: s.Key, Server: d.Key}] = true
		}
	}
	return out
}

// selectChecks compiles one service of st (and one of its servers, when
// server is set) and returns its servers' checks.
func selectChecks(st *ipvsmgr.State, service, server string) ([]ipvsmgr.ServerCheck, error) {
	i, err := FindService(st, service)
	if err != nil {
		return nil, err
	}
	svc := st.Services[i]
	if server != "" {
		j, err := FindServer(&svc, server)
		if err != nil {
			return nil, err
		}
		svc.Servers = svc.Servers[j : j+1]
	}
	d, err := ipvsmgr.Compile(&ipvsmgr.State{Settings: st.Settings, Services: []ipvsmgr.Service{svc}})
	if err != nil {
		return nil, err
	}
	return d.Checks, nil
}

// CheckResult is one check run on demand ("test this check now").
type CheckResult struct {
	Service  string  `json:"service"`
	Server   string  `json:"server"`
	Check    string  `json:"check"`
	Target   string  `json:"target"`
	Outcome  string  `json:"outcome"` // pass, fail or fault
	Reason   string  `json:"reason"`
	Duration float64 `json:"duration_seconds"`
	Weight   *int    `json:"weight,omitempty"`  // an exec check's dynamic weight
	Percent  *int    `json:"percent,omitempty"` // an agent's share of the weight
}

// CheckServer runs a real server's check once, now, and returns what it
// found. The result is not counted toward rise or fall.
func (c *Core) CheckServer(ctx context.Context, a Actor, svcID, id string) (res *CheckResult, err error) {
	defer func() {
		detail := ""
		if res != nil {
			detail = res.Outcome + ": " + res.Reason
		}
		c.audit(ctx, a, "rs check", svcID+" "+id, nil, err, detail)
	}()
	if wait := c.checkRuns.take(a.Name, c.now()); wait > 0 {
		return nil, &RateLimitedError{What: fmt.Sprintf("%s ran %d checks on demand within %s, the most a user may", a.Name, CheckRunsPerUser, CheckRunsWindow),
			RetryAfter: wait}
	}
	st, _, err := c.store.Current(ctx)
	if err != nil {
		return nil, err
	}
	checks, err := selectChecks(st, svcID, id)
	if err != nil {
		return nil, err
	}
	if len(checks) == 0 {
		return nil, errorf(CodeBadInput, "real server %q of %q has no check (or it or its service is disabled)", id, svcID)
	}
	sc := &checks[0]
	if !sc.Checked() {
		return nil, errorf(CodeBadInput, "real server %q of %q has no check to run (type none)", id, svcID)
	}
	r := c.rt.Check(ctx, &sc.Spec)
	res = &CheckResult{Service: sc.ServiceName, Server: sc.ServerName, Check: sc.Spec.Type, Target: sc.Spec.Target.String(),
		Outcome: r.Outcome.String(), Reason: r.Reason, Duration: r.Duration.Seconds()}
	if r.Weight >= 0 {
		w := r.Weight
		res.Weight = &w
	}
	if r.Percent >= 0 {
		p := r.Percent
		res.Percent = &p
	}
	return res, nil
}

// HealthByServer is the health of every real server of the current state
// with a check or a forced health, by service and server (the panel's live
// table and its "why" view); a server not in it is unchecked.
func (c *Core) HealthByServer(ctx context.Context) (map[ipvsmgr.ServerRef]*HealthStatus, error) {
	_, d, err := c.currentDesired(ctx)
	if err != nil {
		return nil, err
	}
	return c.healthStatuses(d), nil
}
