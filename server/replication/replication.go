package replication

import (
	"bytes"
	"context"
	"fmt"
	"log/slog"
	"net/url"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/ipvsctl/ipvsctl/server"
	"github.com/ipvsctl/ipvsctl/server/events"
	"github.com/ipvsctl/ipvsctl/server/store"
	"github.com/ipvsctl/ipvsctl/server/trust"
)

// replicator follows the peer's desired state: a backup takes the master's
// every change; after a split (both changed it) the newer change wins on
// both, and the conflict is logged, audited and shown in status.
type replicator struct {
	c     *server.Core
	store *store.Store
	log   *slog.Logger
	peer  server.Peer
	url   string
	token string
	pin   string // the peer's certificate fingerprint
	ca    string // the pair CA (PEM)
	// allowExec: documents with new exec checks may be taken (node setting).
	allowExec bool
	// follower takes the source's every revision (server.ReplicationFollower).
	follower bool
	cancel   context.CancelFunc
	done     chan struct{}

	mu        sync.Mutex
	st        server.ReplicationStatus
	syncedAt  time.Time
	reported  string // the conflict last reported (winner's and loser's hashes)
	conflicts []server.Conflict
}

// Config is what a replicator follows and how.
type Config struct {
	Core  *server.Core
	Store *store.Store
	Log   *slog.Logger
	Peer  server.Peer // the peer's API
	// URL, Token, Fingerprint and CA are the node settings the peer was
	// reached with (Follows compares them).
	URL, Token, Fingerprint, CA string
	// AllowExec: documents with new exec checks may be taken (node setting).
	AllowExec bool
	// Follower: this director follows a source (node set --replication
	// follower): it takes the source's every revision, no conflict rule.
	Follower bool
}

// ConfigOf is the part of Config the node settings give.
func ConfigOf(n store.Node) Config {
	return Config{URL: n.PeerURL, Token: n.PeerToken, Fingerprint: n.PeerFingerprint, CA: n.PeerCA,
		AllowExec: n.AllowReplicatedExec, Follower: n.Replication == server.ReplicationFollower}
}

// Replicator follows the peer's desired state until Stop.
type Replicator struct{ p *replicator }

// Start follows the peer's desired state until ctx ends or Stop.
func Start(ctx context.Context, cfg Config) *Replicator {
	rctx, cancel := context.WithCancel(ctx)
	rep := &replicator{c: cfg.Core, store: cfg.Store, log: cfg.Log, peer: cfg.Peer, url: cfg.URL, token: cfg.Token,
		pin: cfg.Fingerprint, ca: cfg.CA, allowExec: cfg.AllowExec, follower: cfg.Follower, cancel: cancel, done: make(chan struct{})}
	rep.st = server.ReplicationStatus{Peer: cfg.URL, Conflicts: []server.Conflict{}}
	if h, at, err := cfg.Store.SyncedHash(ctx); err == nil && h != "" {
		rep.syncedAt = at
	}
	go func() {
		defer close(rep.done)
		rep.run(rctx)
	}()
	return &Replicator{p: rep}
}

// Follows says the replicator was started with these node settings.
func (r *Replicator) Follows(n store.Node) bool {
	p, c := r.p, ConfigOf(n)
	return p.url == c.URL && p.token == c.Token && p.pin == c.Fingerprint && p.ca == c.CA && p.allowExec == c.AllowExec &&
		p.follower == c.Follower
}

// Stop stops following and waits for it.
func (r *Replicator) Stop() {
	r.p.cancel()
	<-r.p.done
}

// Peer is the API of the director it follows (the runner asks it, too,
// for the count a returning director waits for).
func (r *Replicator) Peer() server.Peer { return r.p.peer }

// Status is what replication is doing.
func (r *Replicator) Status() *server.ReplicationStatus { return r.p.status() }

func (p *replicator) run(ctx context.Context) {
	var after int64
	backoff := 200 * time.Millisecond
	pause := func() bool {
		select {
		case <-ctx.Done():
			return false
		case <-time.After(backoff):
		}
		backoff = min(2*backoff, 5*time.Second)
		return true
	}
	for ctx.Err() == nil {
		asked := time.Now()
		wctx, cancel := context.WithTimeout(ctx, server.LongPollWait+15*time.Second)
		ps, err := p.peer.WaitState(wctx, after, p.followerReport(ctx))
		cancel()
		if ctx.Err() != nil {
			return
		}
		if err != nil {
			p.mu.Lock()
			changed := p.st.Error != err.Error()
			p.st.Connected, p.st.InSync, p.st.Error = false, false, err.Error()
			p.st.Failures++
			p.mu.Unlock()
			if changed {
				p.unreachable(ctx, err)
			}
			if !pause() {
				return
			}
			continue
		}
		err = p.consider(ctx, ps)
		if err != nil && ctx.Err() == nil {
			p.mu.Lock()
			if p.st.Error != err.Error() {
				p.log.Error("replication", "err", err)
				p.failed("the peer's desired state was not taken", err)
			}
			p.st.Error = err.Error()
			p.st.Failures++
			p.mu.Unlock()
		}
		// A refused revision, or an answer with nothing newer that came at
		// once (a peer that does not wait as the long poll should), is not
		// asked for again at once: without the pause a misbehaving peer
		// would be polled in a busy loop.
		if err != nil || ps.Revision <= after && time.Since(asked) < time.Second {
			if !pause() {
				return
			}
		} else {
			backoff = 200 * time.Millisecond
		}
		after = ps.Revision
	}
}

// failed tells of a failure of replication (the callers tell of each
// failure once, until it changes).
func (p *replicator) failed(what string, err error) {
	p.c.Events().Publish(events.Event{Type: events.Replication, Subject: p.url, Message: "replication from " + p.url + ": " + what + ": " + err.Error(),
		Fields: map[string]string{"peer": p.url, "error": err.Error()}})
}

// unreachable logs a failed poll, and audits a peer refused for its
// identity (its certificate, or plain HTTP where TLS was asked): such a
// peer was never sent the token.
func (p *replicator) unreachable(ctx context.Context, err error) {
	p.failed("the peer did not answer", err)
	if !trust.IsRefusal(err) {
		p.log.Warn("replication: peer unreachable", "err", err)
		return
	}
	p.log.Error("replication: peer refused, its identity is not the one pinned; it was sent no token", "err", err)
	e := store.AuditEntry{Actor: "replication", Via: "api", ClientAddr: hostOf(p.url), Action: "replication peer refused",
		Target: p.url, Outcome: store.OutcomeFailure, Detail: err.Error()}
	if _, werr := p.store.WriteAudit(context.WithoutCancel(ctx), e); werr != nil {
		p.log.Error("audit record lost", "action", e.Action, "err", werr)
	}
}

// MaxClockSkew is how far ahead of this director's clock a peer's revision
// time is believed: past it, the peer's change does not win a conflict on
// its time (a peer cannot make itself always newer).
const MaxClockSkew = time.Minute

func replicated(author string) bool { return strings.HasPrefix(author, server.ReplicatedAuthor) }

// newer says whether revision a is newer than b: by time, then by hash.
func newer(a, b *store.Head) bool {
	if !a.At.Equal(b.At) {
		return a.At.After(b.At)
	}
	return a.Hash > b.Hash
}

func describe(where string, h *store.Head) string {
	return fmt.Sprintf("%s revision %d by %s at %s", where, h.Revision, h.Author, h.At.UTC().Format(time.RFC3339Nano))
}

// consider takes the peer's revision if it is the one both should have:
// on a backup the master's, unless this director holds a newer change the
// master has not had; elsewhere the peer's only when it holds a change this
// one has not had and that is newer than any this one made.
func (p *replicator) consider(ctx context.Context, ps *server.PeerState) error {
	now := time.Now()
	p.mu.Lock()
	p.st.Connected, p.st.Error, p.st.PeerRevision = true, "", ps.Revision
	p.mu.Unlock()
	mine, err := p.store.Head(ctx)
	if err != nil {
		return err
	}
	if ps.Revision == 0 { // the peer has nothing yet: it takes ours
		p.setInSync(false, now)
		return nil
	}
	if mine.Hash == ps.Hash {
		return p.agreed(ctx, mine.Hash, now)
	}
	synced, _, err := p.store.SyncedHash(ctx)
	if err != nil {
		return err
	}
	peerName := orDefault(ps.Node, hostOf(p.url))
	adopt, conflict, refusal := p.decide(mine, ps, synced, peerName, now)
	if !adopt {
		p.setInSync(false, now)
		if conflict != nil {
			p.report(ctx, *conflict, ps.Hash+mine.Hash, peerName)
		}
		if refusal != "" {
			return fmt.Errorf("refused the peer's revision %d: %s", ps.Revision, refusal)
		}
		return nil
	}
	return p.adopt(ctx, ps, mine, conflict, peerName, now)
}

// decide says whether the peer's revision is the one to have, the conflict
// to report when both directors changed the state since they last agreed
// (or this one refuses the peer's), and why it refuses.
func (p *replicator) decide(mine *store.Head, ps *server.PeerState, synced, peerName string, now time.Time) (adopt bool, conflict *server.Conflict, refusal string) {
	mineDiverged := mine.Revision > 0 && !replicated(mine.Author) && mine.Hash != synced
	peerChanged := !replicated(ps.Author) && ps.Hash != synced
	backup, _, _ := server.DaemonSideOf(p.c).Role().Backup()
	if backup {
		adopt = !mineDiverged || (peerChanged && newer(&ps.Head, mine))
	} else {
		adopt = peerChanged && (!mineDiverged || newer(&ps.Head, mine))
	}
	future := ps.At.After(now.Add(MaxClockSkew))
	if mineDiverged && peerChanged && future {
		adopt = false
	}
	if p.follower { // the source's revision is the one to have
		adopt, future = true, false
	}
	if adopt && !p.allowExec {
		refusal = newPrograms(mine.Document, ps.Document)
	}
	switch {
	case refusal != "":
		adopt = false
		c := server.Conflict{At: now, Winner: "this director", Kept: describe("local", mine),
			Lost: describe("peer "+peerName+"'s", &ps.Head) + ": refused, " + refusal +
				" (exec checks run programs as root; allow them here with ipvsctl node set --allow-replicated-exec)"}
		conflict = &c
	case mineDiverged && peerChanged:
		c := server.Conflict{At: now, Winner: "this director", Kept: describe("local", mine), Lost: describe("peer "+peerName+"'s", &ps.Head)}
		if adopt {
			c.Winner, c.Kept, c.Lost = "peer "+peerName, describe("peer "+peerName+"'s", &ps.Head), describe("local", mine)
		} else if future {
			c.Lost += fmt.Sprintf(" (its time is %s ahead of this director's clock, past the %s skew believed)",
				ps.At.Sub(now).Round(time.Second), MaxClockSkew)
		}
		conflict = &c
	}
	return adopt, conflict, refusal
}

// adopt stores the peer's revision as this director's, reports the conflict
// it settles, and checks that what was stored is the peer's document.
func (p *replicator) adopt(ctx context.Context, ps *server.PeerState, mine *store.Head, conflict *server.Conflict, peerName string, now time.Time) error {
	label := fmt.Sprintf("replication: %s's revision %d", peerName, ps.Revision)
	if conflict != nil {
		label += fmt.Sprintf(" (conflict: replaces diverging local revision %d, kept in the history)", mine.Revision)
	}
	res, err := p.c.Apply(ctx, server.Actor{Name: server.ReplicatedAuthor + peerName, Via: "api", Addr: hostOf(p.url)},
		bytes.NewReader(ps.Document), label, server.WriteOptions{NoWait: true})
	if err != nil {
		return fmt.Errorf("store %s: %w", label, err)
	}
	if conflict != nil {
		conflict.Revision = res.Revision
		p.report(ctx, *conflict, ps.Hash+mine.Hash, peerName)
	}
	p.log.Info("replication: took the peer's desired state", "peer_revision", ps.Revision, "revision", res.Revision,
		"after", time.Since(ps.At).Round(time.Millisecond).String())
	p.mu.Lock()
	copied := now
	p.st.LastCopy, p.st.LastCopySeconds = &copied, now.Sub(ps.At).Seconds()
	p.mu.Unlock()
	after, err := p.store.Head(ctx)
	if err != nil {
		return err
	}
	if after.Hash != ps.Hash {
		return fmt.Errorf("stored %s, but its document differs from the peer's (hash %.12s, peer's %.12s)", label, after.Hash, ps.Hash)
	}
	return p.agreed(ctx, after.Hash, now)
}

func (p *replicator) agreed(ctx context.Context, hash string, now time.Time) error {
	synced, _, err := p.store.SyncedHash(ctx)
	if err != nil {
		return err
	}
	if synced != hash {
		if err := p.store.SaveSyncedHash(ctx, hash, now); err != nil {
			return err
		}
	}
	p.setInSync(true, now)
	return nil
}

func (p *replicator) setInSync(in bool, now time.Time) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if in {
		p.syncedAt = now
	}
	p.st.InSync = in
}

// report logs, audits and keeps a conflict once.
func (p *replicator) report(ctx context.Context, c server.Conflict, key, peerName string) {
	p.mu.Lock()
	if p.reported == key {
		p.mu.Unlock()
		return
	}
	p.reported = key
	p.mu.Unlock()
	// Logged and audited before status shows it.
	defer func() {
		p.mu.Lock()
		defer p.mu.Unlock()
		p.conflicts = append(p.conflicts, c)
		if len(p.conflicts) > 20 {
			p.conflicts = slices.Clone(p.conflicts[len(p.conflicts)-20:])
		}
	}()
	p.log.Warn("replication conflict: the peer's desired state and this director's differ; one is kept",
		"winner", c.Winner, "kept", c.Kept, "lost", c.Lost)
	e := store.AuditEntry{Actor: server.ReplicatedAuthor + peerName, Via: "api", ClientAddr: hostOf(p.url), Action: "replication conflict",
		Target: peerName, Outcome: store.OutcomeSuccess,
		Detail: fmt.Sprintf("winner %s: kept %s; lost %s (still in its history)", c.Winner, c.Kept, c.Lost)}
	if c.Revision != 0 {
		rev := c.Revision
		e.Revision = &rev
	}
	if _, err := p.store.WriteAudit(context.WithoutCancel(ctx), e); err != nil {
		p.log.Error("audit record lost", "action", e.Action, "err", err)
	}
}

func (p *replicator) status() *server.ReplicationStatus {
	p.mu.Lock()
	defer p.mu.Unlock()
	s := p.st
	s.Conflicts = append([]server.Conflict{}, p.conflicts...)
	if !s.InSync || !s.Connected {
		if !p.syncedAt.IsZero() {
			s.LagSeconds = time.Since(p.syncedAt).Seconds()
		}
	}
	return &s
}

func hostOf(u string) string {
	pu, err := url.Parse(u)
	if err != nil || pu.Hostname() == "" {
		return u
	}
	return pu.Hostname()
}

// followerReport is what this replicator tells the director it follows
// with each poll (the source shows it in its status).
func (p *replicator) followerReport(ctx context.Context) server.FollowerReport {
	p.mu.Lock()
	r := server.FollowerReport{Error: p.st.Error}
	p.mu.Unlock()
	r.Hash, _, _ = p.store.SyncedHash(ctx)
	r.Node = p.c.NodeName(ctx)
	return r
}
