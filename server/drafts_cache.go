package server

import (
	"context"
	"errors"
	"sync"

	"github.com/ipvsctl/ipvsctl/server/store"
)

// draftCache is the core's copy of the users' drafts: read from the store
// once per user, then replaced by every draft write this core makes. Every
// entry point writes drafts through one core (the panel and the API in the
// daemon's process; the CLI with --server through the API, without it
// through the daemon's socket when a daemon runs), so the copy is never
// older than what any of them wrote, and a page does not read SQLite to
// say whether its user has a draft.
type draftCache struct {
	mu    sync.Mutex
	by    map[string]*draftEntry
	gen   uint64                 // counts writes: a read older than a write is not kept
	locks map[string]*sync.Mutex // one write at a time per author: the store and the copy agree in order
}

// maxDraftEntries bounds the copy: names read that have no draft (GET
// /api/v1/drafts/{author} takes any name) cannot grow it without end.
const maxDraftEntries = 1024

type draftEntry struct {
	d *store.Draft // nil: the author has none
	// sum is the banner's summary, counted against revision sumRev.
	sum    *DraftSummary
	sumRev int64
}

// lock serializes author's draft writes; the returned func unlocks.
func (dc *draftCache) lock(author string) func() {
	dc.mu.Lock()
	if dc.locks == nil {
		dc.locks = map[string]*sync.Mutex{}
	}
	l := dc.locks[author]
	if l == nil {
		l = &sync.Mutex{}
		dc.locks[author] = l
	}
	dc.mu.Unlock()
	l.Lock()
	return l.Unlock
}

// entry is author's entry, read from s when not kept.
func (dc *draftCache) entry(ctx context.Context, s *store.Store, author string) (*draftEntry, error) {
	dc.mu.Lock()
	e, gen := dc.by[author], dc.gen
	dc.mu.Unlock()
	if e != nil {
		return e, nil
	}
	d, err := s.Draft(ctx, author)
	if err != nil && !errors.Is(err, store.ErrNotFound) {
		return nil, err
	}
	e = &draftEntry{d: d}
	dc.mu.Lock()
	defer dc.mu.Unlock()
	if kept := dc.by[author]; kept != nil {
		return kept, nil // a write got in first: it is newer than what was read
	}
	if dc.gen == gen {
		dc.keep(author, e)
	}
	return e, nil
}

// set keeps d (nil: none) as author's draft, as a write just stored it.
func (dc *draftCache) set(author string, d *store.Draft) {
	dc.mu.Lock()
	dc.gen++
	dc.keep(author, &draftEntry{d: d})
	dc.mu.Unlock()
}

// forget drops author's entry: what the store holds is not known.
func (dc *draftCache) forget(author string) {
	dc.mu.Lock()
	dc.gen++
	delete(dc.by, author)
	dc.mu.Unlock()
}

// keep stores e (dc.mu held).
func (dc *draftCache) keep(author string, e *draftEntry) {
	if dc.by == nil || len(dc.by) >= maxDraftEntries && dc.by[author] == nil {
		dc.by = map[string]*draftEntry{}
	}
	dc.by[author] = e
}
