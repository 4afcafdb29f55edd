package ipvsmgr_test

import (
	"context"
	"log/slog"
	"net/netip"
	"slices"
	"strings"
	"testing"

	"github.com/ipvsctl/ipvsctl/ipvsmgr"
	"github.com/ipvsctl/ipvsctl/ipvsmgr/fakekernel"
)

// recordingLedger notes whether the VIP was already up when the ledger was saved.
type recordingLedger struct {
	fakekernel.Ledger
	host     *fakekernel.Host
	upAtSave []bool
}

func (l *recordingLedger) SaveLedger(ctx context.Context, led *ipvsmgr.Ledger) error {
	up, _ := l.host.HasVIP(ctx, fastVIP)
	l.upAtSave = append(l.upAtSave, up)
	return l.Ledger.SaveLedger(ctx, led)
}

var fastVIP = ipvsmgr.VIP{Interface: "eth0", Addr: netip.MustParseAddr("198.18.0.100")}

// A VRRP transition moves VIPs outside a reconcile: the ledger knows of a
// VIP before it is up, and only VIPs ipvsctl added are taken down.
func TestAddRemoveVIPsKeepTheLedger(t *testing.T) {
	ctx := context.Background()
	host := fakekernel.NewHost()
	led := &recordingLedger{host: host}
	r := &ipvsmgr.Reconciler{Kernel: fakekernel.New(), Addrs: host, Ledger: led, Log: slog.New(slog.DiscardHandler)}
	foreign := ipvsmgr.VIP{Interface: "eth0", Addr: netip.MustParseAddr("198.18.0.101")}
	host.AddVIP(foreign) // someone else's address

	if f := r.AddVIPs(ctx, []ipvsmgr.VIP{fastVIP, foreign}); f != nil {
		t.Fatal(f)
	}
	if !slices.Equal(led.upAtSave, []bool{false}) {
		t.Errorf("ledger saved with the VIP up: %v (want saved once, before the add)", led.upAtSave)
	}
	l, _ := led.LoadLedger(ctx)
	if !slices.Equal(l.VIPs, []ipvsmgr.VIP{fastVIP}) {
		t.Errorf("ledger VIPs %v", l.VIPs)
	}
	if f := r.RemoveVIPs(ctx, []ipvsmgr.VIP{fastVIP, foreign}); f != nil {
		t.Fatal(f)
	}
	if ops := strings.Join(host.Ops(), "; "); ops != "ip addr add 198.18.0.100 dev eth0; ip addr del 198.18.0.100 dev eth0" {
		t.Errorf("host changes: %s", ops)
	}
	if up, _ := host.HasVIP(ctx, foreign); !up {
		t.Error("someone else's address was removed")
	}
	if l, _ := led.LoadLedger(ctx); len(l.VIPs) != 0 {
		t.Errorf("ledger VIPs after removal %v", l.VIPs)
	}
}
