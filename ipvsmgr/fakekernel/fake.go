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

	"github.com/ipvsctl/ipvsctl/ipvsmgr"
)

// Kernel is a fake IPVS table.
type Kernel struct {
	mu     sync.Mutex
	table  ipvsmgr.Table
	log    []string
	FailOn func(op ipvsmgr.Op) error // injected failure for an op, or nil
	// BatchFault, if set, is asked once per Apply of n ops: an err makes
	// the batch fail as a netlink socket does when it loses requests or
	// answers (ENOBUFS, EINTR): the first applied ops are made, and every
	// op from failedFrom on (failedFrom <= applied) reports err, wrapped
	// in ipvsmgr.ErrTransport.
	BatchFault func(n int) (applied, failedFrom int, err error)
	ReadErr    error // returned by Table when set
	// ReadReversed makes Table list each service's real servers in the
	// other order (a kernel that walks its list the other way): set it
	// before use. Tests of the Maglev fingerprints use it for a director
	// whose mh table differs from its peers'.
	ReadReversed bool
	schedOK      func(string) bool
	// trash holds deleted destinations as the kernel's dest_trash does: a
	// destination added again to its service is the same one, with its
	// connection counts and counters (its connection entries still point
	// at it).
	trash map[trashKey]ipvsmgr.Destination
}

type trashKey struct {
	svc ipvsmgr.ServiceKey
	dst ipvsmgr.DestKey
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
		if k.ReadReversed {
			slices.Reverse(cp.Dests)
		}
		t.Services = append(t.Services, &cp)
	}
	return t, nil
}

// SetActive sets a real server's active connection count (as traffic would).
func (k *Kernel) SetActive(svc ipvsmgr.ServiceKey, dst ipvsmgr.DestKey, n uint32) {
	k.mu.Lock()
	defer k.mu.Unlock()
	for _, s := range k.table.Services {
		if s.Key != svc {
			continue
		}
		for _, d := range s.Dests {
			if d.Key == dst {
				d.ActiveConns = n
			}
		}
	}
}

// AddConns counts n more connections scheduled by a service (as traffic
// would: the kernel's conns counter).
func (k *Kernel) AddConns(svc ipvsmgr.ServiceKey, n uint64) {
	k.mu.Lock()
	defer k.mu.Unlock()
	for _, s := range k.table.Services {
		if s.Key == svc {
			s.Stats.Conns += n
		}
	}
}

// Apply applies ops one by one, as the kernel does with a batch.
func (k *Kernel) Apply(_ context.Context, ops []ipvsmgr.Op) []error {
	k.mu.Lock()
	defer k.mu.Unlock()
	errs := make([]error, len(ops))
	if k.BatchFault != nil {
		if applied, from, err := k.BatchFault(len(ops)); err != nil {
			err = fmt.Errorf("%w: %w", ipvsmgr.ErrTransport, err)
			for i := range ops {
				if i < applied {
					if aerr := k.apply(ops[i]); aerr == nil {
						k.log = append(k.log, ops[i].String())
					} else if i < from {
						errs[i] = aerr
					}
				}
				if i >= from {
					errs[i] = err
				}
			}
			return errs
		}
	}
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

// apply makes op as the kernel does: a new destination goes to the head of
// its service's list (Table.Apply), a deleted one (or every one of a
// deleted service) to the trash, and an added one is taken back from it.
func (k *Kernel) apply(op ipvsmgr.Op) error {
	var svc *ipvsmgr.VirtualService
	if op.Service != nil {
		key := op.Service.Key
		if key.FWMark != 0 {
			key.Addr = netip.Addr{}
		}
		for _, s := range k.table.Services {
			if s.Key == key {
				svc = s
			}
		}
	}
	var gone []*ipvsmgr.Destination
	switch {
	case svc != nil && op.Kind == ipvsmgr.OpDelService:
		gone = svc.Dests
	case svc != nil && op.Kind == ipvsmgr.OpDelDest:
		for _, d := range svc.Dests {
			if d.Key == op.Dest.Key {
				gone = append(gone, d)
			}
		}
	}
	if err := k.table.Apply(op); err != nil {
		return err
	}
	if k.trash == nil {
		k.trash = map[trashKey]ipvsmgr.Destination{}
	}
	for _, d := range gone {
		k.trash[trashKey{svc.Key, d.Key}] = *d
	}
	if op.Kind == ipvsmgr.OpAddDest && svc != nil {
		tk := trashKey{svc.Key, op.Dest.Key}
		if old, ok := k.trash[tk]; ok {
			delete(k.trash, tk)
			d := svc.Dests[0] // Table.Apply put it at the head
			d.ActiveConns, d.InactiveConns, d.Stats = old.ActiveConns, old.InactiveConns, old.Stats
		}
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
