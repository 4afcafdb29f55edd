package server

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/ipvsctl/ipvsctl/ipvsmgr"
	"github.com/ipvsctl/ipvsctl/server/store"
)

// A draft is one user's staged desired state: the edits they stage (the same
// Edits a direct write makes) collect in a whole document, kept in the store
// per user so that it survives a restart, and applied later as one revision
// refused if the stored state moved since the draft's base. Drafts are the
// core's alone: every entry point reads and writes them here, through one
// copy (drafts_cache.go).

// DraftInfo is one user's draft, without its document.
type DraftInfo struct {
	Author  string    `json:"author"`
	Base    int64     `json:"base"`
	Updated time.Time `json:"updated"`
}

// DraftDiff is what applying a draft would change: in the document, against
// the current state, and in the kernel.
type DraftDiff struct {
	DraftInfo
	Current int64 `json:"current"`
	// Moved says the stored state changed since the draft's base: applying
	// it is refused; Since lists what moved it.
	Moved   bool             `json:"moved"`
	Since   []store.Revision `json:"since,omitempty"`
	Changes []string         `json:"changes"`
	Kernel  *DiffResult      `json:"kernel,omitempty"`
	// KernelErr says why the kernel's changes are not known.
	KernelErr string `json:"kernel_error,omitempty"`
}

// Drafts lists every user's draft.
func (c *Core) Drafts(ctx context.Context) ([]DraftInfo, error) {
	ds, err := c.store.Drafts(ctx)
	out := make([]DraftInfo, 0, len(ds))
	for _, d := range ds {
		out = append(out, DraftInfo{Author: d.Author, Base: d.Base, Updated: d.Updated})
	}
	return out, err
}

// Draft is author's draft, with its document (CodeNotFound when none):
// the core's copy (drafts_cache.go), not a read of the store. The caller
// may change the returned struct, not its Doc's bytes.
func (c *Core) Draft(ctx context.Context, author string) (*store.Draft, error) {
	e, err := c.drafts.entry(ctx, c.store, author)
	if err != nil {
		return nil, err
	}
	if e.d == nil {
		return nil, fmt.Errorf("%s has no draft: %w", author, store.ErrNotFound)
	}
	d := *e.d
	return &d, nil
}

// DraftDocument is author's draft as a desired-state document.
func (c *Core) DraftDocument(ctx context.Context, author string) ([]byte, error) {
	d, err := c.Draft(ctx, author)
	if err != nil {
		return nil, err
	}
	return d.Doc, nil
}

// draftState is author's draft decoded.
func (c *Core) draftState(ctx context.Context, author string) (*ipvsmgr.State, *store.Draft, error) {
	d, err := c.Draft(ctx, author)
	if err != nil {
		return nil, nil, err
	}
	st, err := ipvsmgr.DecodeState(bytes.NewReader(d.Doc))
	if err != nil {
		return nil, nil, fmt.Errorf("draft of %s: %w", author, err)
	}
	return st, d, nil
}

// DraftSummary is the banner a screen shows about a draft.
type DraftSummary struct {
	Base    int64 `json:"base"`
	Current int64 `json:"current"`
	Changes int   `json:"changes"` // how many changes it makes to the current state
	Moved   bool  `json:"moved"`   // the stored state moved since its base
}

// SummarizeDraft is author's draft's summary (CodeNotFound when none),
// counted once per draft and revision: rev is the current revision as the
// caller knows it (the panel's: the daemon's, without a database read).
func (c *Core) SummarizeDraft(ctx context.Context, author string, rev int64) (*DraftSummary, error) {
	e, err := c.drafts.entry(ctx, c.store, author)
	if err != nil {
		return nil, err
	}
	if e.d == nil {
		return nil, fmt.Errorf("%s has no draft: %w", author, store.ErrNotFound)
	}
	c.drafts.mu.Lock()
	sum, at := e.sum, e.sumRev
	c.drafts.mu.Unlock()
	if sum != nil && at == rev {
		return sum, nil
	}
	sum = &DraftSummary{Base: e.d.Base}
	cur, curRev, err := c.State(ctx)
	if err != nil {
		return sum, nil
	}
	sum.Current, sum.Moved = curRev, curRev != e.d.Base
	if st, err := ipvsmgr.DecodeState(bytes.NewReader(e.d.Doc)); err == nil {
		sum.Changes = len(ipvsmgr.Changes(cur, st))
	}
	c.drafts.mu.Lock()
	e.sum, e.sumRev = sum, rev
	c.drafts.mu.Unlock()
	return sum, nil
}

func infoOf(d *store.Draft) *DraftInfo {
	return &DraftInfo{Author: d.Author, Base: d.Base, Updated: d.Updated}
}

// StartDraft starts a's draft from the current state unless they have one
// (then it is kept): what the panel's "Start a draft", POST
// /api/v1/draft/start and ipvsctl draft start do.
func (c *Core) StartDraft(ctx context.Context, a Actor) (*DraftInfo, error) {
	if err := allow(a, "draft stage", RoleFor("draft stage")); err != nil {
		return nil, err
	}
	defer c.drafts.lock(a.Name)()
	d, err := c.startDraft(ctx, a)
	if err != nil {
		return nil, err
	}
	return infoOf(d), nil
}

// startDraft is StartDraft under a's draft lock, allowed.
func (c *Core) startDraft(ctx context.Context, a Actor) (*store.Draft, error) {
	if d, err := c.Draft(ctx, a.Name); err == nil || !errors.Is(err, store.ErrNotFound) {
		return d, err
	}
	st, rev, err := c.State(ctx)
	if err != nil {
		return nil, err
	}
	doc, err := store.Encode(st)
	if err != nil {
		return nil, err
	}
	return c.saveDraft(ctx, &store.Draft{Author: a.Name, Base: rev, Doc: doc})
}

// saveDraft stores d and keeps what the store has (under d.Author's lock).
func (c *Core) saveDraft(ctx context.Context, d *store.Draft) (*store.Draft, error) {
	if err := c.store.SaveDraft(ctx, d); err != nil {
		c.drafts.forget(d.Author)
		return nil, err
	}
	saved, err := c.store.Draft(ctx, d.Author)
	if err != nil {
		c.drafts.forget(d.Author)
		return nil, err
	}
	c.drafts.set(d.Author, saved)
	cp := *saved
	return &cp, nil
}

// stage is a Write with WriteOptions.Draft or IntoOpenDraft: the edits
// made on a's draft (started from the current state when they have none),
// refused as a direct write would be: the same checks of role and
// validation, the same errors. Nothing reaches the kernel. With onlyOpen,
// when a has no draft (or may not stage) nothing is done and staged is
// false: the change is the caller's to make.
func (c *Core) stage(ctx context.Context, a Actor, edits []Edit, onlyOpen bool) (res *WriteResult, staged bool, err error) {
	for _, e := range edits {
		if err := allow(a, e.Action, e.Role); err != nil {
			return nil, false, err
		}
	}
	if err := allow(a, "draft stage", RoleFor("draft stage")); err != nil {
		if onlyOpen {
			return nil, false, nil // who may not stage makes the change itself
		}
		return nil, false, err
	}
	defer c.drafts.lock(a.Name)()
	if onlyOpen {
		if _, err := c.Draft(ctx, a.Name); errors.Is(err, store.ErrNotFound) {
			return nil, false, nil
		} else if err != nil {
			return nil, false, err
		}
	}
	d, err := c.startDraft(ctx, a)
	if err != nil {
		return nil, false, err
	}
	st, err := ipvsmgr.DecodeState(bytes.NewReader(d.Doc))
	if err != nil {
		return nil, false, fmt.Errorf("draft of %s: %w", a.Name, err)
	}
	if _, err := batch(edits)(st); err != nil {
		return nil, false, err
	}
	if _, err := ipvsmgr.Compile(st); err != nil {
		return nil, false, err
	}
	if d.Doc, err = store.Encode(st); err != nil {
		return nil, false, err
	}
	if d, err = c.saveDraft(ctx, d); err != nil {
		return nil, false, err
	}
	return &WriteResult{Revision: d.Base, Draft: infoOf(d)}, true, nil
}

// StageState makes st (validated) a's whole draft, based on the current
// revision: an import previewed before it is applied.
func (c *Core) StageState(ctx context.Context, a Actor, st *ipvsmgr.State) (*DraftInfo, error) {
	if err := allow(a, "draft stage", RoleFor("draft stage")); err != nil {
		return nil, err
	}
	if _, err := ipvsmgr.Compile(st); err != nil {
		return nil, err
	}
	rev, err := c.store.CurrentRevision(ctx)
	if err != nil {
		return nil, err
	}
	doc, err := store.Encode(st)
	if err != nil {
		return nil, err
	}
	defer c.drafts.lock(a.Name)()
	d, err := c.saveDraft(ctx, &store.Draft{Author: a.Name, Base: rev, Doc: doc})
	if err != nil {
		return nil, err
	}
	return infoOf(d), nil
}

// DiffDraft is what applying author's draft would change.
func (c *Core) DiffDraft(ctx context.Context, author string) (*DraftDiff, error) {
	st, d, err := c.draftState(ctx, author)
	if err != nil {
		return nil, err
	}
	cur, rev, err := c.State(ctx)
	if err != nil {
		return nil, err
	}
	out := &DraftDiff{DraftInfo: *infoOf(d), Current: rev, Moved: rev != d.Base}
	if out.Changes = ipvsmgr.Changes(cur, st); out.Changes == nil {
		out.Changes = []string{}
	}
	if out.Moved {
		out.Since, _ = c.revisionsSince(ctx, d.Base)
	}
	if out.Kernel, err = c.Diff(ctx, bytes.NewReader(d.Doc)); err != nil {
		out.KernelErr = err.Error()
	}
	return out, nil
}

// revisionsSince lists the revisions after base, oldest first (at most 50).
func (c *Core) revisionsSince(ctx context.Context, base int64) ([]store.Revision, error) {
	revs, err := c.store.History(ctx, 50)
	if err != nil {
		return nil, err
	}
	var out []store.Revision
	for i := len(revs) - 1; i >= 0; i-- {
		if revs[i].ID > base {
			out = append(out, revs[i])
		}
	}
	return out, nil
}

// ApplyDraft stores a's draft as one revision and reconciles, refused when
// the stored state moved since the draft's base; the applied draft is gone.
// label says what the draft was for the history ("": "draft of USER").
func (c *Core) ApplyDraft(ctx context.Context, a Actor, label string, o WriteOptions) (*WriteResult, error) {
	label = orDefault(label, "draft of "+a.Name)
	// Held through the write: an edit staged meanwhile would be lost with
	// the applied draft.
	defer c.drafts.lock(a.Name)()
	st, d, err := c.draftState(ctx, a.Name)
	if err != nil {
		c.audit(ctx, a, "draft apply", label, nil, err, "")
		return nil, err
	}
	o.Base = d.Base
	if d.Base == 0 {
		// A draft made before the first revision: refused if one appeared since.
		if rev, err := c.store.CurrentRevision(ctx); err == nil && rev != 0 {
			err := &store.StaleError{Base: 0, Current: rev}
			c.audit(ctx, a, "draft apply", label, nil, err, "")
			return nil, err
		}
	}
	res, err := c.applyState(ctx, a, "draft apply", st, label, o)
	if err != nil {
		return nil, err
	}
	if err := c.store.DeleteDraft(ctx, a.Name); err != nil {
		c.log.Error("delete applied draft", "user", a.Name, "err", err)
		c.drafts.forget(a.Name)
	} else {
		c.drafts.set(a.Name, nil)
	}
	return res, nil
}

// DiscardDraft throws a's draft away (no error when there is none).
func (c *Core) DiscardDraft(ctx context.Context, a Actor) error {
	if err := allow(a, "draft discard", RoleFor("draft discard")); err != nil {
		return err
	}
	defer c.drafts.lock(a.Name)()
	if err := c.store.DeleteDraft(ctx, a.Name); err != nil {
		c.drafts.forget(a.Name)
		return err
	}
	c.drafts.set(a.Name, nil)
	return nil
}
