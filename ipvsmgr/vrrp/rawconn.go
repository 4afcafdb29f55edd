package vrrp

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/netip"
	"slices"
	"sync/atomic"
	"syscall"

	"golang.org/x/net/ipv4"
	"golang.org/x/net/ipv6"
	"golang.org/x/sys/unix"
)

// hopLimit is what VRRP sends and requires on receipt: a packet that crossed
// a router is not from this link.
const hopLimit = 255

// ConnConfig says where a RawConn speaks VRRP.
type ConnConfig struct {
	Interface string
	VRID      uint8
	IPv6      bool
	// Peers, when set, get each advert by unicast instead of the multicast
	// group, and only adverts from them are accepted.
	Peers []netip.Addr
	// Primary is the adverts' source; by default the interface's first IPv4
	// address, or for IPv6 its link-local address (its first global one when
	// the peers are not link-local).
	Primary netip.Addr
	// Auth, when set, signs the adverts sent and checks those received
	// (keepalived's auth_hmac trailer); its keys may change as the conn runs.
	Auth   *Auth
	Logger *slog.Logger
}

// ConnStats counts the packets a RawConn dropped, by reason.
type ConnStats struct {
	BadTTL, OtherVRID, NotPeer, Malformed uint64
	// Refused by Auth: no trailer (enforce), a malformed one, an unknown
	// key id, a wrong HMAC, a time stamp outside the window, a replay.
	AuthMissing, AuthMalformed, AuthUnknownKey, AuthBadHMAC, AuthStale, AuthReplay uint64
}

// ByReason is the counts by name (bad_ttl, not_peer, auth_bad_hmac...).
func (s ConnStats) ByReason() map[string]uint64 {
	return map[string]uint64{"bad_ttl": s.BadTTL, "other_vrid": s.OtherVRID, "not_peer": s.NotPeer, "malformed": s.Malformed,
		"auth_missing": s.AuthMissing, "auth_malformed": s.AuthMalformed, "auth_unknown_key": s.AuthUnknownKey,
		"auth_bad_hmac": s.AuthBadHMAC, "auth_stale": s.AuthStale, "auth_replay": s.AuthReplay}
}

// RawConn is a raw IP protocol 112 socket bound to one interface.
type RawConn struct {
	cfg     ConnConfig
	ifi     *net.Interface
	primary netip.Addr
	p4      *ipv4.PacketConn
	p6      *ipv6.PacketConn
	closer  net.PacketConn
	log     *slog.Logger
	buf     []byte
	auth    atomic.Pointer[Auth]

	badTTL, otherVRID, notPeer, malformed                                          atomic.Uint64
	authMissing, authMalformed, authUnknownKey, authBadHMAC, authStale, authReplay atomic.Uint64
}

// Listen opens a raw VRRP socket on the interface, in the caller's network
// namespace (needs CAP_NET_RAW), joined to the multicast group unless peers
// are given.
func Listen(cfg ConnConfig) (*RawConn, error) {
	ifi, err := net.InterfaceByName(cfg.Interface)
	if err != nil {
		return nil, fmt.Errorf("vrrp: interface %s: %w", cfg.Interface, err)
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	c := &RawConn{cfg: cfg, ifi: ifi, primary: cfg.Primary, log: cfg.Logger, buf: make([]byte, 65536)}
	c.auth.Store(cfg.Auth)
	for _, p := range cfg.Peers {
		if p.Unmap().Is4() == cfg.IPv6 {
			return nil, fmt.Errorf("vrrp: peer %s is not of the instance's family", p)
		}
	}
	if !c.primary.IsValid() {
		if c.primary, err = primaryAddr(ifi, cfg.IPv6, len(cfg.Peers) > 0 && !cfg.Peers[0].IsLinkLocalUnicast()); err != nil {
			return nil, err
		}
	}
	lc := net.ListenConfig{Control: func(_, _ string, rc syscall.RawConn) error {
		var serr error
		err := rc.Control(func(fd uintptr) { serr = unix.BindToDevice(int(fd), ifi.Name) })
		if err == nil {
			err = serr
		}
		if err != nil {
			return fmt.Errorf("bind to %s: %w", ifi.Name, err)
		}
		return nil
	}}
	network, laddr := "ip4:112", "0.0.0.0"
	if cfg.IPv6 {
		network, laddr = "ip6:112", "::"
	}
	pc, err := lc.ListenPacket(context.Background(), network, laddr)
	if err != nil {
		return nil, fmt.Errorf("vrrp: open raw socket on %s: %w", ifi.Name, err)
	}
	c.closer = pc
	if cfg.IPv6 {
		err = c.setup6(pc)
	} else {
		err = c.setup4(pc)
	}
	if err != nil {
		pc.Close()
		return nil, fmt.Errorf("vrrp: set up raw socket on %s: %w", ifi.Name, err)
	}
	return c, nil
}

func (c *RawConn) setup4(pc net.PacketConn) error {
	p := ipv4.NewPacketConn(pc)
	c.p4 = p
	return errors.Join(
		p.SetControlMessage(ipv4.FlagTTL|ipv4.FlagDst|ipv4.FlagInterface, true),
		p.SetTTL(hopLimit),
		p.SetMulticastTTL(hopLimit),
		p.SetMulticastLoopback(false),
		p.SetMulticastInterface(c.ifi),
		c.join(func() error { return p.JoinGroup(c.ifi, &net.IPAddr{IP: GroupIPv4.AsSlice()}) }),
	)
}

func (c *RawConn) setup6(pc net.PacketConn) error {
	p := ipv6.NewPacketConn(pc)
	c.p6 = p
	return errors.Join(
		p.SetControlMessage(ipv6.FlagHopLimit|ipv6.FlagDst|ipv6.FlagInterface, true),
		p.SetHopLimit(hopLimit),
		p.SetMulticastHopLimit(hopLimit),
		p.SetMulticastLoopback(false),
		p.SetMulticastInterface(c.ifi),
		c.join(func() error { return p.JoinGroup(c.ifi, &net.IPAddr{IP: GroupIPv6.AsSlice()}) }),
	)
}

func (c *RawConn) join(f func() error) error {
	if len(c.cfg.Peers) > 0 {
		return nil
	}
	return f()
}

func primaryAddr(ifi *net.Interface, v6, global bool) (netip.Addr, error) {
	addrs, err := ifi.Addrs()
	if err != nil {
		return netip.Addr{}, fmt.Errorf("vrrp: addresses of %s: %w", ifi.Name, err)
	}
	for _, a := range addrs {
		p, err := netip.ParsePrefix(a.String())
		if err != nil {
			continue
		}
		ip := p.Addr()
		switch {
		case !v6 && ip.Is4(),
			v6 && ip.Is6() && !ip.Is4In6() && ip.IsLinkLocalUnicast() != global:
			return ip, nil
		}
	}
	kind := "IPv4"
	if v6 {
		kind = "link-local IPv6"
		if global {
			kind = "global IPv6"
		}
	}
	return netip.Addr{}, fmt.Errorf("vrrp: %s has no %s address", ifi.Name, kind)
}

// Primary is the adverts' source address.
func (c *RawConn) Primary() netip.Addr { return c.primary }

// SetAuth turns authentication on (or, with nil, off) as the conn runs:
// the next advert sent and received follow it.
func (c *RawConn) SetAuth(a *Auth) { c.auth.Store(a) }

// Stats counts the packets dropped so far.
func (c *RawConn) Stats() ConnStats {
	return ConnStats{BadTTL: c.badTTL.Load(), OtherVRID: c.otherVRID.Load(), NotPeer: c.notPeer.Load(), Malformed: c.malformed.Load(),
		AuthMissing: c.authMissing.Load(), AuthMalformed: c.authMalformed.Load(), AuthUnknownKey: c.authUnknownKey.Load(),
		AuthBadHMAC: c.authBadHMAC.Load(), AuthStale: c.authStale.Load(), AuthReplay: c.authReplay.Load()}
}

// Close closes the socket; a Receive under way returns.
func (c *RawConn) Close() error { return c.closer.Close() }

// Send sends the advert to the group, or to each peer.
func (c *RawConn) Send(a *Advert) error {
	dsts := c.cfg.Peers
	if len(dsts) == 0 {
		dsts = []netip.Addr{GroupIPv4}
		if c.cfg.IPv6 {
			dsts = []netip.Addr{GroupIPv6}
		}
	}
	body, err := a.body(c.primary)
	if err != nil {
		return err
	}
	// One trailer (one sequence) for every peer's copy, as keepalived: the
	// HMAC leaves out the destination and the checksum.
	var tr []byte
	if auth := c.auth.Load(); auth != nil && auth.Signs() {
		tr = auth.seal(body, c.primary)
	}
	var errs []error
	for _, dst := range dsts {
		b := a.finish(body, tr, c.primary, dst)
		if c.cfg.IPv6 {
			to := &net.IPAddr{IP: dst.AsSlice()}
			if dst.IsLinkLocalUnicast() || dst.IsLinkLocalMulticast() {
				to.Zone = c.ifi.Name
			}
			_, err = c.p6.WriteTo(b, &ipv6.ControlMessage{Src: c.primary.AsSlice(), IfIndex: c.ifi.Index, HopLimit: hopLimit}, to)
		} else {
			_, err = c.p4.WriteTo(b, &ipv4.ControlMessage{Src: c.primary.AsSlice(), IfIndex: c.ifi.Index}, &net.IPAddr{IP: dst.AsSlice()})
		}
		if err != nil {
			errs = append(errs, fmt.Errorf("send advert to %s: %w", dst, err))
		}
	}
	return errors.Join(errs...)
}

// Receive returns the next advert for the VRID that passes every check; the
// others are counted in Stats and dropped.
func (c *RawConn) Receive() (Received, error) {
	for {
		var (
			n        int
			ttl      int
			src, dst netip.Addr
			ifindex  int
			from     net.Addr
			err      error
		)
		if c.cfg.IPv6 {
			var cm *ipv6.ControlMessage
			n, cm, from, err = c.p6.ReadFrom(c.buf)
			if cm != nil {
				ttl, ifindex = cm.HopLimit, cm.IfIndex
				dst, _ = netip.AddrFromSlice(cm.Dst)
			}
		} else {
			var cm *ipv4.ControlMessage
			n, cm, from, err = c.p4.ReadFrom(c.buf)
			if cm != nil {
				ttl, ifindex = cm.TTL, cm.IfIndex
				dst, _ = netip.AddrFromSlice(cm.Dst)
			}
		}
		if err != nil {
			return Received{}, err
		}
		if ia, ok := from.(*net.IPAddr); ok {
			src, _ = netip.AddrFromSlice(ia.IP)
		}
		src, dst = src.Unmap(), dst.Unmap()
		switch {
		case ifindex != 0 && ifindex != c.ifi.Index:
			continue
		case ttl != hopLimit:
			c.badTTL.Add(1)
			c.log.Debug("vrrp packet dropped: TTL is not 255", "src", src, "ttl", ttl)
			continue
		case n < 2 || c.buf[1] != c.cfg.VRID:
			c.otherVRID.Add(1)
			continue
		case len(c.cfg.Peers) > 0 && !slices.Contains(c.cfg.Peers, src):
			c.notPeer.Add(1)
			c.log.Debug("vrrp packet dropped: not from a peer", "src", src)
			continue
		}
		a, err := ParseAuthAdvert(c.buf[:n], src, dst, c.auth.Load())
		if err != nil {
			c.dropCounter(err).Add(1)
			c.log.Debug("vrrp packet dropped", "src", src, "err", err)
			continue
		}
		return Received{Advert: a, Src: src}, nil
	}
}

// dropCounter is the counter of an advert that did not parse or verify.
func (c *RawConn) dropCounter(err error) *atomic.Uint64 {
	switch {
	case errors.Is(err, ErrAuthMissing):
		return &c.authMissing
	case errors.Is(err, ErrAuthMalformed):
		return &c.authMalformed
	case errors.Is(err, ErrAuthUnknownKey):
		return &c.authUnknownKey
	case errors.Is(err, ErrAuthBadHMAC):
		return &c.authBadHMAC
	case errors.Is(err, ErrAuthStale):
		return &c.authStale
	case errors.Is(err, ErrAuthReplay):
		return &c.authReplay
	}
	return &c.malformed
}
