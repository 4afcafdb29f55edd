package daemon

import (
	"context"
	"net"
	"testing"
	"time"

	"github.com/ipvsctl/ipvsctl/arpguard"
	"github.com/ipvsctl/ipvsctl/ipvsmgr"
	"github.com/ipvsctl/ipvsctl/ipvsmgr/ipvsmgrtest"
	"github.com/ipvsctl/ipvsctl/server"
	"github.com/ipvsctl/ipvsctl/server/store"
)

// The key moves with every change a view may show: a write through the
// core and a revision or real-server result another process stores behind
// the daemon's back (once the daemon's loop has seen it), a reconcile, a
// health change; and not otherwise.
func TestKeyMovesWithWhatTheDaemonKnows(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	core, d, path, _ := daemonOnFake(t)
	d.Interval, d.Poll, d.Snapshot = time.Hour, 10*time.Millisecond, time.Hour
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	ipvsmgrtest.AcceptAndClose(ln)
	port := ln.Addr().(*net.TCPAddr).Port
	done := make(chan error, 1)
	go func() { done <- d.Run(ctx) }()
	defer func() { cancel(); <-done }()
	waitKey := func(what string, ok func(server.RenderKey) bool) server.RenderKey {
		t.Helper()
		for ctx.Err() == nil {
			if key := core.KeyNow(); ok(key) {
				return key
			}
			time.Sleep(5 * time.Millisecond)
		}
		t.Fatalf("timed out waiting for %s", what)
		return server.RenderKey{}
	}
	// Opening the kernel is a restore: its reconcile moves the key too,
	// and may come after the first snapshot (and a key read across it may
	// hold the snapshot from before it): wait for a key that held 20 ms.
	key := waitKey("the first snapshot and the opening restore", func(k server.RenderKey) bool {
		if k.Snap == nil || k.Results == 0 || k.Reconciles == 0 {
			return false
		}
		time.Sleep(20 * time.Millisecond)
		return core.KeyNow() == k
	})
	time.Sleep(50 * time.Millisecond)
	if again := core.KeyNow(); again != key {
		t.Fatalf("the key moved with nothing changed: %+v -> %+v", key, again)
	}

	web := &ipvsmgr.State{Services: []ipvsmgr.Service{{Name: "web", Address: "198.18.0.100", Port: 80,
		Check:   &ipvsmgr.Check{Type: "tcp", Address: "127.0.0.1", Port: port, Interval: 0.1, Timeout: 0.5, Rise: 1, Fall: 1},
		Servers: []ipvsmgr.Server{{Name: "r1", Address: "198.18.0.11"}}}}}
	res, err := applyState(ctx, core, server.Actor{Name: "t", Via: "test"}, web, "web")
	if err != nil {
		t.Fatal(err)
	}
	if now := core.KeyNow(); now.Rev != res.Revision || now.Reconciles <= key.Reconciles || now.Health == key.Health {
		t.Fatalf("a write through the core, at once: %+v -> %+v (revision %d)", key, now, res.Revision)
	}
	key = waitKey("the check passing", func(k server.RenderKey) bool {
		hs, _ := core.HealthByServer(ctx)
		for _, h := range hs {
			if h.State == "up" {
				return true
			}
		}
		return false
	})
	ln.Close()
	waitKey("the health change", func(k server.RenderKey) bool {
		hs, _ := core.HealthByServer(ctx)
		for _, h := range hs {
			if h.State == "down" {
				return k.Health > key.Health
			}
		}
		return false
	})

	// Another process (the CLI without the daemon's socket) writes the store.
	other, err := store.Open(ctx, path)
	if err != nil {
		t.Fatal(err)
	}
	defer other.Close()
	key = core.KeyNow()
	rev, _, err := other.Commit(ctx, res.Revision, &ipvsmgr.State{}, "cli", "cli", "empty")
	if err != nil {
		t.Fatal(err)
	}
	waitKey("another process's revision", func(k server.RenderKey) bool { return k.Rev == rev })
	key = core.KeyNow()
	if err := other.SaveResults(ctx, []arpguard.Result{{Target: "198.18.0.11", State: arpguard.StateDrift, At: time.Now()}}); err != nil {
		t.Fatal(err)
	}
	waitKey("another process's real-server result", func(k server.RenderKey) bool { return k.Results > key.Results })
}
