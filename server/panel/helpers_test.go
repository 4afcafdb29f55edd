package panel

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"net/url"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/ipvsctl/ipvsctl/ipvsmgr"
	"github.com/ipvsctl/ipvsctl/ipvsmgr/fakekernel"
	"github.com/ipvsctl/ipvsctl/ipvsmgr/tune"
	"github.com/ipvsctl/ipvsctl/ipvsmgr/vrrp"
	"github.com/ipvsctl/ipvsctl/server"
	"github.com/ipvsctl/ipvsctl/server/auth"
	"github.com/ipvsctl/ipvsctl/server/daemon"
	"github.com/ipvsctl/ipvsctl/server/redundancy"
	"github.com/ipvsctl/ipvsctl/server/store"
)

// trafficKernel is the fake kernel with made-up traffic: every real server
// in the kernel gets connections and rates, and one at weight 0 loses a
// connection per read (a drain counting down).
type trafficKernel struct {
	*fakekernel.Kernel
	mu      sync.Mutex
	reads   int
	drain   map[string]uint32
	readErr error
	failOn  func(ipvsmgr.Op) error
}

func (k *trafficKernel) setReadErr(err error) {
	k.mu.Lock()
	defer k.mu.Unlock()
	k.readErr = err
}

func (k *trafficKernel) setFailOn(f func(ipvsmgr.Op) error) {
	k.mu.Lock()
	defer k.mu.Unlock()
	k.failOn = f
}

// Apply refuses what failOn refuses (as the kernel does, op by op).
func (k *trafficKernel) Apply(ctx context.Context, ops []ipvsmgr.Op) []error {
	k.mu.Lock()
	f := k.failOn
	k.mu.Unlock()
	errs := make([]error, len(ops))
	var pass []ipvsmgr.Op
	var at []int
	for i, op := range ops {
		if f != nil {
			if errs[i] = f(op); errs[i] != nil {
				continue
			}
		}
		pass = append(pass, op)
		at = append(at, i)
	}
	for j, err := range k.Kernel.Apply(ctx, pass) {
		errs[at[j]] = err
	}
	return errs
}

func (k *trafficKernel) Table(ctx context.Context) (*ipvsmgr.Table, error) {
	k.mu.Lock()
	rerr := k.readErr
	k.mu.Unlock()
	if rerr != nil {
		return nil, rerr
	}
	t, err := k.Kernel.Table(ctx)
	if err != nil {
		return nil, err
	}
	k.mu.Lock()
	defer k.mu.Unlock()
	k.reads++
	if k.drain == nil {
		k.drain = map[string]uint32{}
	}
	for si, s := range t.Services {
		s.Stats = ipvsmgr.Stats{}
		for di, d := range s.Dests {
			key := s.Key.String() + d.Key.String()
			base := uint32(20 + 7*si + 3*di + (k.reads % 5))
			if d.Weight == 0 {
				left, ok := k.drain[key]
				if !ok {
					left = 12
				}
				if left > 0 {
					left--
				}
				k.drain[key] = left
				d.ActiveConns, d.InactiveConns = left, 0
				d.Stats = ipvsmgr.Stats{}
			} else {
				delete(k.drain, key)
				d.ActiveConns, d.InactiveConns = base*d.Weight, base/2
				d.Stats = ipvsmgr.Stats{CPS: uint64(base) * 3, InPPS: uint64(base) * 40, OutPPS: uint64(base) * 35,
					InBPS: uint64(base) * 52000, OutBPS: uint64(base) * 610000, Conns: uint64(base) * 1000}
			}
			s.Stats.CPS += d.Stats.CPS
			s.Stats.InPPS += d.Stats.InPPS
			s.Stats.OutPPS += d.Stats.OutPPS
			s.Stats.InBPS += d.Stats.InBPS
			s.Stats.OutBPS += d.Stats.OutBPS
		}
	}
	return t, nil
}

// testPassword is the stored users' password (the fake sessions check their own).
const testPassword = "correct horse battery"

// fakeAuth is the sessions the panel is given (Deps.Who, Login, Logout,
// ChangePassword): a cookie naming user and role. The users, tokens and
// audit the screens show are the core's, in the real store.
type fakeAuth struct {
	mu     sync.Mutex
	users  map[string]string // name -> role
	pw     map[string]string // own passwords (ChangePassword)
	logins []string
	fails  int
}

const testCookie = "test_session"

func (a *fakeAuth) who(r *http.Request) (string, string, bool) {
	c, err := r.Cookie(testCookie)
	if err != nil {
		return "", "", false
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	role, ok := a.users[c.Value]
	return c.Value, role, ok
}

func (a *fakeAuth) login(w http.ResponseWriter, r *http.Request, user, pass string) error {
	a.mu.Lock()
	defer a.mu.Unlock()
	if _, ok := a.users[user]; !ok || pass != "pw-"+user {
		a.fails++
		if a.fails > 5 {
			return &LoginError{Msg: "too many attempts; wait 30 s"}
		}
		return &LoginError{Msg: "wrong user name or password"}
	}
	a.logins = append(a.logins, user)
	http.SetCookie(w, &http.Cookie{Name: testCookie, Value: user, Path: "/", HttpOnly: true, SameSite: http.SameSiteStrictMode})
	return nil
}

func (a *fakeAuth) logout(w http.ResponseWriter, r *http.Request) {
	http.SetCookie(w, &http.Cookie{Name: testCookie, Path: "/", MaxAge: -1})
}

// env is a panel over a real store, a core and a running daemon with a fake kernel.
type env struct {
	t      *testing.T
	core   *server.Core
	st     *store.Store
	path   string // of the database
	kernel *trafficKernel
	auth   *fakeAuth
	panel  *Panel
	h      http.Handler
	cancel context.CancelFunc
	done   chan struct{}
}

func newEnv(t testing.TB) *env { return newEnvTimed(t, false) }

// newEnvTimed with realistic true runs the daemon and the sampler at their
// production periods (kernel read every 2 s, full reconcile every 10 s,
// samples every 10 s), for measurements; else fast, for tests.
func newEnvTimed(t testing.TB, realistic bool, with ...func(*server.Config)) *env {
	t.Helper()
	return newEnvOf(t, envOptions{realistic: realistic, core: with})
}

// envOptions: the core's configuration, and the daemon's periods after
// realistic sets them.
type envOptions struct {
	realistic bool
	core      []func(*server.Config)
	daemon    func(*daemon.Daemon)
	panel     func(*Panel) // before its sampler starts
}

func newEnvOf(t testing.TB, o envOptions) *env {
	t.Helper()
	realistic, with := o.realistic, o.core
	ctx, cancel := context.WithCancel(context.Background())
	path := filepath.Join(t.TempDir(), "ipvsctl.db")
	st, err := store.Open(ctx, path)
	if err != nil {
		t.Fatal(err)
	}
	k := &trafficKernel{Kernel: fakekernel.New()}
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	cfg := server.Config{Store: st, Log: log, OpenKernel: func() (*server.KernelConn, error) {
		return &server.KernelConn{Kernel: k, Close: func() {}}, nil
	}, TuneHost: tune.DirHost{Root: t.TempDir()}, // no setting to read: no tuning badge unless a test gives a host
		Auth: auth.New(st, auth.Config{Params: auth.CheapParams(), Log: log})}
	for _, f := range with {
		f(&cfg)
	}
	core := server.New(cfg)
	d := daemon.New(core, st, log)
	d.Interval, d.Poll, d.Snapshot = 200*time.Millisecond, 20*time.Millisecond, 50*time.Millisecond
	// A seeded pair's VRRP must not speak on the host's interfaces.
	redundancy.Attach(d, redundancy.Hooks{Listen: func(vrrp.ConnConfig) (vrrp.Conn, error) { return nil, errors.New("panel tests speak no VRRP") }})
	if realistic {
		d.Interval, d.Poll, d.Snapshot = 10*time.Second, time.Second, server.PollInterval
	}
	if o.daemon != nil {
		o.daemon(d)
	}
	fa := &fakeAuth{users: map[string]string{"alice": "admin", "oscar": "operator", "vic": "viewer"}, pw: map[string]string{"alice": "pw-alice"}}
	for _, name := range []string{"alice", "vic"} { // the users screen's, in the store
		if err := core.AddUser(ctx, server.Actor{Name: "root", Via: "test"}, server.NewUser{Name: name, Role: fa.users[name], Password: testPassword}); err != nil {
			t.Fatal(err)
		}
	}
	p, err := New(Deps{Core: core, Who: fa.who, Login: fa.login, Logout: fa.logout, Log: log,
		NoUsers:        func(context.Context) bool { return false },
		ChangePassword: fa.changePassword,
	})
	if err != nil {
		t.Fatal(err)
	}
	if !realistic {
		p.sampler.every = 50 * time.Millisecond
	}
	if o.panel != nil {
		o.panel(p)
	}
	e := &env{core: core, st: st, path: path, kernel: k, auth: fa, panel: p, h: p.Routes(), cancel: cancel, done: make(chan struct{})}
	var wg sync.WaitGroup
	wg.Add(2)
	go func() { defer wg.Done(); d.Run(ctx) }()
	go func() { defer wg.Done(); p.RunSampler(ctx) }()
	go func() { wg.Wait(); close(e.done) }()
	t.Cleanup(func() {
		cancel()
		<-e.done
		st.Close()
	})
	// Wait for the first snapshot.
	for i := 0; i < 200 && core.Snapshot() == nil; i++ {
		time.Sleep(10 * time.Millisecond)
	}
	return e
}

// seed stores a state directly (not through the panel).
func (e *env) seed(t testing.TB, st *ipvsmgr.State) int64 {
	t.Helper()
	doc, err := json.Marshal(st)
	if err != nil {
		t.Fatal(err)
	}
	res, err := e.core.Apply(context.Background(), server.Actor{Name: "seed", Via: "test"}, bytes.NewReader(doc), "seed", server.WriteOptions{NoWait: true})
	if err != nil {
		t.Fatal(err)
	}
	return res.Revision
}

func webState() *ipvsmgr.State {
	one, three := 1, 3
	return &ipvsmgr.State{Services: []ipvsmgr.Service{{
		Name: "web", Protocol: "tcp", Address: "198.18.0.100", Port: 80, Scheduler: "wrr",
		Servers: []ipvsmgr.Server{{Name: "r1", Address: "198.18.0.11", Weight: &one}, {Name: "r2", Address: "198.18.0.12", Weight: &three, UpperThreshold: 500}},
	}}}
}

type resp struct {
	Code   int
	Body   string
	Header http.Header
}

func (e *env) do(t testing.TB, user, method, target string, form url.Values) resp {
	t.Helper()
	var body io.Reader
	if form != nil {
		body = strings.NewReader(form.Encode())
	}
	r := httptest.NewRequest(method, target, body)
	if form != nil {
		r.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	}
	if method == http.MethodPost {
		r.Header.Set("Sec-Fetch-Site", "same-origin")
	}
	if user != "" {
		r.AddCookie(&http.Cookie{Name: testCookie, Value: user})
	}
	w := httptest.NewRecorder()
	e.h.ServeHTTP(w, r)
	return resp{Code: w.Code, Body: w.Body.String(), Header: w.Header()}
}

func (e *env) get(t testing.TB, user, target string) resp {
	t.Helper()
	return e.do(t, user, http.MethodGet, target, nil)
}

func (e *env) post(t testing.TB, user, target string, form url.Values) resp {
	t.Helper()
	if form == nil {
		form = url.Values{}
	}
	return e.do(t, user, http.MethodPost, target, form)
}

// waitFor polls cond until it holds or 5 s pass.
func waitFor(t testing.TB, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for time.Now().Before(deadline) {
		if cond() {
			return
		}
		time.Sleep(20 * time.Millisecond)
	}
	t.Fatalf("timed out waiting for %s", what)
}

func (a *fakeAuth) changePassword(_ context.Context, user, old, nw string) error {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.pw[user] != old {
		return &LoginError{Msg: "the current password is wrong"}
	}
	a.pw[user] = nw
	return nil
}

func httptestRequest(method, target, body string) *http.Request {
	r := httptest.NewRequest(method, target, strings.NewReader(body))
	if body != "" {
		r.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	}
	return r
}

func serve(e *env, r *http.Request) *httptest.ResponseRecorder {
	w := httptest.NewRecorder()
	e.h.ServeHTTP(w, r)
	return w
}

func bytesReader(b []byte) *strings.Reader { return strings.NewReader(string(b)) }
