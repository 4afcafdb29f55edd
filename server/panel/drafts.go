package panel

import (
	"context"
	"errors"
	"fmt"
	"sync"

	"github.com/ipvsctl/ipvsctl/server"
	"github.com/ipvsctl/ipvsctl/server/store"
)

// drafts are the users' drafts as the core last gave them to the panel:
// read once per user, then kept, so that a page does not read SQLite to say
// whether its user has one. Each keeps the banner's summary with the
// revision it was counted against.
type drafts struct {
	storage interface {
		Draft(ctx context.Context, author string) (*store.Draft, error)
	}
	writeMu sync.Mutex // one write at a time: the store and the map agree in order

	mu sync.Mutex
	by map[string]*draftEntry
}

type draftEntry struct {
	d      *store.Draft // nil: the user has none
	sum    *draftInfo
	sumRev int64
}

func newDrafts(s *server.Core) *drafts { return &drafts{storage: s, by: map[string]*draftEntry{}} }

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

// write runs a change of user's draft through the core (which returns the
// draft as it stored it, nil when it removed it) and keeps what it returned.
func (b *drafts) write(user string, change func() (*store.Draft, error)) error {
	b.writeMu.Lock()
	defer b.writeMu.Unlock()
	d, err := change()
	if err != nil {
		b.forget(user) // what the store has is not known: read it again
		return err
	}
	b.set(user, &draftEntry{d: d})
	return nil
}

// remove discards user's draft through the core.
func (b *drafts) remove(user string, discard func() error) error {
	return b.write(user, func() (*store.Draft, error) { return nil, discard() })
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
