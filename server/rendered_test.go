package server

import (
	"context"
	"net"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/ipvsctl/ipvsctl/arpguard"
	"github.com/ipvsctl/ipvsctl/ipvsmgr"
	"github.com/ipvsctl/ipvsctl/ipvsmgr/fakekernel"
	"github.com/ipvsctl/ipvsctl/ipvsmgr/ipvsmgrtest"
	"github.com/ipvsctl/ipvsctl/server/store"
)

// One rendering per snapshot however many ask; while a new one is made,
// the others get the last one at once.
func TestRenderedOncePerSnapshot(t *testing.T) {
	var r Rendered[[]byte]
	builds := 0
	build := func(s string) func() ([]byte, error) {
		return func() ([]byte, error) { builds++; return []byte(s), nil }
	}
	s1 := &Snapshot{At: time.Now()}
	for range 5 {
		if b, _ := r.Get(RenderKey{Snap: s1}, build("one")); string(b) != "one" {
			t.Fatalf("got %q", b)
		}
	}
	if builds != 1 {
		t.Fatalf("%d renderings of one snapshot", builds)
	}
	s2 := &Snapshot{At: time.Now()}
	started, release := make(chan struct{}), make(chan struct{})
	var wg sync.WaitGroup
	wg.Go(func() {
		_, _ = r.Get(RenderKey{Snap: s2}, func() ([]byte, error) { close(started); <-release; return []byte("two"), nil })
	})
	<-started
	if b, _ := r.Get(RenderKey{Snap: s2}, build("again")); string(b) != "one" {
		t.Errorf("while the new one is made: %q, want the last one", b)
	}
	close(release)
	wg.Wait()
	if b, _ := r.Get(RenderKey{Snap: s2}, build("again")); string(b) != "two" {
		t.Errorf("after: %q", b)
	}
	if b, _ := r.Get(RenderKey{Snap: s2, Stale: true}, build("stale")); string(b) != "stale" {
		t.Errorf("a snapshot gone stale is rendered again: %q", b)
	}
}

// Only a newer snapshot is worth not waiting for: while a rendering is
// made, a key whose revision, reconciles, health, results or staleness
// moved gets its own rendering, never the last one.
func TestRenderedWaitsForEveryOtherChange(t *testing.T) {
	s := &Snapshot{At: time.Now()}
	base := RenderKey{Snap: s, Rev: 3, Reconciles: 5, Health: 7, Results: 9}
	moved := map[string]RenderKey{}
	for name, f := range map[string]func(k *RenderKey){
		"revision": func(k *RenderKey) { k.Rev++ }, "reconcile": func(k *RenderKey) { k.Reconciles++ },
		"health": func(k *RenderKey) { k.Health++ }, "results": func(k *RenderKey) { k.Results++ },
		"stale": func(k *RenderKey) { k.Stale = true },
	} {
		k := base
		f(&k)
		moved[name] = k
	}
	for name, k := range moved {
		var r Rendered[string]
		if b, _ := r.Get(base, func() (string, error) { return "old", nil }); b != "old" {
			t.Fatal(b)
		}
		started, release := make(chan struct{}), make(chan struct{})
		var wg sync.WaitGroup
		wg.Go(func() {
			_, _ = r.Get(RenderKey{Snap: &Snapshot{At: time.Now()}, Rev: 3, Reconciles: 5, Health: 7, Results: 9},
				func() (string, error) { close(started); <-release; return "newer snapshot", nil })
		})
		<-started
		if b, _ := r.Get(k, func() (string, error) { return "new", nil }); b != "new" {
			t.Errorf("%s moved while another rendering was made: got %q", name, b)
		}
		close(release)
		wg.Wait()
	}
	var r Rendered[string]
	for i := range 3 {
		if b, _ := r.Get(RenderKey{Rev: int64(i)}, func() (string, error) { return itoaTest(i), nil }); b != itoaTest(i) {
			t.Errorf("without a snapshot nothing is kept: %q", b)
		}
	}
}

func itoaTest(i int) string { return string(rune('0' + i)) }

// The daemon counts its reads through a wrapper: the sync daemons of the
// driver behind it are still found.
func TestSyncDaemonsFoundThroughTheReadCounter(t *testing.T) {
	fk := &syncFake{}
	var reads atomic.Int64
	if syncDaemonsOf(&countedKernel{Kernel: fk, reads: &reads}) != fk {
		t.Fatal("the counted kernel hides its driver's sync daemons")
	}
	if syncDaemonsOf(fakekernel.New()) != nil {
		t.Fatal("a kernel without sync daemons has some")
	}
}

type syncFake struct {
	*fakekernel.Kernel
	fakekernel.SyncDaemons
}

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
	waitKey := func(what string, ok func(RenderKey) bool) RenderKey {
		t.Helper()
		for ctx.Err() == nil {
			if key := core.KeyNow(); ok(key) {
				return key
			}
			time.Sleep(5 * time.Millisecond)
		}
		t.Fatalf("timed out waiting for %s", what)
		return RenderKey{}
	}
	key := waitKey("the first snapshot", func(k RenderKey) bool { return k.Snap != nil && k.Results > 0 })
	time.Sleep(50 * time.Millisecond)
	if again := core.KeyNow(); again != key {
		t.Fatalf("the key moved with nothing changed: %+v -> %+v", key, again)
	}

	web := &ipvsmgr.State{Services: []ipvsmgr.Service{{Name: "web", Address: "198.18.0.100", Port: 80,
		Check:   &ipvsmgr.Check{Type: "tcp", Address: "127.0.0.1", Port: port, Interval: 0.1, Timeout: 0.5, Rise: 1, Fall: 1},
		Servers: []ipvsmgr.Server{{Name: "r1", Address: "198.18.0.11"}}}}}
	res, err := core.ApplyState(ctx, Actor{Name: "t", Via: "test"}, web, "web", WriteOptions{NoWait: true})
	if err != nil {
		t.Fatal(err)
	}
	if now := core.KeyNow(); now.Rev != res.Revision || now.Reconciles <= key.Reconciles || now.Health == key.Health {
		t.Fatalf("a write through the core, at once: %+v -> %+v (revision %d)", key, now, res.Revision)
	}
	key = waitKey("the check passing", func(k RenderKey) bool {
		hs, _ := core.HealthByServer(ctx)
		for _, h := range hs {
			if h.State == "up" {
				return true
			}
		}
		return false
	})
	ln.Close()
	waitKey("the health change", func(k RenderKey) bool {
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
	waitKey("another process's revision", func(k RenderKey) bool { return k.Rev == rev })
	key = core.KeyNow()
	if err := other.SaveResults(ctx, []arpguard.Result{{Target: "198.18.0.11", State: arpguard.StateDrift, At: time.Now()}}); err != nil {
		t.Fatal(err)
	}
	waitKey("another process's real-server result", func(k RenderKey) bool { return k.Results > key.Results })
}
