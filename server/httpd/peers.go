package httpd

import (
	"context"
	"net/http"
	"time"

	"github.com/ipvsctl/ipvsctl/server"
	"github.com/ipvsctl/ipvsctl/server/trust"
)

// Headers a follower's long poll brings: what it has, and its last error
// (shown in the source's status).
const (
	HeaderFollowerHash  = "X-Ipvsctl-Follower-Hash"
	HeaderFollowerError = "X-Ipvsctl-Follower-Error"
)

// isDirectorCall says whether r is a call only a peer director makes:
// replication's long poll, GET /api/v1/state?after=N, and a follower's
// report of its Maglev fingerprints, POST /api/v1/bgp/fingerprints.
func isDirectorCall(r *http.Request) bool {
	return r.Method == http.MethodGet && r.URL.Path == "/api/v1/state" && r.URL.Query().Has("after") ||
		r.Method == http.MethodPost && r.URL.Path == pathFingerprints
}

// pathFingerprints is where a following director reports its Maglev
// fingerprints and gets every other director's.
const pathFingerprints = "/api/v1/bgp/fingerprints"

type callerKey struct{}

// directorCaller is a director call's proved identity: its client
// certificate's fingerprint ("" for a plain-HTTP call on loopback).
type directorCaller struct {
	fingerprint string
	addr        string
}

// directorsOnly refuses a call between directors that does not show a
// director certificate this one believes (pinned with node set, or signed
// by the pair CA for the caller's address), before the route's guard looks
// at its token. Over plain HTTP (serve on loopback, tests) such a call is
// taken from loopback only. Other routes are the operators' and the
// panel's: they need no client certificate.
func (o Options) directorsOnly(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if !isDirectorCall(r) {
			next.ServeHTTP(w, r)
			return
		}
		addr := trust.RemoteAddr(r.RemoteAddr)
		c := &directorCaller{addr: addr.String()}
		h := proxied(r)
		if h == "" && o.Auth != nil && o.Auth.FromTrustedProxy(r) {
			h = "a trusted proxy (--trusted-proxy) as its peer"
		}
		if h != "" {
			// A director calls another itself: a call a proxy passed on is
			// a remote client's, whatever the peer address (a reverse
			// proxy on the director is a loopback peer).
			o.refuseCaller(w, r, c, &trust.UntrustedError{Reason: "a call between directors that came through a proxy (it has " + h +
				"; client " + o.clientAddr(r) + "): directors call each other directly"})
			return
		}
		if r.TLS == nil {
			if !addr.IsLoopback() {
				o.refuseCaller(w, r, c, &trust.UntrustedError{Reason: "a call between directors over plain HTTP from " + addr.String() + " (TLS with a director certificate is needed off loopback)"})
				return
			}
		} else {
			d, err := o.Core.Directors(r.Context())
			if err != nil {
				st, b := errorBody(err)
				writeJSON(w, st, b)
				return
			}
			fp, err := d.VerifyCaller(r.TLS.PeerCertificates, addr, time.Now())
			c.fingerprint = fp
			if err != nil {
				o.refuseCaller(w, r, c, err)
				return
			}
		}
		next.ServeHTTP(w, r.WithContext(context.WithValue(r.Context(), callerKey{}, c)))
	})
}

// proxied names the header that says r came through a proxy ("" if none).
func proxied(r *http.Request) string {
	for _, h := range []string{"X-Forwarded-For", "Forwarded", "X-Real-Ip", "X-Forwarded-Host"} {
		if _, ok := r.Header[h]; ok {
			return h
		}
	}
	return ""
}

// clientAddr is the request's client as the trusted proxies say.
func (o Options) clientAddr(r *http.Request) string {
	if o.Auth == nil {
		return trust.RemoteAddr(r.RemoteAddr).String()
	}
	return o.Auth.ClientAddr(r)
}

func (o Options) refuseCaller(w http.ResponseWriter, r *http.Request, c *directorCaller, err error) {
	o.Core.CallerRefused(r.Context(), c.addr, c.fingerprint, err)
	writeJSON(w, http.StatusForbidden, &ErrorBody{Error: err.Error() + "; a director calling another shows its own certificate, which the called one pins (node set --follower-fingerprint, --peer-fingerprint) or its pair CA signed (--peer-ca)",
		Code: server.CodeForbidden, Fields: []FieldError{}})
}

// followerPolled records the poll of a proved director in the core.
func (a *api) followerPolled(r *http.Request, after int64) func() {
	c, _ := r.Context().Value(callerKey{}).(*directorCaller)
	if c == nil {
		return func() {}
	}
	return a.core.FollowerPolled(server.FollowerPoll{Fingerprint: orDefault(c.fingerprint, "(plain HTTP) "+c.addr), Addr: c.addr,
		Node: r.Header.Get(HeaderNode), After: after, Hash: r.Header.Get(HeaderFollowerHash), Error: r.Header.Get(HeaderFollowerError)})
}

// stillBelieved checks a director's long poll again when it is to be
// answered: a pin or pair CA removed while it waited shuts it out then,
// not at its next poll.
func (a *api) stillBelieved(r *http.Request) error {
	c, _ := r.Context().Value(callerKey{}).(*directorCaller)
	if c == nil || r.TLS == nil {
		return nil
	}
	d, err := a.core.Directors(r.Context())
	if err != nil {
		return err
	}
	if _, err := d.VerifyCaller(r.TLS.PeerCertificates, trust.RemoteAddr(r.RemoteAddr), time.Now()); err != nil {
		a.core.CallerRefused(r.Context(), c.addr, c.fingerprint, err)
		return &server.Error{Code: server.CodeForbidden, Msg: err.Error() + " (no longer believed here)"}
	}
	return nil
}
