package server

import (
	"context"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/ipvsctl/ipvsctl/server/events"
)

// Event is one thing the director told of (server/events).
type Event = events.Event

// EventFilter selects events by type and subject.
type EventFilter = events.Filter

// EventTypes are the types of event.
func EventTypes() []string { return slices.Clone(events.Types) }

// Events is the daemon's event log, which the rooms beside the core
// publish to; nil (which takes every Publish) in a process that is not the
// daemon.
func (c *Core) Events() *events.Log { return c.events }

// ReadEvents returns the events after ID after that f selects, oldest
// first (at most events.MaxCatchUp): the daemon's log, else (a CLI without
// a daemon) the store's.
func (c *Core) ReadEvents(ctx context.Context, a Actor, after int64, f EventFilter) ([]Event, error) {
	if err := allow(a, "read events", RoleFor("events")); err != nil {
		return nil, err
	}
	if c.events != nil {
		return c.events.Since(ctx, after, f)
	}
	return events.ReadStore(ctx, c.store, after, 0, f)
}

// revisionStored tells of a revision a change stored.
func (c *Core) revisionStored(a Actor, rev int64, summary string) {
	c.events.Publish(Event{Type: events.Revision, Subject: "revision/" + strconv.FormatInt(rev, 10),
		Message: "revision " + strconv.FormatInt(rev, 10) + " stored by " + a.Name + " (" + a.Via + "): " + summary,
		Fields:  map[string]string{"revision": strconv.FormatInt(rev, 10), "by": a.Name, "via": a.Via, "summary": summary}})
}

// LockoutEvent is auth's OnLockout for the daemon: a login locked out.
func LockoutEvent(l *events.Log) func(user, addr string, wait time.Duration) {
	return func(user, addr string, wait time.Duration) {
		l.Publish(Event{Type: events.LoginLocked, Subject: "user/" + user,
			Message: "logins of " + user + " from " + addr + " locked out for " + wait.Round(time.Second).String() + " after repeated failures",
			Fields:  map[string]string{"user": user, "addr": addr, "for": wait.Round(time.Second).String()}})
	}
}

// ParseEventFilter makes a filter of type names (each a type or a prefix
// such as "bgp."; comma-separated lists are split) and a subject.
func ParseEventFilter(types []string, subject string) (EventFilter, error) {
	f := EventFilter{Subject: subject}
	for _, list := range types {
		for _, t := range strings.Split(list, ",") {
			if t = strings.TrimSpace(t); t == "" {
				continue
			}
			if !events.ValidType(t) {
				return f, errorf(CodeBadInput, "type: %q is not an event type (one of %s, or a prefix such as \"realserver.\")",
					t, strings.Join(events.Types, ", "))
			}
			f.Types = append(f.Types, t)
		}
	}
	return f, nil
}

// FollowEvents returns the events after ID after that f selects and a
// follower of those to come: the daemon's (a process without its log has
// none to follow and is refused). Stop it with Events().Unfollow.
func (c *Core) FollowEvents(ctx context.Context, a Actor, after int64, f EventFilter) ([]Event, *events.Follower, error) {
	if err := allow(a, "read events", RoleFor("events")); err != nil {
		return nil, nil, err
	}
	if c.events == nil {
		return nil, nil, errorf(CodeUnavailable, "events: only the daemon has events to follow")
	}
	return c.events.Follow(ctx, after, f)
}

// eventsPoll is how often WatchEvents looks at the store in a process
// that is not the daemon.
const eventsPoll = 500 * time.Millisecond

// WatchEvents calls fn with each event after ID after that f selects, then
// with each new one as it is published, until ctx ends (nil) or fn fails
// (its error). A follower dropped for falling behind catches up from where
// it was. Without the daemon's log (a CLI on the database) it reads the
// store every half second.
func (c *Core) WatchEvents(ctx context.Context, a Actor, after int64, f EventFilter, fn func(Event) error) error {
	for {
		var past []Event
		var fl *events.Follower
		var err error
		if c.events != nil {
			past, fl, err = c.FollowEvents(ctx, a, after, f)
		} else {
			past, err = c.ReadEvents(ctx, a, after, f)
		}
		if err != nil {
			return err
		}
		for _, e := range past {
			if err := fn(e); err != nil {
				c.events.Unfollow(fl)
				return err
			}
			after = e.ID
		}
		if fl == nil {
			select {
			case <-ctx.Done():
				return nil
			case <-time.After(eventsPoll):
				continue
			}
		}
		err = c.follow(ctx, fl, &after, fn)
		c.events.Unfollow(fl)
		if err != nil || ctx.Err() != nil || !fl.Dropped() {
			return err // fn failed, ctx ended, or the log closed (the daemon stops)
		}
	}
}

// follow passes fl's events to fn until fl closes, ctx ends or fn fails.
// Those published before ctx ended are passed on first (a stopping
// daemon's VRRP stop reaches its notify_stop).
func (c *Core) follow(ctx context.Context, fl *events.Follower, after *int64, fn func(Event) error) error {
	for {
		var e Event
		var ok bool
		select {
		case e, ok = <-fl.C():
		case <-ctx.Done():
			select {
			case e, ok = <-fl.C():
			default:
				return nil
			}
		}
		if !ok {
			return nil
		}
		if err := fn(e); err != nil {
			return err
		}
		*after = e.ID
	}
}
