package vrrp

import (
	"bytes"
	"net"
	"net/netip"
	"testing"
	"time"

	"github.com/mdlayher/arp"
	"github.com/mdlayher/ndp"
	"golang.org/x/net/ipv4"
)

func listenIn(t *testing.T, ns string, cfg ConnConfig) *RawConn {
	t.Helper()
	var c *RawConn
	if err := inNetns(ns, func() (err error) { c, err = Listen(cfg); return err }); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

// recvWithin is Receive bounded in time.
func recvWithin(t *testing.T, c *RawConn, d time.Duration) (Received, bool) {
	t.Helper()
	type res struct {
		r   Received
		err error
	}
	ch := make(chan res, 1)
	go func() { r, err := c.Receive(); ch <- res{r, err} }()
	select {
	case x := <-ch:
		if x.err != nil {
			t.Fatalf("receive: %v", x.err)
		}
		return x.r, true
	case <-time.After(d):
		c.Close() // ends the Receive above
		<-ch
		return Received{}, false
	}
}

func TestRawConnNetns(t *testing.T) {
	requireRoot(t)
	a, b := vethPair(t)
	for _, tc := range []struct {
		name     string
		v6       bool
		peersA   []netip.Addr
		peersB   []netip.Addr
		src      netip.Addr // of a's adverts; zero: link-local, checked by prefix
		vips     []netip.Addr
		wrongTTL bool
	}{
		{name: "ipv4 multicast", src: netip.MustParseAddr(a.v4), vips: []netip.Addr{netip.MustParseAddr("198.18.0.100")}, wrongTTL: true},
		{name: "ipv4 unicast", peersA: []netip.Addr{netip.MustParseAddr(b.v4)}, peersB: []netip.Addr{netip.MustParseAddr(a.v4)},
			src: netip.MustParseAddr(a.v4), vips: []netip.Addr{netip.MustParseAddr("198.18.0.100")}},
		{name: "ipv6 multicast", v6: true, vips: []netip.Addr{netip.MustParseAddr("2001:db8::100")}},
		{name: "ipv6 unicast", v6: true, peersA: []netip.Addr{netip.MustParseAddr(b.v6)}, peersB: []netip.Addr{netip.MustParseAddr(a.v6)},
			src: netip.MustParseAddr(a.v6), vips: []netip.Addr{netip.MustParseAddr("2001:db8::100")}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ca := listenIn(t, a.ns, ConnConfig{Interface: a.ifname, VRID: 51, IPv6: tc.v6, Peers: tc.peersA})
			cb := listenIn(t, b.ns, ConnConfig{Interface: b.ifname, VRID: 51, IPv6: tc.v6, Peers: tc.peersB})
			other := listenIn(t, a.ns, ConnConfig{Interface: a.ifname, VRID: 52, IPv6: tc.v6, Peers: tc.peersA})
			if tc.src.IsValid() && ca.Primary() != tc.src || !tc.src.IsValid() && !ca.Primary().IsLinkLocalUnicast() {
				t.Fatalf("primary address %s", ca.Primary())
			}
			if err := other.Send(&Advert{VRID: 52, Priority: 1, MaxAdvertInterval: 100, Addrs: tc.vips}); err != nil {
				t.Fatal(err)
			}
			if tc.wrongTTL {
				sendTTL(t, a.ns, 64, &Advert{VRID: 51, Priority: 7, MaxAdvertInterval: 100, Addrs: tc.vips}, ca.Primary())
			}
			want := &Advert{VRID: 51, Priority: 100, MaxAdvertInterval: 25, Addrs: tc.vips}
			if err := ca.Send(want); err != nil {
				t.Fatal(err)
			}
			r, ok := recvWithin(t, cb, 5*time.Second)
			if !ok {
				t.Fatalf("no advert received; dropped %+v", cb.Stats())
			}
			if r.Src != ca.Primary() || r.Advert.Priority != 100 || r.Advert.MaxAdvertInterval != 25 || r.Advert.Addrs[0] != tc.vips[0] {
				t.Errorf("received %v from %s", r.Advert, r.Src)
			}
			st := cb.Stats()
			wantTTL := uint64(0)
			if tc.wrongTTL {
				wantTTL = 1
			}
			if st.OtherVRID != 1 || st.BadTTL != wantTTL {
				t.Errorf("dropped %+v, want 1 of another VRID, %d with a TTL below 255", st, wantTTL)
			}
			// And back.
			if err := cb.Send(&Advert{VRID: 51, Priority: 0, MaxAdvertInterval: 25, Addrs: tc.vips}); err != nil {
				t.Fatal(err)
			}
			if r, ok := recvWithin(t, ca, 5*time.Second); !ok || r.Advert.Priority != 0 || r.Src != cb.Primary() {
				t.Errorf("reply: %v %v from %s", ok, r.Advert, r.Src)
			}
		})
	}
}

// sendTTL sends an otherwise valid advert with the given TTL from ns.
func sendTTL(t *testing.T, ns string, ttl int, adv *Advert, src netip.Addr) {
	t.Helper()
	err := inNetns(ns, func() error {
		pc, err := net.ListenPacket("ip4:112", src.String())
		if err != nil {
			return err
		}
		defer pc.Close()
		p := ipv4.NewPacketConn(pc)
		if err := p.SetMulticastTTL(ttl); err != nil {
			return err
		}
		b, err := adv.Marshal(src, GroupIPv4)
		if err != nil {
			return err
		}
		_, err = p.WriteTo(b, nil, &net.IPAddr{IP: GroupIPv4.AsSlice()})
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
}

func TestAnnouncerNetns(t *testing.T) {
	requireRoot(t)
	a, b := vethPair(t)
	var ann *LinkAnnouncer
	var arpc *arp.Client
	var ndpc *ndp.Conn
	var macA net.HardwareAddr
	if err := inNetns(a.ns, func() (err error) {
		ifi, err := net.InterfaceByName(a.ifname)
		if err != nil {
			return err
		}
		macA = ifi.HardwareAddr
		ann, err = NewAnnouncer(a.ifname, true, true)
		return err
	}); err != nil {
		t.Fatal(err)
	}
	defer ann.Close()
	if err := inNetns(b.ns, func() error {
		ifi, err := net.InterfaceByName(b.ifname)
		if err != nil {
			return err
		}
		if arpc, err = arp.Dial(ifi); err != nil {
			return err
		}
		ndpc, _, err = ndp.Listen(ifi, ndp.LinkLocal)
		return err
	}); err != nil {
		t.Fatal(err)
	}
	defer arpc.Close()
	defer ndpc.Close()
	v4, v6 := netip.MustParseAddr("198.18.0.100"), netip.MustParseAddr("2001:db8::100")
	if err := ann.Announce([]netip.Addr{v4, v6}); err != nil {
		t.Fatal(err)
	}
	_ = arpc.SetReadDeadline(time.Now().Add(5 * time.Second))
	for {
		p, _, err := arpc.Read()
		if err != nil {
			t.Fatalf("no gratuitous ARP: %v", err)
		}
		if p.SenderIP == v4 && p.TargetIP == v4 && p.SenderHardwareAddr.String() == macA.String() {
			break
		}
	}
	_ = ndpc.SetReadDeadline(time.Now().Add(5 * time.Second))
	for {
		m, _, src, err := ndpc.ReadFrom()
		if err != nil {
			t.Fatalf("no unsolicited neighbour advertisement: %v", err)
		}
		na, ok := m.(*ndp.NeighborAdvertisement)
		if !ok || na.TargetAddress != v6 {
			continue
		}
		if !na.Override || na.Solicited || !src.IsLinkLocalUnicast() {
			t.Errorf("advertisement %+v from %s", na, src)
		}
		if len(na.Options) != 1 || na.Options[0].(*ndp.LinkLayerAddress).Addr.String() != macA.String() {
			t.Errorf("options %+v", na.Options)
		}
		break
	}
}

// TestRawConnAuthNetns: two conns sharing key 1 over a veth, IPv4 and IPv6,
// multicast: a signed advert passes; one signed with another key and one
// without a trailer (both priority 255) are dropped and counted by reason;
// keys rotated on the running conns (SetAuth, Update) go on passing.
func TestRawConnAuthNetns(t *testing.T) {
	requireRoot(t)
	a, b := vethPair(t)
	for _, v6 := range []bool{false, true} {
		t.Run(map[bool]string{false: "ipv4", true: "ipv6"}[v6], func(t *testing.T) {
			vips := []netip.Addr{netip.MustParseAddr("198.18.0.100")}
			if v6 {
				vips = []netip.Addr{netip.MustParseAddr("2001:db8::100")}
			}
			key1 := AuthKey{ID: 1, Secret: kaKey()}
			mk := func(keys ...AuthKey) *Auth {
				au, err := NewAuth(AuthConfig{Keys: keys, ActiveKey: keys[0].ID, Window: 5 * time.Second})
				if err != nil {
					t.Fatal(err)
				}
				return au
			}
			ca := listenIn(t, a.ns, ConnConfig{Interface: a.ifname, VRID: 51, IPv6: v6, Auth: mk(key1)})
			recvAuth := mk(key1)
			cb := listenIn(t, b.ns, ConnConfig{Interface: b.ifname, VRID: 51, IPv6: v6, Auth: recvAuth})
			forger := listenIn(t, a.ns, ConnConfig{Interface: a.ifname, VRID: 51, IPv6: v6,
				Auth: mk(AuthKey{ID: 1, Secret: bytes.Repeat([]byte{7}, 32)})})
			plain := listenIn(t, a.ns, ConnConfig{Interface: a.ifname, VRID: 51, IPv6: v6})
			for _, c := range []*RawConn{forger, plain} {
				if err := c.Send(&Advert{VRID: 51, Priority: 255, MaxAdvertInterval: 100, Addrs: vips}); err != nil {
					t.Fatal(err)
				}
			}
			if err := ca.Send(&Advert{VRID: 51, Priority: 100, MaxAdvertInterval: 100, Addrs: vips}); err != nil {
				t.Fatal(err)
			}
			r, ok := recvWithin(t, cb, 5*time.Second)
			if !ok || r.Advert.Priority != 100 {
				t.Fatalf("the signed advert: %v %v; dropped %+v", ok, r.Advert, cb.Stats())
			}
			if st := cb.Stats(); st.AuthBadHMAC != 1 || st.AuthMissing != 1 {
				t.Errorf("dropped %+v, want 1 bad HMAC and 1 without a trailer", st)
			}
			// Rotation on the running conns: the receiver takes key 2 too,
			// the sender moves to it.
			key2 := AuthKey{ID: 2, Secret: bytes.Repeat([]byte{0x42}, 40)}
			if err := recvAuth.Update(AuthConfig{Keys: []AuthKey{key1, key2}, ActiveKey: 1, Window: 5 * time.Second}); err != nil {
				t.Fatal(err)
			}
			ca.SetAuth(mk(key2, key1))
			if err := ca.Send(&Advert{VRID: 51, Priority: 101, MaxAdvertInterval: 100, Addrs: vips}); err != nil {
				t.Fatal(err)
			}
			r, ok = recvWithin(t, cb, 5*time.Second)
			if !ok || r.Advert.Priority != 101 {
				t.Fatalf("after the rotation: %v %v; dropped %+v", ok, r.Advert, cb.Stats())
			}
		})
	}
}

// TestRawConnPeersAllowListNetns: with peers, an advert from an address of
// the link that is not a peer is dropped and counted, and a peer's passes.
func TestRawConnPeersAllowListNetns(t *testing.T) {
	requireRoot(t)
	a, b := vethPair(t)
	sh(t, "ip", "-n", a.ns, "addr", "add", "198.18.0.9/24", "dev", a.ifname)
	vips := []netip.Addr{netip.MustParseAddr("198.18.0.100")}
	peerA, peerB := netip.MustParseAddr(a.v4), netip.MustParseAddr(b.v4)
	cb := listenIn(t, b.ns, ConnConfig{Interface: b.ifname, VRID: 51, Peers: []netip.Addr{peerA}})
	stranger := listenIn(t, a.ns, ConnConfig{Interface: a.ifname, VRID: 51, Peers: []netip.Addr{peerB}, Primary: netip.MustParseAddr("198.18.0.9")})
	ca := listenIn(t, a.ns, ConnConfig{Interface: a.ifname, VRID: 51, Peers: []netip.Addr{peerB}})
	if err := stranger.Send(&Advert{VRID: 51, Priority: 255, MaxAdvertInterval: 100, Addrs: vips}); err != nil {
		t.Fatal(err)
	}
	if err := ca.Send(&Advert{VRID: 51, Priority: 100, MaxAdvertInterval: 100, Addrs: vips}); err != nil {
		t.Fatal(err)
	}
	r, ok := recvWithin(t, cb, 5*time.Second)
	if !ok || r.Src != peerA || r.Advert.Priority != 100 {
		t.Fatalf("the peer's advert: %v %v from %s; dropped %+v", ok, r.Advert, r.Src, cb.Stats())
	}
	// Sent first, on the same veth: counted before the peer's came.
	if st := cb.Stats(); st.NotPeer != 1 || st.ByReason()["not_peer"] != 1 {
		t.Errorf("dropped %+v, want 1 not from a peer", st)
	}
}
