//go:build vmtest

package vmtest

import (
	"context"
	"errors"
	"net/netip"
	"os/exec"
	"strings"
	"syscall"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/ipvsctl/ipvsctl/ipvsmgr"
	"github.com/ipvsctl/ipvsctl/ipvsmgr/kernel"
)

// TestSyncDaemonStartListStop starts a master and a backup connection sync
// daemon through the driver, reads them back with ipvsadm and with the
// driver, stops them, and reads a daemon ipvsadm started.
func TestSyncDaemonStartListStop(t *testing.T) {
	ns := "syncd"
	run(t, "ip", "netns", "add", ns)
	t.Cleanup(func() { exec.Command("ip", "netns", "del", ns).Run() })
	ip := func(args ...string) { run(t, "ip", append([]string{"-n", ns}, args...)...) }
	ip("link", "set", "lo", "up")
	ip("link", "add", "sync0", "type", "veth", "peer", "name", "sync1")
	// The master's daemon sends from the interface's IPv4 address.
	ip("addr", "add", "198.18.2.1/24", "dev", "sync0")
	ip("addr", "add", "198.18.2.2/24", "dev", "sync1")
	ip("link", "set", "sync0", "up")
	ip("link", "set", "sync1", "up")
	ipvsadmDaemons := func() string {
		return strings.TrimSpace(run(t, "ip", "netns", "exec", ns, "ipvsadm", "--list", "--daemon"))
	}
	ctx := context.Background()
	inNS(t, ns, func() {
		drv, err := kernel.Open(kernel.Options{LoadModule: true})
		if err != nil {
			t.Fatal(err)
		}
		defer drv.Close()
		master := ipvsmgr.SyncDaemon{State: ipvsmgr.SyncMaster, Interface: "sync0", SyncID: 51}
		backup := ipvsmgr.SyncDaemon{State: ipvsmgr.SyncBackup, Interface: "sync1", SyncID: 51,
			Group: netip.MustParseAddr("239.1.1.1"), Port: 8850, TTL: 2, MaxLen: 1200}
		if err := drv.StartSyncDaemon(ctx, master); err != nil {
			t.Fatal(err)
		}
		if err := drv.StartSyncDaemon(ctx, backup); err != nil {
			t.Fatal(err)
		}
		out := ipvsadmDaemons()
		t.Logf("ipvsadm --list --daemon:\n%s", out)
		for _, want := range []string{
			"master sync daemon (mcast=sync0, syncid=51",
			"backup sync daemon (mcast=sync1, syncid=51, maxlen=1200, group=239.1.1.1, port=8850, ttl=2)",
		} {
			if !strings.Contains(out, want) {
				t.Errorf("ipvsadm does not list %q", want)
			}
		}
		got, err := drv.ListSyncDaemons(ctx)
		if err != nil {
			t.Fatal(err)
		}
		// The kernel fills the master's defaults.
		master.Group, master.Port, master.TTL = netip.MustParseAddr("224.0.0.81"), 8848, 1
		if len(got) == 2 && got[0].MaxLen != 0 {
			master.MaxLen = got[0].MaxLen
		}
		if diff := cmp.Diff([]ipvsmgr.SyncDaemon{master, backup}, got, cmp.Comparer(func(a, b netip.Addr) bool { return a == b })); diff != "" {
			t.Errorf("ListSyncDaemons (-want +got):\n%s", diff)
		}
		if err := drv.StartSyncDaemon(ctx, master); !errors.Is(err, syscall.EEXIST) {
			t.Errorf("a second master daemon: %v, want EEXIST", err)
		}
		if err := drv.StopSyncDaemon(ctx, ipvsmgr.SyncMaster); err != nil {
			t.Fatal(err)
		}
		if out := ipvsadmDaemons(); strings.Contains(out, "master") || !strings.Contains(out, "backup sync daemon") {
			t.Errorf("after stopping the master, ipvsadm lists:\n%s", out)
		}
		if err := drv.StopSyncDaemon(ctx, ipvsmgr.SyncBackup); err != nil {
			t.Fatal(err)
		}
		if out := ipvsadmDaemons(); out != "" {
			t.Errorf("after stopping both, ipvsadm lists:\n%s", out)
		}
		if got, err := drv.ListSyncDaemons(ctx); err != nil || len(got) != 0 {
			t.Errorf("after stopping both: %v, %v", got, err)
		}
		err = drv.StopSyncDaemon(ctx, ipvsmgr.SyncBackup)
		t.Logf("stopping a stopped daemon: %v", err)
		if err == nil {
			t.Error("stopping a stopped daemon succeeded")
		}

		// And the other way: ipvsadm starts one, the driver reads it.
		run(t, "ip", "netns", "exec", ns, "ipvsadm", "--start-daemon", "master", "--mcast-interface", "sync0", "--syncid", "7",
			"--mcast-group", "239.1.1.2", "--mcast-port", "9000", "--mcast-ttl", "3", "--sync-maxlen", "1000")
		got, err = drv.ListSyncDaemons(ctx)
		if err != nil {
			t.Fatal(err)
		}
		want := []ipvsmgr.SyncDaemon{{State: ipvsmgr.SyncMaster, Interface: "sync0", SyncID: 7, MaxLen: 1000,
			Group: netip.MustParseAddr("239.1.1.2"), Port: 9000, TTL: 3}}
		if diff := cmp.Diff(want, got, cmp.Comparer(func(a, b netip.Addr) bool { return a == b })); diff != "" {
			t.Errorf("daemon ipvsadm started, as the driver reads it (-want +got):\n%s", diff)
		}
		if err := drv.StopSyncDaemon(ctx, ipvsmgr.SyncMaster); err != nil {
			t.Fatal(err)
		}
	})
}
