package redundancy_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/ipvsctl/ipvsctl/server"
)

// setActive gives every real server of d's kernel n active connections.
func (d *director) setActive(n uint32) {
	tab, err := d.k.Table(context.Background())
	if err != nil {
		d.t.Fatal(err)
	}
	for _, s := range tab.Services {
		for _, dst := range s.Dests {
			d.k.SetActive(s.Key, dst.Key, n)
		}
	}
}

func (d *director) family() server.FamilyStatus {
	if r := d.status(); r != nil && len(r.Families) > 0 {
		return r.Families[0]
	}
	return server.FamilyStatus{}
}

// failbackPair is b (priority 100) master alone with 100 active
// connections, then a (priority 200, each the other's replication peer)
// started: a returning director that would preempt b.
func failbackPair(t *testing.T, doc string) (a, b *director) {
	t.Helper()
	ctx := context.Background()
	h := &hub{}
	a, b = newDirector(t, "198.18.0.2", 200), newDirector(t, "198.18.0.3", 100)
	if _, err := b.core.Apply(ctx, admin, strings.NewReader(doc), "state.json", server.WriteOptions{NoApply: true}); err != nil {
		t.Fatal(err)
	}
	a.peerWith(b)
	b.peerWith(a)
	b.start(h, nil)
	eventually(t, 10*time.Second, "b master with the VIP and its service", func() bool {
		tab, _ := b.k.Table(ctx)
		return b.role() == "master" && b.hasVIP() && len(tab.Services) == 1
	})
	b.setActive(100)
	a.start(h, nil)
	eventually(t, 10*time.Second, "a backup with b's table (replication)", func() bool {
		tab, _ := a.k.Table(ctx)
		return a.role() == "backup" && len(tab.Services) == 1
	})
	return a, b
}

// A director that returns above its master waits before it preempts until
// its backup sync daemon has the master's active connections (asked of the
// peer it follows), says so in its status and log, and then takes over,
// naming in the transition what it waited for.
func TestFailbackWaitsForTheSyncDaemon(t *testing.T) {
	a, b := failbackPair(t, pairState)
	eventually(t, 5*time.Second, "a's preemption waiting for the master's 100 connections", func() bool {
		return strings.Contains(a.family().PreemptWait, "the master's 100 active connections (0 at the last count)")
	})
	time.Sleep(time.Second) // ten advert intervals, three master down intervals
	if a.role() != "backup" || a.hasVIP() || b.role() != "master" || !b.hasVIP() {
		t.Fatalf("while a's sync daemon is behind: a %s (VIP %v), b %s (VIP %v)", a.role(), a.hasVIP(), b.role(), b.hasVIP())
	}
	if logs := a.logs.String(); !strings.Contains(logs, "a preemption waits for the sync daemon") {
		t.Errorf("a's log does not say what its preemption waits for:\n%s", logs)
	}

	a.setActive(60) // partly caught up: still waiting
	eventually(t, 5*time.Second, "a waiting for 60 of 100", func() bool {
		return strings.Contains(a.family().PreemptWait, "the master's 100 active connections (60 at the last count)")
	})
	a.setActive(100)
	eventually(t, 5*time.Second, "a master with the VIP, b backup without it", func() bool {
		return a.role() == "master" && a.hasVIP() && b.role() == "backup" && !b.hasVIP()
	})
	tr := a.status().Transitions
	if last := tr[len(tr)-1]; last.To != "master" ||
		!strings.HasPrefix(last.Reason, "preempting a master of lower priority 100 after waiting ") ||
		!strings.HasSuffix(last.Reason, "for the sync daemon to have the master's 100 active connections (60 at the last count)") {
		t.Errorf("a's takeover: %+v", last)
	}
	if w := a.family().PreemptWait; w != "" {
		t.Errorf("a master still says it waits: %q", w)
	}
	if logs := a.logs.String(); !strings.Contains(logs, "the sync daemon caught up: the preemption goes ahead") {
		t.Errorf("a's log does not say the sync daemon caught up:\n%s", logs)
	}
}

// The wait is bounded: a sync daemon that never catches up holds the
// preemption back for preempt_sync_wait and no longer.
func TestFailbackWaitIsBounded(t *testing.T) {
	a, b := failbackPair(t, withSyncWait("1.5"))
	eventually(t, 5*time.Second, "a's preemption waiting", func() bool { return a.family().PreemptWait != "" })
	eventually(t, 10*time.Second, "a master with the VIP, b backup without it", func() bool {
		return a.role() == "master" && a.hasVIP() && b.role() == "backup" && !b.hasVIP()
	})
	// How long it waited is the machine's to say (timed by its clock from
	// when the preemption was due), not this test's.
	tr := a.status().Transitions
	if last := tr[len(tr)-1]; !strings.Contains(last.Reason, "after waiting 1.5s (preempt_sync_wait) for the sync daemon to have the master's 100 active connections (0 at the last count)") {
		t.Errorf("a's takeover: %+v", last)
	}
}

// preempt_sync_wait 0 turns the wait off: a preempts at once.
func TestFailbackWithoutWait(t *testing.T) {
	a, b := failbackPair(t, withSyncWait("0"))
	eventually(t, 10*time.Second, "a master with the VIP, b backup without it", func() bool {
		return a.role() == "master" && a.hasVIP() && b.role() == "backup" && !b.hasVIP()
	})
	tr := a.status().Transitions
	if last := tr[len(tr)-1]; last.Reason != "preempting a master of lower priority 100" {
		t.Errorf("a's takeover: %+v", last)
	}
}
