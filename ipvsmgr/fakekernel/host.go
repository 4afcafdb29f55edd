package fakekernel

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"
	"sync"

	"github.com/ipvsctl/ipvsctl/ipvsmgr"
	"github.com/ipvsctl/ipvsctl/ipvsmgr/kernel"
)

// Host is a fake of what the director changes besides the IPVS table: VIPs
// on interfaces, fwmark mangle rules, and the sysctls a state needs. It
// records each change as the command that would make it.
type Host struct {
	mu      sync.Mutex
	vips    map[ipvsmgr.VIP]bool
	marks   map[string]bool
	sysctls map[string]string
	log     []string
	failAdd int // the next EnsureVIP calls that fail
}

// NewHost returns a host with no VIPs, no rules and forwarding off.
func NewHost() *Host {
	return &Host{vips: map[ipvsmgr.VIP]bool{}, marks: map[string]bool{}, sysctls: map[string]string{}}
}

// Ops returns the changes made so far as commands, and forgets them.
func (h *Host) Ops() []string {
	h.mu.Lock()
	defer h.mu.Unlock()
	out := h.log
	h.log = nil
	return out
}

// Sysctl returns a sysctl's value ("" when never set).
func (h *Host) Sysctl(key string) string {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.sysctls[key]
}

// AddVIP puts an address on an interface as someone else would.
func (h *Host) AddVIP(v ipvsmgr.VIP) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.vips[v] = true
}

// FailAdds makes the next n additions of a VIP fail (netlink refusing one).
func (h *Host) FailAdds(n int) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.failAdd = n
}

func (h *Host) EnsureVIP(_ context.Context, v ipvsmgr.VIP) (bool, error) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if !h.vips[v] && h.failAdd > 0 {
		h.failAdd--
		return false, fmt.Errorf("add %s: file exists", v)
	}
	if h.vips[v] {
		return false, nil
	}
	h.vips[v] = true
	h.log = append(h.log, "ip addr add "+v.Addr.String()+" dev "+v.Interface)
	return true, nil
}

func (h *Host) RemoveVIP(_ context.Context, v ipvsmgr.VIP) error {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.vips[v] {
		delete(h.vips, v)
		h.log = append(h.log, "ip addr del "+v.Addr.String()+" dev "+v.Interface)
	}
	return nil
}

func (h *Host) HasVIP(_ context.Context, v ipvsmgr.VIP) (bool, error) {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.vips[v], nil
}

func markID(r ipvsmgr.MarkRule) string {
	ports := make([]string, len(r.Ports))
	for i, p := range r.Ports {
		ports[i] = strconv.Itoa(p)
	}
	return fmt.Sprintf("mark %d %s %s:%s", r.Mark, r.Protocol, r.Addr, strings.Join(ports, ","))
}

func (h *Host) planMarks(rules []ipvsmgr.MarkRule) (add, del []string) {
	want := map[string]bool{}
	for _, r := range rules {
		id := markID(r)
		want[id] = true
		if !h.marks[id] {
			add = append(add, id)
		}
	}
	for id := range h.marks {
		if !want[id] {
			del = append(del, id)
		}
	}
	slices.Sort(del)
	return add, del
}

func (h *Host) SyncMarks(_ context.Context, rules []ipvsmgr.MarkRule) error {
	h.mu.Lock()
	defer h.mu.Unlock()
	add, del := h.planMarks(rules)
	for _, id := range add {
		h.marks[id] = true
		h.log = append(h.log, "iptables -t mangle -A IPVSCTL-FWMARK "+id)
	}
	for _, id := range del {
		delete(h.marks, id)
		h.log = append(h.log, "iptables -t mangle -D IPVSCTL-FWMARK "+id)
	}
	return nil
}

func (h *Host) PlanMarks(_ context.Context, rules []ipvsmgr.MarkRule) ([]string, error) {
	h.mu.Lock()
	defer h.mu.Unlock()
	add, del := h.planMarks(rules)
	var out []string
	for _, id := range add {
		out = append(out, "iptables -t mangle -A IPVSCTL-FWMARK "+id)
	}
	for _, id := range del {
		out = append(out, "iptables -t mangle -D IPVSCTL-FWMARK "+id)
	}
	return out, nil
}

// Prepare sets the sysctls a desired state needs (forwarding for NAT), as
// the real host's preparation does; modules are always there.
func (h *Host) Prepare(d *ipvsmgr.Desired) []ipvsmgr.Failure {
	h.mu.Lock()
	defer h.mu.Unlock()
	p := kernel.Prepare(d)
	keys := slices.Sorted(maps.Keys(p.Sysctls))
	for _, k := range keys {
		if h.sysctls[k] != p.Sysctls[k] {
			h.sysctls[k] = p.Sysctls[k]
			h.log = append(h.log, "sysctl "+k+"="+p.Sysctls[k])
		}
	}
	return nil
}
