package auth

import (
	"net/http"
	"net/netip"
	"strings"
)

// ClientAddr is the address a request came from: the connection's peer,
// unless that peer is a trusted proxy; then X-Forwarded-For is read from the
// right, hop by hop, while the hop is trusted, and the first address not
// trusted is the client. Entries a client wrote itself (to the left of the
// first untrusted hop) are never believed. A peer that is not an IP address
// (a unix socket) is given as it is.
func ClientAddr(r *http.Request, trusted []netip.Prefix) string {
	peer, err := netip.ParseAddrPort(r.RemoteAddr)
	if err != nil {
		return r.RemoteAddr
	}
	addr := peer.Addr().Unmap()
	if !isTrusted(addr, trusted) {
		return addr.String()
	}
	var hops []string
	for _, v := range r.Header.Values("X-Forwarded-For") {
		hops = append(hops, strings.Split(v, ",")...)
	}
	for i := len(hops) - 1; i >= 0 && isTrusted(addr, trusted); i-- {
		hop, err := netip.ParseAddr(strings.TrimSpace(hops[i]))
		if err != nil {
			break // a malformed hop: the last good one is as far as we can see
		}
		addr = hop.Unmap()
	}
	return addr.String()
}

// ClientAddr is ClientAddr with the configured trusted proxies.
func (a *Auth) ClientAddr(r *http.Request) string { return ClientAddr(r, a.cfg.TrustedProxies) }

// isHTTPS reports a request that reached us, or a trusted proxy in front of
// us, over TLS: the session cookie is then Secure.
func (a *Auth) isHTTPS(r *http.Request) bool {
	if r.TLS != nil {
		return true
	}
	peer, err := netip.ParseAddrPort(r.RemoteAddr)
	return err == nil && isTrusted(peer.Addr().Unmap(), a.cfg.TrustedProxies) &&
		strings.EqualFold(r.Header.Get("X-Forwarded-Proto"), "https")
}

func isTrusted(a netip.Addr, trusted []netip.Prefix) bool {
	for _, p := range trusted {
		if p.Contains(a) {
			return true
		}
	}
	return false
}

// FromTrustedProxy reports a request whose connection's peer is one of
// the trusted proxies: whoever the client is, it is not that peer.
func (a *Auth) FromTrustedProxy(r *http.Request) bool {
	peer, err := netip.ParseAddrPort(r.RemoteAddr)
	return err == nil && isTrusted(peer.Addr().Unmap(), a.cfg.TrustedProxies)
}
