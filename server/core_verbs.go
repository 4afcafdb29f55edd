package server

import (
	"context"
	"fmt"
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

// ServerID is how URLs and the verbs name a real server in its service:
// its name, else address:port, else its address (FindServer takes each).
func ServerID(rs *ipvsmgr.Server) string {
	if rs.Name != "" {
		return rs.Name
	}
	if rs.Port != 0 {
		return rs.Address + ":" + strconv.Itoa(rs.Port)
	}
	return rs.Address
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
	return c.Write(ctx, a, o, AddServiceEdit(svc))
}

// PatchService changes the given fields of a virtual service, in place.
func (c *Core) PatchService(ctx context.Context, a Actor, id string, p ServicePatch, o WriteOptions) (*WriteResult, error) {
	return c.Write(ctx, a, o, PatchServiceEdit(id, p))
}

// RemoveService removes a virtual service and its real servers.
func (c *Core) RemoveService(ctx context.Context, a Actor, id string, o WriteOptions) (*WriteResult, error) {
	return c.Write(ctx, a, o, RemoveServiceEdit(id))
}

// SetServiceEnabled puts a virtual service into the kernel or takes it out,
// keeping it in the desired state.
func (c *Core) SetServiceEnabled(ctx context.Context, a Actor, id string, on bool, o WriteOptions) (*WriteResult, error) {
	return c.Write(ctx, a, o, ServiceEnabledEdit(id, on))
}

func enableVerb(on bool) string {
	if on {
		return "enable"
	}
	return "disable"
}

// AddServer adds a real server to a virtual service.
func (c *Core) AddServer(ctx context.Context, a Actor, svcID string, rs ipvsmgr.Server, o WriteOptions) (*WriteResult, error) {
	return c.Write(ctx, a, o, AddServerEdit(svcID, rs))
}

// PatchServer changes the given fields of a real server, in place.
func (c *Core) PatchServer(ctx context.Context, a Actor, svcID, id string, p ServerPatch, o WriteOptions) (*WriteResult, error) {
	return c.Write(ctx, a, o, PatchServerEdit(svcID, id, p))
}

// RemoveServer removes a real server; one with connections is retired
// first (weight 0 until they end, or settings.retire_timeout).
func (c *Core) RemoveServer(ctx context.Context, a Actor, svcID, id string, o WriteOptions) (*WriteResult, error) {
	return c.Write(ctx, a, o, RemoveServerEdit(svcID, id))
}

// DrainServer drains a real server: weight 0 in the kernel, no new
// connections, established ones go on; its configured weight is kept, and
// SetServerEnabled(on) gives it back.
func (c *Core) DrainServer(ctx context.Context, a Actor, svcID, id string, o WriteOptions) (*WriteResult, error) {
	return c.Write(ctx, a, o, DrainServerEdit(svcID, id))
}

// SetServerEnabled makes a real server ready (in the kernel at its
// configured weight, undrained) or puts it in maintenance (out of the
// kernel, retired first while it has connections).
func (c *Core) SetServerEnabled(ctx context.Context, a Actor, svcID, id string, on bool, o WriteOptions) (*WriteResult, error) {
	return c.Write(ctx, a, o, ServerEnabledEdit(svcID, id, on))
}

// SetSettings changes the given global settings.
func (c *Core) SetSettings(ctx context.Context, a Actor, p SettingsPatch, o WriteOptions) (*WriteResult, error) {
	return c.Write(ctx, a, o, SettingsEdit(p))
}

// Rollback makes revision rev's desired state current again, as a new revision.
func (c *Core) Rollback(ctx context.Context, a Actor, rev int64, o WriteOptions) (*WriteResult, error) {
	r, err := c.store.Revision(ctx, rev)
	if err != nil {
		c.audit(ctx, a, "rollback", strconv.FormatInt(rev, 10), nil, err, "")
		return nil, err
	}
	return c.Write(ctx, a, o, newEdit("rollback", strconv.FormatInt(rev, 10), func(cur *ipvsmgr.State) (edit, error) {
		*cur = *r.State
		return edit{summary: fmt.Sprintf("rollback to revision %d", rev), touched: -1, removed: -1, whole: true}, nil
	}))
}
