package client

import (
	"crypto/tls"
	"errors"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/ipvsctl/ipvsctl/server"
	"github.com/ipvsctl/ipvsctl/server/trust"
)

// NewPeer is the API of the director replication follows: over https:// it
// believes only a certificate d.Trust believes (its pin, or the pair CA's
// for the URL's host; checked in the TLS handshake, before any request, so
// a peer that fails never sees the token) and shows own, this director's
// certificate, as its client certificate (the peer believes it the same
// way before it looks at the token); http:// only on loopback (tests).
// No proxy, no redirect.
func NewPeer(d server.PeerDial, own *tls.Certificate) (*Client, error) {
	base := d.URL
	if err := trust.CheckPeerURL(base); err != nil {
		return nil, &server.Error{Code: server.CodeBadInput, Msg: "peer_url: " + err.Error()}
	}
	tr := &http.Transport{Proxy: nil, ForceAttemptHTTP2: true, TLSHandshakeTimeout: 10 * time.Second,
		IdleConnTimeout: 90 * time.Second, MaxIdleConns: 4}
	if u, _ := url.Parse(base); u.Scheme == "https" {
		if d.Trust.Empty() {
			return nil, &server.Error{Code: server.CodeBadInput, Msg: "peer_fingerprint: the https:// peer " + base + " has no pinned fingerprint and there is no pair CA"}
		}
		tr.TLSClientConfig = d.Trust.ClientConfig(u.Hostname(), own, nil)
	}
	hc := &http.Client{Transport: tr, CheckRedirect: func(*http.Request, []*http.Request) error {
		return errors.New("the peer answered with a redirect, which replication does not follow")
	}}
	return &Client{base: strings.TrimRight(base, "/"), token: d.Token, hc: hc, maxAnswer: MaxPeerAnswer}, nil
}

// LoadIdentity reads a director's certificate and key (serve's identity)
// for NewPeer.
func LoadIdentity(cert, key string) (*tls.Certificate, error) {
	c, err := tls.LoadX509KeyPair(cert, key)
	if err != nil {
		return nil, errors.Join(errors.New("load this director's certificate "+cert), err)
	}
	return &c, nil
}
