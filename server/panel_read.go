package server

import (
	"context"
	"time"

	"github.com/ipvsctl/ipvsctl/arpguard"
	"github.com/ipvsctl/ipvsctl/server/store"
)

// Reads the panel makes besides the API's: it builds its live views from the
// daemon's snapshot itself (matching kernel keys to the desired state it
// caches per revision), so that a 2 s refresh does not decode the state.

// Snapshot returns the daemon's last kernel snapshot; nil without a daemon
// or before its first poll.
func (c *Core) Snapshot() *Snapshot {
	if c.live == nil {
		return nil
	}
	return c.live.Snapshot()
}

// LastReconcile returns the daemon's last reconcile; ok is false without a
// daemon or before its first reconcile.
func (c *Core) LastReconcile() (rep ReconcileReport, ok bool) {
	if c.live == nil {
		return ReconcileReport{}, false
	}
	return c.live.LastReconcile()
}

// CurrentRevision is the number of the stored desired state's revision.
func (c *Core) CurrentRevision(ctx context.Context) (int64, error) {
	return c.store.CurrentRevision(ctx)
}

// RealServerResults is the last preparation result (push, verify, undo) per real server.
func (c *Core) RealServerResults(ctx context.Context) ([]arpguard.Result, error) {
	return c.store.Results(ctx)
}

// The panel's chart points: the sampler's series and their points, kept in
// the store beside the revisions (see store/charts.go).

// ChartSeries gives each key its series id, making the missing ones.
func (c *Core) ChartSeries(ctx context.Context, keys []string, seen int64) (map[string]int64, error) {
	return c.store.ChartSeries(ctx, keys, seen)
}

// ChartSeriesID is key's series id.
func (c *Core) ChartSeriesID(ctx context.Context, key string) (int64, error) {
	return c.store.ChartSeriesID(ctx, key)
}

// SaveChartPoints stores one sample of every series and forgets old ones.
func (c *Core) SaveChartPoints(ctx context.Context, res int, t int64, chunks map[int64][]byte, keepFrom, forgetBefore int64) error {
	return c.store.SaveChartPoints(ctx, res, t, chunks, keepFrom, forgetBefore)
}

// ChartPoints reads one chunk's points since a time.
func (c *Core) ChartPoints(ctx context.Context, res int, chunk, since int64) ([]store.ChartRow, error) {
	return c.store.ChartPoints(ctx, res, chunk, since)
}

// LastLogin is when user last logged in after since (zero: never).
func (c *Core) LastLogin(ctx context.Context, user string, since time.Time) (time.Time, error) {
	return c.store.LastLogin(ctx, user, since)
}
