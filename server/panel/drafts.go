package panel

import (
	"context"
	"errors"
	"fmt"
	"sync"

	"github.com/ipvsctl/ipvsctl/server/store"
)

// drafts are the users' drafts as the panel, their only writer, last
// stored them: read from the store once per user, then kept, so that a page
// does not read SQLite to say whether its user has one. Each keeps the
// banner's summary with the revision it was counted against.
type drafts struct {
	storage Storage
	writeMu sync.Mutex // one write at a time: the store and the map agree in order

	mu sync.Mutex
	by map[string]*draftEntry
}

type draftEntry struct {
	d      *store.Draft // nil: the user has none
	sum    *draftInfo
	sumRev int64
}

func newDrafts(s Storage) *drafts { return &drafts{storage: s, by: map[string]*draftEntry{}} }

// get is user's draft (a copy), store.ErrNotFound when there is none.
func (b *drafts) get(ctx context.Context, user string) (*store.Draft, error) {
	e, err := b.entry(ctx, user)
	if err != nil {
		return nil, err
	}
	if e.d == nil {
		return nil, fmt.Errorf("draft of %s: %w", user, store.ErrNotFound)
	}
	cp := *e.d
	return &cp, nil
}

func (b *drafts) entry(ctx context.Context, user string) (*draftEntry, error) {
	b.mu.Lock()
	e := b.by[user]
	b.mu.Unlock()
	if e != nil {
		return e, nil
	}
	d, err := b.storage.Draft(ctx, user)
	if err != nil && !errors.Is(err, store.ErrNotFound) {
		return nil, err
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	if e := b.by[user]; e != nil {
		return e, nil // a write got in first: it is newer than what was read
	}
	e = &draftEntry{d: d}
	b.by[user] = e
	return e, nil
}

func (b *drafts) save(ctx context.Context, d *store.Draft) error {
	b.writeMu.Lock()
	defer b.writeMu.Unlock()
	if err := b.storage.SaveDraft(ctx, d); err != nil {
		b.forget(d.Author) // what the store has is not known: read it again
		return err
	}
	cp := *d
	b.set(d.Author, &draftEntry{d: &cp})
	return nil
}

func (b *drafts) remove(ctx context.Context, user string) error {
	b.writeMu.Lock()
	defer b.writeMu.Unlock()
	if err := b.storage.DeleteDraft(ctx, user); err != nil {
		b.forget(user)
		return err
	}
	b.set(user, &draftEntry{})
	return nil
}

func (b *drafts) set(user string, e *draftEntry) {
	b.mu.Lock()
	b.by[user] = e
	b.mu.Unlock()
}

func (b *drafts) forget(user string) {
	b.mu.Lock()
	delete(b.by, user)
	b.mu.Unlock()
}

// summary is the banner about user's draft at revision rev (nil: no
// draft), counted by count once per draft and revision.
func (b *drafts) summary(ctx context.Context, user string, rev int64, count func(*store.Draft) *draftInfo) *draftInfo {
	e, err := b.entry(ctx, user)
	if err != nil || e.d == nil {
		return nil
	}
	b.mu.Lock()
	sum, at := e.sum, e.sumRev
	b.mu.Unlock()
	if sum != nil && at == rev {
		return sum
	}
	sum = count(e.d)
	b.mu.Lock()
	e.sum, e.sumRev = sum, rev
	b.mu.Unlock()
	return sum
}
