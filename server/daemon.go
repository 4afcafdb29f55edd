// Package server is the ipvsctl daemon: it keeps the kernel matching the
// desired state in the store.
package server

import (
	"context"
	"log/slog"
	"time"

	"github.com/ipvsctl/ipvsctl/ipvsmgr"
	"github.com/ipvsctl/ipvsctl/server/store"
)

// Daemon reconciles the kernel with the stored desired state: at once when a
// new revision is stored, and every Interval anyway, which repairs
// out-of-band changes and finishes drains.
type Daemon struct {
	Store      *store.Store
	Reconciler *ipvsmgr.Reconciler
	Log        *slog.Logger
	Interval   time.Duration // full reconcile period; 0 means 10 s
	Poll       time.Duration // how often to look for a new revision; 0 means 1 s
}

// Run reconciles until ctx is cancelled.
func (d *Daemon) Run(ctx context.Context) error {
	interval, poll := d.Interval, d.Poll
	if interval == 0 {
		interval = 10 * time.Second
	}
	if poll == 0 {
		poll = time.Second
	}
	tick := time.NewTicker(poll)
	defer tick.Stop()
	lastRev, lastRun := int64(-1), time.Time{}
	for {
		rev, err := d.Store.CurrentRevision(ctx)
		switch {
		case err != nil && ctx.Err() == nil:
			d.Log.Error("read desired state revision", "err", err)
		case err == nil && (rev != lastRev || time.Since(lastRun) >= interval):
			d.reconcile(ctx, rev, rev != lastRev)
			lastRev, lastRun = rev, time.Now()
		}
		select {
		case <-ctx.Done():
			return nil
		case <-tick.C:
		}
	}
}

func (d *Daemon) reconcile(ctx context.Context, rev int64, newRevision bool) {
	st, _, err := d.Store.Current(ctx)
	if err != nil {
		d.Log.Error("read desired state", "err", err)
		return
	}
	desired, err := ipvsmgr.Compile(st)
	if err != nil {
		d.Log.Error("stored desired state is invalid", "revision", rev, "err", err)
		return
	}
	res, err := d.Reconciler.Reconcile(ctx, desired)
	if err != nil {
		d.Log.Error("reconcile", "revision", rev, "err", err)
		return
	}
	if len(res.Changes) > 0 && !newRevision {
		d.Log.Warn("kernel had drifted from the desired state; repaired", "revision", rev, "changes", len(res.Changes))
	}
	for _, dr := range res.Draining {
		d.Log.Info("draining", "service", dr.Service.String(), "server", dr.Dest.String(), "active", dr.ActiveConns)
	}
}
