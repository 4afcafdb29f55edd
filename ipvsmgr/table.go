package ipvsmgr

import (
	"fmt"
	"net/netip"
	"slices"
	"syscall"
)

// Apply changes the table as the kernel does for op, refusing what the
// kernel refuses (a service or server that exists already, or not yet).
// The daemon keeps its copy of the kernel's table current with it; the fake
// kernel is a table changed by it.
func (t *Table) Apply(op Op) error {
	var svc *VirtualService
	if op.Service != nil {
		svc = t.find(op.Service.Key)
	}
	switch op.Kind {
	case OpAddService:
		if svc != nil {
			return syscall.EEXIST
		}
		cp := *op.Service
		cp.Dests = nil
		if cp.Key.FWMark != 0 {
			cp.Key.Addr = netip.Addr{} // the kernel keys a fwmark service by mark and family only
		}
		t.Services = append(t.Services, &cp)
	case OpEditService:
		if svc == nil {
			return syscall.ESRCH
		}
		svc.Scheduler, svc.Flags, svc.Timeout, svc.Netmask = op.Service.Scheduler, op.Service.Flags, op.Service.Timeout, op.Service.Netmask
	case OpDelService:
		if svc == nil {
			return syscall.ESRCH
		}
		t.Services = slices.DeleteFunc(t.Services, func(s *VirtualService) bool { return s == svc })
	case OpAddDest, OpEditDest, OpDelDest:
		if svc == nil {
			return syscall.ESRCH
		}
		return applyDest(svc, op)
	case OpSetTimeouts:
		tm := &t.Timeouts
		for _, p := range []struct {
			dst *uint32
			v   uint32
		}{{&tm.TCP, op.Timeouts.TCP}, {&tm.TCPFin, op.Timeouts.TCPFin}, {&tm.UDP, op.Timeouts.UDP}} {
			if p.v != 0 {
				*p.dst = p.v
			}
		}
	default:
		return fmt.Errorf("unknown op %d", op.Kind)
	}
	return nil
}

func applyDest(svc *VirtualService, op Op) error {
	idx := slices.IndexFunc(svc.Dests, func(d *Destination) bool { return d.Key == op.Dest.Key })
	if op.Dest.LowerThreshold > op.Dest.UpperThreshold && op.Kind != OpDelDest {
		return syscall.ERANGE
	}
	switch op.Kind {
	case OpAddDest:
		if idx >= 0 {
			return syscall.EEXIST
		}
		cp := *op.Dest
		cp.ActiveConns, cp.InactiveConns = 0, 0
		// The kernel links a new destination at the head of the service's
		// list (__ip_vs_update_dest: list_add_rcu), and lists it so.
		svc.Dests = slices.Insert(svc.Dests, 0, &cp)
	case OpEditDest:
		if idx < 0 {
			return syscall.ENOENT
		}
		d := svc.Dests[idx]
		d.Forward, d.Weight, d.UpperThreshold, d.LowerThreshold = op.Dest.Forward, op.Dest.Weight, op.Dest.UpperThreshold, op.Dest.LowerThreshold
	case OpDelDest:
		if idx < 0 {
			return syscall.ENOENT
		}
		svc.Dests = slices.Delete(svc.Dests, idx, idx+1)
	}
	return nil
}

// With is the table after every op the kernel made (errs[i] nil), leaving
// t as it was: the services no op touched are shared with t, so a change of
// one weight in a table of 11,000 real servers copies one service.
func (t *Table) With(ops []Op, errs []error) *Table {
	out := &Table{Timeouts: t.Timeouts, Services: slices.Clone(t.Services)}
	at := make(map[ServiceKey]int, len(out.Services))
	for i, s := range out.Services {
		at[s.Key] = i
	}
	copied := map[ServiceKey]bool{}
	type ref struct {
		svc  ServiceKey
		dest DestKey
	}
	trash := map[ref]*Destination{} // deleted by these ops
	for i, op := range ops {
		if errs[i] != nil {
			continue
		}
		if op.Service == nil {
			_ = out.Apply(op)
			continue
		}
		j, ok := at[op.Service.Key]
		switch {
		case op.Kind == OpAddService:
			if ok {
				continue // the kernel refuses it: errs[i] was set
			}
			cp := *op.Service
			cp.Dests = nil
			if cp.Key.FWMark != 0 {
				cp.Key.Addr = netip.Addr{} // the kernel keys a fwmark service by mark and family only
			}
			out.Services = append(out.Services, &cp)
			at[op.Service.Key] = len(out.Services) - 1
			copied[op.Service.Key] = true
		case op.Kind == OpDelService:
			if ok {
				out.Services = slices.Delete(out.Services, j, j+1)
				for k, s := range out.Services[j:] {
					at[s.Key] = j + k
				}
				delete(at, op.Service.Key)
			}
		case ok:
			svc := out.Services[j]
			if !copied[svc.Key] {
				cp := *svc
				cp.Dests = make([]*Destination, len(svc.Dests))
				for k, d := range svc.Dests {
					dc := *d
					cp.Dests[k] = &dc
				}
				svc, out.Services[j] = &cp, &cp
				copied[svc.Key] = true
			}
			switch op.Kind {
			case OpEditService:
				svc.Scheduler, svc.Flags, svc.Timeout, svc.Netmask = op.Service.Scheduler, op.Service.Flags, op.Service.Timeout, op.Service.Netmask
			case OpDelDest:
				if i := slices.IndexFunc(svc.Dests, func(d *Destination) bool { return d.Key == op.Dest.Key }); i >= 0 {
					trash[ref{svc.Key, op.Dest.Key}] = svc.Dests[i]
				}
				_ = applyDest(svc, op)
			case OpAddDest:
				_ = applyDest(svc, op)
				// Re-added from the kernel's trash: the same destination,
				// its connection counts and counters kept.
				if old := trash[ref{svc.Key, op.Dest.Key}]; old != nil && len(svc.Dests) > 0 && svc.Dests[0].Key == op.Dest.Key {
					d := svc.Dests[0]
					d.ActiveConns, d.InactiveConns, d.Stats = old.ActiveConns, old.InactiveConns, old.Stats
				}
			default:
				_ = applyDest(svc, op)
			}
		}
	}
	return out
}

func (t *Table) find(key ServiceKey) *VirtualService {
	for _, s := range t.Services {
		if s.Key == key {
			return s
		}
	}
	return nil
}

// Clone is a deep copy of the table.
func (t *Table) Clone() *Table {
	cp := &Table{Timeouts: t.Timeouts, Services: make([]*VirtualService, len(t.Services))}
	for i, s := range t.Services {
		sc := *s
		sc.Dests = make([]*Destination, len(s.Dests))
		for j, d := range s.Dests {
			dc := *d
			sc.Dests[j] = &dc
		}
		cp.Services[i] = &sc
	}
	return cp
}
