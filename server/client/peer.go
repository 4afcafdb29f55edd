package client

import (
	"errors"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/ipvsctl/ipvsctl/server"
	"github.com/ipvsctl/ipvsctl/server/trust"
)

// NewPeer is the other director's API as replication calls it: over
// https:// it believes only a certificate of fingerprint (checked in the
// TLS handshake, before any request, so a peer that fails never sees the
// token); http:// only on loopback (tests). No proxy, no redirect.
func NewPeer(base, token, fingerprint string) (*Client, error) {
	if err := trust.CheckPeerURL(base); err != nil {
		return nil, &server.Error{Code: server.CodeBadInput, Msg: "peer_url: " + err.Error()}
	}
	tr := &http.Transport{Proxy: nil, ForceAttemptHTTP2: true, TLSHandshakeTimeout: 10 * time.Second,
		IdleConnTimeout: 90 * time.Second, MaxIdleConns: 4}
	if u, _ := url.Parse(base); u.Scheme == "https" {
		if fingerprint == "" {
			return nil, &server.Error{Code: server.CodeBadInput, Msg: "peer_fingerprint: the https:// peer " + base + " has no pinned fingerprint"}
		}
		fp, err := trust.ParseFingerprint(fingerprint)
		if err != nil {
			return nil, &server.Error{Code: server.CodeBadInput, Msg: "peer_fingerprint: " + err.Error()}
		}
		tr.TLSClientConfig = trust.PinnedConfig(fp, nil)
	}
	hc := &http.Client{Transport: tr, CheckRedirect: func(*http.Request, []*http.Request) error {
		return errors.New("the peer answered with a redirect, which replication does not follow")
	}}
	return &Client{base: strings.TrimRight(base, "/"), token: token, hc: hc}, nil
}
