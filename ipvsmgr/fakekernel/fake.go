// Package fakekernel is an in-memory IPVS kernel for tests: it applies ops to
// a table the way the kernel would, refuses what the kernel refuses, and
// records every op as the ipvsadm command that does the same.
package fakekernel

import (
	"context"
	"fmt"
	"net/netip"
	"slices"
	"sync"
	"syscall"

	"github.com/ipvsctl/ipvsctl/ipvsmgr"
)

// Kernel is a fake IPVS table.
type Kernel struct {
	mu      sync.Mutex
	table   ipvsmgr.Table
	log     []string
	FailOn  func(op ipvsmgr.Op) error // injected failure for an op, or nil
	ReadErr error                     // returned by Table when set
	schedOK func(string) bool
}

// New returns an empty fake kernel that knows every scheduler.
func New() *Kernel {
	return &Kernel{}
}

// Ops returns the ops applied so far as ipvsadm commands, and forgets them.
func (k *Kernel) Ops() []string {
	k.mu.Lock()
	defer k.mu.Unlock()
	out := k.log
	k.log = nil
	return out
}

// Table returns a deep copy of the table.
func (k *Kernel) Table(context.Context) (*ipvsmgr.Table, error) {
	k.mu.Lock()
	defer k.mu.Unlock()
	if k.ReadErr != nil {
		return nil, k.ReadErr
	}
	t := &ipvsmgr.Table{Timeouts: k.table.Timeouts}
	for _, s := range k.table.Services {
		cp := *s
		cp.Flags |= ipvsmgr.FlagHashed // as the kernel reports
		cp.Dests = nil
		for _, d := range s.Dests {
			dc := *d
			cp.Dests = append(cp.Dests, &dc)
		}
		t.Services = append(t.Services, &cp)
	}
	return t, nil
}

// SetActive sets a real server's active connection count (as traffic would).
func (k *Kernel) SetActive(svc ipvsmgr.ServiceKey, dst ipvsmgr.DestKey, n uint32) {
	k.mu.Lock()
	defer k.mu.Unlock()
	if s := k.find(svc); s != nil {
		for _, d := range s.Dests {
			if d.Key == dst {
				d.ActiveConns = n
			}
		}
	}
}

func (k *Kernel) find(key ipvsmgr.ServiceKey) *ipvsmgr.VirtualService {
	for _, s := range k.table.Services {
		if s.Key == key {
			return s
		}
	}
	return nil
}

// Apply applies ops one by one, as the kernel does with a batch.
func (k *Kernel) Apply(_ context.Context, ops []ipvsmgr.Op) []error {
	k.mu.Lock()
	defer k.mu.Unlock()
	errs := make([]error, len(ops))
	for i, op := range ops {
		if k.FailOn != nil {
			if err := k.FailOn(op); err != nil {
				errs[i] = err
				continue
			}
		}
		if err := k.apply(op); err != nil {
			errs[i] = err
			continue
		}
		k.log = append(k.log, op.String())
	}
	return errs
}

func (k *Kernel) apply(op ipvsmgr.Op) error {
	var svc *ipvsmgr.VirtualService
	if op.Service != nil {
		svc = k.find(op.Service.Key)
	}
	switch op.Kind {
	case ipvsmgr.OpAddService:
		if svc != nil {
			return syscall.EEXIST
		}
		cp := *op.Service
		cp.Dests = nil
		if cp.Key.FWMark != 0 {
			cp.Key.Addr = netip.Addr{} // the kernel keys a fwmark service by mark and family only
		}
		k.table.Services = append(k.table.Services, &cp)
	case ipvsmgr.OpEditService:
		if svc == nil {
			return syscall.ESRCH
		}
		svc.Scheduler, svc.Flags, svc.Timeout, svc.Netmask = op.Service.Scheduler, op.Service.Flags, op.Service.Timeout, op.Service.Netmask
	case ipvsmgr.OpDelService:
		if svc == nil {
			return syscall.ESRCH
		}
		k.table.Services = slices.DeleteFunc(k.table.Services, func(s *ipvsmgr.VirtualService) bool { return s == svc })
	case ipvsmgr.OpAddDest, ipvsmgr.OpEditDest, ipvsmgr.OpDelDest:
		if svc == nil {
			return syscall.ESRCH
		}
		return applyDest(svc, op)
	case ipvsmgr.OpSetTimeouts:
		t := &k.table.Timeouts
		for _, p := range []struct {
			dst *uint32
			v   uint32
		}{{&t.TCP, op.Timeouts.TCP}, {&t.TCPFin, op.Timeouts.TCPFin}, {&t.UDP, op.Timeouts.UDP}} {
			if p.v != 0 {
				*p.dst = p.v
			}
		}
	default:
		return fmt.Errorf("unknown op %d", op.Kind)
	}
	return nil
}

func applyDest(svc *ipvsmgr.VirtualService, op ipvsmgr.Op) error {
	idx := slices.IndexFunc(svc.Dests, func(d *ipvsmgr.Destination) bool { return d.Key == op.Dest.Key })
	if op.Dest.LowerThreshold > op.Dest.UpperThreshold && op.Kind != ipvsmgr.OpDelDest {
		return syscall.ERANGE
	}
	switch op.Kind {
	case ipvsmgr.OpAddDest:
		if idx >= 0 {
			return syscall.EEXIST
		}
		cp := *op.Dest
		cp.ActiveConns, cp.InactiveConns = 0, 0
		svc.Dests = append(svc.Dests, &cp)
	case ipvsmgr.OpEditDest:
		if idx < 0 {
			return syscall.ENOENT
		}
		d := svc.Dests[idx]
		d.Forward, d.Weight, d.UpperThreshold, d.LowerThreshold = op.Dest.Forward, op.Dest.Weight, op.Dest.UpperThreshold, op.Dest.LowerThreshold
	case ipvsmgr.OpDelDest:
		if idx < 0 {
			return syscall.ENOENT
		}
		svc.Dests = slices.Delete(svc.Dests, idx, idx+1)
	}
	return nil
}

// Ledger is an in-memory ipvsmgr.LedgerStore.
type Ledger struct {
	mu sync.Mutex
	l  ipvsmgr.Ledger
}

// LoadLedger returns a copy of the ledger.
func (m *Ledger) LoadLedger(context.Context) (*ipvsmgr.Ledger, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	cp := m.l
	return &cp, nil
}

// SaveLedger replaces the ledger.
func (m *Ledger) SaveLedger(_ context.Context, l *ipvsmgr.Ledger) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.l = *l
	return nil
}
