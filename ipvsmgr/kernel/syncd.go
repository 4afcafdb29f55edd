package kernel

import (
	"context"
	"errors"
	"fmt"
	"net/netip"
	"os"
	"syscall"

	"golang.org/x/sys/unix"

	"github.com/ipvsctl/ipvsctl/ipvsmgr"
)

// The connection sync daemon's commands and attributes (include/uapi/linux/ip_vs.h).
const (
	cmdNewDaemon = 9
	cmdDelDaemon = 10
	cmdGetDaemon = 11

	attrCmdDaemon = 3

	attrDaemonState  = 1 // u32
	attrDaemonIfn    = 2 // NUL-terminated string, at most 15 bytes
	attrDaemonSyncID = 3 // u32
	attrDaemonMaxLen = 4 // u16
	attrDaemonGroup  = 5 // IPv4 address, network order
	attrDaemonGroup6 = 6 // 16 bytes
	attrDaemonPort   = 7 // u16, host order
	attrDaemonTTL    = 8 // u8
	ifNameMax        = 16
	maxSyncID        = 255
)

func checkSyncDaemon(d ipvsmgr.SyncDaemon) error {
	switch {
	case d.State != ipvsmgr.SyncMaster && d.State != ipvsmgr.SyncBackup:
		return fmt.Errorf("sync daemon state %d is neither master (1) nor backup (2)", d.State)
	case d.Interface == "" || len(d.Interface) >= ifNameMax:
		return fmt.Errorf("sync daemon interface %q: want a name of 1..15 bytes", d.Interface)
	case d.SyncID > maxSyncID:
		return fmt.Errorf("sync daemon syncid %d is out of range 0..255", d.SyncID)
	case d.Group.IsValid() && !d.Group.IsMulticast():
		return fmt.Errorf("sync daemon group %s is not a multicast address", d.Group)
	}
	return nil
}

// newDaemon encodes IPVS_CMD_NEW_DAEMON with its attributes in the order
// ipvsadm's libipvs puts them.
func (e *encoder) newDaemon(family uint16, seq uint32, d ipvsmgr.SyncDaemon) {
	start := e.begin(family, cmdNewDaemon, seq)
	n := e.nest(attrCmdDaemon)
	e.u32(attrDaemonState, uint32(d.State))
	e.attr(attrDaemonIfn, append([]byte(d.Interface), 0))
	e.u32(attrDaemonSyncID, d.SyncID)
	if d.MaxLen != 0 {
		e.u16(attrDaemonMaxLen, d.MaxLen)
	}
	if d.Port != 0 {
		e.u16(attrDaemonPort, d.Port)
	}
	if d.TTL != 0 {
		e.attr(attrDaemonTTL, []byte{d.TTL})
	}
	switch g := d.Group.Unmap(); {
	case g.Is6():
		e.attr(attrDaemonGroup6, g.AsSlice())
	case g.Is4():
		e.attr(attrDaemonGroup, g.AsSlice())
	}
	e.endNest(n)
	e.end(start)
}

// delDaemon encodes IPVS_CMD_DEL_DAEMON: the kernel needs only the state;
// ipvsadm sends the syncid too.
func (e *encoder) delDaemon(family uint16, seq uint32, state ipvsmgr.SyncState, syncID uint32) {
	start := e.begin(family, cmdDelDaemon, seq)
	n := e.nest(attrCmdDaemon)
	e.u32(attrDaemonState, uint32(state))
	e.u32(attrDaemonSyncID, syncID)
	e.endNest(n)
	e.end(start)
}

func parseDaemon(b []byte) ipvsmgr.SyncDaemon {
	var d ipvsmgr.SyncDaemon
	for typ, val := range attrs(b) {
		switch typ {
		case attrDaemonState:
			d.State = ipvsmgr.SyncState(u32(val))
		case attrDaemonIfn:
			d.Interface = cString(val)
		case attrDaemonSyncID:
			d.SyncID = u32(val)
		case attrDaemonMaxLen:
			d.MaxLen = u16(val)
		case attrDaemonGroup:
			if len(val) == 4 {
				d.Group = netip.AddrFrom4([4]byte(val))
			}
		case attrDaemonGroup6:
			if len(val) == 16 {
				d.Group = netip.AddrFrom16([16]byte(val))
			}
		case attrDaemonPort:
			d.Port = u16(val)
		case attrDaemonTTL:
			if len(val) >= 1 {
				d.TTL = val[0]
			}
		}
	}
	return d
}

// StartSyncDaemon starts a kernel connection sync daemon (ipvsadm
// --start-daemon). Starting one that runs already is an error (EEXIST).
func (d *Driver) StartSyncDaemon(ctx context.Context, sd ipvsmgr.SyncDaemon) error {
	if err := checkSyncDaemon(sd); err != nil {
		return err
	}
	err := d.daemonCmd(ctx, func(e *encoder, family uint16, seq uint32) { e.newDaemon(family, seq, sd) })
	if errors.Is(err, unix.EEXIST) {
		return fmt.Errorf("start %s: %w: one runs already", sd, err)
	}
	if err != nil {
		return fmt.Errorf("start %s: %w", sd, err)
	}
	return nil
}

// StopSyncDaemon stops the master or backup sync daemon (ipvsadm
// --stop-daemon). Stopping one that is not running is an error (ESRCH).
func (d *Driver) StopSyncDaemon(ctx context.Context, state ipvsmgr.SyncState) error {
	err := d.daemonCmd(ctx, func(e *encoder, family uint16, seq uint32) { e.delDaemon(family, seq, state, 0) })
	if err != nil {
		return fmt.Errorf("stop %s sync daemon: %w", state, err)
	}
	return nil
}

func (d *Driver) daemonCmd(ctx context.Context, encode func(e *encoder, family uint16, seq uint32)) error {
	d.mu.Lock()
	defer d.mu.Unlock()
	if _, err := os.Stat(procIPVS); err != nil {
		return fmt.Errorf("%w: %s is absent", ipvsmgr.ErrIPVSUnavailable, procIPVS)
	}
	c := d.conns[0]
	errs, err := c.exchange(ctx, 1, false, func(e *encoder, _ int, seq uint32) { encode(e, c.family, seq) }, nil, d.timeout)
	if err != nil {
		return err
	}
	if errno, ok := errs[0].(syscall.Errno); ok {
		return errno
	}
	return errs[0]
}

// ListSyncDaemons reads the running sync daemons (ipvsadm --list --daemon).
func (d *Driver) ListSyncDaemons(ctx context.Context) ([]ipvsmgr.SyncDaemon, error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if _, err := os.Stat(procIPVS); err != nil {
		return nil, fmt.Errorf("%w: %s is absent", ipvsmgr.ErrIPVSUnavailable, procIPVS)
	}
	c := d.conns[0]
	var out []ipvsmgr.SyncDaemon
	errs, err := c.exchange(ctx, 1, false, func(e *encoder, _ int, seq uint32) {
		e.end(e.beginFlags(c.family, cmdGetDaemon, seq, nlmFRequest|nlmFDump))
	}, func(_ int, payload []byte) {
		if b := nestedPayload(payload, attrCmdDaemon); b != nil {
			out = append(out, parseDaemon(b))
		}
	}, d.timeout)
	if err == nil {
		err = errs[0]
	}
	if err != nil {
		return nil, fmt.Errorf("list sync daemons: %w", err)
	}
	return out, nil
}

var _ ipvsmgr.SyncDaemons = (*Driver)(nil)
