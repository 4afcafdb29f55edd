package server

import (
	"reflect"

	"github.com/ipvsctl/ipvsctl/ipvsmgr"
)

// ServicePatch changes the fields of a virtual service that are set; a nil
// field is unchanged. A CLI flag set, a JSON body and a form all become one.
type ServicePatch struct {
	Name               *string          `json:"name,omitempty"`
	Protocol           *string          `json:"protocol,omitempty"`
	Address            *string          `json:"address,omitempty"`
	Port               *int             `json:"port,omitempty"`
	FWMark             *uint32          `json:"fwmark,omitempty"`
	Match              *[]ipvsmgr.Match `json:"match,omitempty"`
	Interface          *string          `json:"interface,omitempty"`
	Scheduler          *string          `json:"scheduler,omitempty"`
	SchedulerFlags     *[]string        `json:"scheduler_flags,omitempty"`
	OnePacket          *bool            `json:"one_packet,omitempty"`
	Persistence        *int             `json:"persistence,omitempty"`
	PersistenceNetmask *string          `json:"persistence_netmask,omitempty"`
	Forwarding         *string          `json:"forwarding,omitempty"`
	Enabled            *bool            `json:"enabled,omitempty"`
	// Check replaces the service's health check; an empty one ({}) removes it.
	Check *ipvsmgr.Check `json:"check,omitempty"`
	// SorryServer replaces the sorry server; one without an address or a
	// port removes it.
	SorryServer *ipvsmgr.SorryServer `json:"sorry_server,omitempty"`
	Quorum      *int                 `json:"quorum,omitempty"`
	Hysteresis  *int                 `json:"hysteresis,omitempty"`
	// QuorumUp and QuorumDown set the programs run when the service gains
	// or loses its quorum (a list, or one command line); [] removes one.
	QuorumUp   *ipvsmgr.Argv `json:"quorum_up,omitempty"`
	QuorumDown *ipvsmgr.Argv `json:"quorum_down,omitempty"`
	// Group sets the service's group ("" takes it out of one).
	Group *string `json:"group,omitempty"`
}

// ApplyTo sets the patch's fields on s. Giving a firewall mark without a
// protocol makes the service a fwmark service (which has none).
func (p *ServicePatch) ApplyTo(s *ipvsmgr.Service) {
	set(&s.Name, p.Name)
	set(&s.Protocol, p.Protocol)
	set(&s.Address, p.Address)
	set(&s.Port, p.Port)
	if p.FWMark != nil {
		s.FWMark = *p.FWMark
		if *p.FWMark != 0 && p.Protocol == nil {
			s.Protocol = ""
		}
	}
	set(&s.Match, p.Match)
	set(&s.Interface, p.Interface)
	set(&s.Scheduler, p.Scheduler)
	set(&s.SchedulerFlags, p.SchedulerFlags)
	set(&s.OnePacket, p.OnePacket)
	set(&s.Persistence, p.Persistence)
	set(&s.PersistenceNetmask, p.PersistenceNetmask)
	set(&s.Forwarding, p.Forwarding)
	if p.Enabled != nil {
		on := *p.Enabled
		s.Enabled = &on
	}
	if p.Check != nil {
		s.Check = checkOrNil(p.Check)
	}
	if p.SorryServer != nil {
		s.SorryServer = nil
		if *p.SorryServer != (ipvsmgr.SorryServer{}) {
			sorry := *p.SorryServer
			s.SorryServer = &sorry
		}
	}
	set(&s.Quorum, p.Quorum)
	set(&s.Group, p.Group)
	set(&s.Hysteresis, p.Hysteresis)
	for _, q := range []struct{ dst, p *ipvsmgr.Argv }{{&s.QuorumUp, p.QuorumUp}, {&s.QuorumDown, p.QuorumDown}} {
		if q.p != nil {
			*q.dst = nil
			if len(*q.p) > 0 {
				*q.dst = append(ipvsmgr.Argv{}, *q.p...)
			}
		}
	}
}

// checkOrNil is a copy of c, or nil for an empty check (which removes one).
func checkOrNil(c *ipvsmgr.Check) *ipvsmgr.Check {
	if reflect.ValueOf(*c).IsZero() {
		return nil
	}
	cp := *c
	return &cp
}

// ServerPatch changes the fields of a real server that are set.
type ServerPatch struct {
	Name           *string `json:"name,omitempty"`
	Address        *string `json:"address,omitempty"`
	Port           *int    `json:"port,omitempty"`
	Weight         *int    `json:"weight,omitempty"`
	Forwarding     *string `json:"forwarding,omitempty"`
	UpperThreshold *int    `json:"upper_threshold,omitempty"`
	LowerThreshold *int    `json:"lower_threshold,omitempty"`
	Enabled        *bool   `json:"enabled,omitempty"`
	// Drained drains the server (true) or makes it ready again (false),
	// its configured weight kept either way.
	Drained *bool `json:"drained,omitempty"`
	// Health forces the server up or down whatever its checks say; auto
	// (kept as no value) follows them again.
	Health *string `json:"health,omitempty"`
	// Check replaces the fields of the service's check the server overrides;
	// an empty one ({}) removes its overrides.
	Check *ipvsmgr.Check `json:"check,omitempty"`
}

// ApplyTo sets the patch's fields on s.
func (p *ServerPatch) ApplyTo(s *ipvsmgr.Server) {
	if p.Health != nil {
		s.Health = *p.Health
		if s.Health == "auto" {
			s.Health = ""
		}
	}
	set(&s.Name, p.Name)
	set(&s.Address, p.Address)
	set(&s.Port, p.Port)
	if p.Weight != nil {
		w := *p.Weight
		s.Weight = &w
	}
	set(&s.Forwarding, p.Forwarding)
	set(&s.UpperThreshold, p.UpperThreshold)
	set(&s.LowerThreshold, p.LowerThreshold)
	if p.Enabled != nil {
		on := *p.Enabled
		s.Enabled = &on
	}
	set(&s.Drained, p.Drained)
	if p.Check != nil {
		s.Check = checkOrNil(p.Check)
	}
}

func set[T any](dst *T, v *T) {
	if v != nil {
		*dst = *v
	}
}

// SettingsPatch changes the global settings that are set.
type SettingsPatch struct {
	Network             *string `json:"network,omitempty"`
	TCPTimeout          *int    `json:"tcp_timeout,omitempty"`
	TCPFinTimeout       *int    `json:"tcpfin_timeout,omitempty"`
	UDPTimeout          *int    `json:"udp_timeout,omitempty"`
	KeepForeignServices *bool   `json:"keep_foreign_services,omitempty"`
	RetireTimeout       *int    `json:"retire_timeout,omitempty"`
	// DrainTimeout is retire_timeout's old name, still taken (retire_timeout wins).
	DrainTimeout *int `json:"drain_timeout,omitempty"`
	// MaintenanceDir sets settings.maintenance_dir (ldirectord's
	// maintenancedir); "" clears it.
	MaintenanceDir *string `json:"maintenance_dir,omitempty"`
	// Redundancy replaces settings.redundancy; an empty one ({}) removes it.
	Redundancy *ipvsmgr.Redundancy `json:"redundancy,omitempty"`
}

// ApplyTo sets the patch's fields on s.
func (p *SettingsPatch) ApplyTo(s *ipvsmgr.Settings) {
	set(&s.Network, p.Network)
	set(&s.TCPTimeout, p.TCPTimeout)
	set(&s.TCPFinTimeout, p.TCPFinTimeout)
	set(&s.UDPTimeout, p.UDPTimeout)
	set(&s.KeepForeignServices, p.KeepForeignServices)
	set(&s.RetireTimeout, p.DrainTimeout)
	set(&s.RetireTimeout, p.RetireTimeout)
	set(&s.MaintenanceDir, p.MaintenanceDir)
	if p.Redundancy != nil {
		s.Redundancy = nil
		if !reflect.ValueOf(*p.Redundancy).IsZero() {
			red := *p.Redundancy
			s.Redundancy = &red
		}
	}
}
