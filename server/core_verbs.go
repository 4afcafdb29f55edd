package server

import (
	"context"
	"fmt"
	"slices"
	"strconv"
	"strings"

	"github.com/ipvsctl/ipvsctl/ipvsmgr"
)

// ServiceID is how a virtual service is named: its name, PROTO:ADDRESS:PORT or fwmark:N.
func ServiceID(s *ipvsmgr.Service) string {
	if s.Name != "" {
		return s.Name
	}
	return serviceKey(s)
}

func serviceKey(s *ipvsmgr.Service) string {
	if s.FWMark != 0 {
		return fmt.Sprintf("fwmark:%d", s.FWMark)
	}
	return fmt.Sprintf("%s:%s:%d", strings.ToLower(orDefault(s.Protocol, "tcp")), s.Address, s.Port)
}

// FindService returns the index of the service named id: its name, or
// PROTO:ADDRESS:PORT, or fwmark:N.
func FindService(st *ipvsmgr.State, id string) (int, error) {
	for i := range st.Services {
		s := &st.Services[i]
		if s.Name == id || serviceKey(s) == id {
			return i, nil
		}
	}
	return -1, errorf(CodeNotFound, "no virtual service %q (give its name, PROTO:ADDRESS:PORT or fwmark:N)", id)
}

// FindServer returns the index of real server id (its name, ADDRESS or
// ADDRESS:PORT) in service s.
func FindServer(s *ipvsmgr.Service, id string) (int, error) {
	for i := range s.Servers {
		rs := &s.Servers[i]
		if rs.Name == id || rs.Address == id || rs.Address+":"+strconv.Itoa(rs.Port) == id {
			return i, nil
		}
	}
	return -1, errorf(CodeNotFound, "virtual service %q has no real server %q", orDefault(s.Name, s.Address), id)
}

func orDefault(s, def string) string {
	if s == "" {
		return def
	}
	return s
}

// AddService adds a virtual service.
func (c *Core) AddService(ctx context.Context, a Actor, svc ipvsmgr.Service, o WriteOptions) (*WriteResult, error) {
	if svc.Servers == nil {
		svc.Servers = []ipvsmgr.Server{}
	}
	return c.update(ctx, a, "vs add", svc.Name, o, func(cur *ipvsmgr.State) (edit, error) {
		if svc.Name == "" {
			return edit{}, &ipvsmgr.ValidationError{Problems: []ipvsmgr.Problem{{Field: "name", Message: "a new virtual service needs a name"}}}
		}
		if _, err := FindService(cur, svc.Name); err == nil {
			return edit{}, errorf(CodeExists, "virtual service %q already exists (use vs set)", svc.Name)
		}
		cur.Services = append(cur.Services, svc)
		return touch(len(cur.Services)-1, "vs add "+svc.Name), nil
	})
}

// PatchService changes the given fields of a virtual service, in place.
func (c *Core) PatchService(ctx context.Context, a Actor, id string, p ServicePatch, o WriteOptions) (*WriteResult, error) {
	return c.update(ctx, a, "vs set", id, o, func(cur *ipvsmgr.State) (edit, error) {
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

// RemoveService removes a virtual service and its real servers.
func (c *Core) RemoveService(ctx context.Context, a Actor, id string, o WriteOptions) (*WriteResult, error) {
	return c.update(ctx, a, "vs rm", id, o, func(cur *ipvsmgr.State) (edit, error) {
		i, err := FindService(cur, id)
		if err != nil {
			return edit{}, err
		}
		cur.Services = slices.Delete(cur.Services, i, i+1)
		return edit{summary: "vs rm " + id, touched: -1, removed: i}, nil
	})
}

// SetServiceEnabled puts a virtual service into the kernel or takes it out,
// keeping it in the desired state.
func (c *Core) SetServiceEnabled(ctx context.Context, a Actor, id string, on bool, o WriteOptions) (*WriteResult, error) {
	return c.update(ctx, a, "vs "+enableVerb(on), id, o, func(cur *ipvsmgr.State) (edit, error) {
		i, err := FindService(cur, id)
		if err != nil {
			return edit{}, err
		}
		cur.Services[i].Enabled = &on
		return touch(i, "vs "+enableVerb(on)+" "+id), nil
	})
}

func enableVerb(on bool) string {
	if on {
		return "enable"
	}
	return "disable"
}

// AddServer adds a real server to a virtual service.
func (c *Core) AddServer(ctx context.Context, a Actor, svcID string, rs ipvsmgr.Server, o WriteOptions) (*WriteResult, error) {
	return c.update(ctx, a, "rs add", svcID+" "+orDefault(rs.Name, rs.Address), o, func(cur *ipvsmgr.State) (edit, error) {
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

// PatchServer changes the given fields of a real server, in place.
func (c *Core) PatchServer(ctx context.Context, a Actor, svcID, id string, p ServerPatch, o WriteOptions) (*WriteResult, error) {
	return c.editServer(ctx, a, "set", svcID, id, o, func(s *ipvsmgr.Service, i int) { p.ApplyTo(&s.Servers[i]) })
}

// RemoveServer removes a real server; with active connections it drains at weight 0 first.
func (c *Core) RemoveServer(ctx context.Context, a Actor, svcID, id string, o WriteOptions) (*WriteResult, error) {
	return c.editServer(ctx, a, "rm", svcID, id, o, func(s *ipvsmgr.Service, i int) {
		s.Servers = append(s.Servers[:i], s.Servers[i+1:]...)
	})
}

// DrainServer sets a real server's weight to 0: no new connections, established ones go on.
func (c *Core) DrainServer(ctx context.Context, a Actor, svcID, id string, o WriteOptions) (*WriteResult, error) {
	return c.editServer(ctx, a, "drain", svcID, id, o, func(s *ipvsmgr.Service, i int) {
		zero := 0
		s.Servers[i].Weight = &zero
	})
}

// SetServerEnabled puts a real server into the kernel or takes it out (drained first).
func (c *Core) SetServerEnabled(ctx context.Context, a Actor, svcID, id string, on bool, o WriteOptions) (*WriteResult, error) {
	return c.editServer(ctx, a, enableVerb(on), svcID, id, o, func(s *ipvsmgr.Service, i int) { s.Servers[i].Enabled = &on })
}

func (c *Core) editServer(ctx context.Context, a Actor, verb, svcID, id string, o WriteOptions, change func(*ipvsmgr.Service, int)) (*WriteResult, error) {
	return c.update(ctx, a, "rs "+verb, svcID+" "+id, o, func(cur *ipvsmgr.State) (edit, error) {
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

// Rollback makes revision rev's desired state current again, as a new revision.
func (c *Core) Rollback(ctx context.Context, a Actor, rev int64, o WriteOptions) (*WriteResult, error) {
	r, err := c.store.Revision(ctx, rev)
	if err != nil {
		c.audit(ctx, a, "rollback", strconv.FormatInt(rev, 10), nil, err, "")
		return nil, err
	}
	return c.update(ctx, a, "rollback", strconv.FormatInt(rev, 10), o, func(cur *ipvsmgr.State) (edit, error) {
		*cur = *r.State
		return edit{summary: fmt.Sprintf("rollback to revision %d", rev), touched: -1, removed: -1, whole: true}, nil
	})
}
