package server

import (
	"fmt"
	"slices"

	"github.com/ipvsctl/ipvsctl/ipvsmgr"
	"github.com/ipvsctl/ipvsctl/server/auth"
)

// Edit is one verb's change of the desired state, made by a pure function
// of the state: the same Edit is what a direct write commits (Core.Write)
// and what a draft stages (Core.StageEdits), so both validate alike, fail
// with the same errors and are audited under the same action.
type Edit struct {
	Action string    // the audit's action: "rs drain"
	Target string    // what it is on: "web r1"
	Role   auth.Role // the least role that may make it
	apply  func(st *ipvsmgr.State) (edit, error)
}

// ApplyTo makes the edit on st (in place).
func (e Edit) ApplyTo(st *ipvsmgr.State) error {
	_, err := e.apply(st)
	return err
}

func newEdit(action, target string, apply func(*ipvsmgr.State) (edit, error)) Edit {
	return Edit{Action: action, Target: target, Role: RoleFor(action), apply: apply}
}

// AddServiceEdit adds a virtual service.
func AddServiceEdit(svc ipvsmgr.Service) Edit {
	if svc.Servers == nil {
		svc.Servers = []ipvsmgr.Server{}
	}
	return newEdit("vs add", svc.Name, func(cur *ipvsmgr.State) (edit, error) {
		if svc.Name == "" {
			return edit{}, &ipvsmgr.ValidationError{Problems: []ipvsmgr.Problem{{Field: "name", Message: "a new virtual service needs a name"}}}
		}
		if _, err := FindService(cur, svc.Name); err == nil {
			return edit{}, errorf(CodeExists, "virtual service %q already exists (use vs set)", svc.Name)
		}
		cur.Services = append(slices.Clip(cur.Services), svc)
		return touch(len(cur.Services)-1, "vs add "+svc.Name), nil
	})
}

// PatchServiceEdit changes the given fields of a virtual service, in place.
func PatchServiceEdit(id string, p ServicePatch) Edit {
	return newEdit("vs set", id, func(cur *ipvsmgr.State) (edit, error) {
		i, err := FindService(cur, id)
		if err != nil {
			return edit{}, err
		}
		old := cur.Services[i]
		p.ApplyTo(&cur.Services[i])
		return touch(i, "vs set "+id+": "+ipvsmgr.Summary(ipvsmgr.Changes(&ipvsmgr.State{Services: []ipvsmgr.Service{old}},
			&ipvsmgr.State{Services: []ipvsmgr.Service{cur.Services[i]}}))), nil
	})
}

// RemoveServiceEdit removes a virtual service and its real servers.
func RemoveServiceEdit(id string) Edit {
	return newEdit("vs rm", id, func(cur *ipvsmgr.State) (edit, error) {
		i, err := FindService(cur, id)
		if err != nil {
			return edit{}, err
		}
		cur.Services = slices.Delete(slices.Clone(cur.Services), i, i+1)
		return edit{summary: "vs rm " + id, touched: -1, removed: i}, nil
	})
}

// ServiceEnabledEdit puts a virtual service into the kernel or takes it
// out, keeping it in the desired state.
func ServiceEnabledEdit(id string, on bool) Edit {
	verb := "vs " + enableVerb(on)
	return newEdit(verb, id, func(cur *ipvsmgr.State) (edit, error) {
		i, err := FindService(cur, id)
		if err != nil {
			return edit{}, err
		}
		cur.Services[i].Enabled = &on
		return touch(i, verb+" "+id), nil
	})
}

// AddServerEdit adds a real server to a virtual service.
func AddServerEdit(svcID string, rs ipvsmgr.Server) Edit {
	return newEdit("rs add", svcID+" "+orDefault(rs.Name, rs.Address), func(cur *ipvsmgr.State) (edit, error) {
		if rs.Address == "" {
			return edit{}, &ipvsmgr.ValidationError{Problems: []ipvsmgr.Problem{{Field: "address", Message: "a real server needs an address"}}}
		}
		si, err := FindService(cur, svcID)
		if err != nil {
			return edit{}, err
		}
		svc := &cur.Services[si]
		if rs.Name != "" {
			if _, err := FindServer(svc, rs.Name); err == nil {
				return edit{}, errorf(CodeExists, "virtual service %q already has a real server %q", svcID, rs.Name)
			}
		}
		// A new slice: the daemon's current state may share the old one.
		svc.Servers = append(slices.Clip(svc.Servers), rs)
		return touch(si, fmt.Sprintf("rs add %s %s", svcID, orDefault(rs.Name, rs.Address))), nil
	})
}

// PatchServerEdit changes the given fields of a real server, in place. An
// operator may make it when it changes only OperatorServerFields.
func PatchServerEdit(svcID, id string, p ServerPatch) Edit {
	e := serverEdit("set", svcID, id, func(s *ipvsmgr.Service, i int) { p.ApplyTo(&s.Servers[i]) })
	if !operatorPatch(p) {
		e.Role = auth.Admin
	}
	return e
}

// RemoveServerEdit removes a real server; one with connections is retired
// (kept at weight 0 in the kernel until they end).
func RemoveServerEdit(svcID, id string) Edit {
	return serverEdit("rm", svcID, id, func(s *ipvsmgr.Service, i int) { s.Servers = slices.Delete(s.Servers, i, i+1) })
}

// DrainServerEdit drains a real server: weight 0 in the kernel (no new
// connections, established ones go on), its configured weight kept.
func DrainServerEdit(svcID, id string) Edit {
	return serverEdit("drain", svcID, id, func(s *ipvsmgr.Service, i int) { s.Servers[i].Drained = true })
}

// ServerEnabledEdit enables a real server (ready: in the kernel at its
// configured weight, drained or disabled before) or disables it (maint:
// out of the kernel, retired first while it has connections).
func ServerEnabledEdit(svcID, id string, on bool) Edit {
	return serverEdit(enableVerb(on), svcID, id, func(s *ipvsmgr.Service, i int) {
		rs := &s.Servers[i]
		rs.Enabled = &on
		if on {
			rs.Drained = false
		}
	})
}

func serverEdit(verb, svcID, id string, change func(*ipvsmgr.Service, int)) Edit {
	return newEdit("rs "+verb, svcID+" "+id, func(cur *ipvsmgr.State) (edit, error) {
		si, err := FindService(cur, svcID)
		if err != nil {
			return edit{}, err
		}
		ri, err := FindServer(&cur.Services[si], id)
		if err != nil {
			return edit{}, err
		}
		svc := &cur.Services[si]
		svc.Servers = slices.Clone(svc.Servers) // the daemon's current state may share the old one
		change(svc, ri)
		return touch(si, fmt.Sprintf("rs %s %s %s", verb, svcID, id)), nil
	})
}

// SettingsEdit changes the given global settings.
func SettingsEdit(p SettingsPatch) Edit {
	return newEdit("settings", "", func(cur *ipvsmgr.State) (edit, error) {
		old := cur.Settings
		p.ApplyTo(&cur.Settings)
		return edit{summary: "settings: " + ipvsmgr.Summary(ipvsmgr.Changes(&ipvsmgr.State{Settings: old}, &ipvsmgr.State{Settings: cur.Settings})),
			touched: -1, removed: -1}, nil
	})
}

// batch is edits made as one change (one revision).
func batch(edits []Edit) func(cur *ipvsmgr.State) (edit, error) {
	if len(edits) == 1 {
		return edits[0].apply
	}
	return func(cur *ipvsmgr.State) (edit, error) {
		var sum string
		for i, e := range edits {
			ed, err := e.apply(cur)
			if i > 0 {
				sum += "; "
			}
			if sum += ed.summary; err != nil {
				return edit{summary: sum}, err
			}
		}
		return edit{summary: sum, touched: -1, removed: -1, whole: true}, nil
	}
}
