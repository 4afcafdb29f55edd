package httpd

import (
	"context"
	"errors"
	"net/http"
	"time"

	"github.com/ipvsctl/ipvsctl/server"
	"github.com/ipvsctl/ipvsctl/server/auth"
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
// panel's: they need no client certificate, but for a director's token
// (directorTokens).
func (o Options) directorsOnly(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if !isDirectorCall(r) {
			next.ServeHTTP(w, r)
			return
		}
		c, err := o.believeDirector(r)
		if err != nil {
			o.refuseCaller(w, r, c, "", err)
			return
		}
		ctx := context.WithValue(r.Context(), callerKey{}, c)
		if r.TLS != nil {
			ctx = auth.WithDirectorCall(ctx) // its token becomes a director's
		}
		next.ServeHTTP(w, r.WithContext(ctx))
	})
}

// directorTokens holds a director's token (auth.Principal.Director: it made
// a call between directors, or was made with token create --director) to
// the rule of a call between directors on every route: from that director
// itself, never through a proxy, and over TLS with its believed
// certificate. So a stolen peer token alone reads nothing.
func (o Options) directorTokens(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		p, ok := auth.FromContext(r.Context())
		if !ok || !p.Director || r.Context().Value(callerKey{}) != nil {
			next.ServeHTTP(w, r)
			return
		}
		if c, err := o.believeDirector(r); err != nil {
			o.refuseCaller(w, r, c, "this API token is a director's, taken only as a call between directors is: ", err)
			return
		}
		next.ServeHTTP(w, r)
	})
}

// believeDirector says whether r comes from a director this one believes:
// not through a proxy; over TLS with a director certificate pinned with
// node set or signed by the pair CA for the caller's address; over plain
// HTTP (serve on loopback, tests) from loopback only.
func (o Options) believeDirector(r *http.Request) (*directorCaller, error) {
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
		return c, &trust.UntrustedError{Reason: "a call between directors that came through a proxy (it has " + h +
			"; client " + o.clientAddr(r) + "): directors call each other directly"}
	}
	if r.TLS == nil {
		if !addr.IsLoopback() {
			return c, &trust.UntrustedError{Reason: "a call between directors over plain HTTP from " + addr.String() + " (TLS with a director certificate is needed off loopback)"}
		}
		return c, nil
	}
	d, err := o.Core.Directors(r.Context())
	if err != nil {
		return c, err
	}
	c.fingerprint, err = d.VerifyCaller(r.TLS.PeerCertificates, addr, time.Now())
	return c, err
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

// refuseCaller answers a call believeDirector refused: 403 for an
// untrusted caller (reported in the core), else the store's error.
func (o Options) refuseCaller(w http.ResponseWriter, r *http.Request, c *directorCaller, why string, err error) {
	var ue *trust.UntrustedError
	if !errors.As(err, &ue) {
		st, b := errorBody(err)
		writeJSON(w, st, b)
		return
	}
	o.Core.CallerRefused(r.Context(), c.addr, c.fingerprint, err)
	writeJSON(w, http.StatusForbidden, &ErrorBody{Error: why + err.Error() + "; a director calling another shows its own certificate, which the called one pins (node set --follower-fingerprint, --peer-fingerprint) or its pair CA signed (--peer-ca)",
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
