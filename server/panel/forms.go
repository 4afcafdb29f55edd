package panel

import (
	"cmp"
	"net/http"
	"slices"
	"strconv"
	"strings"

	"github.com/ipvsctl/ipvsctl/ipvsmgr"
	"github.com/ipvsctl/ipvsctl/server"
)

var serviceFields = []string{"name", "kind", "protocol", "address", "port", "fwmark", "match", "interface", "scheduler",
	"scheduler_flags", "one_packet", "persistence", "persistence_netmask", "forwarding", "enabled", "group"}

var serverFields = []string{"name", "address", "port", "weight", "forwarding", "upper_threshold", "lower_threshold", "enabled", "health"}

// formFields are the fields of the service or the real-server form that
// an error may be shown beside.
func formFields(serverForm bool) []string {
	if serverForm {
		return append(slices.Clip(serverFields), checkFieldNames(true)...)
	}
	return append(slices.Clip(serviceFields), checkFieldNames(false)...)
}

// serviceForm fills a form from a service (to edit it).
func serviceForm(s *ipvsmgr.Service) *form {
	f := newForm()
	f.Values["name"] = s.Name
	f.Values["kind"] = "port"
	if s.FWMark != 0 {
		f.Values["kind"] = "fwmark"
		f.Values["fwmark"] = strconv.FormatUint(uint64(s.FWMark), 10)
	}
	f.Values["protocol"] = s.Protocol
	f.Values["address"] = s.Address
	if s.Port != 0 {
		f.Values["port"] = strconv.Itoa(s.Port)
	}
	var lines []string
	for _, m := range s.Match {
		ports := make([]string, len(m.Ports))
		for i, p := range m.Ports {
			ports[i] = strconv.Itoa(p)
		}
		lines = append(lines, m.Protocol+" "+strings.Join(ports, ","))
	}
	f.Values["match"] = strings.Join(lines, "\n")
	f.Values["interface"] = s.Interface
	f.Values["scheduler"] = s.Scheduler
	f.Multi["scheduler_flags"] = s.SchedulerFlags
	if s.OnePacket {
		f.Values["one_packet"] = "1"
	}
	if s.Persistence != 0 {
		f.Values["persistence"] = strconv.Itoa(s.Persistence)
	}
	f.Values["persistence_netmask"] = s.PersistenceNetmask
	f.Values["forwarding"] = s.Forwarding
	f.Values["group"] = s.Group
	if s.IsEnabled() {
		f.Values["enabled"] = "1"
	}
	typ := formType(s.Check, false)
	h := healthOf(s.Check, s.SorryServer, s.Quorum)
	h.Hysteresis = s.Hysteresis
	f.fillHealth(h, checkRows(false, "", typ), typ)
	return f
}

// parseServiceForm reads a posted service form; errors it can see without
// the core (a port that is not a number) go beside their field.
func parseServiceForm(r *http.Request) (*form, ipvsmgr.Service) {
	f := newForm()
	for _, k := range serviceFields {
		f.Values[k] = strings.TrimSpace(r.PostFormValue(k))
	}
	f.Values["match"] = r.PostFormValue("match")
	f.Multi["scheduler_flags"] = r.PostForm["scheduler_flags"]
	var s ipvsmgr.Service
	s.Name = f.V("name")
	s.Address = f.V("address")
	s.Interface = f.V("interface")
	s.Scheduler = f.V("scheduler")
	s.SchedulerFlags = f.Multi["scheduler_flags"]
	s.OnePacket = f.V("one_packet") != ""
	s.Persistence = f.intField("persistence")
	s.PersistenceNetmask = f.V("persistence_netmask")
	s.Forwarding = f.V("forwarding")
	s.Group = f.V("group")
	on := f.V("enabled") != ""
	s.Enabled = &on
	if f.V("kind") == "fwmark" {
		s.FWMark = uint32(f.intField("fwmark"))
		if s.FWMark == 0 {
			f.set("fwmark", "a fwmark service needs a mark above 0")
		}
		s.Match = f.matchField()
	} else {
		s.Protocol = f.V("protocol")
		s.Port = f.intField("port")
	}
	h := f.readHealth(r, checkRows(false, "", ""), false, "")
	s.Check, s.SorryServer, s.Quorum, s.Hysteresis = h.checkOf(), h.sorryOf(), h.Quorum, h.Hysteresis
	return f, s
}

func (f *form) intField(name string) int {
	v := f.V(name)
	if v == "" {
		return 0
	}
	n, err := strconv.Atoi(v)
	if err != nil {
		f.set(name, strconv.Quote(v)+" is not a whole number")
	}
	return n
}

// matchField reads match rules, one a line: "tcp 80,443".
func (f *form) matchField() []ipvsmgr.Match {
	var out []ipvsmgr.Match
	for i, line := range strings.Split(f.V("match"), "\n") {
		fs := strings.Fields(strings.ReplaceAll(line, ",", " "))
		if len(fs) == 0 {
			continue
		}
		m := ipvsmgr.Match{Protocol: strings.ToLower(fs[0]), Ports: []int{}}
		for _, p := range fs[1:] {
			n, err := strconv.Atoi(p)
			if err != nil {
				f.set("match", "line "+strconv.Itoa(i+1)+": "+strconv.Quote(p)+" is not a port (write: tcp 80,443)")
				continue
			}
			m.Ports = append(m.Ports, n)
		}
		out = append(out, m)
	}
	return out
}

// patchOf is the patch that makes a service what the form says: every field.
func patchOf(s *ipvsmgr.Service) server.ServicePatch {
	match := s.Match
	flags := s.SchedulerFlags
	if flags == nil {
		flags = []string{}
	}
	sorry := cmp.Or(s.SorryServer, &ipvsmgr.SorryServer{}) // an empty one removes it
	return server.ServicePatch{Name: &s.Name, Protocol: &s.Protocol, Address: &s.Address, Port: &s.Port, FWMark: &s.FWMark,
		Match: &match, Interface: &s.Interface, Scheduler: &s.Scheduler, SchedulerFlags: &flags, OnePacket: &s.OnePacket,
		Persistence: &s.Persistence, PersistenceNetmask: &s.PersistenceNetmask, Forwarding: &s.Forwarding, Enabled: s.Enabled,
		Check: checkPatch(s.Check), SorryServer: sorry, Quorum: &s.Quorum, Group: &s.Group, Hysteresis: &s.Hysteresis}
}

// checkPatch is the patch's check for a form's: an empty one removes it.
func checkPatch(c *ipvsmgr.Check) *ipvsmgr.Check {
	if c == nil {
		return &ipvsmgr.Check{}
	}
	return c
}

// serverForm fills a form from a real server; inherit is its service's check type.
func serverForm(rs *ipvsmgr.Server, inherit string) *form {
	f := newForm()
	f.Values["name"] = rs.Name
	f.Values["address"] = rs.Address
	if rs.Port != 0 {
		f.Values["port"] = strconv.Itoa(rs.Port)
	}
	f.Values["weight"] = strconv.Itoa(rs.EffectiveWeight())
	f.Values["forwarding"] = rs.Forwarding
	if rs.UpperThreshold != 0 {
		f.Values["upper_threshold"] = strconv.Itoa(rs.UpperThreshold)
	}
	if rs.LowerThreshold != 0 {
		f.Values["lower_threshold"] = strconv.Itoa(rs.LowerThreshold)
	}
	if rs.IsEnabled() {
		f.Values["enabled"] = "1"
	}
	if rs.Health != "auto" {
		f.Values["health"] = rs.Health
	}
	f.fillHealth(healthOf(rs.Check, nil, 0), checkRows(true, inherit, ""), formType(rs.Check, true))
	return f
}

// parseServerForm reads a posted real-server form; inherit is its
// service's check type, which says which check fields the server's
// overrides may set.
func parseServerForm(r *http.Request, inherit string) (*form, ipvsmgr.Server) {
	f := newForm()
	for _, k := range serverFields {
		f.Values[k] = strings.TrimSpace(r.PostFormValue(k))
	}
	var rs ipvsmgr.Server
	rs.Name = f.V("name")
	rs.Address = f.V("address")
	rs.Port = f.intField("port")
	if f.V("weight") != "" {
		w := f.intField("weight")
		rs.Weight = &w
	}
	rs.Forwarding = f.V("forwarding")
	rs.UpperThreshold = f.intField("upper_threshold")
	rs.LowerThreshold = f.intField("lower_threshold")
	on := f.V("enabled") != ""
	rs.Enabled = &on
	rs.Health = f.V("health")
	rs.Check = f.readHealth(r, checkRows(true, inherit, ""), true, inherit).checkOf()
	return f, rs
}

func serverPatchOf(rs *ipvsmgr.Server) server.ServerPatch {
	return server.ServerPatch{Name: &rs.Name, Address: &rs.Address, Port: &rs.Port, Weight: rs.Weight, Forwarding: &rs.Forwarding,
		UpperThreshold: &rs.UpperThreshold, LowerThreshold: &rs.LowerThreshold, Enabled: rs.Enabled, Health: &rs.Health,
		Check: checkPatch(rs.Check)}
}

func baseOf(r *http.Request) int64 {
	n, _ := strconv.ParseInt(r.PostFormValue("base"), 10, 64)
	return n
}
