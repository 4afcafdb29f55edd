package ipvsmgr

import (
	"encoding/json"
	"fmt"
	"sort"
	"strings"
)

// serviceID names a service in change lists: its name, or its key.
func serviceID(s *Service) string {
	if s.Name != "" {
		return s.Name
	}
	if s.FWMark != 0 {
		return fmt.Sprintf("fwmark %d", s.FWMark)
	}
	return fmt.Sprintf("%s %s:%d", s.Protocol, s.Address, s.Port)
}

func serverID(s *Server) string {
	if s.Name != "" {
		return s.Name
	}
	if s.Port != 0 {
		return fmt.Sprintf("%s:%d", s.Address, s.Port)
	}
	return s.Address
}

// fields flattens a value to its JSON fields, so that two versions of a
// service or server can be compared field by field.
func fields(v any, skip string) map[string]string {
	b, _ := json.Marshal(v)
	var m map[string]json.RawMessage
	_ = json.Unmarshal(b, &m)
	out := make(map[string]string, len(m))
	for k, raw := range m {
		if k != skip {
			out[k] = string(raw)
		}
	}
	return out
}

func fieldChanges(prefix string, a, b map[string]string) []string {
	keys := map[string]bool{}
	for k := range a {
		keys[k] = true
	}
	for k := range b {
		keys[k] = true
	}
	var names []string
	for k := range keys {
		if a[k] != b[k] {
			names = append(names, k)
		}
	}
	sort.Strings(names)
	var out []string
	for _, k := range names {
		from, to := a[k], b[k]
		if from == "" {
			from = "(unset)"
		}
		if to == "" {
			to = "(unset)"
		}
		out = append(out, fmt.Sprintf("~ %s %s: %s -> %s", prefix, k, from, to))
	}
	return out
}

// Changes describes what differs from old to new, one line per change:
// "+ service web", "- server web/r2", "~ service web scheduler: "wlc" -> "rr"".
func Changes(old, new *State) []string {
	var out []string
	out = append(out, fieldChanges("settings", fields(old.Settings, ""), fields(new.Settings, ""))...)
	before := map[string]*Service{}
	for i := range old.Services {
		before[serviceID(&old.Services[i])] = &old.Services[i]
	}
	seen := map[string]bool{}
	for i := range new.Services {
		s := &new.Services[i]
		id := serviceID(s)
		seen[id] = true
		o, ok := before[id]
		if !ok {
			out = append(out, "+ service "+id)
			continue
		}
		out = append(out, fieldChanges("service "+id, fields(o, "servers"), fields(s, "servers"))...)
		out = append(out, serverChanges(id, o.Servers, s.Servers)...)
	}
	for i := range old.Services {
		if id := serviceID(&old.Services[i]); !seen[id] {
			out = append(out, "- service "+id)
		}
	}
	if len(old.Imported) != len(new.Imported) {
		out = append(out, fmt.Sprintf("~ imported keys: %d -> %d", len(old.Imported), len(new.Imported)))
	}
	return out
}

func serverChanges(svc string, old, new []Server) []string {
	var out []string
	before := map[string]*Server{}
	for i := range old {
		before[serverID(&old[i])] = &old[i]
	}
	seen := map[string]bool{}
	for i := range new {
		id := serverID(&new[i])
		seen[id] = true
		o, ok := before[id]
		if !ok {
			out = append(out, "+ server "+svc+"/"+id)
			continue
		}
		out = append(out, fieldChanges("server "+svc+"/"+id, fields(o, ""), fields(&new[i], ""))...)
	}
	for i := range old {
		if id := serverID(&old[i]); !seen[id] {
			out = append(out, "- server "+svc+"/"+id)
		}
	}
	return out
}

// Summary is a one-line account of Changes, for a revision.
func Summary(changes []string) string {
	switch len(changes) {
	case 0:
		return "no change"
	case 1, 2, 3:
		return strings.Join(changes, "; ")
	}
	return fmt.Sprintf("%s; %s; and %d more changes", changes[0], changes[1], len(changes)-2)
}
