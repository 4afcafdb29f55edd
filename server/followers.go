package server

import (
	"context"
	"maps"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/ipvsctl/ipvsctl/server/store"
)

// FollowerPoll is what a director following this one says with each long
// poll (GET /api/v1/state?after=N): who it is (its client certificate's
// fingerprint, proved at the request), where it calls from, and what it has.
type FollowerPoll struct {
	Fingerprint string
	Addr        string
	Node        string // its name for itself (its node address)
	After       int64  // this director's revision it last took
	Hash        string // the hash of the document it last agreed on
	Error       string // its replication's last error ("" for none)
}

// FollowerStatus is one director that follows this one (or tried to), as
// status shows it on the source.
type FollowerStatus struct {
	Name        string    `json:"name"`
	Address     string    `json:"address"`
	Fingerprint string    `json:"fingerprint"`
	Connected   bool      `json:"connected"` // a long poll of it is open now
	LastSeen    time.Time `json:"last_seen"`
	Revision    int64     `json:"revision"` // this director's revision it last took
	InSync      bool      `json:"in_sync"`
	// LagSeconds is 0 while in sync, else how long ago the first revision
	// it does not have was made here.
	LagSeconds float64 `json:"lag_seconds"`
	// Error is the follower's own last replication error, or (Refused) why
	// this director refused its call.
	Error   string `json:"error,omitempty"`
	Refused bool   `json:"refused,omitempty"`
}

// followerTable is the directors seen polling this one, by fingerprint
// (refused callers by address and fingerprint), bounded.
type followerTable struct {
	mu      sync.Mutex
	m       map[string]*followerEntry
	audited map[string]time.Time
}

type followerEntry struct {
	st    FollowerStatus
	hash  string
	polls int
}

const (
	maxFollowers       = 64
	refusalAuditWindow = 15 * time.Minute
	// refusalsAudited bounds the certificates audited per address and
	// window; maxAudited the (address, certificate) pairs remembered.
	refusalsAudited = 4
	maxAudited      = 1024
)

// shouldAudit says whether a refusal of (addr, fingerprint) is audited now
// (t.mu held).
func (t *followerTable) shouldAudit(addr, fingerprint string, now time.Time) bool {
	if t.audited == nil {
		t.audited = map[string]time.Time{}
	}
	key := addr + " " + fingerprint
	if at, seen := t.audited[key]; seen && now.Sub(at) < refusalAuditWindow {
		return false
	}
	fromAddr := 0
	for k, at := range t.audited {
		switch {
		case now.Sub(at) >= refusalAuditWindow:
			delete(t.audited, k)
		case strings.HasPrefix(k, addr+" "):
			fromAddr++
		}
	}
	if fromAddr >= refusalsAudited || len(t.audited) >= maxAudited {
		return false
	}
	t.audited[key] = now
	return true
}

func (t *followerTable) entry(key string, now time.Time) *followerEntry {
	if t.m == nil {
		t.m = map[string]*followerEntry{}
	}
	e := t.m[key]
	if e == nil {
		if len(t.m) >= maxFollowers { // forget the longest unseen, a refused caller first
			var old string
			older := func(v *followerEntry) bool {
				o := t.m[old]
				if v.st.Refused != o.st.Refused {
					return v.st.Refused
				}
				return v.st.LastSeen.Before(o.st.LastSeen)
			}
			for k, v := range t.m {
				if v.polls == 0 && (old == "" || older(v)) {
					old = k
				}
			}
			delete(t.m, old)
		}
		e = &followerEntry{}
		t.m[key] = e
	}
	e.st.LastSeen = now
	return e
}

// FollowerPolled records a trusted director's long poll; done ends it.
func (c *Core) FollowerPolled(p FollowerPoll) (done func()) {
	t := &c.followers
	t.mu.Lock()
	defer t.mu.Unlock()
	delete(t.m, "refused "+p.Addr+" "+p.Fingerprint)
	e := t.entry(p.Fingerprint, c.now())
	e.st = FollowerStatus{Name: orDefault(p.Node, p.Addr), Address: p.Addr, Fingerprint: p.Fingerprint, LastSeen: e.st.LastSeen,
		Revision: p.After, Error: p.Error}
	e.hash = p.Hash
	e.polls++
	var once sync.Once
	return func() {
		once.Do(func() {
			t.mu.Lock()
			e.polls--
			e.st.LastSeen = c.now()
			t.mu.Unlock()
		})
	}
}

// CallerRefused records a call on the link between directors that showed
// no trusted client certificate: it was refused before its token was
// looked at. Status shows it among the followers (the latest
// refusalsAudited certificates per address); it is logged and audited once per (address, certificate) and
// 15 minutes, at most refusalsAudited certificates per address (a caller
// making new certificates cannot grow the audit or the log without bound).
func (c *Core) CallerRefused(ctx context.Context, addr, fingerprint string, why error) {
	now := c.now()
	t := &c.followers
	t.mu.Lock()
	key := "refused " + addr + " " + fingerprint
	if t.m[key] == nil { // at most refusalsAudited certificates shown per address
		var mine []string
		for k := range t.m {
			if strings.HasPrefix(k, "refused "+addr+" ") {
				mine = append(mine, k)
			}
		}
		slices.SortFunc(mine, func(a, b string) int { return t.m[a].st.LastSeen.Compare(t.m[b].st.LastSeen) })
		for len(mine) >= refusalsAudited {
			delete(t.m, mine[0])
			mine = mine[1:]
		}
	}
	e := t.entry(key, now)
	e.st = FollowerStatus{Name: addr, Address: addr, Fingerprint: fingerprint, LastSeen: now, Error: why.Error(), Refused: true}
	audit := t.shouldAudit(addr, fingerprint, now)
	t.mu.Unlock()
	if !audit {
		c.log.Debug("a call between directors was refused again", "addr", addr, "fingerprint", fingerprint, "err", why)
		return
	}
	c.log.Warn("a call between directors was refused: no trusted client certificate; its token was not looked at",
		"addr", addr, "fingerprint", fingerprint, "err", why)
	en := store.AuditEntry{Actor: "(director)", Via: "api", ClientAddr: addr, Action: "replication caller refused",
		Target: orDefault(fingerprint, "no certificate"), Outcome: store.OutcomeFailure, Detail: why.Error()}
	if _, err := c.store.WriteAudit(context.WithoutCancel(ctx), en); err != nil {
		c.log.Error("audit record lost", "action", en.Action, "err", err)
	}
}

// Followers are the directors following this one, and the callers it
// refused, with how far behind each is.
func (c *Core) Followers(ctx context.Context) ([]FollowerStatus, error) {
	t := &c.followers
	t.mu.Lock()
	type row struct {
		st   FollowerStatus
		hash string
	}
	var rows []row
	for _, k := range slices.Sorted(maps.Keys(t.m)) {
		e := t.m[k]
		st := e.st
		st.Connected = e.polls > 0
		rows = append(rows, row{st, e.hash})
	}
	t.mu.Unlock()
	if len(rows) == 0 {
		return nil, nil
	}
	head, err := c.store.Head(ctx)
	if err != nil {
		return nil, err
	}
	now := c.now()
	out := make([]FollowerStatus, 0, len(rows))
	for _, r := range rows {
		st := r.st
		if !st.Refused {
			st.InSync = r.hash == head.Hash && st.Revision >= head.Revision
			if !st.InSync {
				at, ok, err := c.store.FirstRevisionAfter(ctx, st.Revision)
				if err != nil {
					return nil, err
				}
				if !ok || r.hash != head.Hash && st.Revision >= head.Revision {
					at = head.At
				}
				st.LagSeconds = max(0, now.Sub(at).Seconds())
			}
		}
		out = append(out, st)
	}
	slices.SortStableFunc(out, func(a, b FollowerStatus) int { return strings.Compare(a.Name, b.Name) })
	return out, nil
}
