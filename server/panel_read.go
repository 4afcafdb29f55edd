package server

import (
	"context"

	"github.com/ipvsctl/ipvsctl/arpguard"
)

// Reads the panel makes besides the API's: it builds its live views from the
// daemon's snapshot itself (matching kernel keys to the desired state it
// caches per revision), so that a 2 s refresh does not decode the state.

// Snapshot returns the daemon's last kernel snapshot; nil without a daemon
// or before its first poll.
func (c *Core) Snapshot() *Snapshot {
	if c.shared == nil {
		return nil
	}
	return c.shared.snap.Load()
}

// LastReconcile returns the daemon's last reconcile; ok is false without a
// daemon or before its first reconcile.
func (c *Core) LastReconcile() (rep ReconcileReport, ok bool) {
	if c.shared == nil {
		return rep, false
	}
	rep = c.shared.lastReconcile()
	return rep, !rep.At.IsZero()
}

// CurrentRevision is the number of the stored desired state's revision.
func (c *Core) CurrentRevision(ctx context.Context) (int64, error) {
	return c.store.CurrentRevision(ctx)
}

// RealServerResults is the last preparation result (push, verify, undo) per real server.
func (c *Core) RealServerResults(ctx context.Context) ([]arpguard.Result, error) {
	return c.store.Results(ctx)
}
