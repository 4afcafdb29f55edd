package daemon

import (
	"context"
	"io"
	"log/slog"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/ipvsctl/ipvsctl/ipvsmgr"
	"github.com/ipvsctl/ipvsctl/ipvsmgr/fakekernel"
	"github.com/ipvsctl/ipvsctl/server"
	"github.com/ipvsctl/ipvsctl/server/store"
)

func TestDaemonFollowsRevisionsAndRepairs(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	st := testStore(t, ctx)
	k := fakekernel.New()
	logs := &syncWriter{b: &strings.Builder{}}
	core := server.New(server.Config{Store: st, OpenKernel: openFake(k, nil), Log: slog.New(slog.NewTextHandler(io.Discard, nil))})
	d := New(core, st, slog.New(slog.NewTextHandler(logs, nil)))
	d.Interval, d.Poll = 50*time.Millisecond, 10*time.Millisecond
	done := make(chan error, 1)
	go func() { done <- d.Run(ctx) }()

	state := &ipvsmgr.State{Services: []ipvsmgr.Service{{Name: "web", Address: "198.18.0.100", Port: 80,
		Servers: []ipvsmgr.Server{{Address: "198.18.0.11"}}}}}
	if _, _, err := st.Commit(ctx, 0, state, "t", "test", "add web"); err != nil {
		t.Fatal(err)
	}
	waitKernel := func(what string, ok func(*ipvsmgr.Table) bool) {
		t.Helper()
		for ctx.Err() == nil {
			if tbl, _ := k.Table(ctx); ok(tbl) {
				return
			}
			time.Sleep(5 * time.Millisecond)
		}
		t.Fatalf("timed out waiting for %s", what)
	}
	waitKernel("the new revision in the kernel", func(t *ipvsmgr.Table) bool { return len(t.Services) == 1 && len(t.Services[0].Dests) == 1 })
	// Someone runs ipvsadm -C: the daemon puts the service back.
	tbl, _ := k.Table(ctx)
	k.Apply(ctx, []ipvsmgr.Op{{Kind: ipvsmgr.OpDelService, Service: tbl.Services[0]}})
	waitKernel("the repair", func(t *ipvsmgr.Table) bool { return len(t.Services) == 1 })
	for ctx.Err() == nil && !strings.Contains(logs.String(), "repaired") {
		time.Sleep(5 * time.Millisecond) // the repair is logged once its reconcile returns
	}
	cancel()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(logs.String(), "repaired") {
		t.Errorf("repair not logged: %s", logs.String())
	}
}

// daemonOnFake is a core over a new database at path and its daemon (not
// started) on a fake kernel.
func daemonOnFake(t *testing.T) (*server.Core, *Daemon, string, *fakekernel.Kernel) {
	t.Helper()
	path := filepath.Join(t.TempDir(), "ipvsctl.db")
	st, err := store.Open(context.Background(), path)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	k := fakekernel.New()
	core := server.New(server.Config{Store: st, OpenKernel: func() (*server.KernelConn, error) { return &server.KernelConn{Kernel: k, Close: func() {}}, nil }})
	return core, New(core, st, slog.New(slog.DiscardHandler)), path, k
}

// The daemon's writes start from its copy of the current state: a revision
// another process stored in between is read first, never overwritten.
func TestDaemonWriteKeepsAnotherProcessRevision(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	core, d, path, k := daemonOnFake(t)
	d.Interval, d.Poll = time.Hour, 10*time.Millisecond
	go d.Run(ctx)
	for !d.sk.isOpen() && ctx.Err() == nil {
		time.Sleep(5 * time.Millisecond)
	}
	a := server.Actor{Name: "t", Via: "api"}
	if _, err := core.AddService(ctx, a, ipvsmgr.Service{Name: "web", Address: "198.18.0.100", Port: 80}, server.WriteOptions{}); err != nil {
		t.Fatal(err)
	}
	// Another process (a CLI with --no-apply, or an older ipvsctl) stores a revision.
	other, err := store.Open(ctx, path)
	if err != nil {
		t.Fatal(err)
	}
	if _, _, err := other.Update(ctx, "other", "cli", func(s *ipvsmgr.State, _ int64) (string, error) {
		s.Services = append(s.Services, ipvsmgr.Service{Name: "dns", Protocol: "udp", Address: "198.18.0.53", Port: 53, Servers: []ipvsmgr.Server{}})
		return "vs add dns", nil
	}); err != nil {
		t.Fatal(err)
	}
	other.Close()
	if _, err := core.AddServer(ctx, a, "web", ipvsmgr.Server{Address: "198.18.0.11"}, server.WriteOptions{}); err != nil {
		t.Fatal(err)
	}
	cur, rev, err := d.store.Current(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if rev != 3 || len(cur.Services) != 2 || len(cur.Services[0].Servers) != 1 {
		t.Fatalf("revision %d: %+v", rev, cur.Services)
	}
	// The write reconciled the service it changed; the daemon, seeing the
	// other process's revision, brings the rest.
	for {
		tbl, _ := k.Table(ctx)
		if len(tbl.Services) == 2 && len(tbl.Services[0].Dests)+len(tbl.Services[1].Dests) == 1 {
			break
		}
		if ctx.Err() != nil {
			t.Fatalf("kernel has %d services, want both", len(tbl.Services))
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// Readers of the status share the snapshot: many of them make no kernel read.
func TestStatusReadersShareOneKernelRead(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	st := testStore(t, ctx)
	k := fakekernel.New()
	core := server.New(server.Config{Store: st, OpenKernel: openFake(k, nil)})
	d := New(core, st, slog.New(slog.DiscardHandler))
	if err := d.sk.connect(); err != nil {
		t.Fatal(err)
	}
	d.sk.poll(ctx)
	if n := server.DaemonSideOf(core).KernelReads(); n != 1 {
		t.Fatalf("one poll made %d kernel reads", n)
	}
	for range 50 {
		if _, err := core.Status(ctx); err != nil {
			t.Fatal(err)
		}
	}
	if n := server.DaemonSideOf(core).KernelReads(); n != 1 {
		t.Fatalf("50 status reads after one poll: %d kernel reads, want 1", n)
	}
}

// The snapshot is polled by one loop: a running daemon with nothing to
// reconcile reads the kernel's table once per snapshot interval (plus its
// opening's and its first reconcile's reads), never twice (two pollers
// did, from 858c933; here 20 polls against 40).
func TestOnePollerReadsTheSnapshot(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	st := testStore(t, ctx)
	core := server.New(server.Config{Store: st, OpenKernel: openFake(fakekernel.New(), nil)})
	d := New(core, st, slog.New(slog.DiscardHandler))
	const every = 50 * time.Millisecond
	d.Interval, d.Poll, d.Snapshot = time.Hour, time.Hour, every
	runCtx, stop := context.WithCancel(ctx)
	done := make(chan error, 1)
	start := time.Now()
	go func() { done <- d.Run(runCtx) }()
	time.Sleep(time.Second)
	stop()
	<-done
	elapsed := time.Since(start)
	reads := server.DaemonSideOf(core).KernelReads()
	// A ticker drops the ticks a busy machine misses and never adds one.
	limit := int64(elapsed/every) + 1 + 5 // the poll at the start; the opening, the first reconcile and a margin
	t.Logf("%d kernel reads in %s at one poll every %s (at most %d)", reads, elapsed.Round(time.Millisecond), every, limit)
	if reads > limit {
		t.Errorf("%d kernel reads in %s: more than one poller (at most %d)", reads, elapsed.Round(time.Millisecond), limit)
	}
	if reads < 3 {
		t.Errorf("%d kernel reads in %s: the snapshot is not polled", reads, elapsed.Round(time.Millisecond))
	}
}

// The daemon counts its reads through a wrapper: the driver behind it is
// still found (its sync daemons: package redundancy unwraps it).
func TestReadCounterUnwrapsToTheDriver(t *testing.T) {
	fk := fakekernel.New()
	var reads atomic.Int64
	var k ipvsmgr.Kernel = &countedKernel{Kernel: fk, reads: &reads}
	u, ok := k.(interface{ Unwrap() ipvsmgr.Kernel })
	if !ok || u.Unwrap() != fk {
		t.Fatal("the counted kernel hides its driver")
	}
}

// A write's revision is committed before the write offers it to the
// daemon: a loop tick in between leaves it to the write, whose answer then
// lists the kernel changes it made; a write that ends without offering one
// leaves the revision to the loop's next tick.
func TestLoopLeavesAWritesRevisionToTheWrite(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	_, d, path, k := daemonOnFake(t)
	d.Interval, d.Poll = time.Hour, 5*time.Millisecond
	go d.Run(ctx)
	for !d.sk.isOpen() && ctx.Err() == nil {
		time.Sleep(5 * time.Millisecond)
	}
	other, err := store.Open(ctx, path)
	if err != nil {
		t.Fatal(err)
	}
	defer other.Close()
	commit := func(name, addr string) (int64, *ipvsmgr.Desired) {
		t.Helper()
		rev, _, err := other.Update(ctx, "t", "api", func(s *ipvsmgr.State, _ int64) (string, error) {
			s.Services = append(s.Services, ipvsmgr.Service{Name: name, Address: addr, Port: 80, Servers: []ipvsmgr.Server{}})
			return "vs add " + name, nil
		})
		if err != nil {
			t.Fatal(err)
		}
		st, _, err := other.Current(ctx)
		if err != nil {
			t.Fatal(err)
		}
		desired, err := ipvsmgr.Compile(st)
		if err != nil {
			t.Fatal(err)
		}
		return rev, desired
	}
	services := func() int {
		tbl, _ := k.Table(ctx)
		return len(tbl.Services)
	}

	apply, release, err := d.sk.BeginWrite(ctx, server.WriteOptions{})
	if err != nil {
		t.Fatal(err)
	}
	rev, desired := commit("web", "198.18.0.100")
	time.Sleep(100 * time.Millisecond) // about 20 of the loop's ticks
	if n := services(); n != 0 {
		t.Fatalf("the loop reconciled revision %d under the write that made it (%d services in the kernel)", rev, n)
	}
	res := &server.WriteResult{Revision: rev}
	if err := apply(ctx, res, desired, server.WriteOptions{}, nil); err != nil {
		t.Fatal(err)
	}
	release()
	if len(res.Changes) != 1 || services() != 1 {
		t.Fatalf("the write's answer lists %d kernel changes (%v), want its service's 1", len(res.Changes), res.Changes)
	}

	// A write that stores nothing of its own: the loop takes the revision
	// once the write has ended.
	_, release = func() (server.ApplyFunc, func()) {
		a, r, err := d.sk.BeginWrite(ctx, server.WriteOptions{})
		if err != nil {
			t.Fatal(err)
		}
		return a, r
	}()
	commit("api", "198.18.0.101")
	// About 20 of the loop's ticks: it sees the revision while the write is
	// under way and leaves it to the write, which then ends offering none.
	time.Sleep(100 * time.Millisecond)
	release()
	for services() != 2 {
		if ctx.Err() != nil {
			t.Fatalf("the loop never reconciled a revision no write offered (%d services)", services())
		}
		time.Sleep(5 * time.Millisecond)
	}
}
