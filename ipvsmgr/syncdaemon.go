package ipvsmgr

import (
	"context"
	"fmt"
	"net/netip"
)

// SyncState is which IPVS connection sync daemon: the master's sends the
// connection table, the backup's receives it, so that established
// connections survive a failover.
type SyncState uint32

// IP_VS_STATE_MASTER and IP_VS_STATE_BACKUP.
const (
	SyncMaster SyncState = 1
	SyncBackup SyncState = 2
)

func (s SyncState) String() string {
	switch s {
	case SyncMaster:
		return "master"
	case SyncBackup:
		return "backup"
	}
	return fmt.Sprintf("sync-state(%d)", uint32(s))
}

// SyncDaemon is one kernel connection sync daemon. Zero optional fields
// leave the kernel's defaults (group 224.0.0.81, port 8848, TTL 1, the
// interface's MTU).
type SyncDaemon struct {
	State     SyncState
	Interface string // the multicast interface
	SyncID    uint32 // 0..255: a backup takes only its master's SyncID
	MaxLen    uint16 // UDP payload size
	Group     netip.Addr
	Port      uint16
	TTL       uint8
}

func (d SyncDaemon) String() string {
	s := fmt.Sprintf("%s sync daemon on %s, syncid %d", d.State, d.Interface, d.SyncID)
	if d.Group.IsValid() {
		s += fmt.Sprintf(", group %s", d.Group)
	}
	if d.Port != 0 {
		s += fmt.Sprintf(", port %d", d.Port)
	}
	if d.TTL != 0 {
		s += fmt.Sprintf(", ttl %d", d.TTL)
	}
	if d.MaxLen != 0 {
		s += fmt.Sprintf(", maxlen %d", d.MaxLen)
	}
	return s
}

// SyncDaemons starts, stops and lists the kernel's connection sync daemons
// (the kernel driver; a fake in tests).
type SyncDaemons interface {
	StartSyncDaemon(ctx context.Context, d SyncDaemon) error
	StopSyncDaemon(ctx context.Context, state SyncState) error
	ListSyncDaemons(ctx context.Context) ([]SyncDaemon, error)
}
