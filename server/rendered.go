package server

import (
	"sync"
	"time"
)

// Rendered keeps the last rendering of a view of what the daemon knows (the
// status document, the metrics' exposition, the panel's overview) so that
// any number of clients cost one rendering per change. While a rendering of
// a newer snapshot is made, the others get the last one at once instead of
// waiting for it; any other change (a revision, a reconcile, health, a
// real-server result, the snapshot going stale) is waited for: one
// rendering at a time, each request served one made from data at least as
// new as what it asked for (twenty scrapers of an 11,000-server director
// after a reconcile made twenty 14 MB expositions at once, 2.7 GB).
type Rendered[T any] struct {
	mu       sync.Mutex
	done     *sync.Cond // a rendering ended
	key      RenderKey
	body     T
	has      bool
	building bool
}

// RenderKey says what a rendering was made from: the daemon's snapshot and
// the generation of everything else it knows that a view may show. Each
// count only grows, so a rendering is never shown for data that moved since.
type RenderKey struct {
	Snap  *Snapshot
	Stale bool // the snapshot was stale when rendered: a rendering says so
	// Rev is the newest desired revision the daemon knows of: its own
	// writes' at once, another process's once its loop has read it.
	Rev int64
	// Reconciles counts the daemon's reconciles (the last one's report).
	Reconciles int64
	// Health counts the changes the health checks made (and new checks).
	Health int64
	// Results counts the changes of the stored real-server preparation results.
	Results int64
	// Events is the newest event's ID (the overview's recent events).
	Events int64
}

// KeyNow is the key of a rendering of what the daemon knows now. It takes
// no lock and reads no database: a request can afford it.
func (c *Core) KeyNow() RenderKey {
	s := c.Snapshot()
	k := RenderKey{Snap: s, Stale: s == nil || time.Since(s.At) > 2*PollInterval, Results: c.resultsGen.Load()}
	n := c.counters()
	k.Rev, k.Reconciles, k.Health = n.Rev, n.Reconciles, n.Health
	k.Events = c.events.Last()
	return k
}

// onlySnapshotMoved says k is of the same data as old but a newer snapshot.
func (k RenderKey) onlySnapshotMoved(old RenderKey) bool {
	k.Snap = old.Snap
	return k == old
}

// covers says a rendering made for k shows data at least as new as o asks
// for: the same snapshot, as stale as o says it is, or a newer one (not
// stale if o's is not), and every count as far.
func (k RenderKey) covers(o RenderKey) bool {
	switch {
	case k.Snap == nil || o.Snap == nil:
		return false
	case k.Snap == o.Snap && k.Stale != o.Stale:
		return false
	case k.Snap != o.Snap && (k.Snap.At.Before(o.Snap.At) || k.Stale && !o.Stale):
		return false
	}
	return k.Rev >= o.Rev && k.Reconciles >= o.Reconciles && k.Health >= o.Health && k.Results >= o.Results && k.Events >= o.Events
}

// Get returns the rendering for key, made by build when there is none that
// covers it (one build at a time: a request waits for the one under way).
// A key without a snapshot (no daemon, or before its first poll) is never
// kept.
func (r *Rendered[T]) Get(key RenderKey, build func() (T, error)) (T, error) {
	r.mu.Lock()
	if r.done == nil {
		r.done = sync.NewCond(&r.mu)
	}
	for {
		if r.has && (r.key.covers(key) || r.building && key.Snap != nil && key.onlySnapshotMoved(r.key)) {
			body := r.body
			r.mu.Unlock()
			return body, nil
		}
		if !r.building {
			break
		}
		r.done.Wait()
	}
	r.building = true
	r.mu.Unlock()
	body, err := build()
	r.mu.Lock()
	defer r.mu.Unlock()
	r.building = false
	r.done.Broadcast()
	if err != nil {
		var zero T
		return zero, err
	}
	if key.Snap != nil {
		r.key, r.body, r.has = key, body, true
	}
	return body, nil
}
