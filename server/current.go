package server

import (
	"bytes"
	"context"
	"errors"
	"reflect"
	"slices"
	"sync"

	"github.com/ipvsctl/ipvsctl/ipvsmgr"
	"github.com/ipvsctl/ipvsctl/server/store"
)

// edit is what a change did to the desired state, so that the daemon
// re-encodes, recompiles and compares only what changed.
type edit struct {
	summary string
	touched int  // index (in the new state) of the one service changed or added; -1 for none
	removed int  // index (in the old state) of the one service removed; -1 for none
	whole   bool // anything may have changed
}

func touch(i int, summary string) edit { return edit{summary: summary, touched: i, removed: -1} }

// current is the daemon's copy of the stored desired state: the state, each
// service's encoding and what compiling them made. A write starts from it
// instead of decoding, validating and encoding a director's whole document.
type current struct {
	rev   int64
	st    *ipvsmgr.State
	enc   [][]byte // enc[i] is st.Services[i] as stored
	cache ipvsmgr.CompileCache
}

// stateWriter is how the core reads the current state and writes edits to
// it: straight on the store (storeWriter, a process that makes one change),
// or on a copy kept between writes (cachedWriter, the daemon's).
type stateWriter interface {
	// state is the current state (a copy the caller may change) and its revision.
	state(ctx context.Context) (*ipvsmgr.State, int64, error)
	// update makes change as one revision; it also names the services the
	// change touched, for the reconcile (nil when any may have changed).
	update(ctx context.Context, a Actor, o WriteOptions, change func(cur *ipvsmgr.State) (edit, error)) (*WriteResult, *ipvsmgr.Desired, []ipvsmgr.ServiceKey, string, error)
	// replaced is told of a whole document stored as revision rev.
	replaced(rev int64, doc *ipvsmgr.State, enc [][]byte)
}

// storeWriter writes on the store, decoding the current state each time.
type storeWriter struct{ c *Core }

func (w storeWriter) state(ctx context.Context) (*ipvsmgr.State, int64, error) {
	return w.c.store.Current(ctx)
}

func (w storeWriter) update(ctx context.Context, a Actor, o WriteOptions, change func(cur *ipvsmgr.State) (edit, error)) (*WriteResult, *ipvsmgr.Desired, []ipvsmgr.ServiceKey, string, error) {
	var summary string
	var desired *ipvsmgr.Desired
	res := &WriteResult{}
	var err error
	res.Revision, res.Changed, err = w.c.store.Update(ctx, a.Name, a.Via, func(cur *ipvsmgr.State, base int64) (string, error) {
		if err := o.stale(base); err != nil {
			return "", err
		}
		ed, err := change(cur)
		if summary = ed.summary; err != nil {
			return "", err
		}
		if desired, err = ipvsmgr.Compile(cur); err != nil {
			return "", err
		}
		return summary, nil
	})
	if err != nil {
		return nil, nil, nil, summary, err
	}
	return res, desired, nil, summary, nil
}

func (storeWriter) replaced(int64, *ipvsmgr.State, [][]byte) {}

// cachedWriter is the daemon's: a write starts from its copy of the current
// state (the current type) instead of decoding, validating and encoding a
// director's whole document.
type cachedWriter struct {
	c   *Core
	mu  sync.Mutex // one write at a time, on cur
	cur *current
}

func (w *cachedWriter) state(ctx context.Context) (*ipvsmgr.State, int64, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	cur, err := w.loadCurrent(ctx)
	if err != nil {
		return nil, 0, err
	}
	st := *cur.st
	st.Services = slices.Clone(cur.st.Services)
	for i := range st.Services {
		s := &st.Services[i]
		s.Servers, s.Match, s.SchedulerFlags = slices.Clone(s.Servers), slices.Clone(s.Match), slices.Clone(s.SchedulerFlags)
	}
	st.Imported = slices.Clone(cur.st.Imported)
	return &st, cur.rev, nil
}

func (w *cachedWriter) replaced(rev int64, doc *ipvsmgr.State, enc [][]byte) {
	w.mu.Lock()
	if w.cur == nil || w.cur.rev < rev {
		w.cur = &current{rev: rev, st: doc, enc: enc}
	}
	w.mu.Unlock()
}

// loadCurrent returns the copy of the current state, reading it again
// when another process stored a revision since (w.mu held).
func (w *cachedWriter) loadCurrent(ctx context.Context) (*current, error) {
	c := w.c
	rev, err := c.store.CurrentRevision(ctx)
	if err != nil {
		return nil, err
	}
	if w.cur != nil && w.cur.rev == rev {
		return w.cur, nil
	}
	st, rev, err := c.store.Current(ctx)
	if err != nil {
		return nil, err
	}
	_, enc, err := store.EncodeServices(st)
	if err != nil {
		return nil, err
	}
	w.cur = &current{rev: rev, st: st, enc: enc}
	return w.cur, nil
}

// update: the change is made on a copy of the current state, and only the
// service it touched is encoded and compiled again.
func (w *cachedWriter) update(ctx context.Context, a Actor, o WriteOptions, change func(cur *ipvsmgr.State) (edit, error)) (*WriteResult, *ipvsmgr.Desired, []ipvsmgr.ServiceKey, string, error) {
	c := w.c
	w.mu.Lock()
	defer w.mu.Unlock()
	reloaded := w.cur == nil
	for attempt := 0; ; attempt++ {
		if w.cur != nil && attempt == 0 {
			if rev, err := c.store.CurrentRevision(ctx); err == nil && rev != w.cur.rev {
				reloaded = true
			}
		}
		cur, err := w.loadCurrent(ctx)
		if err != nil {
			return nil, nil, nil, "", err
		}
		if err := o.stale(cur.rev); err != nil {
			return nil, nil, nil, "", err
		}
		next := *cur.st
		next.Services = slices.Clone(cur.st.Services)
		ed, err := change(&next)
		if err != nil {
			return nil, nil, nil, ed.summary, err
		}
		enc, err := reencode(cur, &next, ed)
		if err != nil {
			return nil, nil, nil, ed.summary, err
		}
		desired, err := ipvsmgr.CompileWith(&next, enc, &cur.cache)
		if err != nil {
			return nil, nil, nil, ed.summary, err
		}
		from := unchanged(cur, &next, enc, ed)
		if from != nil && ed.removed < 0 && len(enc) == len(cur.enc) && !slices.Contains(from, -1) {
			// Nothing changed (a weight set to what it was): no revision.
			return &WriteResult{Revision: cur.rev}, desired, touchedKeys(cur, &next, ed, reloaded), ed.summary, nil
		}
		rev, changed, err := c.commit(ctx, a, cur, &next, enc, from, ed.summary)
		var stale *store.StaleError
		if errors.As(err, &stale) && attempt < 50 {
			w.cur, reloaded = nil, true // another process wrote: read it again
			continue
		}
		if err != nil {
			return nil, nil, nil, ed.summary, err
		}
		w.cur = &current{rev: rev, st: &next, enc: enc, cache: cur.cache}
		if changed {
			c.revisionStored(a, rev, ed.summary)
		}
		return &WriteResult{Revision: rev, Changed: changed}, desired, touchedKeys(cur, &next, ed, reloaded), ed.summary, nil
	}
}

// touchedKeys are the kernel keys of the services an edit changed, as they
// were and as they are; nil when it may have changed any, or when the state
// it started from came from another process's revision, which the kernel
// may not have yet.
func touchedKeys(cur *current, next *ipvsmgr.State, ed edit, reloaded bool) []ipvsmgr.ServiceKey {
	if ed.whole || reloaded {
		return nil
	}
	keys := []ipvsmgr.ServiceKey{}
	add := func(svc *ipvsmgr.Service) bool {
		k, ok := ipvsmgr.ServiceKeyOf(svc)
		keys = append(keys, k)
		return ok
	}
	if ed.removed >= 0 && !add(&cur.st.Services[ed.removed]) {
		return nil
	}
	if ed.touched >= 0 {
		if ed.touched < len(cur.st.Services) && ed.removed < 0 && !add(&cur.st.Services[ed.touched]) {
			return nil
		}
		if !add(&next.Services[ed.touched]) {
			return nil
		}
	}
	return keys
}

// commit stores next: as a forward delta against cur when from says which
// services are cur's (a few kilobytes for a weight change), else whole.
func (c *Core) commit(ctx context.Context, a Actor, cur *current, next *ipvsmgr.State, enc [][]byte, from []int, summary string) (int64, bool, error) {
	if from != nil {
		delta, err := store.ForwardDelta(next, enc, from)
		if err != nil {
			return 0, false, err
		}
		rev, err := c.store.CommitForward(ctx, cur.rev, delta, a.Name, a.Via, summary)
		if !errors.Is(err, store.ErrWholeNeeded) {
			return rev, err == nil, err
		}
	}
	doc, err := store.JoinServices(next, enc)
	if err != nil {
		return 0, false, err
	}
	return c.store.CommitDocument(ctx, cur.rev, doc, nil, a.Name, a.Via, summary)
}

// unchanged maps each service of next to its index in cur when the edit
// left it as it was (-1 when not); nil when the edit may have changed
// anything, settings included.
func unchanged(cur *current, next *ipvsmgr.State, enc [][]byte, ed edit) []int {
	if ed.whole || !reflect.DeepEqual(cur.st.Settings, next.Settings) || !reflect.DeepEqual(cur.st.Imported, next.Imported) {
		return nil
	}
	from := make([]int, len(enc))
	for j := range from {
		i := j
		if ed.removed >= 0 && j >= ed.removed {
			i = j + 1
		}
		from[j] = i
		if i >= len(cur.enc) || (j == ed.touched && !bytes.Equal(enc[j], cur.enc[i])) {
			from[j] = -1
		}
	}
	return from
}

// reencode gives each service of next its encoding, taking cur's for the
// services the edit did not touch.
func reencode(cur *current, next *ipvsmgr.State, ed edit) ([][]byte, error) {
	if ed.whole {
		_, enc, err := store.EncodeServices(next)
		return enc, err
	}
	enc := slices.Clone(cur.enc)
	if ed.removed >= 0 {
		enc = slices.Delete(enc, ed.removed, ed.removed+1)
	}
	if ed.touched >= 0 {
		b := ipvsmgr.EncodeService(&next.Services[ed.touched])
		if ed.touched == len(enc) {
			enc = append(enc, b)
		} else {
			enc[ed.touched] = b
		}
	}
	if len(enc) != len(next.Services) {
		_, all, err := store.EncodeServices(next) // an edit that did not say what it did
		return all, err
	}
	return enc, nil
}
