package server

import (
	"context"
	"errors"
	"fmt"
	"net"
	"time"

	"github.com/ipvsctl/ipvsctl/ipvsmgr"
)

// Why answers "why is this real server not getting traffic?": every check,
// in order, each with a typed reason. The CLI (ipvsctl why), the API (GET
// .../servers/{sid}/why) and the panel's page all show this one read.
type Why struct {
	Service string `json:"service"`
	Server  string `json:"server"`
	// Address is ADDRESS:PORT as the kernel has it.
	Address string     `json:"address"`
	Checks  []WhyCheck `json:"checks"`
	// Blocking counts the checks that stop traffic.
	Blocking int    `json:"blocking"`
	Verdict  string `json:"verdict"`
}

// WhyCheck is one thing that can keep a real server from getting traffic.
type WhyCheck struct {
	Check  WhyTopic  `json:"check"`
	Status WhyStatus `json:"status"`
	// Reason is what was found, as a code a script can test.
	Reason WhyReason `json:"reason"`
	Detail string    `json:"detail"` // the same in words
}

// WhyTopic names a check.
type WhyTopic string

const (
	WhyKernelData      WhyTopic = "kernel_data"
	WhyServiceEnabled  WhyTopic = "service_enabled"
	WhyServerAdmin     WhyTopic = "server_admin"
	WhyWeight          WhyTopic = "weight"
	WhyInKernel        WhyTopic = "in_kernel"
	WhyVIP             WhyTopic = "vip"
	WhyPreparation     WhyTopic = "preparation"
	WhyHealth          WhyTopic = "health"
	WhyConnectionLimit WhyTopic = "connection_limit"
)

// Title is the topic in words.
func (t WhyTopic) Title() string {
	return map[WhyTopic]string{WhyKernelData: "Kernel data", WhyServiceEnabled: "Virtual service enabled", WhyServerAdmin: "Real server admin state",
		WhyWeight: "Weight", WhyInKernel: "In the kernel", WhyVIP: "VIP on its interface", WhyPreparation: "Real-server preparation",
		WhyHealth: "Health", WhyConnectionLimit: "Connection limit"}[t]
}

// WhyStatus is a check's outcome.
type WhyStatus string

const (
	WhyOK       WhyStatus = "ok"
	WhyBlocking WhyStatus = "blocking" // this stops traffic
	WhyUnknown  WhyStatus = "unknown"  // cannot tell
)

// WhyReason is what a check found.
type WhyReason string

const (
	ReasonOK                 WhyReason = "ok"
	ReasonKernelStale        WhyReason = "kernel_stale"
	ReasonNoKernelData       WhyReason = "no_kernel_data"
	ReasonServiceDisabled    WhyReason = "service_disabled"
	ReasonServerDisabled     WhyReason = "server_disabled"
	ReasonDrained            WhyReason = "drained"
	ReasonWeightZero         WhyReason = "weight_zero"
	ReasonServiceNotInKernel WhyReason = "service_not_in_kernel"
	ReasonServerNotInKernel  WhyReason = "server_not_in_kernel"
	ReasonKernelWeightZero   WhyReason = "kernel_weight_zero"
	ReasonNotInKernel        WhyReason = "not_in_kernel_as_configured"
	ReasonRetiring           WhyReason = "retiring"
	ReasonVIPMissing         WhyReason = "vip_missing"
	ReasonVIPStandby         WhyReason = "vip_standby"
	ReasonVIPUnmanaged       WhyReason = "vip_unmanaged"
	ReasonVIPUnknown         WhyReason = "vip_unknown"
	ReasonNeverPrepared      WhyReason = "never_prepared"
	ReasonPreparationFailed  WhyReason = "preparation_failed"
	ReasonUnchecked          WhyReason = "unchecked"
	ReasonHealthDown         WhyReason = "health_down"
	ReasonMaintenance        WhyReason = "maintenance" // a file of settings.maintenance_dir holds it out
	ReasonHealthUnknown      WhyReason = "health_unknown"
	ReasonAtLimit            WhyReason = "at_connection_limit"
	ReasonNoLimit            WhyReason = "no_limit"
)

// whyFacts is what Why reads, gathered first so that the checks are pure.
type whyFacts struct {
	svc      *ipvsmgr.Service
	rs       *ipvsmgr.Server
	key      ipvsmgr.ServiceKey
	dest     ipvsmgr.DestKey
	snap     *Snapshot               // nil: no kernel data
	vs       *ipvsmgr.VirtualService // the kernel's, nil when it has none
	kdest    *ipvsmgr.Destination    // the kernel's, nil when it has none
	failure  *ipvsmgr.Failure        // the last reconcile's failure for it
	recErr   string                  // the last reconcile's error
	vip      *ipvsmgr.VIP            // the VIP it is reached by, nil when unmanaged
	standby  bool                    // this director does not carry the VIP (backup)
	vipUp    *bool                   // whether the VIP is on its interface (nil: unknown)
	vipErr   error                   // why that is unknown
	prepared []preparation           // the real server's preparation results
	health   *HealthStatus           // nil: no check
}

type preparation struct {
	ok      bool
	action  string
	at      time.Time
	summary string
}

// Why reads why real server id of service svcID gets no traffic, or says
// nothing stops it.
func (c *Core) Why(ctx context.Context, svcID, id string) (*Why, error) {
	f, err := c.whyFacts(ctx, svcID, id)
	if err != nil {
		return nil, err
	}
	w := &Why{Service: ServiceID(f.svc), Server: serverName(f.rs), Address: f.dest.String(), Checks: whyChecks(f)}
	for _, ch := range w.Checks {
		if ch.Status == WhyBlocking {
			w.Blocking++
		}
	}
	w.Verdict = fmt.Sprintf("%d reason(s) found, in order below.", w.Blocking)
	if w.Blocking == 0 {
		w.Verdict = "Nothing found that stops traffic to this real server."
		if f.kdest != nil && f.kdest.ActiveConns == 0 && f.kdest.Stats.CPS == 0 {
			w.Verdict += " It has no connection now: check the clients, the scheduler and persistence, and its health."
		}
	}
	return w, nil
}

func serverName(rs *ipvsmgr.Server) string {
	if rs.Name != "" {
		return rs.Name
	}
	if rs.Port != 0 {
		return fmt.Sprintf("%s:%d", rs.Address, rs.Port)
	}
	return rs.Address
}

func (c *Core) whyFacts(ctx context.Context, svcID, id string) (*whyFacts, error) {
	st, _, err := c.State(ctx)
	if err != nil {
		return nil, err
	}
	si, err := FindService(st, svcID)
	if err != nil {
		return nil, err
	}
	ri, err := FindServer(&st.Services[si], id)
	if err != nil {
		return nil, err
	}
	f := &whyFacts{svc: &st.Services[si], rs: &st.Services[si].Servers[ri]}
	one, on := *f.svc, true
	one.Enabled, one.Servers = &on, []ipvsmgr.Server{*f.rs}
	one.Servers[0].Enabled = &on
	d, err := ipvsmgr.Compile(&ipvsmgr.State{Settings: st.Settings, Services: []ipvsmgr.Service{one}})
	if err != nil || len(d.Table.Services) != 1 || len(d.Table.Services[0].Dests) != 1 {
		return nil, fmt.Errorf("why %s %s: the stored state does not compile: %v", svcID, id, err)
	}
	f.key, f.dest = d.Table.Services[0].Key, d.Table.Services[0].Dests[0].Key
	f.snap = c.whySnapshot(ctx)
	if f.snap != nil && f.snap.Table != nil {
		for _, vs := range f.snap.Table.Services {
			if vs.Key == f.key {
				f.vs = vs
				for _, kd := range vs.Dests {
					if kd.Key == f.dest {
						f.kdest = kd
					}
				}
			}
		}
	}
	if rep, ok := c.LastReconcile(); ok {
		f.recErr = rep.Err
		for i := range rep.Failures {
			fl := &rep.Failures[i]
			if fl.Key != nil && *fl.Key == f.key && (fl.Dest == nil || *fl.Dest == f.dest) {
				f.failure = fl
				break
			}
		}
	}
	c.whyVIP(ctx, d, f)
	if results, err := c.RealServerResults(ctx); err == nil {
		for _, res := range results {
			if hostOnly(res.Host) == f.rs.Address || res.Target == f.rs.Address || (f.rs.Name != "" && res.Target == f.rs.Name) {
				f.prepared = append(f.prepared, preparation{ok: res.OK(), action: res.Action, at: res.At, summary: res.Summary()})
			}
		}
	}
	if hs, err := c.HealthByServer(ctx); err == nil {
		f.health = hs[ipvsmgr.ServerRef{Service: f.key, Server: f.dest}]
	}
	return f, nil
}

// whySnapshot is the daemon's snapshot; without a daemon (the CLI on the
// database) one read of the kernel.
func (c *Core) whySnapshot(ctx context.Context) *Snapshot {
	snap, err := c.rt.Table(ctx)
	if err != nil {
		return &Snapshot{At: c.now(), Err: err}
	}
	return snap
}

// whyVIP finds the service's VIP and whether it is on its interface.
func (c *Core) whyVIP(ctx context.Context, d *ipvsmgr.Desired, f *whyFacts) {
	for i := range d.VIPs {
		f.vip = &d.VIPs[i]
	}
	if f.vip == nil {
		return
	}
	over := c.roleOverlay(d)
	for _, v := range over.Standby {
		if v == *f.vip {
			f.standby = true
			return
		}
	}
	host, closeFn, err := c.rt.Host()
	if err != nil {
		f.vipErr = err
		return
	}
	defer closeFn()
	if host == nil {
		f.vipErr = fmt.Errorf("this process does not manage addresses")
		return
	}
	seen, err := host.Observe(ctx, ipvsmgr.HostQuery{VIPs: []ipvsmgr.VIP{*f.vip}})
	if err != nil {
		f.vipErr = err
		return
	}
	if msg, bad := seen.VIPErr[*f.vip]; bad {
		f.vipErr = errors.New(msg)
		return
	}
	up := seen.Up[*f.vip]
	f.vipUp = &up
}

func hostOnly(hostport string) string {
	if h, _, err := net.SplitHostPort(hostport); err == nil {
		return h
	}
	return hostport
}

// whyChecks are the checks, in order, from what was read.
func whyChecks(f *whyFacts) []WhyCheck {
	var out []WhyCheck
	add := func(t WhyTopic, s WhyStatus, r WhyReason, format string, args ...any) {
		out = append(out, WhyCheck{Check: t, Status: s, Reason: r, Detail: fmt.Sprintf(format, args...)})
	}
	known := f.snap != nil && f.snap.Table != nil
	if !known || f.snap.Err != nil {
		why := "no kernel table"
		if f.snap != nil && f.snap.Err != nil {
			why = f.snap.Err.Error()
		}
		add(WhyKernelData, WhyUnknown, ReasonKernelStale, "the kernel table is stale or unreadable: what follows about the kernel may be old (%s)", why)
	}
	svcOn, rsOn := f.svc.IsEnabled(), f.rs.IsEnabled()
	if svcOn {
		add(WhyServiceEnabled, WhyOK, ReasonOK, "yes")
	} else {
		add(WhyServiceEnabled, WhyBlocking, ReasonServiceDisabled, "no: the virtual service %s is disabled, so none of its real servers is in the kernel", ServiceID(f.svc))
	}
	switch {
	case !rsOn:
		add(WhyServerAdmin, WhyBlocking, ReasonServerDisabled, "maint: this real server is disabled (kept in the configuration, out of the kernel)")
	case f.rs.Drained:
		add(WhyServerAdmin, WhyBlocking, ReasonDrained, "drain: weight 0 in the kernel, no new connections (configured weight %d kept; rs enable gives it back)", f.rs.EffectiveWeight())
	default:
		add(WhyServerAdmin, WhyOK, ReasonOK, "ready")
	}
	if wt := f.rs.EffectiveWeight(); wt == 0 {
		add(WhyWeight, WhyBlocking, ReasonWeightZero, "0 configured: the scheduler sends it no new connection")
	} else {
		add(WhyWeight, WhyOK, ReasonOK, "%d configured", wt)
	}
	out = append(out, inKernelCheck(f, known, svcOn, rsOn))
	out = append(out, vipCheck(f))
	out = append(out, preparationCheck(f))
	out = append(out, healthCheck(f.health))
	switch up := f.rs.UpperThreshold; {
	case up > 0 && f.kdest != nil && int(f.kdest.ActiveConns) >= up:
		add(WhyConnectionLimit, WhyBlocking, ReasonAtLimit, "reached: %d active ≥ upper threshold %d (the kernel sends it no new connection until it is below %d)",
			f.kdest.ActiveConns, up, max(f.rs.LowerThreshold, 0))
	case up > 0:
		active := uint32(0)
		if f.kdest != nil {
			active = f.kdest.ActiveConns
		}
		add(WhyConnectionLimit, WhyOK, ReasonOK, "%d active of %d", active, up)
	default:
		add(WhyConnectionLimit, WhyOK, ReasonNoLimit, "none")
	}
	return out
}

func inKernelCheck(f *whyFacts, known, svcOn, rsOn bool) WhyCheck {
	ch := WhyCheck{Check: WhyInKernel, Status: WhyBlocking}
	said := ""
	if f.failure != nil {
		said = " — the kernel said at the last reconcile: " + f.failure.Change + ": " + f.failure.Err
	} else if f.recErr != "" {
		said = " — the last reconcile failed: " + f.recErr
	}
	switch {
	case !known:
		ch.Status, ch.Reason, ch.Detail = WhyUnknown, ReasonNoKernelData, "unknown: no kernel data"
	case f.vs == nil && svcOn:
		ch.Reason, ch.Detail = ReasonServiceNotInKernel, "the virtual service "+f.key.String()+" is not in the kernel"+said
	case f.kdest == nil && svcOn && rsOn:
		ch.Reason, ch.Detail = ReasonServerNotInKernel, "the kernel has no real server "+f.dest.String()+" in "+f.key.String()+said
	case f.kdest != nil && (!rsOn || !svcOn):
		ch.Status, ch.Reason = WhyOK, ReasonRetiring
		ch.Detail = fmt.Sprintf("retiring: kept at weight %d until its %d connection(s) end", f.kdest.Weight, f.kdest.ActiveConns)
	case f.kdest != nil && f.kdest.Weight == 0 && f.rs.KernelWeight() > 0:
		ch.Reason, ch.Detail = ReasonKernelWeightZero, fmt.Sprintf("in the kernel with weight 0 (configured %d)%s", f.rs.KernelWeight(), said)
	case f.kdest != nil:
		ch.Status, ch.Reason, ch.Detail = WhyOK, ReasonOK, fmt.Sprintf("yes, weight %d", f.kdest.Weight)
	default:
		ch.Status, ch.Reason, ch.Detail = WhyOK, ReasonNotInKernel, "no (as configured)"
	}
	return ch
}

func vipCheck(f *whyFacts) WhyCheck {
	ch := WhyCheck{Check: WhyVIP, Status: WhyOK}
	switch {
	case f.vip == nil:
		ch.Reason, ch.Detail = ReasonVIPUnmanaged, "not managed by ipvsctl (the service names no interface)"
	case f.standby:
		ch.Status, ch.Reason, ch.Detail = WhyBlocking, ReasonVIPStandby, f.vip.String()+": this director is the backup of its pair, so the master carries the VIP"
	case f.vipUp == nil:
		ch.Status, ch.Reason, ch.Detail = WhyUnknown, ReasonVIPUnknown, "cannot tell: "+f.vipErr.Error()
	case !*f.vipUp:
		ch.Status, ch.Reason, ch.Detail = WhyBlocking, ReasonVIPMissing, f.vip.Addr.String()+" is not on "+f.vip.Interface+": the next reconcile adds it"
	default:
		ch.Reason, ch.Detail = ReasonOK, f.vip.Addr.String()+" is on "+f.vip.Interface
	}
	return ch
}

func preparationCheck(f *whyFacts) WhyCheck {
	if len(f.prepared) == 0 {
		return WhyCheck{Check: WhyPreparation, Status: WhyUnknown, Reason: ReasonNeverPrepared, Detail: "never pushed or verified from this director (ipvsctl realserver verify)"}
	}
	p := f.prepared[len(f.prepared)-1]
	ch := WhyCheck{Check: WhyPreparation, Status: WhyOK, Reason: ReasonOK,
		Detail: p.action + " at " + p.at.UTC().Format("2006-01-02 15:04:05") + " UTC: " + p.summary}
	if !p.ok {
		ch.Status, ch.Reason = WhyBlocking, ReasonPreparationFailed
	}
	return ch
}

func healthCheck(h *HealthStatus) WhyCheck {
	ch := WhyCheck{Check: WhyHealth}
	switch {
	case h == nil:
		ch.Status, ch.Reason, ch.Detail = WhyOK, ReasonUnchecked, "unchecked: no check, the server is always in (give it or its service a check to have it watched)"
	case h.Phase == PhaseMaintenance:
		ch.Status, ch.Reason, ch.Detail = WhyBlocking, ReasonMaintenance, "in maintenance at weight 0 in every service: "+h.Reason+" (remove the file to put it back)"
	case h.State == "down":
		ch.Status, ch.Reason, ch.Detail = WhyBlocking, ReasonHealthDown, h.Phase
		if h.Since != nil {
			ch.Detail += " since " + h.Since.UTC().Format("2006-01-02 15:04:05") + " UTC"
		}
		if h.Reason != "" {
			ch.Detail += ": " + h.Reason
		}
		if h.Fault != "" {
			ch.Detail += " (checker fault: " + h.Fault + ")"
		}
	case h.State == "up":
		ch.Status, ch.Reason, ch.Detail = WhyOK, ReasonOK, fmt.Sprintf("%s, effective weight %d of %d", h.Phase, h.EffectiveWeight, h.ConfiguredWeight)
	default:
		ch.Status, ch.Reason, ch.Detail = WhyUnknown, ReasonHealthUnknown, h.Phase+": "+h.Reason
	}
	if h != nil {
		ch.Detail += checkRunDetail(h)
	}
	return ch
}

// checkRunDetail is when the check last ran, and how late its round is
// when the checker is behind.
func checkRunDetail(h *HealthStatus) string {
	ago := func(seconds float64) string {
		return time.Duration(seconds * float64(time.Second)).Round(100 * time.Millisecond).String()
	}
	s := ""
	if h.LastCheckAge != nil {
		s = "; last checked " + ago(*h.LastCheckAge) + " ago"
	}
	if h.Late > 0 {
		s += "; its round is late by " + ago(h.Late) + " (the checker is behind: see ipvsctl status)"
	}
	return s
}
