package bgp

import (
	"context"
	"fmt"
	"log/slog"
	"net/netip"
	"strings"
	"testing"
	"time"

	"github.com/osrg/gobgp/v4/api"

	"github.com/ipvsctl/ipvsctl/ipvsmgr"
	"github.com/ipvsctl/ipvsctl/ipvsmgr/bgp/bgptest"
)

func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

func TestSpeakerAnnouncesAndWithdrawsToARealPeer(t *testing.T) {
	r := bgptest.StartRouter(t)
	ctx := context.Background()
	cfg := Config{
		Settings: ipvsmgr.BGP{ASN: 65001, Communities: []string{"65000:100"}, MED: 7,
			Peers: []ipvsmgr.BGPPeer{{Address: "127.0.0.2", Port: r.Port, ASN: 65000, HoldTime: 9}}},
		RouterID: netip.MustParseAddr("198.18.0.1"),
		Source:   netip.MustParseAddr("127.0.0.1"),
	}
	sp, err := Start(ctx, cfg, slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	stopped := false
	defer func() {
		if !stopped {
			sp.Stop(ctx, 0)
		}
	}()
	waitFor(t, "the session to be established", func() bool {
		ps, err := sp.Peers(ctx)
		return err == nil && len(ps) == 1 && ps[0].Up
	})
	vip := netip.MustParsePrefix("198.18.0.100/32")
	if err := sp.Announce([]netip.Prefix{vip, netip.MustParsePrefix("198.18.0.101/32")}); err != nil {
		t.Fatal(err)
	}
	var nh string
	var attrs []string
	waitFor(t, "the router to have 198.18.0.100/32", func() bool {
		var ok bool
		nh, attrs, ok = r.Route(t, "198.18.0.100/32")
		return ok
	})
	if nh != "127.0.0.1" {
		t.Errorf("next hop at the router = %q, want the session's source 127.0.0.1 (attrs %v)", nh, attrs)
	}
	joined := ""
	for _, a := range attrs {
		joined += a + " "
	}
	for _, want := range []string{"65000:100", "{Med: 7}"} {
		if !strings.Contains(joined, want) {
			t.Errorf("attributes %q lack %q", joined, want)
		}
	}
	waitFor(t, "the speaker to count 2 advertised", func() bool {
		ps, err := sp.Peers(ctx)
		return err == nil && len(ps) == 1 && ps[0].Advertised == 2 && ps[0].State == "established"
	})
	// One VIP loses its quorum: only it is withdrawn.
	if err := sp.Announce([]netip.Prefix{netip.MustParsePrefix("198.18.0.101/32")}); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "198.18.0.100/32 withdrawn at the router", func() bool { _, _, ok := r.Route(t, "198.18.0.100/32"); return !ok })
	if _, _, ok := r.Route(t, "198.18.0.101/32"); !ok {
		t.Error("198.18.0.101/32 was withdrawn too")
	}
	if got := sp.Announced(); len(got) != 1 || got[0].String() != "198.18.0.101/32" {
		t.Errorf("Announced() = %v", got)
	}
	// Stop withdraws before it closes the session.
	sp.Stop(ctx, 200*time.Millisecond)
	stopped = true
	waitFor(t, "198.18.0.101/32 gone at the router", func() bool { _, _, ok := r.Route(t, "198.18.0.101/32"); return !ok })
}

func TestStartRefusesAMissingRouterID(t *testing.T) {
	_, err := Start(context.Background(), Config{Settings: ipvsmgr.BGP{ASN: 65001}}, slog.New(slog.DiscardHandler))
	if err == nil || !strings.Contains(err.Error(), "router-id") {
		t.Fatalf("err = %v, want one naming --router-id", err)
	}
}

// Drain's de-preference: the router sees the director's AS prepended on the
// routes already announced and on one announced after, and the plain path
// again when the prepend is taken off.
func TestSpeakerPrependsItsASAtARealPeer(t *testing.T) {
	r := bgptest.StartRouter(t)
	ctx := context.Background()
	cfg := Config{
		Settings: ipvsmgr.BGP{ASN: 65001, Peers: []ipvsmgr.BGPPeer{{Address: "127.0.0.2", Port: r.Port, ASN: 65000, HoldTime: 9}}},
		RouterID: netip.MustParseAddr("198.18.0.1"),
		Source:   netip.MustParseAddr("127.0.0.1"),
	}
	sp, err := Start(ctx, cfg, slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	defer sp.Stop(ctx, 0)
	asPath := func(prefix string) string {
		p, ok := r.ASPath(t, prefix)
		if !ok {
			return "none"
		}
		return fmt.Sprint(p)
	}
	waitPath := func(prefix, want string) {
		t.Helper()
		waitFor(t, prefix+" with AS path "+want, func() bool { return asPath(prefix) == want })
	}
	if err := sp.Announce([]netip.Prefix{netip.MustParsePrefix("198.18.0.100/32")}); err != nil {
		t.Fatal(err)
	}
	waitPath("198.18.0.100/32", "[65001]")
	if err := sp.SetPrepend(3); err != nil {
		t.Fatal(err)
	}
	waitPath("198.18.0.100/32", "[65001 65001 65001 65001]")
	if err := sp.Announce([]netip.Prefix{netip.MustParsePrefix("198.18.0.100/32"), netip.MustParsePrefix("198.18.0.101/32")}); err != nil {
		t.Fatal(err)
	}
	waitPath("198.18.0.101/32", "[65001 65001 65001 65001]")
	if got := sp.Prepend(); got != 3 {
		t.Errorf("Prepend() = %d, want 3", got)
	}
	if err := sp.SetPrepend(0); err != nil {
		t.Fatal(err)
	}
	waitPath("198.18.0.100/32", "[65001]")
	waitPath("198.18.0.101/32", "[65001]")
	// A withdrawal still takes the route away.
	if err := sp.Announce(nil); err != nil {
		t.Fatal(err)
	}
	waitPath("198.18.0.100/32", "none")
	waitPath("198.18.0.101/32", "none")
}

// The transitions after which GoBGP may hold a BFD reset for a peer's next
// session (TendPeers adds such a peer again; TestBGPECMPAtBIRD shows why).
func TestResetMayBeQueued(t *testing.T) {
	const (
		none  = api.BfdSessionState_BFD_SESSION_STATE_UNSPECIFIED
		down  = api.BfdSessionState_BFD_SESSION_STATE_DOWN
		initS = api.BfdSessionState_BFD_SESSION_STATE_INIT
		up    = api.BfdSessionState_BFD_SESSION_STATE_UP
	)
	for _, c := range []struct {
		prev, now   api.BfdSessionState
		established bool
		want        bool
	}{
		{up, down, false, true},    // expired or signalled down with the session down
		{initS, down, false, true}, // an init session expired (the router dropped its BFD)
		{up, down, true, false},    // the session is up: nothing was queued, or it is gone already
		{down, down, false, false}, // still down: looked at before
		{none, down, false, false}, // first look, a new peer
		{up, up, false, false},
		{down, initS, false, false},
	} {
		if got := resetMayBeQueued(c.prev, c.now, c.established); got != c.want {
			t.Errorf("resetMayBeQueued(%v, %v, established %v) = %v, want %v", c.prev, c.now, c.established, got, c.want)
		}
	}
}
