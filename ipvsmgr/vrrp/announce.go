package vrrp

import (
	"errors"
	"fmt"
	"net"
	"net/netip"

	"github.com/mdlayher/arp"
	"github.com/mdlayher/ethernet"
	"github.com/mdlayher/ndp"
)

// LinkAnnouncer sends gratuitous ARPs (IPv4) and unsolicited neighbour
// advertisements (IPv6) on one interface, so that switches and neighbours
// move the virtual addresses to this director at once.
type LinkAnnouncer struct {
	ifi *net.Interface
	arp *arp.Client
	ndp *ndp.Conn
}

// NewAnnouncer opens the sockets on the interface, in the caller's network
// namespace (needs CAP_NET_RAW): an AF_PACKET socket for ARP when ipv4, an
// ICMPv6 socket from the link-local address when ipv6.
func NewAnnouncer(ifname string, ipv4, ipv6 bool) (*LinkAnnouncer, error) {
	ifi, err := net.InterfaceByName(ifname)
	if err != nil {
		return nil, fmt.Errorf("vrrp: interface %s: %w", ifname, err)
	}
	l := &LinkAnnouncer{ifi: ifi}
	if ipv4 {
		if l.arp, err = arp.Dial(ifi); err != nil {
			return nil, fmt.Errorf("vrrp: ARP socket on %s: %w", ifname, err)
		}
	}
	if ipv6 {
		if l.ndp, _, err = ndp.Listen(ifi, ndp.LinkLocal); err != nil {
			l.Close()
			return nil, fmt.Errorf("vrrp: NDP socket on %s: %w", ifname, err)
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
			// RFC 5227's ARP announcement: a request for the address from
			// itself, to the broadcast address.
			var p *arp.Packet
			p, err = arp.NewPacket(arp.OperationRequest, l.ifi.HardwareAddr, a, ethernet.Broadcast, a)
			if err == nil {
				err = l.arp.WriteTo(p, ethernet.Broadcast)
			}
		case a.Is6() && l.ndp != nil:
			err = l.ndp.WriteTo(&ndp.NeighborAdvertisement{Override: true, TargetAddress: a,
				Options: []ndp.Option{&ndp.LinkLayerAddress{Direction: ndp.Target, Addr: l.ifi.HardwareAddr}}}, nil, allNodes)
		default:
			err = errors.New("no socket for its family")
		}
		if err != nil {
			errs = append(errs, fmt.Errorf("announce %s on %s: %w", a, l.ifi.Name, err))
		}
	}
	return errors.Join(errs...)
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
