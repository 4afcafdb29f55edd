package fakekernel

import (
	"context"
	"fmt"
	"slices"
	"sync"

	"github.com/ipvsctl/ipvsctl/ipvsmgr"
)

// Host is a fake of what the director changes besides the IPVS table: VIPs
// on interfaces, fwmark mangle rules, and the sysctls a state needs. It
// records each change as the command that would make it (HostOp.String).
type Host struct {
	mu      sync.Mutex
	vips    map[ipvsmgr.VIP]bool
	marks   []string // mark rule ids, in chain order
	chain   [2]bool  // the mangle chain exists (IPv4, IPv6)
	sysctls map[string]string
	modules map[string]bool // loaded; nil: all of them
	log     []string
	failAdd int // the next VIP additions that fail
}

// NewHost returns a host with no VIPs, no rules and forwarding off.
func NewHost() *Host {
	return &Host{vips: map[ipvsmgr.VIP]bool{}, sysctls: map[string]string{}}
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

// EnsureVIP, RemoveVIP and HasVIP change and read VIPs as the reconcile's
// ops do, for tests that act as another process (a takeover by hand).
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

// NoModules makes every module unloaded: a reconcile then loads what its
// state needs.
func (h *Host) NoModules() {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.modules = map[string]bool{}
}

// Observe reads the fake host.
func (h *Host) Observe(_ context.Context, q ipvsmgr.HostQuery) (*ipvsmgr.HostState, error) {
	h.mu.Lock()
	defer h.mu.Unlock()
	s := &ipvsmgr.HostState{Up: map[ipvsmgr.VIP]bool{}, Sysctls: map[string]string{}, Modules: map[string]bool{}}
	for _, v := range q.VIPs {
		s.Up[v] = h.vips[v]
	}
	for _, k := range q.Sysctls {
		s.Sysctls[k] = h.sysctls[k]
	}
	for _, m := range q.Modules {
		s.Modules[m] = h.modules == nil || h.modules[m]
	}
	if q.Marks {
		s.Marks = slices.Clone(h.marks)
		s.MarkChain = h.chain
	}
	return s, nil
}

// Apply makes ops on the fake host, recording each as its command.
func (h *Host) Apply(_ context.Context, ops []ipvsmgr.HostOp) []error {
	h.mu.Lock()
	defer h.mu.Unlock()
	errs := make([]error, len(ops))
	for i, op := range ops {
		noop := (op.Kind == ipvsmgr.HostAddVIP && h.vips[op.VIP]) || (op.Kind == ipvsmgr.HostDelVIP && !h.vips[op.VIP])
		if errs[i] = h.apply(op); errs[i] == nil && !noop {
			h.log = append(h.log, op.String())
		}
	}
	return errs
}

func (h *Host) apply(op ipvsmgr.HostOp) error {
	switch op.Kind {
	case ipvsmgr.HostLoadModule:
		if h.modules != nil {
			h.modules[op.Module] = true
		}
	case ipvsmgr.HostSetSysctl:
		h.sysctls[op.Sysctl] = op.Value
	case ipvsmgr.HostAddVIP:
		if !h.vips[op.VIP] && h.failAdd > 0 {
			h.failAdd--
			return fmt.Errorf("add %s: file exists", op.VIP)
		}
		h.vips[op.VIP] = true
	case ipvsmgr.HostDelVIP:
		delete(h.vips, op.VIP)
	case ipvsmgr.HostAddMark:
		id := op.Mark.ID()
		if !slices.Contains(h.marks, id) {
			h.marks = append(h.marks, id)
		}
		h.chain[family(op.Mark.Addr.Is6())] = true
	case ipvsmgr.HostDelMark:
		first := true
		h.marks = slices.DeleteFunc(h.marks, func(id string) bool {
			if id != op.MarkID {
				return false
			}
			keep := op.Dup && first
			first = false
			return !keep
		})
	case ipvsmgr.HostDelMarkChain:
		h.chain[family(op.V6)] = false
	default:
		return fmt.Errorf("unknown host op %d", op.Kind)
	}
	return nil
}

func family(v6 bool) int {
	if v6 {
		return 1
	}
	return 0
}
