// Package servertest runs a daemon for tests: a real SQLite store, the fake
// kernel and host, the API on a real socket, and a user and token per role.
package servertest

import (
	"context"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/ipvsctl/ipvsctl/ipvsmgr/fakekernel"
	"github.com/ipvsctl/ipvsctl/server"
	"github.com/ipvsctl/ipvsctl/server/auth"
	"github.com/ipvsctl/ipvsctl/server/client"
	"github.com/ipvsctl/ipvsctl/server/daemon"
	"github.com/ipvsctl/ipvsctl/server/events"
	"github.com/ipvsctl/ipvsctl/server/httpd"
	"github.com/ipvsctl/ipvsctl/server/metrics"
	"github.com/ipvsctl/ipvsctl/server/redundancy"
	"github.com/ipvsctl/ipvsctl/server/store"
)

// Rig is a running daemon.
type Rig struct {
	DB     string
	Store  *store.Store
	Core   *server.Core
	Auth   *auth.Auth
	Events *events.Log
	Kernel *fakekernel.Kernel
	Host   *fakekernel.Host
	URL    string // the API over TCP
	// Handler is the API's and the panel's handler, for a test that
	// serves it its own way (TLS).
	Handler http.Handler
	Socket  string // the local CLI's socket
	Tokens  map[auth.Role]string
	// Contract counts what the rig checked against the OpenAPI document:
	// every API request over URL and its answer (servertest/openapi.go).
	Contract *Contract
	// Password is every test user's password; the users are named admin, operator and viewer.
	Password string
}

// Option changes how Start builds the daemon.
type Option func(*server.Config)

// WithRealServerSSH has the daemon log in to real servers with rs.
func WithRealServerSSH(rs server.RealServerSSH) Option {
	return func(c *server.Config) { c.RealServerSSH = rs }
}

// WithAuth has the daemon's logins, sessions and tokens configured by ac
// (cheap password hashing unless ac says otherwise).
func WithAuth(ac auth.Config) Option {
	return func(c *server.Config) {
		if ac.Params == (auth.Params{}) {
			ac.Params = auth.CheapParams()
		}
		c.Auth = auth.New(c.Store, ac)
	}
}

// Start runs a daemon over a new database in t.TempDir() until the test ends.
func Start(t testing.TB, with ...Option) *Rig {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	dir := t.TempDir()
	g := &Rig{DB: filepath.Join(dir, "ipvsctl.db"), Kernel: fakekernel.New(), Host: fakekernel.NewHost(),
		Tokens: map[auth.Role]string{}, Password: "correct horse battery"}
	st, err := store.Open(ctx, g.DB)
	if err != nil {
		t.Fatal(err)
	}
	g.Store = st
	log := slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelError}))
	evs, err := events.New(ctx, st, log)
	if err != nil {
		t.Fatal(err)
	}
	g.Events = evs
	cfg := server.Config{Store: st, Log: log, Events: evs, OpenKernel: func() (*server.KernelConn, error) {
		return &server.KernelConn{Kernel: g.Kernel, Host: g.Host, Close: func() {}}, nil
	}}
	for _, o := range with {
		o(&cfg)
	}
	if cfg.Auth == nil {
		cfg.Auth = auth.New(st, auth.Config{Params: auth.CheapParams(), Log: log, OnLockout: server.LockoutEvent(evs)})
	}
	g.Auth = cfg.Auth
	g.Core = server.New(cfg)
	d := daemon.New(g.Core, st, log)
	redundancy.Attach(d, redundancy.Hooks{})
	d.Interval, d.Poll, d.Snapshot = time.Hour, 20*time.Millisecond, 50*time.Millisecond
	d.Directors = func(dl server.PeerDial) (daemon.DirectorPeer, error) { return client.NewPeer(dl, nil) } // loopback http: no certificate
	g.addUsers(t, ctx)
	m := metrics.New(g.Core)
	d.Observe(m)
	opts := httpd.Options{Core: g.Core, Auth: g.Auth, Log: log, Metrics: m.Handler(), Instrument: m.Instrument}
	pnl, err := httpd.NewPanel(g.Core, g.Auth, time.Now(), opts)
	if err != nil {
		t.Fatal(err)
	}
	opts.Panel = pnl
	h, err := httpd.Handler(opts)
	if err != nil {
		t.Fatal(err)
	}
	g.Handler = h
	g.Contract = &Contract{}
	ts := httptest.NewServer(validating(t, h, g.Contract, t.Errorf))
	g.URL = ts.URL
	g.Socket = g.DB + ".sock"
	ln, err := httpd.ListenUnix(g.Socket)
	if err != nil {
		t.Fatal(err)
	}
	local := httpd.NewHTTPServer(httpd.LocalHandler(opts), log)
	go local.Serve(ln)
	done := make(chan struct{})
	go func() { d.Run(ctx); close(done) }()
	for g.Core.Snapshot() == nil || g.Core.Snapshot().Table == nil { // the daemon has opened the kernel and read it
		if ctx.Err() != nil {
			break
		}
		time.Sleep(2 * time.Millisecond)
	}
	t.Cleanup(func() {
		ts.Close()
		t.Logf("OpenAPI: %d API calls checked against the document (%d requests it refuses, refused by the API too)", g.Contract.Checked.Load(), g.Contract.Refused.Load())
		local.Close()
		cancel()
		<-done
		st.Close()
	})
	return g
}

// addUsers adds the users admin, operator and viewer, each with the rig's
// password and a token of its role.
func (g *Rig) addUsers(t testing.TB, ctx context.Context) {
	root := &auth.Principal{User: "root", Role: auth.Admin, Via: "cli"}
	for _, role := range []auth.Role{auth.Admin, auth.Operator, auth.Viewer} {
		if err := g.Auth.AddUser(ctx, root, role.String(), role, g.Password); err != nil {
			t.Fatal(err)
		}
		tok, _, err := g.Auth.CreateToken(ctx, root, role.String(), "", 0)
		if err != nil {
			t.Fatal(err)
		}
		g.Tokens[role] = tok
	}
}

// PanelLogin logs user in through the panel's login form and returns its
// session cookie.
func (g *Rig) PanelLogin(t testing.TB, user string) *http.Cookie {
	t.Helper()
	resp, _ := g.Panel(t, nil, "POST", "/login", url.Values{"user": {user}, "password": {g.Password}})
	for _, c := range resp.Cookies() {
		if c.Name == auth.CookieName && c.Value != "" {
			return c
		}
	}
	t.Fatalf("login as %s: %s, no session cookie", user, resp.Status)
	return nil
}

// Panel sends a panel request (a form when form is not nil) with the session
// cookie, if any, and does not follow a redirect.
func (g *Rig) Panel(t testing.TB, cookie *http.Cookie, method, path string, form url.Values) (*http.Response, string) {
	t.Helper()
	req, err := http.NewRequest(method, g.URL+path, strings.NewReader(form.Encode()))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Accept", "text/html")
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	if cookie != nil {
		req.AddCookie(cookie)
	}
	noRedirect := &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	resp, err := noRedirect.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	return resp, string(b)
}

// API sends an API request with role's token.
func (g *Rig) API(t testing.TB, role auth.Role, method, path, body string) (*http.Response, string) {
	t.Helper()
	req, err := http.NewRequest(method, g.URL+path, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer "+g.Tokens[role])
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	return resp, string(b)
}
