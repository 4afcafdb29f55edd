package httpd_test

import (
	"bytes"
	"context"
	"crypto/tls"
	"encoding/json"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/ipvsctl/ipvsctl/ipvsmgr/bgp"
	"github.com/ipvsctl/ipvsctl/server"
	"github.com/ipvsctl/ipvsctl/server/auth"
	"github.com/ipvsctl/ipvsctl/server/httpd"
	"github.com/ipvsctl/ipvsctl/server/servertest"
	"github.com/ipvsctl/ipvsctl/server/store"
	"github.com/ipvsctl/ipvsctl/server/trust"
	"github.com/ipvsctl/ipvsctl/server/trust/trusttest"
)

type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// directorTLS serves g's handler over real TLS on loopback with cert, as
// serve does (a client certificate asked for, none required).
func directorTLS(t *testing.T, g *servertest.Rig, cert tls.Certificate) string {
	t.Helper()
	ts := httptest.NewUnstartedServer(g.Handler)
	ts.TLS = trust.ServerConfig()
	ts.TLS.Certificates = []tls.Certificate{cert}
	ts.StartTLS()
	t.Cleanup(ts.Close)
	return ts.URL
}

// poll makes replication's long poll (answered at once: after=0 on a
// store with a revision) as a director showing own, with token.
func poll(t *testing.T, base string, srvTrust trust.Directors, own *tls.Certificate, token, path string) (int, *httpd.ErrorBody) {
	t.Helper()
	hc := &http.Client{Transport: &http.Transport{TLSClientConfig: srvTrust.ClientConfig("127.0.0.1", own, nil)}}
	defer hc.CloseIdleConnections()
	req, _ := http.NewRequest("GET", base+path, nil)
	if path == "/api/v1/bgp/fingerprints" { // a follower's report of its Maglev fingerprints
		req, _ = http.NewRequest("POST", base+path, strings.NewReader(`{"router_id": "198.18.0.2", "services": []}`))
	}
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	req.Header.Set(httpd.HeaderNode, "198.18.0.2")
	resp, err := hc.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	var eb httpd.ErrorBody
	if resp.StatusCode >= 300 {
		if err := json.Unmarshal(b, &eb); err != nil {
			t.Fatalf("%d %s", resp.StatusCode, b)
		}
	}
	return resp.StatusCode, &eb
}

// A director's call (replication's long poll) must show a client
// certificate this director believes: pinned with node set, or signed by
// the pair CA for the address it calls from. Without one it is refused
// before its token is looked at (403 whatever the token, where a believed
// director with a wrong token gets 401), logged, shown in status and
// audited once however often it retries. Operators' calls need no
// certificate.
func TestDirectorCallsNeedABelievedClientCertificate(t *testing.T) {
	ctx := context.Background()
	logs := &syncBuffer{}
	g := servertest.Start(t, func(c *server.Config) { c.Log = slog.New(slog.NewTextHandler(logs, nil)) })
	setUp(t, g)
	srvCert, srvFP := trusttest.SelfSigned(t, "d1", net.ParseIP("198.18.0.1"))
	base := directorTLS(t, g, srvCert)
	toMe := trust.Directors{Pins: []string{srvFP}}
	viewer := g.Tokens[auth.Viewer]
	// The peer's token: its first believed call makes it a director's, so
	// operators' calls below use another one.
	peer, _, err := g.Auth.CreateToken(ctx, &auth.Principal{User: "root", Role: auth.Admin, Via: "cli"}, "viewer", "peer", 0)
	if err != nil {
		t.Fatal(err)
	}
	const longPoll = "/api/v1/state?after=0"
	const fingerprintsPath = "/api/v1/bgp/fingerprints"

	pinned, pinnedFP := trusttest.SelfSigned(t, "d2", net.ParseIP("198.18.0.2"))
	unpinned, unpinnedFP := trusttest.SelfSigned(t, "d3", net.ParseIP("198.18.0.3"))
	ca := trusttest.NewCA(t, "pair CA")
	caHere := ca.Issue(t, "d4", trusttest.Loopback())
	caOther := ca.Issue(t, "d5", []net.IP{net.ParseIP("198.18.0.66")}, "other.example")
	admin := server.Actor{Name: "root", Via: "cli"}
	if _, err := g.Core.SetNode(ctx, admin, server.NodePatch{Replication: ptr("source"), FollowerFingerprints: &[]string{pinnedFP}}); err != nil {
		t.Fatal(err)
	}

	refused := func(t *testing.T, own *tls.Certificate, want string) {
		t.Helper()
		for _, path := range []string{longPoll, fingerprintsPath} {
			for _, tok := range []string{peer, "not-a-token"} {
				code, eb := poll(t, base, toMe, own, tok, path)
				if code != http.StatusForbidden || eb.Code != server.CodeForbidden || !strings.Contains(eb.Error, want) {
					t.Fatalf("%s, token %.8s: %d %+v, want 403 with %q", path, tok, code, eb, want)
				}
			}
		}
	}
	believed := func(t *testing.T, own *tls.Certificate) {
		t.Helper()
		for _, path := range []string{longPoll, fingerprintsPath} {
			if code, eb := poll(t, base, toMe, own, "not-a-token", path); code != http.StatusUnauthorized {
				t.Fatalf("%s: a believed director with a wrong token: %d %+v, want 401 (the token is still the role check)", path, code, eb)
			}
			if code, eb := poll(t, base, toMe, own, peer, path); code != http.StatusOK {
				t.Fatalf("%s: a believed director: %d %+v", path, code, eb)
			}
		}
	}

	t.Run("pins", func(t *testing.T) {
		refused(t, nil, "showed no certificate")
		refused(t, &unpinned, "not the pinned")
		refused(t, &caOther, "not the pinned")
		believed(t, &pinned)
	})
	t.Run("pair CA", func(t *testing.T) {
		if _, err := g.Core.SetNode(ctx, admin, server.NodePatch{PeerCA: ptr(string(ca.PEM)), FollowerFingerprints: &[]string{}}); err != nil {
			t.Fatal(err)
		}
		refused(t, nil, "showed no certificate")
		refused(t, &pinned, "neither pinned nor signed by the pair CA") // no longer pinned
		refused(t, &caOther, "not for 127.0.0.1")
		believed(t, &caHere)
	})

	// Operators and the panel show no certificate and need none.
	for _, path := range []string{"/api/v1/status", "/api/v1/state", "/healthz"} {
		hc := &http.Client{Transport: &http.Transport{TLSClientConfig: toMe.ClientConfig("127.0.0.1", nil, nil)}}
		req, _ := http.NewRequest("GET", base+path, nil)
		req.Header.Set("Authorization", "Bearer "+viewer)
		resp, err := hc.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			t.Errorf("an operator's %s without a client certificate: %d", path, resp.StatusCode)
		}
	}

	// Status on this director shows the refused callers and the believed ones.
	st, err := g.Core.Status(ctx)
	if err != nil {
		t.Fatal(err)
	}
	var refusedRows, followers int
	for _, f := range st.Followers {
		if f.Refused {
			refusedRows++
			if f.Address != "127.0.0.1" || f.Error == "" {
				t.Errorf("refused caller shown as %+v", f)
			}
		} else {
			followers++
			// It asked for after=0 and said no hash: behind since revision 1.
			if f.Name != "198.18.0.2" || f.InSync || f.LagSeconds <= 0 || f.Revision != 0 || f.Connected {
				t.Errorf("follower shown as %+v", f)
			}
		}
	}
	if refusedRows != 4 || followers != 2 { // none, unpinned, caOther, and pinned once the CA replaced the pins
		t.Errorf("status followers: %+v", st.Followers)
	}
	// A caller that makes a new certificate for each try grows neither
	// the audit nor the status past their bounds.
	for range 6 {
		fresh, _ := trusttest.SelfSigned(t, "d9", net.ParseIP("198.18.0.9"))
		refused(t, &fresh, "neither pinned nor signed")
	}
	// Audited once per (address, certificate), however many retries, and at
	// most 4 certificates per address: no certificate, unpinned, caOther,
	// and pinned once the CA replaced the pins.
	es, err := g.Store.Audit(ctx, store.AuditFilter{Contains: "replication caller refused"})
	if err != nil {
		t.Fatal(err)
	}
	if len(es) != 4 {
		t.Errorf("%d audit rows for the refused callers, want 4: %+v", len(es), es)
	}
	if st, err := g.Core.Status(ctx); err != nil || len(st.Followers) != 2+4 {
		t.Errorf("status after new certificates: %d rows, %v (want the 2 followers and 4 refused certificates)", len(st.Followers), err)
	}
	for _, e := range es {
		if e.Outcome != store.OutcomeFailure || e.ClientAddr != "127.0.0.1" {
			t.Errorf("audit row %+v", e)
		}
	}
	if !strings.Contains(logs.String(), "refused") || !strings.Contains(logs.String(), unpinnedFP) {
		t.Error("the refusals are not logged with the caller's fingerprint")
	}
	// Only the believed directors' fingerprint reports were kept, each by
	// the certificate it proved.
	reps := server.DaemonSideOf(g.Core).FingerprintReports()
	if len(reps) != 2 || !slices.ContainsFunc(reps, func(d bgp.DirectorFingerprints) bool { return d.Certificate == pinnedFP && d.Name == "198.18.0.2" }) ||
		slices.ContainsFunc(reps, func(d bgp.DirectorFingerprints) bool { return d.Certificate == unpinnedFP }) {
		t.Errorf("fingerprint reports kept: %+v", reps)
	}
}

// tlsGet GETs path over TLS as a client showing own (nil: none) with
// token and the header pairs hdr; it returns the status and the body.
func tlsGet(t *testing.T, base string, srvTrust trust.Directors, own *tls.Certificate, token, path string, hdr ...string) (int, string) {
	t.Helper()
	hc := &http.Client{Transport: &http.Transport{TLSClientConfig: srvTrust.ClientConfig("127.0.0.1", own, nil)}}
	defer hc.CloseIdleConnections()
	req, _ := http.NewRequest("GET", base+path, nil)
	req.Header.Set("Authorization", "Bearer "+token)
	req.Header.Set("Accept", "application/json")
	for i := 0; i+1 < len(hdr); i += 2 {
		req.Header.Set(hdr[i], hdr[i+1])
	}
	resp, err := hc.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

// A director's token (made with token create --director, or used once for
// a believed call between directors) is taken over TLS only as a call
// between directors is, on every route, the panel's too: with that
// director's believed certificate, never through a proxy. So a stolen
// peer token alone reads nothing. Other tokens need no certificate.
func TestDirectorTokenNeedsItsDirectorsCertificate(t *testing.T) {
	ctx := context.Background()
	g := servertest.Start(t)
	setUp(t, g)
	srvCert, srvFP := trusttest.SelfSigned(t, "d1", net.ParseIP("198.18.0.1"))
	base := directorTLS(t, g, srvCert)
	toMe := trust.Directors{Pins: []string{srvFP}}
	pinned, pinnedFP := trusttest.SelfSigned(t, "d2", net.ParseIP("198.18.0.2"))
	unpinned, _ := trusttest.SelfSigned(t, "d3", net.ParseIP("198.18.0.3"))
	admin := server.Actor{Name: "root", Via: "cli"}
	if _, err := g.Core.SetNode(ctx, admin, server.NodePatch{Replication: ptr("source"), FollowerFingerprints: &[]string{pinnedFP}}); err != nil {
		t.Fatal(err)
	}
	made, err := g.Core.CreateToken(ctx, admin, server.TokenRequest{User: "viewer", Name: "made-for-d2", Director: true})
	if err != nil {
		t.Fatal(err)
	}
	if made.Info.DirectorAt == nil {
		t.Fatalf("token create --director: %+v, want director_at set", made.Info)
	}
	later, err := g.Core.CreateToken(ctx, admin, server.TokenRequest{User: "viewer", Name: "used-by-d2"})
	if err != nil {
		t.Fatal(err)
	}
	other := g.Tokens[auth.Viewer]

	// A plain token is an operator's until a director uses it.
	if code, body := tlsGet(t, base, toMe, nil, later.Token, "/api/v1/status"); code != http.StatusOK {
		t.Fatalf("a plain token without a certificate: %d %s", code, body)
	}
	if code, eb := poll(t, base, toMe, &pinned, later.Token, "/api/v1/state?after=0"); code != http.StatusOK {
		t.Fatalf("the believed director's long poll: %d %+v", code, eb)
	}
	ts, err := g.Core.Tokens(ctx)
	if err != nil {
		t.Fatal(err)
	}
	for _, tk := range ts {
		if (tk.Name == "used-by-d2" || tk.Name == "made-for-d2") != (tk.DirectorAt != nil) {
			t.Errorf("token %s: director_at %v", tk.Name, tk.DirectorAt)
		}
	}
	es, err := g.Store.Audit(ctx, store.AuditFilter{Action: "token director"})
	if err != nil || len(es) != 1 || es[0].Actor != "viewer" || !strings.Contains(es[0].Detail, "first call between directors") {
		t.Errorf("audit of the token becoming a director's: %+v %v", es, err)
	}

	for _, tok := range []string{made.Token, later.Token} {
		for _, path := range []string{"/api/v1/status", "/api/v1/state", "/api/v1/settings", "/", "/services"} {
			for _, c := range []struct {
				own  *tls.Certificate
				hdr  []string
				want string
			}{
				{nil, nil, "showed no certificate"},
				{&unpinned, nil, "not the pinned"},
				{&pinned, []string{"X-Forwarded-For", "192.0.2.7"}, "came through a proxy"},
			} {
				code, body := tlsGet(t, base, toMe, c.own, tok, path, c.hdr...)
				if code != http.StatusForbidden || !strings.Contains(body, "is a director's") || !strings.Contains(body, c.want) {
					t.Errorf("%s with token %.16s, %v %v: %d %.300s; want 403 naming the director's token and %q", path, tok, c.own != nil, c.hdr, code, body, c.want)
				}
			}
			if code, body := tlsGet(t, base, toMe, &pinned, tok, path); code != http.StatusOK {
				t.Errorf("%s with the director's token and its certificate: %d %.300s", path, code, body)
			}
		}
	}
	// Another viewer's token still reads without a certificate.
	if code, body := tlsGet(t, base, toMe, nil, other, "/api/v1/status"); code != http.StatusOK {
		t.Errorf("an operator's token without a certificate: %d %s", code, body)
	}
}
