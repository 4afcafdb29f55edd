package server

import (
	"strconv"

	"github.com/ipvsctl/ipvsctl/ipvsmgr"
)

// The words an operator reads of a virtual service (ServiceState.State):
// the panel's tiles, GET /api/v1/status's "states" and ipvsctl status
// --states say the same.
const (
	StateUp       = "up"       // every real server that should take traffic does
	StateDegraded = "degraded" // some do not (Reason: how many)
	StateAllDown  = "all down" // none does, or it has none
	StateDown     = "down"     // not in the kernel
	StateDisabled = "disabled" // disabled in the desired state (for a real server: and out of the kernel)
	StateUnknown  = "unknown"  // no kernel table to say (no daemon, or before its first read)
)

// The words of a real server (ServerState.State), besides up, down,
// disabled and unknown.
const (
	StateDraining = "draining" // out of service but still in the kernel at weight 0 until its connections end (Reason: why)
	StateDrained  = "drained"  // drained (or weight 0) and without active connections
	StateFull     = "full"     // at its connection limit (upper_threshold)
)

// What the desired state says of a real server (ServerState.Admin).
const (
	AdminEnabled  = "enabled"
	AdminDrained  = "drained" // drained, or configured at weight 0
	AdminDisabled = "disabled"
	AdminRemoved  = "removed" // not in the desired state, still in the kernel until its connections end (retiring)
)

// ServiceState is one virtual service of the desired state matched with
// the kernel's table: one word with its reason, and its real servers'.
type ServiceState struct {
	ID      string `json:"id"` // how URLs and the verbs name it
	Name    string `json:"name,omitempty"`
	Service string `json:"service"` // -t 198.18.0.100:80, as ipvsadm names it
	Enabled bool   `json:"enabled"`
	// InKernel: the kernel has it (false when unknown).
	InKernel bool   `json:"in_kernel"`
	State    string `json:"state"`
	// Reason says why State is a problem ("" when it is not one).
	Reason  string        `json:"reason,omitempty"`
	Servers []ServerState `json:"servers"` // the desired state's, then the removed ones the kernel still has

	Key     ipvsmgr.ServiceKey      `json:"-"`
	Desired *ipvsmgr.Service        `json:"-"`
	Kernel  *ipvsmgr.VirtualService `json:"-"` // nil when the kernel has none (or it is unknown)
}

// ServerState is one real server of a ServiceState.
type ServerState struct {
	ID      string `json:"id"` // how the verbs name it in its service
	Name    string `json:"name,omitempty"`
	Address string `json:"address"` // address:port as the kernel has it
	Admin   string `json:"admin"`
	// Health is the checks' phase (up, down, going down 2/3, ...) or
	// unchecked.
	Health   string `json:"health"`
	InKernel bool   `json:"in_kernel"`
	State    string `json:"state"`
	// Reason says why State is a problem, or why a server drains ("" else).
	Reason string `json:"reason,omitempty"`

	Key      ipvsmgr.DestKey      `json:"-"`
	Desired  *ipvsmgr.Server      `json:"-"` // nil: removed from the desired state
	Dest     *ipvsmgr.Destination `json:"-"` // nil when the kernel has none
	HealthOf *HealthStatus        `json:"-"` // nil when the server has no check
}

// Serving says the server takes traffic (up or full).
func (s *ServerState) Serving() bool { return s.State == StateUp || s.State == StateFull }

// States is every service of st matched with table (nil: unknown) and the
// checks' health hs, in the desired state's order; sk and dk are st's
// kernel keys (KernelKeys).
func States(st *ipvsmgr.State, sk []ipvsmgr.ServiceKey, dk [][]ipvsmgr.DestKey, table *ipvsmgr.Table, hs map[ipvsmgr.ServerRef]*HealthStatus) []ServiceState {
	kernel := map[ipvsmgr.ServiceKey]*ipvsmgr.VirtualService{}
	if table != nil {
		for _, vs := range table.Services {
			kernel[vs.Key] = vs
		}
	}
	out := make([]ServiceState, len(st.Services))
	for i := range st.Services {
		out[i] = serviceState(&st.Services[i], sk[i], dk[i], kernel[sk[i]], table != nil, hs)
	}
	return out
}

func serviceState(svc *ipvsmgr.Service, key ipvsmgr.ServiceKey, dk []ipvsmgr.DestKey, vs *ipvsmgr.VirtualService, known bool,
	hs map[ipvsmgr.ServerRef]*HealthStatus) ServiceState {
	s := ServiceState{ID: ServiceID(svc), Name: svc.Name, Service: key.String(), Enabled: svc.IsEnabled(), InKernel: vs != nil,
		Key: key, Desired: svc, Kernel: vs, Servers: make([]ServerState, 0, len(svc.Servers))}
	dests := map[ipvsmgr.DestKey]*ipvsmgr.Destination{}
	if vs != nil {
		for _, d := range vs.Dests {
			dests[d.Key] = d
		}
	}
	serving, shouldServe := 0, 0
	for j := range svc.Servers {
		var dkey ipvsmgr.DestKey
		if j < len(dk) {
			dkey = dk[j]
		}
		rs := &svc.Servers[j]
		sr := ServerState{ID: ServerID(rs), Name: rs.Name, Address: dkey.String(), Health: "unchecked", Key: dkey, Desired: rs, Dest: dests[dkey]}
		delete(dests, dkey)
		if h := hs[ipvsmgr.ServerRef{Service: key, Server: dkey}]; h != nil {
			sr.Health, sr.HealthOf = h.Phase, h
		}
		switch {
		case !rs.IsEnabled():
			sr.Admin = AdminDisabled
		case rs.Drained || rs.EffectiveWeight() == 0:
			sr.Admin = AdminDrained
		default:
			sr.Admin = AdminEnabled
		}
		sr.InKernel = sr.Dest != nil
		if s.Enabled && sr.Admin == AdminEnabled {
			shouldServe++
		}
		sr.State, sr.Reason = serverWord(&sr, s.Enabled, known)
		if sr.State == StateUp {
			serving++
		}
		s.Servers = append(s.Servers, sr)
	}
	if vs != nil {
		for _, d := range vs.Dests {
			if dests[d.Key] == nil {
				continue
			}
			s.Servers = append(s.Servers, ServerState{ID: d.Key.String(), Address: d.Key.String(), Admin: AdminRemoved, Health: "unchecked",
				InKernel: true, State: StateDraining, Reason: "removed from the desired state: retiring at weight 0 until its connections end",
				Key: d.Key, Dest: d})
		}
	}
	s.State, s.Reason = serviceWord(&s, known, serving, shouldServe)
	return s
}

// serverWord is what a real server is doing, and why when that is a
// problem or it drains.
func serverWord(sr *ServerState, svcEnabled, known bool) (string, string) {
	switch {
	case !known:
		return StateUnknown, ""
	case !svcEnabled:
		if sr.InKernel {
			return StateDraining, "its service is disabled: at weight 0 until its connections end"
		}
		return StateDisabled, ""
	case sr.Admin == AdminDisabled:
		if sr.InKernel {
			return StateDraining, "disabled: at weight 0 until its connections end"
		}
		return StateDisabled, ""
	case sr.Admin == AdminDrained:
		if sr.Dest != nil && sr.Dest.ActiveConns > 0 {
			return StateDraining, "drained: " + strconv.FormatUint(uint64(sr.Dest.ActiveConns), 10) + " active connections left"
		}
		return StateDrained, ""
	case sr.HealthOf != nil && sr.HealthOf.Phase == PhaseMaintenance:
		if sr.Dest != nil && sr.Dest.ActiveConns > 0 {
			return StateDraining, sr.HealthOf.Reason + ": " + strconv.FormatUint(uint64(sr.Dest.ActiveConns), 10) + " active connections left"
		}
		return StateDrained, sr.HealthOf.Reason
	case !sr.InKernel:
		return StateDown, "not in the kernel"
	case sr.Dest.Weight == 0:
		return StateDown, "weight 0 in the kernel"
	case sr.Desired.UpperThreshold > 0 && int(sr.Dest.ActiveConns) >= sr.Desired.UpperThreshold:
		return StateFull, "at its connection limit"
	}
	return StateUp, ""
}

func serviceWord(s *ServiceState, known bool, serving, shouldServe int) (string, string) {
	switch {
	case !s.Enabled:
		return StateDisabled, ""
	case !known:
		return StateUnknown, ""
	case !s.InKernel:
		return StateDown, "not in the kernel"
	case len(s.Servers) == 0:
		return StateAllDown, "no real servers"
	case serving == 0:
		return StateAllDown, "no real server takes traffic"
	case serving < shouldServe:
		return StateDegraded, strconv.Itoa(shouldServe-serving) + " of " + strconv.Itoa(shouldServe) + " real servers not taking traffic"
	}
	return StateUp, ""
}
