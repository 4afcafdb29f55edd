package redundancy_test

import (
	"context"
	"crypto/tls"
	"net"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/ipvsctl/ipvsctl/server"
	"github.com/ipvsctl/ipvsctl/server/httpd"
	"github.com/ipvsctl/ipvsctl/server/store"
	"github.com/ipvsctl/ipvsctl/server/trust/trusttest"
)

// roguePeer answers replication's long poll with a document of its choice,
// and records every Authorization header a request brought it.
type roguePeer struct {
	srv *httptest.Server
	doc string
	at  time.Time

	mu    sync.Mutex
	auths []string
	hits  int
}

func (p *roguePeer) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	p.mu.Lock()
	p.hits++
	if a := r.Header.Get("Authorization"); a != "" {
		p.auths = append(p.auths, a)
	}
	p.mu.Unlock()
	if r.URL.Path != "/api/v1/state" {
		http.NotFound(w, r)
		return
	}
	if after, _ := strconv.ParseInt(r.URL.Query().Get("after"), 10, 64); after >= 1 {
		select { // the same revision again: wait as a real peer's long poll does
		case <-r.Context().Done():
			return
		case <-time.After(300 * time.Millisecond):
		}
	}
	h := w.Header()
	h.Set("ETag", `"1"`)
	h.Set(httpd.HeaderRevisionAt, p.at.UTC().Format(time.RFC3339Nano))
	h.Set(httpd.HeaderRevisionAuthor, "mallory")
	h.Set(httpd.HeaderContentHash, store.DocumentHash([]byte(p.doc)))
	h.Set(httpd.HeaderNode, "198.18.0.66")
	w.Write([]byte(p.doc))
}

func (p *roguePeer) hash() string { return store.DocumentHash([]byte(p.doc)) }

func (p *roguePeer) tokens() ([]string, int) {
	p.mu.Lock()
	defer p.mu.Unlock()
	return append([]string(nil), p.auths...), p.hits
}

// newRogue serves on loopback: plain HTTP when certPEM is nil, else TLS
// with that certificate (and chain).
func newRogue(t *testing.T, doc string, at time.Time, cert *tls.Certificate) *roguePeer {
	t.Helper()
	p := &roguePeer{doc: canonical(t, doc), at: at}
	p.srv = httptest.NewUnstartedServer(p)
	if cert == nil {
		p.srv.Start()
	} else {
		p.srv.TLS = &tls.Config{Certificates: []tls.Certificate{*cert}}
		p.srv.StartTLS()
	}
	t.Cleanup(p.srv.Close)
	return p
}

// canonical is doc as a director stores (and serves) it.
func canonical(t *testing.T, doc string) string {
	t.Helper()
	d := newDirector(t, "198.18.0.9", 100)
	if _, err := d.core.Apply(context.Background(), admin, strings.NewReader(doc), "doc", server.WriteOptions{NoApply: true}); err != nil {
		t.Fatal(err)
	}
	return string(d.head().Document)
}

// identity is a director's own self-signed certificate, as serve makes it.
func identity(t *testing.T) (tls.Certificate, string) {
	t.Helper()
	return trusttest.SelfSigned(t, "d2", net.ParseIP("198.18.0.2"))
}

// caSigned is a certificate for another name, signed by a CA of its own:
// valid in every respect but the pin.
func caSigned(t *testing.T, name string) tls.Certificate {
	t.Helper()
	return trusttest.NewCA(t, "Some CA").Issue(t, name, trusttest.Loopback(), name)
}

const plainState = `{"services": [{"name": "web", "address": "198.18.0.100", "port": 80, "scheduler": "rr",
   "servers": [{"name": "r1", "address": "198.18.0.11"}]}]}`

const execState = `{"services": [{"name": "web", "address": "198.18.0.100", "port": 80, "scheduler": "rr",
   "check": {"type": "exec", "command": ["/bin/true", "%h"]},
   "servers": [{"name": "r1", "address": "198.18.0.11"}]}]}`

func follow(t *testing.T, d *director, url, fp string) {
	t.Helper()
	tok := "peer-secret-token"
	if _, err := d.core.SetNode(context.Background(), admin, server.NodePatch{PeerURL: &url, PeerToken: &tok, PeerFingerprint: &fp}); err != nil {
		t.Fatal(err)
	}
}

func replicationError(d *director) string {
	if r := d.status(); r != nil && r.Replication != nil {
		return r.Replication.Error
	}
	return ""
}

func audited(t *testing.T, d *director, contains string) []store.AuditEntry {
	t.Helper()
	es, err := d.st.Audit(context.Background(), store.AuditFilter{Contains: contains})
	if err != nil {
		t.Fatal(err)
	}
	return es
}

// A peer that cannot show the pinned certificate (plain HTTP, a
// self-signed certificate of its own, a CA-signed one for another name) is
// refused in the TLS handshake: it gets no request, so no token; the
// refusal is in the status, node show and the audit, and nothing it
// serves is stored.
func TestRoguePeersGetNoToken(t *testing.T) {
	_, realFP := identity(t) // the real peer's, which the operator pinned
	own, _ := identity(t)
	other := caSigned(t, "other.example")
	for _, tc := range []struct {
		name string
		cert *tls.Certificate
		want string
	}{
		{"plain http", nil, "http"},
		{"self-signed, not pinned", &own, "not the pinned"},
		{"valid certificate for another name", &other, "not the pinned"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			rogue := newRogue(t, plainState, time.Now(), tc.cert)
			d := newDirector(t, "198.18.0.3", 100)
			follow(t, d, "https://"+rogue.srv.Listener.Addr().String(), realFP)
			d.start(&hub{}, nil)
			eventually(t, 5*time.Second, "the refusal in the replication status", func() bool {
				return strings.Contains(replicationError(d), tc.want)
			})
			eventually(t, 5*time.Second, "the refusal audited", func() bool {
				return len(audited(t, d, "replication peer refused")) == 1
			})
			time.Sleep(300 * time.Millisecond) // a retry or two more
			if toks, hits := rogue.tokens(); len(toks) != 0 || hits != 0 {
				t.Fatalf("the rogue peer got %d requests with Authorization %q", hits, toks)
			}
			if h := d.head(); h.Revision != 0 {
				t.Fatalf("the rogue's document was stored: %+v", h)
			}
			nv, err := d.core.NodeSettings(context.Background())
			if err != nil || nv.Redundancy == nil || nv.Redundancy.Replication == nil || !strings.Contains(nv.Redundancy.Replication.Error, tc.want) {
				t.Fatalf("node show: %+v, %v", nv.Redundancy, err)
			}
			if !strings.Contains(d.logs.String(), "peer refused") {
				t.Error("the refusal is not logged")
			}
		})
	}

	// Plain http is refused outright off loopback, and https needs a pin.
	d := newDirector(t, "198.18.0.3", 100)
	for _, p := range []server.NodePatch{
		{PeerURL: ptr("http://198.18.0.2:3636")},
		{PeerURL: ptr("https://198.18.0.2:3636")},
		{PeerURL: ptr("https://198.18.0.2:3636"), PeerFingerprint: ptr("sha256:12ab")},
	} {
		if _, err := d.core.SetNode(context.Background(), admin, p); server.CodeOf(err) != server.CodeBadInput {
			t.Errorf("node set %+v: %v, want bad input", p, err)
		}
	}
}

func ptr[T any](v T) *T { return &v }

// The pinned peer's documents are taken over TLS, but one that brings an
// exec check (a program run as root) is refused, with the conflict shown
// and audited, until this director allows replicated exec checks; and a
// revision time far in the future does not win a conflict.
func TestPinnedPeerExecChecksAndClockSkew(t *testing.T) {
	ctx := context.Background()
	cert, fp := identity(t)

	// A pinned peer: its plain document is taken, over TLS.
	good := newRogue(t, plainState, time.Now(), &cert)
	d := newDirector(t, "198.18.0.3", 100)
	follow(t, d, "https://"+good.srv.Listener.Addr().String(), fp)
	d.start(&hub{}, nil)
	eventually(t, 5*time.Second, "the pinned peer's document stored", func() bool {
		return d.head().Hash == good.hash()
	})
	if toks, _ := good.tokens(); len(toks) == 0 || toks[0] != "Bearer peer-secret-token" {
		t.Fatalf("the pinned peer got Authorization %q", toks)
	}
	d.stop()

	// The same peer now serves an exec check: refused.
	evil := newRogue(t, execState, time.Now(), &cert)
	d = newDirector(t, "198.18.0.3", 100)
	follow(t, d, "https://"+evil.srv.Listener.Addr().String(), fp)
	d.start(&hub{}, nil)
	eventually(t, 5*time.Second, "the exec check refused in the status", func() bool {
		return strings.Contains(replicationError(d), "exec check")
	})
	r := d.status()
	if len(r.Replication.Conflicts) != 1 || !strings.Contains(r.Replication.Conflicts[0].Lost, "allow-replicated-exec") {
		t.Fatalf("conflicts shown: %+v", r.Replication.Conflicts)
	}
	if h := d.head(); h.Revision != 0 {
		t.Fatalf("the exec check was stored: %+v", h)
	}
	if len(audited(t, d, "replication conflict")) != 1 {
		t.Error("the refusal is not audited")
	}
	// Allowed on this director: taken.
	if _, err := d.core.SetNode(ctx, admin, server.NodePatch{AllowReplicatedExec: ptr(true)}); err != nil {
		t.Fatal(err)
	}
	eventually(t, 5*time.Second, "the exec check taken once allowed", func() bool {
		return d.head().Hash == evil.hash()
	})
	d.stop()

	// A split: this director changed its state, the peer claims a change an
	// hour from now. The local change is kept.
	future := newRogue(t, plainState, time.Now().Add(time.Hour), &cert)
	d = newDirector(t, "198.18.0.3", 100)
	local := canonical(t, strings.Replace(plainState, "198.18.0.11", "198.18.0.12", 1))
	if _, err := d.core.Apply(ctx, admin, strings.NewReader(local), "local", server.WriteOptions{NoApply: true}); err != nil {
		t.Fatal(err)
	}
	follow(t, d, "https://"+future.srv.Listener.Addr().String(), fp)
	d.start(&hub{}, nil)
	eventually(t, 5*time.Second, "the conflict shown", func() bool {
		r := d.status()
		return r != nil && r.Replication != nil && len(r.Replication.Conflicts) == 1
	})
	c := d.status().Replication.Conflicts[0]
	if c.Winner != "this director" || !strings.Contains(c.Lost, "ahead of this director's clock") {
		t.Fatalf("conflict %+v", c)
	}
	if d.head().Hash != store.DocumentHash([]byte(local)) {
		t.Fatal("the future-dated peer's document replaced the local change")
	}
}
