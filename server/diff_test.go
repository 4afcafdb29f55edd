package server

import (
	"context"
	"io"
	"log/slog"
	"net/netip"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/ipvsctl/ipvsctl/ipvsmgr"
	"github.com/ipvsctl/ipvsctl/ipvsmgr/fakekernel"
	"github.com/ipvsctl/ipvsctl/server/store"
)

// A diff in the daemon answers from its snapshot: however many viewers
// ask, the kernel's table is read only by the poll and the reconciles, and
// the answer is what the next reconcile would do.
func TestDiffInTheDaemonReadsTheSnapshot(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	st, err := store.Open(ctx, filepath.Join(t.TempDir(), "ipvsctl.db"))
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	k, host := fakekernel.New(), fakekernel.NewHost()
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	core := New(Config{Store: st, Log: log, OpenKernel: func() (*KernelConn, error) {
		return &KernelConn{Kernel: k, Host: host, Close: func() {}}, nil
	}})
	d := NewDaemon(core, log)
	d.Interval, d.Poll, d.Snapshot = time.Hour, time.Hour, time.Hour
	done := make(chan error, 1)
	go func() { done <- d.Run(ctx) }()
	a := Actor{Name: "t", Via: "test"}
	doc := `{"services":[{"name":"web","address":"198.18.0.100","port":80,"interface":"eth0","servers":[{"address":"198.18.0.11"}]}]}`
	if _, err := core.Apply(ctx, a, strings.NewReader(doc), "t", WriteOptions{}); err != nil {
		t.Fatal(err)
	}
	reads := core.KernelReads()
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
	if n := core.KernelReads() - reads; n != 0 {
		t.Errorf("51 diffs read the kernel's table %d times", n)
	}
	cancel()
	<-done
}

func vip100() ipvsmgr.VIP {
	return ipvsmgr.VIP{Interface: "eth0", Addr: netip.MustParseAddr("198.18.0.100")}
}

func hostQuery100() ipvsmgr.HostQuery { return ipvsmgr.HostQuery{VIPs: []ipvsmgr.VIP{vip100()}} }
