package vrrp

import (
	"net"
	"net/netip"
	"strings"
	"testing"
	"time"

	"github.com/mdlayher/arp"
)

// TestAnnouncerAfterLinkFlapNetns: an announcer opened on a veth whose link
// then goes down and up (the flap a cut cable gives) still sends its first
// gratuitous ARP after the link is back, on the real AF_PACKET socket, which
// reports the flap's ENETDOWN once on its next send.
func TestAnnouncerAfterLinkFlapNetns(t *testing.T) {
	requireRoot(t)
	a, b := vethPair(t)
	var ann *LinkAnnouncer
	var macA net.HardwareAddr
	if err := inNetns(a.ns, func() (err error) {
		ifi, err := net.InterfaceByName(a.ifname)
		if err != nil {
			return err
		}
		macA = ifi.HardwareAddr
		ann, err = NewAnnouncer(a.ifname, true, false)
		return err
	}); err != nil {
		t.Fatal(err)
	}
	defer ann.Close()
	var arpc *arp.Client
	if err := inNetns(b.ns, func() error {
		ifi, err := net.InterfaceByName(b.ifname)
		if err != nil {
			return err
		}
		arpc, err = arp.Dial(ifi)
		return err
	}); err != nil {
		t.Fatal(err)
	}
	defer arpc.Close()
	vip := netip.MustParseAddr("198.18.0.100")
	for flap := range 3 {
		sh(t, "ip", "-n", a.ns, "link", "set", a.ifname, "down")
		time.Sleep(50 * time.Millisecond)
		sh(t, "ip", "-n", a.ns, "link", "set", a.ifname, "up")
		// The veth's carrier follows at once; wait for it to be running.
		for i := 0; ; i++ {
			out := sh(t, "ip", "-n", a.ns, "link", "show", "dev", a.ifname)
			if !strings.Contains(out, "NO-CARRIER") && strings.Contains(out, "state UP") {
				break
			}
			if i == 200 {
				t.Fatalf("flap %d: %s not back up: %s", flap, a.ifname, out)
			}
			time.Sleep(10 * time.Millisecond)
		}
		if err := ann.Announce([]netip.Addr{vip}); err != nil {
			t.Fatalf("flap %d: first announcement after the link came back: %v", flap, err)
		}
		_ = arpc.SetReadDeadline(time.Now().Add(5 * time.Second))
		for {
			p, _, err := arpc.Read()
			if err != nil {
				t.Fatalf("flap %d: no gratuitous ARP reached the peer: %v", flap, err)
			}
			if p.SenderIP == vip && p.TargetIP == vip && p.SenderHardwareAddr.String() == macA.String() {
				break
			}
		}
	}
}
