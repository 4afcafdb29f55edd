package server

import (
	"context"
	"time"

	"github.com/ipvsctl/ipvsctl/arpguard"
	"github.com/ipvsctl/ipvsctl/ipvsmgr"
)

// StatusService is one kernel service in the status view.
type StatusService struct {
	Name        string         `json:"name,omitempty"` // the desired state's name for it
	Protocol    string         `json:"protocol,omitempty"`
	Address     string         `json:"address,omitempty"`
	Port        uint16         `json:"port,omitempty"`
	FWMark      uint32         `json:"fwmark,omitempty"`
	Family      string         `json:"family"`
	Scheduler   string         `json:"scheduler"`
	Flags       []string       `json:"flags"`
	Persistence uint32         `json:"persistence"`
	Stats       ipvsmgr.Stats  `json:"stats"`
	Servers     []StatusServer `json:"servers"`
}

// StatusServer is one real server of a kernel service.
type StatusServer struct {
	Address        string        `json:"address"`
	Port           uint16        `json:"port"`
	Forwarding     string        `json:"forwarding"`
	Weight         uint32        `json:"weight"`
	UpperThreshold uint32        `json:"upper_threshold"`
	LowerThreshold uint32        `json:"lower_threshold"`
	ActiveConns    uint32        `json:"active_conns"`
	InactiveConns  uint32        `json:"inactive_conns"`
	Stats          ipvsmgr.Stats `json:"stats"`
	// Health is what the checks say of a server with a check or a forced
	// health (nil for one without). A checked server the kernel does not have
	// (down and removed, or not checked yet) is listed too, with Health.InKernel
	// false, so that an operator sees why it gets no traffic.
	Health *HealthStatus `json:"health,omitempty"`
}

// KernelState says whether the table could be read, and how fresh it is.
type KernelState struct {
	Available bool      `json:"available"`
	Error     string    `json:"error,omitempty"`
	ReadAt    time.Time `json:"read_at"`
	Age       float64   `json:"age_seconds"`
	Stale     bool      `json:"stale"` // older than two poll intervals
}

// StatusView is what the kernel has now, with counters and rates.
type StatusView struct {
	Kernel   KernelState `json:"kernel"`
	Revision int64       `json:"revision"` // of the desired state
	// RealServers is the last push/verify/undo result per real server.
	RealServers []arpguard.Result `json:"real_servers"`
	Timeouts    struct {
		TCP    uint32 `json:"tcp"`
		TCPFin uint32 `json:"tcpfin"`
		UDP    uint32 `json:"udp"`
	} `json:"timeouts"`
	Services []StatusService `json:"services"`
	// States are the desired state's services in the words the panel's
	// tiles show (up, degraded, all down, ...; a real server's up, down,
	// draining, drained, full, ...), each with its reason (States).
	States []ServiceState `json:"states"`
	// Redundancy is the director's part in a redundant pair (absent without settings.redundancy).
	Redundancy *RedundancyStatus `json:"redundancy,omitempty"`
	// BGP is what the director announces and whether its Maglev inputs
	// match the other directors' (absent without a daemon or settings.bgp).
	BGP *BGPStatus `json:"bgp,omitempty"`
	// Followers are the directors following this one (a source's).
	Followers []FollowerStatus `json:"followers,omitempty"`
	// Alerts are the alert destinations and how their deliveries fare
	// (absent without a daemon or settings.alerts).
	Alerts []AlertDelivery `json:"alerts,omitempty"`
	// Checker is the health checker's own health: readiness, late rounds
	// (absent without a daemon).
	Checker *CheckerStatus `json:"checker,omitempty"`
}

// PollInterval is how often the daemon reads the kernel's table: IPVS sums
// its per-CPU counters every 2 s, so reading more often shows nothing new.
const PollInterval = 2 * time.Second

// Status returns the kernel's table: the daemon's snapshot, or (without a
// daemon) a read of the kernel now.
func (c *Core) Status(ctx context.Context) (*StatusView, error) {
	snap, err := c.rt.Table(ctx)
	if err != nil {
		return nil, err
	}
	v := viewOf(snap.Table)
	v.Kernel = KernelState{Available: snap.Table != nil, ReadAt: snap.At, Age: c.now().Sub(snap.At).Seconds()}
	v.Kernel.Stale = c.now().Sub(snap.At) > 2*PollInterval || snap.Err != nil
	if snap.Err != nil {
		v.Kernel.Error = snap.Err.Error()
	}
	if rev, desired, err := c.currentDesired(ctx); err == nil {
		v.Revision = rev
		for i := range v.Services {
			v.Services[i].Name = desired.Names[statusKey(&v.Services[i])]
		}
		hs := c.healthStatuses(desired)
		if len(desired.Checks)+len(desired.Sorry) > 0 || len(hs) > 0 {
			attachHealth(v, desired, hs)
		}
		st, _, err := c.State(ctx)
		if err != nil {
			return nil, err
		}
		sk, dk := KernelKeys(st)
		v.States = States(st, sk, dk, snap.Table, hs)
	}
	rs, err := c.store.Results(ctx)
	if err != nil {
		return nil, err
	}
	v.RealServers = rs
	v.Redundancy = c.redundancyStatus()
	v.BGP = c.bgpStatus()
	v.Alerts = c.AlertDeliveries()
	v.Checker = c.CheckerStatus()
	if v.Followers, err = c.Followers(ctx); err != nil {
		return nil, err
	}
	return v, nil
}

// currentDesired is the current revision compiled: the daemon's, which it
// holds already, or (without a daemon) the store's.
func (c *Core) currentDesired(ctx context.Context) (int64, *ipvsmgr.Desired, error) {
	if rev, d := c.known(); d != nil {
		return rev, d, nil
	}
	st, rev, err := c.store.Current(ctx)
	if err != nil {
		return 0, nil, err
	}
	d, err := c.desiredFor(rev, st)
	return rev, d, err
}

func viewOf(t *ipvsmgr.Table) *StatusView {
	v := &StatusView{Services: []StatusService{}, States: []ServiceState{}, RealServers: []arpguard.Result{}}
	if t == nil {
		return v
	}
	v.Timeouts.TCP, v.Timeouts.TCPFin, v.Timeouts.UDP = t.Timeouts.TCP, t.Timeouts.TCPFin, t.Timeouts.UDP
	for _, s := range ipvsmgr.SortedServices(t.Services) {
		ss := StatusService{
			FWMark: s.Key.FWMark, Family: "ipv4", Scheduler: s.Scheduler, Flags: ipvsmgr.FlagNames(s),
			Stats: s.Stats, Servers: []StatusServer{},
		}
		if s.Key.Family == ipvsmgr.FamilyIPv6 {
			ss.Family = "ipv6"
		}
		if s.Key.FWMark == 0 {
			ss.Protocol, ss.Address, ss.Port = ipvsmgr.ProtocolName(s.Key.Protocol), s.Key.Addr.String(), s.Key.Port
		}
		if s.Flags&ipvsmgr.FlagPersistent != 0 {
			ss.Persistence = s.Timeout
		}
		for _, d := range s.Dests {
			ss.Servers = append(ss.Servers, StatusServer{
				Address: d.Key.Addr.String(), Port: d.Key.Port, Forwarding: d.Forward.String(), Weight: d.Weight,
				UpperThreshold: d.UpperThreshold, LowerThreshold: d.LowerThreshold,
				ActiveConns: d.ActiveConns, InactiveConns: d.InactiveConns, Stats: d.Stats,
			})
		}
		v.Services = append(v.Services, ss)
	}
	return v
}
