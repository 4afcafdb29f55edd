package daemon

import (
	"context"
	"fmt"
	"net/netip"
	"slices"
	"testing"
	"time"

	"github.com/ipvsctl/ipvsctl/ipvsmgr"
	"github.com/ipvsctl/ipvsctl/ipvsmgr/bgp/bgptest"
	"github.com/ipvsctl/ipvsctl/server"
)

// TestDaemonAnnouncesWhatItCanServe runs the daemon on a fake kernel with
// settings.bgp pointing at a real GoBGP router: the VIP's route reaches the
// router while the service has its quorum, goes when it loses it or the
// director is drained, comes back, and is withdrawn when the daemon stops.
func TestDaemonAnnouncesWhatItCanServe(t *testing.T) {
	r := bgptest.StartRouter(t)
	core, d, _, k := daemonOnFake(t)
	d.Interval, d.Poll, d.Snapshot = 50*time.Millisecond, 10*time.Millisecond, 50*time.Millisecond
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	a := server.Actor{Name: "t", Via: "test"}
	rid, src := "198.18.0.1", "127.0.0.1"
	if _, err := core.SetNode(ctx, a, server.NodePatch{RouterID: &rid, BGPSource: &src}); err != nil {
		t.Fatal(err)
	}
	runCtx, stop := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() { done <- d.Run(runCtx) }()
	defer func() { stop(); <-done }()

	drainMode, hold := "", 9
	state := func(health string) *ipvsmgr.State {
		return &ipvsmgr.State{
			Settings: ipvsmgr.Settings{Network: "dr", BGP: &ipvsmgr.BGP{ASN: 65001, Peers: []ipvsmgr.BGPPeer{{Address: "127.0.0.2", Port: r.Port, ASN: 65000, HoldTime: hold}},
				Drain: &ipvsmgr.BGPDrain{Mode: drainMode, Prepend: 2, Quiet: 0.6, Timeout: 30}}},
			Services: []ipvsmgr.Service{{Name: "web", Protocol: "tcp", Address: "198.18.0.100", Port: 80, Quorum: 2,
				Servers: []ipvsmgr.Server{{Name: "r1", Address: "198.18.1.11"}, {Name: "r2", Address: "198.18.1.12", Health: health}}}},
		}
	}
	apply := func(st *ipvsmgr.State) {
		t.Helper()
		if _, err := applyState(ctx, core, a, st, "test"); err != nil {
			t.Fatal(err)
		}
	}
	wait := func(what string, cond func() bool) {
		t.Helper()
		for !cond() {
			if ctx.Err() != nil {
				t.Fatalf("timed out waiting for %s; status %+v", what, core.BGPStatus())
			}
			time.Sleep(20 * time.Millisecond)
		}
	}
	routed := func() bool { _, _, ok := r.Route(t, "198.18.0.100/32"); return ok }
	apply(state(""))
	wait("the VIP announced", routed)
	wait("the status to show the session", func() bool {
		s := core.BGPStatus()
		return s != nil && len(s.Peers) == 1 && s.Peers[0].State == "established" && s.Announced == 1 && len(s.VIPs) == 1 && s.VIPs[0].Announce
	})
	if s := core.BGPStatus(); s.RouterID != rid {
		t.Errorf("router ID %s, want %s", s.RouterID, rid)
	}

	apply(state("down")) // r2 forced down: 1 of 2 up, below quorum
	wait("the VIP withdrawn below quorum", func() bool { return !routed() })
	// The status is stored after the step that withdrew the route.
	wait("the status to say why", func() bool {
		s := core.BGPStatus()
		return s != nil && len(s.VIPs) == 1 && s.VIPs[0].Reason == "below quorum: web has 1 of 2 real servers up"
	})
	if !r.Established(t) {
		t.Error("the session went down with the route; only the route should")
	}
	apply(state(""))
	wait("the VIP announced again", routed)

	// A changed peer restarts the speaker: the old one stops (its routes
	// withdrawn, every GoBGP goroutine ended) before the new one starts, the
	// one speaker a process may hold (GoBGP's package variables; -race
	// reports an overlap).
	firstUp := core.BGPStatus().Peers[0].Since
	hold = 12
	apply(state(""))
	wait("a new session after the peer's change, announcing", func() bool {
		s := core.BGPStatus()
		return s != nil && len(s.Peers) == 1 && s.Peers[0].Up && s.Peers[0].Since.After(firstUp) && s.Announced == 1 && routed()
	})

	// node drain, prepend mode (the default): the route stays, with the AS
	// twice more in its path; the director is drained once its VIP's
	// connection counter has stopped growing for the quiet window.
	asPath := func() string { p, _ := r.ASPath(t, "198.18.0.100/32"); return fmt.Sprint(p) }
	drained := true
	if _, err := core.SetNode(ctx, a, server.NodePatch{Drained: &drained}); err != nil {
		t.Fatal(err)
	}
	wait("the route prepended at the router", func() bool { return asPath() == "[65001 65001 65001]" })
	key := ipvsmgr.ServiceKey{Family: ipvsmgr.FamilyIPv4, Protocol: ipvsmgr.ProtoTCP, Addr: netip.MustParseAddr("198.18.0.100"), Port: 80}
	var phases []string
	for range 20 { // flows still arrive for a second: draining
		k.AddConns(key, 5)
		time.Sleep(50 * time.Millisecond)
		if s := core.BGPStatus(); s.Drain != nil {
			phases = append(phases, s.Drain.Phase)
		}
	}
	if s := core.BGPStatus(); s.Drain == nil || s.Drain.Phase != "draining" || s.Drain.NewConns == 0 || s.Drain.Mode != "prepend" || s.Drain.Prepend != 2 {
		t.Fatalf("while flows arrive: drain %+v", s.Drain)
	}
	if slices.Contains(phases, "drained") {
		t.Errorf("drained while flows were arriving: %v", phases)
	}
	wait("drained after a quiet window", func() bool { s := core.BGPStatus(); return s.Drain != nil && s.Drain.Phase == "drained" })
	s := core.BGPStatus()
	if s.Drain.NewConns != 100 || len(s.VIPs) != 1 || !s.VIPs[0].Announce || s.VIPs[0].Prepend != 2 {
		t.Errorf("drained: drain %+v, VIPs %+v (want the 100 new connections counted, the VIP announced with prepend 2)", s.Drain, s.VIPs)
	}
	if !routed() {
		t.Error("prepend mode withdrew the route")
	}
	// Withdraw mode: the route goes.
	drainMode = "withdraw"
	apply(state(""))
	wait("the VIP withdrawn by the drain", func() bool {
		s := core.BGPStatus()
		return !routed() && s.Drain != nil && s.Drain.Mode == "withdraw"
	})
	if s := core.BGPStatus(); s.Drain == nil || s.Drain.Mode != "withdraw" || s.VIPs[0].Reason != "the director is drained" {
		t.Errorf("withdraw mode: drain %+v, VIPs %+v", s.Drain, s.VIPs)
	}
	drained = false
	if _, err := core.SetNode(ctx, a, server.NodePatch{Drained: &drained}); err != nil {
		t.Fatal(err)
	}
	wait("the VIP announced after undrain", routed)
	wait("the plain path after undrain", func() bool { return asPath() == "[65001]" })
	// The router hears the route during the runner's tend, and the status is
	// kept at its end: the status follows the route, a moment later.
	wait("the status without a drain after undrain", func() bool { return core.BGPStatus().Drain == nil })

	stop()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	done <- nil
	wait("the route gone after the daemon stopped", func() bool { return !routed() })
}
