package fakekernel

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"syscall"

	"github.com/ipvsctl/ipvsctl/ipvsmgr"
)

// SyncDaemons is a fake of the kernel's connection sync daemons: one master
// and one backup at most, as the kernel allows, each start and stop recorded
// as the ipvsadm command that does the same.
type SyncDaemons struct {
	mu      sync.Mutex
	running []ipvsmgr.SyncDaemon
	log     []string
}

// StartSyncDaemon starts d, or fails with EEXIST when one of its state runs.
func (s *SyncDaemons) StartSyncDaemon(_ context.Context, d ipvsmgr.SyncDaemon) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if slices.ContainsFunc(s.running, func(r ipvsmgr.SyncDaemon) bool { return r.State == d.State }) {
		return fmt.Errorf("start %s: %w", d, syscall.EEXIST)
	}
	s.running = append(s.running, d)
	s.log = append(s.log, fmt.Sprintf("ipvsadm --start-daemon %s --mcast-interface %s --syncid %d", d.State, d.Interface, d.SyncID))
	return nil
}

// StopSyncDaemon stops the daemon of state, or fails with ESRCH.
func (s *SyncDaemons) StopSyncDaemon(_ context.Context, state ipvsmgr.SyncState) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	i := slices.IndexFunc(s.running, func(r ipvsmgr.SyncDaemon) bool { return r.State == state })
	if i < 0 {
		return fmt.Errorf("stop %s sync daemon: %w", state, syscall.ESRCH)
	}
	s.running = slices.Delete(s.running, i, i+1)
	s.log = append(s.log, fmt.Sprintf("ipvsadm --stop-daemon %s", state))
	return nil
}

// ListSyncDaemons returns the running daemons.
func (s *SyncDaemons) ListSyncDaemons(context.Context) ([]ipvsmgr.SyncDaemon, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Clone(s.running), nil
}

// Ops returns the starts and stops so far as ipvsadm commands, and forgets
// them.
func (s *SyncDaemons) Ops() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := s.log
	s.log = nil
	return out
}

var _ ipvsmgr.SyncDaemons = (*SyncDaemons)(nil)
