package vrrp

import (
	"errors"
	"fmt"
	"net"
	"net/netip"

	"github.com/mdlayher/arp"
	"github.com/mdlayher/ethernet"
	"github.com/mdlayher/ndp"
	"github.com/mdlayher/packet"
)

// LinkAnnouncer sends gratuitous ARPs (IPv4) and unsolicited neighbour
// advertisements (IPv6) on one interface, so that switches and neighbours
// move the virtual addresses to this director at once.
//
// A socket bound to an interface reports the interface's going down
// (ENETDOWN) once, on its next send, even when the link is back by then: the
// first announcement after a flap, the one a takeover needs most, would be
// lost. So a failed send is tried again, and then once more on a new socket.
type LinkAnnouncer struct {
	ifi     *net.Interface
	dialARP func(*net.Interface) (net.PacketConn, error)
	arp     net.PacketConn
	ndp     *ndp.Conn
}

const etherTypeARP = 0x0806

// NewAnnouncer opens the sockets on the interface, in the caller's network
// namespace (needs CAP_NET_RAW): an AF_PACKET socket for ARP when ipv4, an
// ICMPv6 socket from the link-local address when ipv6.
func NewAnnouncer(ifname string, ipv4, ipv6 bool) (*LinkAnnouncer, error) {
	ifi, err := net.InterfaceByName(ifname)
	if err != nil {
		return nil, fmt.Errorf("vrrp: interface %s: %w", ifname, err)
	}
	var dial func(*net.Interface) (net.PacketConn, error)
	if ipv4 {
		dial = func(ifi *net.Interface) (net.PacketConn, error) {
			return packet.Listen(ifi, packet.Raw, etherTypeARP, nil)
		}
	}
	l, err := newAnnouncer(ifi, dial)
	if err != nil {
		return nil, err
	}
	if ipv6 {
		if l.ndp, _, err = ndp.Listen(ifi, ndp.LinkLocal); err != nil {
			l.Close()
			return nil, fmt.Errorf("vrrp: NDP socket on %s: %w", ifname, err)
		}
	}
	return l, nil
}

// newAnnouncer opens the ARP socket with dial (nil: no IPv4).
func newAnnouncer(ifi *net.Interface, dial func(*net.Interface) (net.PacketConn, error)) (*LinkAnnouncer, error) {
	l := &LinkAnnouncer{ifi: ifi, dialARP: dial}
	if dial != nil {
		var err error
		if l.arp, err = dial(ifi); err != nil {
			return nil, fmt.Errorf("vrrp: ARP socket on %s: %w", ifi.Name, err)
		}
	}
	return l, nil
}

var allNodes = netip.MustParseAddr("ff02::1")

// Announce sends one announcement for each address.
func (l *LinkAnnouncer) Announce(addrs []netip.Addr) error {
	var errs []error
	for _, a := range addrs {
		a = a.Unmap()
		var err error
		switch {
		case a.Is4() && l.arp != nil:
			err = l.sendARP(a)
		case a.Is6() && l.ndp != nil:
			err = l.sendNA(a)
		default:
			err = errors.New("no socket for its family")
		}
		if err != nil {
			errs = append(errs, fmt.Errorf("announce %s on %s: %w", a, l.ifi.Name, err))
		}
	}
	return errors.Join(errs...)
}

// sendARP sends RFC 5227's ARP announcement: a request for the address from
// itself, to the broadcast address.
func (l *LinkAnnouncer) sendARP(a netip.Addr) error {
	p, err := arp.NewPacket(arp.OperationRequest, l.ifi.HardwareAddr, a, ethernet.Broadcast, a)
	if err != nil {
		return err
	}
	pb, err := p.MarshalBinary()
	if err != nil {
		return err
	}
	fb, err := (&ethernet.Frame{Destination: ethernet.Broadcast, Source: l.ifi.HardwareAddr,
		EtherType: ethernet.EtherTypeARP, Payload: pb}).MarshalBinary()
	if err != nil {
		return err
	}
	to := &packet.Addr{HardwareAddr: ethernet.Broadcast}
	return l.retry(func() error { _, err := l.arp.WriteTo(fb, to); return err }, l.reopenARP)
}

func (l *LinkAnnouncer) sendNA(a netip.Addr) error {
	na := &ndp.NeighborAdvertisement{Override: true, TargetAddress: a,
		Options: []ndp.Option{&ndp.LinkLayerAddress{Direction: ndp.Target, Addr: l.ifi.HardwareAddr}}}
	return l.retry(func() error { return l.ndp.WriteTo(na, nil, allNodes) }, l.reopenNDP)
}

// retry sends, sends again on a failure (the error a flap left on the socket
// is reported once), and then once more on a new socket.
func (l *LinkAnnouncer) retry(send func() error, reopen func() error) error {
	err := send()
	if err == nil {
		return nil
	}
	if err = send(); err == nil {
		return nil
	}
	if rerr := reopen(); rerr != nil {
		return fmt.Errorf("%w (and a new socket: %w)", err, rerr)
	}
	return send()
}

// interfaceNow is the interface as the system has it now (its index or
// address may have changed while it was away), or the one known before.
func (l *LinkAnnouncer) interfaceNow() *net.Interface {
	if ifi, err := net.InterfaceByName(l.ifi.Name); err == nil {
		return ifi
	}
	return l.ifi
}

func (l *LinkAnnouncer) reopenARP() error {
	ifi := l.interfaceNow()
	c, err := l.dialARP(ifi)
	if err != nil {
		return fmt.Errorf("ARP socket on %s: %w", ifi.Name, err)
	}
	l.arp.Close()
	l.arp, l.ifi = c, ifi
	return nil
}

func (l *LinkAnnouncer) reopenNDP() error {
	ifi := l.interfaceNow()
	c, _, err := ndp.Listen(ifi, ndp.LinkLocal)
	if err != nil {
		return fmt.Errorf("NDP socket on %s: %w", ifi.Name, err)
	}
	l.ndp.Close()
	l.ndp, l.ifi = c, ifi
	return nil
}

// Close closes the sockets.
func (l *LinkAnnouncer) Close() error {
	var errs []error
	if l.arp != nil {
		errs = append(errs, l.arp.Close())
	}
	if l.ndp != nil {
		errs = append(errs, l.ndp.Close())
	}
	return errors.Join(errs...)
}
