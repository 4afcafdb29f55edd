package daemon

import (
	"context"
	"log/slog"
	"net/netip"
	"strings"
	"testing"
	"time"

	"github.com/ipvsctl/ipvsctl/ipvsmgr"
	"github.com/ipvsctl/ipvsctl/ipvsmgr/fakekernel"
	"github.com/ipvsctl/ipvsctl/server"
)

// A diff in the daemon answers from its snapshot: however many viewers
// ask, the kernel's table is read only by the poll and the reconciles, and
// the answer is what the next reconcile would do.
func TestDiffInTheDaemonReadsTheSnapshot(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	st := testStore(t, ctx)
	k, host := fakekernel.New(), fakekernel.NewHost()
	log := slog.New(slog.DiscardHandler)
	core := server.New(server.Config{Store: st, Log: log, OpenKernel: openFake(k, host)})
	d := New(core, st, log)
	d.Interval, d.Poll, d.Snapshot = time.Hour, time.Hour, time.Hour
	done := make(chan error, 1)
	go func() { done <- d.Run(ctx) }()
	a := server.Actor{Name: "t", Via: "cli"}
	doc := `{"services":[{"name":"web","address":"198.18.0.100","port":80,"interface":"eth0","servers":[{"address":"198.18.0.11"}]}]}`
	if _, err := core.Apply(ctx, a, strings.NewReader(doc), "t", server.WriteOptions{}); err != nil {
		t.Fatal(err)
	}
	// The daemon opens the kernel and restores in its own goroutine: until
	// then a diff answers that it is starting, and its restore reads the
	// table. Wait until it has and is quiet (its timers are an hour away).
	for deadline := time.Now().Add(10 * time.Second); ; {
		before := server.DaemonSideOf(core).KernelReads()
		time.Sleep(100 * time.Millisecond)
		res, err := core.Diff(ctx, nil)
		if err == nil && len(res.Changes) == 0 && server.DaemonSideOf(core).KernelReads() == before {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the daemon never settled: %v %+v", err, res)
		}
	}
	reads := server.DaemonSideOf(core).KernelReads()
	for range 50 {
		res, err := core.Diff(ctx, nil)
		if err != nil || len(res.Changes) != 0 {
			t.Fatalf("diff after the reconcile: %v %+v", err, res)
		}
	}
	// Someone takes the VIP down: the host half is read live.
	vips, _ := host.Observe(ctx, hostQuery100())
	if !vips.Up[vip100()] {
		t.Fatal("VIP not up after the apply")
	}
	host.RemoveVIP(ctx, vip100())
	res, err := core.Diff(ctx, nil)
	if err != nil || strings.Join(res.Changes, ";") != "ip addr add 198.18.0.100 dev eth0" {
		t.Fatalf("diff with the VIP gone: %v %+v", err, res)
	}
	if n := server.DaemonSideOf(core).KernelReads() - reads; n != 0 {
		t.Errorf("51 diffs read the kernel's table %d times", n)
	}
	cancel()
	<-done
}

func vip100() ipvsmgr.VIP {
	return ipvsmgr.VIP{Interface: "eth0", Addr: netip.MustParseAddr("198.18.0.100")}
}

func hostQuery100() ipvsmgr.HostQuery { return ipvsmgr.HostQuery{VIPs: []ipvsmgr.VIP{vip100()}} }

// A write made while the daemon cannot open the kernel yet (ip_vs loading,
// the daemon starting) reaches the kernel when it opens: the open is a
// restore, not a reconcile the write is thought to have made itself.
func TestWriteBeforeTheKernelOpensIsRestored(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	st := testStore(t, ctx)
	k, host := fakekernel.New(), fakekernel.NewHost()
	openable := make(chan struct{})
	log := slog.New(slog.DiscardHandler)
	core := server.New(server.Config{Store: st, Log: log, OpenKernel: func() (*server.KernelConn, error) {
		select {
		case <-openable:
			return &server.KernelConn{Kernel: k, Host: host, Close: func() {}}, nil
		default:
			return nil, ipvsmgr.ErrIPVSUnavailable
		}
	}})
	d := New(core, st, log)
	d.Interval, d.Snapshot, d.Retry, d.Poll = time.Hour, time.Hour, 10*time.Millisecond, 10*time.Millisecond
	done := make(chan error, 1)
	go func() { done <- d.Run(ctx) }()
	doc := `{"services":[{"name":"web","address":"198.18.0.100","port":80,"servers":[{"address":"198.18.0.11"}]}]}`
	if _, err := core.Apply(ctx, server.Actor{Name: "t", Via: "cli"}, strings.NewReader(doc), "t", server.WriteOptions{}); err != nil {
		t.Fatal(err)
	}
	time.Sleep(50 * time.Millisecond) // the daemon tries, and fails, to open the kernel
	close(openable)
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(10 * time.Millisecond) {
		if strings.Contains(strings.Join(k.Ops(), "\n"), "-a -t 198.18.0.100:80 -r 198.18.0.11:80") {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the write made before the kernel opened never reached it; the kernel was told:\n%s", strings.Join(k.Ops(), "\n"))
		}
	}
	cancel()
	<-done
}
