// Package events is what the director tells of as it happens: a real
// server going down or coming back, a VRRP role change, a route withdrawn,
// a revision stored. Each Event is published once, numbered, kept in a
// bounded ring for the readers that follow (the API's event stream, the
// panel's log, `ipvsctl events --follow`) and written to the store in
// batches, so that a reader who was away catches up and a restart keeps
// the recent past.
//
// Publishing never waits: a follower that does not keep up is dropped (its
// stream ends, and it resumes from its last ID), and the store is written
// by a goroutine of its own.
package events

import (
	"context"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

// The types of event. A type names the subject's kind and what happened.
const (
	ServerDown     = "realserver.down"     // a check failed: out of the kernel
	ServerQuiesced = "realserver.quiesced" // a check failed: weight 0 (on_failure quiesce)
	ServerUp       = "realserver.up"       // first passed since the daemon started
	ServerBack     = "realserver.back"     // passed again after being down
	QuorumLost     = "service.quorum_lost"
	QuorumRegained = "service.quorum_regained"
	SorryIn        = "service.sorry_in"  // the sorry server took the traffic
	SorryOut       = "service.sorry_out" // the real servers have it again
	VRRPState      = "vrrp.state"        // a change of VRRP role: master, backup, fault, stop
	BGPAnnounced   = "bgp.announced"
	BGPWithdrawn   = "bgp.withdrawn"
	BGPSession     = "bgp.session" // a router session went up or down
	DriftRepaired  = "drift.repaired"
	ReconcileFail  = "reconcile.failed"
	Replication    = "replication.failed"
	Revision       = "revision.stored"
	LoginLocked    = "login.locked_out"
	// The health checker's own health (the daemon's watchdog).
	CheckerLate     = "checker.late"      // a round of checks is late by more than its interval
	CheckerCaughtUp = "checker.caught_up" // no round is late any more
	CheckerReady    = "checker.ready"     // every check has run once since the start
)

// Types lists every type, for help and validation of filters.
var Types = []string{ServerDown, ServerQuiesced, ServerUp, ServerBack, QuorumLost, QuorumRegained, SorryIn, SorryOut,
	VRRPState, BGPAnnounced, BGPWithdrawn, BGPSession, DriftRepaired, ReconcileFail, Replication, Revision, LoginLocked,
	CheckerLate, CheckerCaughtUp, CheckerReady}

// Event is one thing that happened.
type Event struct {
	ID   int64     `json:"id"`
	Time time.Time `json:"time"`
	Type string    `json:"type"`
	// Subject is what it happened to: a real server
	// ("tcp/198.18.0.10:80 198.18.1.11:80"), a service ("tcp/198.18.0.10:80"),
	// a VRRP family ("vrrp/ipv4"), a route ("198.18.0.10/32"), a router, a user.
	Subject string `json:"subject"`
	// Message is the line an operator reads.
	Message string `json:"message"`
	// Fields are what a program needs (the check's reason, the priority, who).
	Fields map[string]string `json:"fields,omitempty"`
}

// Filter selects events: by type (a type, or a prefix ending in "." such
// as "realserver.") and by subject (its text contains the given one). Empty
// fields select all.
type Filter struct {
	Types   []string
	Subject string
}

// Match says whether e is one of the events f selects.
func (f Filter) Match(e Event) bool {
	if f.Subject != "" && !strings.Contains(e.Subject, f.Subject) {
		return false
	}
	if len(f.Types) == 0 {
		return true
	}
	for _, t := range f.Types {
		if t == e.Type || strings.HasSuffix(t, ".") && strings.HasPrefix(e.Type, t) {
			return true
		}
	}
	return false
}

// ValidType says whether t names a type or a prefix of types ("bgp.").
func ValidType(t string) bool {
	for _, k := range Types {
		if k == t || strings.HasSuffix(t, ".") && strings.HasPrefix(k, t) {
			return true
		}
	}
	return false
}

// Store keeps the events beyond the ring.
type Store interface {
	SaveEvents(ctx context.Context, evs []Event) error
	// EventsAfter returns up to limit events with an ID above after, oldest first.
	EventsAfter(ctx context.Context, after int64, limit int) ([]Event, error)
	LastEventID(ctx context.Context) (int64, error)
}

// saveTimeout bounds one batch's write to the store.
const saveTimeout = 5 * time.Second

// RingSize is how many events the ring holds.
const RingSize = 4096

// FollowerBuffer is how many events a follower may be behind before it is dropped.
const FollowerBuffer = 256

// Log is the director's events: the ring, the followers, the store's writer.
// A nil *Log takes every Publish and has no events (a process that is not
// the daemon).
type Log struct {
	store Store
	log   *slog.Logger
	now   func() time.Time

	lastID atomic.Int64 // last, read without the lock (a rendering's key)

	mu      sync.Mutex
	ring    []Event // oldest first, at most RingSize
	last    int64   // the ID of the newest event
	unsaved []Event
	follow  map[*Follower]struct{}
	closed  bool // Close: no more followers
	saveNow chan struct{}
}

// New starts a Log numbering after the store's newest event, its ring
// holding the store's newest RingSize.
func New(ctx context.Context, st Store, log *slog.Logger) (*Log, error) {
	l := &Log{store: st, log: log, now: time.Now, follow: map[*Follower]struct{}{}, saveNow: make(chan struct{}, 1)}
	last, err := st.LastEventID(ctx)
	if err != nil {
		return nil, err
	}
	l.last = last
	l.lastID.Store(last)
	if last > 0 {
		if l.ring, err = st.EventsAfter(ctx, max(0, last-RingSize), RingSize); err != nil {
			return nil, err
		}
	}
	return l, nil
}

// Publish numbers e, gives it to every follower it matches and queues it
// for the store. It never waits.
func (l *Log) Publish(e Event) {
	if l == nil {
		return
	}
	l.mu.Lock()
	l.last++
	l.lastID.Store(l.last)
	e.ID = l.last
	if e.Time.IsZero() {
		e.Time = l.now()
	}
	e.Time = e.Time.UTC()
	if len(l.ring) == RingSize {
		l.ring = slices.Delete(l.ring, 0, RingSize/8) // drop an eighth at once: a copy per 512 events, not per one
	}
	l.ring = append(l.ring, e)
	l.unsaved = append(l.unsaved, e)
	for f := range l.follow {
		if !f.filter.Match(e) {
			continue
		}
		select {
		case f.c <- e:
		default: // behind: it resumes from its last ID
			delete(l.follow, f)
			f.dropped = true
			close(f.c)
		}
	}
	l.mu.Unlock()
	select {
	case l.saveNow <- struct{}{}:
	default:
	}
}

// Follower receives the events published after it started following.
type Follower struct {
	c       chan Event
	filter  Filter
	dropped bool // set before c is closed
}

// C is the events; it is closed when the follower was dropped or stopped.
func (f *Follower) C() <-chan Event { return f.c }

// Dropped says, once C is closed, whether it was for falling behind.
func (f *Follower) Dropped() bool { return f.dropped }

// Follow returns the events after ID after that f selects (from the ring,
// else the store) and a Follower for those published from now on, with no
// gap and no repeat between the two. Stop it with Unfollow.
func (l *Log) Follow(ctx context.Context, after int64, f Filter) ([]Event, *Follower, error) {
	fl := &Follower{c: make(chan Event, FollowerBuffer), filter: f}
	if l == nil {
		close(fl.c)
		return nil, fl, nil
	}
	past, err := l.catchUp(ctx, after, f, fl)
	if err != nil {
		return nil, nil, err
	}
	return past, fl, nil
}

// Close ends every follower (a daemon stopping: its event streams end,
// and the HTTP server's shutdown does not wait for them); a Follow after
// it gets a closed follower.
func (l *Log) Close() {
	if l == nil {
		return
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	l.closed = true
	for f := range l.follow {
		delete(l.follow, f)
		close(f.c)
	}
}

// Unfollow stops fl; its channel is closed.
func (l *Log) Unfollow(fl *Follower) {
	if l == nil {
		return
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if _, ok := l.follow[fl]; ok {
		delete(l.follow, fl)
		close(fl.c)
	}
}

// MaxCatchUp bounds the events one read returns.
const MaxCatchUp = 10000

// Since returns the events after ID after that f selects, oldest first, at
// most MaxCatchUp (the newest of them).
func (l *Log) Since(ctx context.Context, after int64, f Filter) ([]Event, error) {
	if l == nil {
		return nil, nil
	}
	return l.catchUp(ctx, after, f, nil)
}

// catchUp reads what is older than the ring from the store, without the
// lock (Publish never waits for a disk), then the ring under the lock,
// where fl, if any, starts following: no gap, no repeat.
func (l *Log) catchUp(ctx context.Context, after int64, f Filter, fl *Follower) ([]Event, error) {
	var out []Event
	for {
		l.mu.Lock()
		if len(l.ring) == 0 || after+1 >= l.ring[0].ID {
			for _, e := range l.ring {
				if e.ID > after && f.Match(e) {
					out = append(out, e)
				}
			}
			switch {
			case fl != nil && l.closed:
				close(fl.c)
			case fl != nil:
				l.follow[fl] = struct{}{}
			}
			l.mu.Unlock()
			return newest(out), nil
		}
		upTo := l.ring[0].ID - 1
		l.mu.Unlock()
		kept, err := ReadStore(ctx, l.store, after, upTo, f)
		if err != nil {
			return nil, err
		}
		out = newest(append(out, kept...))
		after = upTo // what the store lacked below the ring was never saved
	}
}

// ReadStore returns the events st keeps with an ID above after and at most
// upTo (0: any) that f selects, oldest first, at most MaxCatchUp (the
// newest of them): a read older than the ring, or a process without the
// daemon's log.
func ReadStore(ctx context.Context, st Store, after, upTo int64, f Filter) ([]Event, error) {
	var out []Event
	for upTo == 0 || after < upTo {
		evs, err := st.EventsAfter(ctx, after, 1000)
		if err != nil {
			return nil, err
		}
		for _, e := range evs {
			if (upTo == 0 || e.ID <= upTo) && f.Match(e) {
				out = append(out, e)
			}
		}
		out = newest(out)
		if len(evs) < 1000 || upTo != 0 && evs[len(evs)-1].ID >= upTo {
			break
		}
		after = evs[len(evs)-1].ID
	}
	return out, nil
}

func newest(evs []Event) []Event {
	if len(evs) > MaxCatchUp {
		return evs[len(evs)-MaxCatchUp:]
	}
	return evs
}

// Last is the ID of the newest event (0: none yet). It takes no lock.
func (l *Log) Last() int64 {
	if l == nil {
		return 0
	}
	return l.lastID.Load()
}

// Run writes the published events to the store until ctx ends (then what
// is queued, with a short grace). Writes are batched: a burst of a
// thousand real servers going down is one transaction. A nil Log returns.
func (l *Log) Run(ctx context.Context) {
	if l == nil {
		return
	}
	// A batch taken is written whatever ctx does meanwhile (an end that
	// comes as it is written must not lose it), within saveTimeout.
	flush := func() {
		l.mu.Lock()
		evs := l.unsaved
		l.unsaved = nil
		l.mu.Unlock()
		if len(evs) == 0 {
			return
		}
		wctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), saveTimeout)
		defer cancel()
		if err := l.store.SaveEvents(wctx, evs); err != nil && l.log != nil {
			l.log.Error("keep events", "count", len(evs), "err", err)
		}
	}
	for {
		select {
		case <-ctx.Done():
			flush()
			return
		case <-l.saveNow:
			flush()
		}
	}
}
