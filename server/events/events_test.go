package events_test

import (
	"context"
	"fmt"
	"path/filepath"
	"testing"
	"time"

	"github.com/ipvsctl/ipvsctl/server/events"
	"github.com/ipvsctl/ipvsctl/server/store"
)

func openStore(t *testing.T, path string) *store.Store {
	t.Helper()
	st, err := store.Open(context.Background(), path)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	return st
}

func ev(typ, subject string) events.Event {
	return events.Event{Type: typ, Subject: subject, Message: typ + " " + subject}
}

// Events are numbered, kept in the store by Run, and a new Log over the
// same database numbers after them and still has them.
func TestEventsAreNumberedAndKeptAcrossARestart(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "ipvsctl.db")
	st := openStore(t, path)
	l, err := events.New(ctx, st, nil)
	if err != nil {
		t.Fatal(err)
	}
	runCtx, stop := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() { l.Run(runCtx); close(done) }()
	l.Publish(ev(events.ServerDown, "-t 198.18.0.10:80 -r 198.18.1.11:80"))
	l.Publish(events.Event{Type: events.Revision, Subject: "revision/2", Fields: map[string]string{"by": "alice"}})
	stop()
	<-done // Run saves what is queued before it returns
	l2, err := events.New(ctx, openStore(t, path), nil)
	if err != nil {
		t.Fatal(err)
	}
	if l2.Last() != 2 {
		t.Fatalf("a new log over the same store starts after %d, want 2", l2.Last())
	}
	got, err := l2.Since(ctx, 0, events.Filter{})
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 2 || got[0].ID != 1 || got[0].Type != events.ServerDown || got[1].Fields["by"] != "alice" || got[1].Time.IsZero() {
		t.Fatalf("kept events = %+v", got)
	}
	l2.Publish(ev(events.ServerBack, "x"))
	if l2.Last() != 3 {
		t.Errorf("the next event is %d, want 3", l2.Last())
	}
}

// A reader that asks for more than the ring holds gets the older ones from
// the store, in order, without a gap or a repeat.
func TestCatchUpBeyondTheRingReadsTheStore(t *testing.T) {
	ctx := context.Background()
	st := openStore(t, filepath.Join(t.TempDir(), "ipvsctl.db"))
	l, err := events.New(ctx, st, nil)
	if err != nil {
		t.Fatal(err)
	}
	n := events.RingSize + 1500
	var batch []events.Event
	for i := 1; i <= n; i++ {
		e := ev(events.ServerDown, fmt.Sprintf("rs%d", i))
		l.Publish(e)
		e.ID, e.Time = int64(i), time.Now()
		batch = append(batch, e)
	}
	// What Run would write: the store has them all.
	if err := st.SaveEvents(ctx, batch); err != nil {
		t.Fatal(err)
	}
	got, err := l.Since(ctx, 10, events.Filter{})
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != n-10 {
		t.Fatalf("got %d events after 10, want %d", len(got), n-10)
	}
	for i, e := range got {
		if e.ID != int64(11+i) {
			t.Fatalf("event %d has ID %d, want %d (a gap or a repeat)", i, e.ID, 11+i)
		}
	}
	past, fl, err := l.Follow(ctx, int64(n-3), events.Filter{})
	if err != nil {
		t.Fatal(err)
	}
	defer l.Unfollow(fl)
	l.Publish(ev(events.ServerBack, "next"))
	if len(past) != 3 || past[0].ID != int64(n-2) {
		t.Fatalf("follow after %d: past = %d events from %d", n-3, len(past), past[0].ID)
	}
	if e := <-fl.C(); e.ID != int64(n+1) || e.Subject != "next" {
		t.Errorf("followed %+v, want event %d", e, n+1)
	}
}

// A follower that does not read is dropped once its buffer is full; the
// publisher never waits for it, and the others go on.
func TestASlowFollowerIsDroppedNotWaitedFor(t *testing.T) {
	ctx := context.Background()
	l, err := events.New(ctx, openStore(t, filepath.Join(t.TempDir(), "ipvsctl.db")), nil)
	if err != nil {
		t.Fatal(err)
	}
	_, slow, _ := l.Follow(ctx, 0, events.Filter{})
	_, picky, _ := l.Follow(ctx, 0, events.Filter{Types: []string{"bgp."}})
	for i := 0; i < events.FollowerBuffer+50; i++ {
		l.Publish(ev(events.ServerDown, "rs")) // returns although nobody reads
	}
	l.Publish(ev(events.BGPWithdrawn, "198.18.0.10/32"))
	n := 0
	for range slow.C() {
		n++
	}
	if !slow.Dropped() || n != events.FollowerBuffer {
		t.Errorf("slow follower: dropped %v after %d events, want dropped after %d", slow.Dropped(), n, events.FollowerBuffer)
	}
	select {
	case e := <-picky.C():
		if e.Type != events.BGPWithdrawn {
			t.Errorf("the bgp. follower got %s", e.Type)
		}
	default:
		t.Error("the bgp. follower got nothing: a filter's follower is not dropped for events it does not select")
	}
	if picky.Dropped() {
		t.Error("the bgp. follower was dropped")
	}
	l.Close()
	if _, ok := <-picky.C(); ok || picky.Dropped() {
		t.Error("Close leaves a follower open, or says it was dropped")
	}
	_, late, _ := l.Follow(ctx, 0, events.Filter{})
	if _, ok := <-late.C(); ok {
		t.Error("a follower after Close is open")
	}
}

func TestFilter(t *testing.T) {
	e := events.Event{Type: events.ServerDown, Subject: "-t 198.18.0.10:80 -r 198.18.1.11:80"}
	for _, c := range []struct {
		f    events.Filter
		want bool
	}{
		{events.Filter{}, true},
		{events.Filter{Types: []string{events.ServerDown}}, true},
		{events.Filter{Types: []string{"realserver."}}, true},
		{events.Filter{Types: []string{"realserver"}}, false}, // a prefix ends in "."
		{events.Filter{Types: []string{events.BGPSession, events.ServerDown}}, true},
		{events.Filter{Subject: "198.18.1.11"}, true},
		{events.Filter{Subject: "198.18.1.12"}, false},
		{events.Filter{Types: []string{"vrrp."}, Subject: "198.18.1.11"}, false},
	} {
		if got := c.f.Match(e); got != c.want {
			t.Errorf("%+v matches %v, want %v", c.f, got, c.want)
		}
	}
	for _, typ := range []string{"realserver.down", "bgp.", "vrrp.state"} {
		if !events.ValidType(typ) {
			t.Errorf("%q is not valid", typ)
		}
	}
	for _, typ := range []string{"down", "realserver", "nope."} {
		if events.ValidType(typ) {
			t.Errorf("%q is valid", typ)
		}
	}
}
