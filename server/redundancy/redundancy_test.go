package redundancy_test

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/ipvsctl/ipvsctl/ipvsmgr"
	"github.com/ipvsctl/ipvsctl/ipvsmgr/fakekernel"
	"github.com/ipvsctl/ipvsctl/ipvsmgr/vrrp"
	"github.com/ipvsctl/ipvsctl/server"
	"github.com/ipvsctl/ipvsctl/server/auth"
	"github.com/ipvsctl/ipvsctl/server/client"
	"github.com/ipvsctl/ipvsctl/server/daemon"
	"github.com/ipvsctl/ipvsctl/server/httpd"
	"github.com/ipvsctl/ipvsctl/server/metrics"
	"github.com/ipvsctl/ipvsctl/server/redundancy"
	"github.com/ipvsctl/ipvsctl/server/store"
)

// hub is a link between fake VRRP conns: an advert reaches every other conn
// of its VRID, unless the link is cut (a split). It carries the adverts'
// bytes through the real encoder and decoder, signed and checked by each
// conn's vrrp.Auth (settings.redundancy.auth).
type hub struct {
	mu    sync.Mutex
	conns map[*hubConn]bool
	cut   atomic.Bool
}

type hubPacket struct {
	b   []byte
	src netip.Addr
}

type hubConn struct {
	h       *hub
	self    netip.Addr
	vrid    uint8
	auth    atomic.Pointer[vrrp.Auth]
	in      chan hubPacket
	closed  chan struct{}
	once    sync.Once
	dropped sync.Map // reason -> *atomic.Uint64
}

func (h *hub) listen(self string) func(vrrp.ConnConfig) (vrrp.Conn, error) {
	return func(cfg vrrp.ConnConfig) (vrrp.Conn, error) {
		c := &hubConn{h: h, self: netip.MustParseAddr(self), vrid: cfg.VRID, in: make(chan hubPacket, 64), closed: make(chan struct{})}
		c.auth.Store(cfg.Auth)
		h.mu.Lock()
		defer h.mu.Unlock()
		if h.conns == nil {
			h.conns = map[*hubConn]bool{}
		}
		h.conns[c] = true
		return c, nil
	}
}

// inject sends raw bytes from src to every conn of the hub: a host on the link.
func (h *hub) inject(b []byte, src netip.Addr) {
	h.mu.Lock()
	defer h.mu.Unlock()
	for o := range h.conns {
		select {
		case o.in <- hubPacket{b, src}:
		default:
		}
	}
}

func (c *hubConn) Receive() (vrrp.Received, error) {
	for {
		select {
		case p := <-c.in:
			if len(p.b) < 2 || p.b[1] != c.vrid {
				continue
			}
			a, err := vrrp.ParseAuthAdvert(p.b, p.src, vrrp.GroupIPv4, c.auth.Load())
			if err != nil {
				c.drop(err)
				continue
			}
			return vrrp.Received{Advert: a, Src: p.src}, nil
		case <-c.closed:
			return vrrp.Received{}, errors.New("closed")
		}
	}
}

func (c *hubConn) drop(err error) {
	reason := "malformed"
	for r, e := range map[string]error{"auth_missing": vrrp.ErrAuthMissing, "auth_bad_hmac": vrrp.ErrAuthBadHMAC,
		"auth_unknown_key": vrrp.ErrAuthUnknownKey, "auth_replay": vrrp.ErrAuthReplay, "auth_stale": vrrp.ErrAuthStale} {
		if errors.Is(err, e) {
			reason = r
		}
	}
	n, _ := c.dropped.LoadOrStore(reason, &atomic.Uint64{})
	n.(*atomic.Uint64).Add(1)
}

// Stats is what a RawConn's says, for the status.
func (c *hubConn) Stats() vrrp.ConnStats {
	get := func(r string) uint64 {
		if n, ok := c.dropped.Load(r); ok {
			return n.(*atomic.Uint64).Load()
		}
		return 0
	}
	return vrrp.ConnStats{Malformed: get("malformed"), AuthMissing: get("auth_missing"), AuthBadHMAC: get("auth_bad_hmac"),
		AuthUnknownKey: get("auth_unknown_key"), AuthReplay: get("auth_replay"), AuthStale: get("auth_stale")}
}

func (c *hubConn) SetAuth(a *vrrp.Auth) { c.auth.Store(a) }

func (c *hubConn) Send(a *vrrp.Advert) error {
	if c.h.cut.Load() {
		return nil
	}
	b, err := a.MarshalAuth(c.self, vrrp.GroupIPv4, c.auth.Load())
	if err != nil {
		return err
	}
	c.h.mu.Lock()
	defer c.h.mu.Unlock()
	for o := range c.h.conns {
		if o == c || o.vrid != c.vrid {
			continue
		}
		select {
		case o.in <- hubPacket{b, c.self}:
		default:
		}
	}
	return nil
}

func (c *hubConn) Primary() netip.Addr { return c.self }

func (c *hubConn) Close() error {
	c.once.Do(func() {
		close(c.closed)
		c.h.mu.Lock()
		delete(c.h.conns, c)
		c.h.mu.Unlock()
	})
	return nil
}

// logAnnouncer notes each announcement in the director's log, a little
// after it began (a real socket's write takes time too): what the takeover
// started before it, that log shows beside it.
type logAnnouncer struct{ logs *lockedBuffer }

func (a logAnnouncer) Announce(addrs []netip.Addr) error {
	time.Sleep(5 * time.Millisecond)
	fmt.Fprintf(a.logs, "msg=\"fake: announced %v\"\n", addrs)
	return nil
}

// director is one ipvsctl daemon over fakes: its own database, kernel,
// host (VIPs) and sync daemons, its API on httptest, VRRP on the hub.
type director struct {
	t      *testing.T
	addr   string
	db     string
	st     *store.Store
	core   *server.Core
	k      *fakekernel.Kernel
	host   *fakekernel.Host
	sd     *fakekernel.SyncDaemons
	srv    *httptest.Server
	token  string
	own    *tls.Certificate // shown to the peer it follows (nil: none)
	link   atomic.Bool      // the VRRP interface is up
	httpUp atomic.Bool      // the API answers (false: a split)
	// listenedWithVIP: VRRP was started while the VIP was still up.
	listenedWithVIP atomic.Bool
	logs            *lockedBuffer
	reconciles      atomic.Int64 // by the daemon, since it started
	atStep          func(redundancy.TakeoverStep)
	cancel          context.CancelFunc
	done            chan error
}

type lockedBuffer struct {
	mu sync.Mutex
	b  strings.Builder
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

func newDirector(t *testing.T, addr string, priority int) *director {
	t.Helper()
	ctx := context.Background()
	d := &director{t: t, addr: addr, db: filepath.Join(t.TempDir(), "ipvsctl.db"), k: fakekernel.New(), host: fakekernel.NewHost(),
		sd: &fakekernel.SyncDaemons{}, logs: &lockedBuffer{}}
	d.link.Store(true)
	d.httpUp.Store(true)
	st, err := store.Open(ctx, d.db)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	d.st = st
	log := slog.New(slog.NewTextHandler(d.logs, &slog.HandlerOptions{Level: slog.LevelInfo}))
	if testing.Verbose() {
		log = slog.New(slog.NewTextHandler(os.Stderr, nil)).With("director", addr)
	}
	d.core = server.New(server.Config{Store: st, Log: log, OpenKernel: func() (*server.KernelConn, error) {
		return &server.KernelConn{Kernel: d.k, Host: d.host, Close: func() {}}, nil
	}})
	a := auth.New(st, auth.Config{Params: auth.CheapParams(), Log: log})
	root := &auth.Principal{User: "root", Role: auth.Admin, Via: "cli"}
	if err := a.AddUser(ctx, root, "peer", auth.Viewer, "correct horse battery"); err != nil {
		t.Fatal(err)
	}
	if d.token, _, err = a.CreateToken(ctx, root, "peer", "", 0); err != nil {
		t.Fatal(err)
	}
	h, err := httpd.Handler(httpd.Options{Core: d.core, Auth: a, Log: log})
	if err != nil {
		t.Fatal(err)
	}
	d.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if !d.httpUp.Load() {
			http.Error(w, "cut", http.StatusServiceUnavailable)
			return
		}
		h.ServeHTTP(w, r)
	}))
	t.Cleanup(func() { server.DaemonSideOf(d.core).EndLongPolls(); d.srv.CloseClientConnections(); d.srv.Close() })
	p := priority
	if _, err := d.core.SetNode(ctx, server.Actor{Name: "root", Via: "cli"}, server.NodePatch{Priority: &p, Address: &addr}); err != nil {
		t.Fatal(err)
	}
	return d
}

func (d *director) start(h *hub, log *slog.Logger) {
	if log == nil {
		log = slog.New(slog.NewTextHandler(d.logs, nil))
	}
	dm := daemon.New(d.core, d.st, log)
	dm.Interval, dm.Poll, dm.Snapshot = time.Hour, 20*time.Millisecond, 50*time.Millisecond
	dm.OnReconcile(func(server.ReconcileReport) { d.reconciles.Add(1) })
	redundancy.Attach(dm, redundancy.Hooks{
		Listen: func(cfg vrrp.ConnConfig) (vrrp.Conn, error) {
			if d.hasVIP() {
				d.listenedWithVIP.Store(true)
			}
			return h.listen(d.addr)(cfg)
		},
		Announcer:   func(string, bool, bool) (vrrp.Announcer, error) { return logAnnouncer{d.logs}, nil },
		LinkUp:      func(string) (bool, error) { return d.link.Load(), nil },
		LocalAddrs:  func() ([]netip.Addr, error) { return []netip.Addr{netip.MustParseAddr(d.addr)}, nil },
		SyncDaemons: func(*server.KernelConn) ipvsmgr.SyncDaemons { return d.sd },
		Peer:        func(pd server.PeerDial) (server.Peer, error) { return client.NewPeer(pd, d.own) },
		Tick:        20 * time.Millisecond,
		AtStep:      d.atStep,
	})
	ctx, cancel := context.WithCancel(context.Background())
	d.cancel, d.done = cancel, make(chan error, 1)
	go func() { d.done <- dm.Run(ctx) }()
	d.t.Cleanup(d.stop)
}

func (d *director) stop() {
	if d.cancel != nil {
		d.cancel()
		<-d.done
		d.cancel = nil
	}
}

func (d *director) peerWith(o *director) {
	d.t.Helper()
	u, tok := o.srv.URL, o.token
	if _, err := d.core.SetNode(context.Background(), server.Actor{Name: "root", Via: "cli"}, server.NodePatch{PeerURL: &u, PeerToken: &tok}); err != nil {
		d.t.Fatal(err)
	}
}

var vip = ipvsmgr.VIP{Interface: "eth0", Addr: netip.MustParseAddr("198.18.0.100")}

func (d *director) hasVIP() bool {
	ok, _ := d.host.HasVIP(context.Background(), vip)
	return ok
}

// status is what the director's daemon says of its VRRP and replication.
func (d *director) status() *server.RedundancyStatus {
	return server.DaemonSideOf(d.core).RedundancyStatus()
}

func (d *director) role() string {
	if r := d.status(); r != nil {
		return r.Role
	}
	return ""
}

func (d *director) head() *store.Head {
	h, err := d.st.Head(context.Background())
	if err != nil {
		d.t.Fatal(err)
	}
	return h
}

func eventually(t *testing.T, within time.Duration, what string, ok func() bool) time.Duration {
	t.Helper()
	start := time.Now()
	for time.Since(start) < within {
		if ok() {
			return time.Since(start)
		}
		time.Sleep(5 * time.Millisecond)
	}
	t.Fatalf("after %s: not %s", within, what)
	return 0
}

const pairState = `{"settings": {"redundancy": {"vrid": 51, "interface": "eth0", "advert_interval": 0.1,
  "unicast_peers": ["198.18.0.2", "198.18.0.3"], "sync_daemon": true, "track_interfaces": ["eth1"]}},
 "services": [{"name": "web", "address": "198.18.0.100", "port": 80, "interface": "eth0", "scheduler": "rr",
   "servers": [{"name": "r1", "address": "198.18.0.11"}]}]}`

var admin = server.Actor{Name: "alice", Via: "cli"}

func quiet() *slog.Logger { return slog.New(slog.DiscardHandler) }

// Two directors elect a master, which alone carries the VIP and runs the
// master sync daemon; the backup follows the master's desired state within a
// second and refuses local edits naming the master; the master's death, its
// fault (a tracked interface down) and its return move the VIP and switch
// the sync daemons.
func TestPairElectsReplicatesAndFailsOver(t *testing.T) {
	ctx := context.Background()
	h := &hub{}
	a, b := newDirector(t, "198.18.0.2", 200), newDirector(t, "198.18.0.3", 100)
	if _, err := a.core.Apply(ctx, admin, strings.NewReader(pairState), "state.json", server.WriteOptions{NoApply: true}); err != nil {
		t.Fatal(err)
	}
	a.peerWith(b)
	b.peerWith(a) // b's database is empty: it takes everything, redundancy included, from a
	a.start(h, quiet())
	b.start(h, quiet())

	eventually(t, 10*time.Second, "a master with the VIP and b a backup without it", func() bool {
		return a.role() == "master" && a.hasVIP() && b.role() == "backup" && !b.hasVIP()
	})
	eventually(t, 5*time.Second, "the IPVS service on both (the backup's ready for a takeover)", func() bool {
		ta, _ := a.k.Table(ctx)
		tb, _ := b.k.Table(ctx)
		return len(ta.Services) == 1 && len(tb.Services) == 1
	})
	eventually(t, 5*time.Second, "the master sync daemon on a and the backup one on b", func() bool {
		da, _ := a.sd.ListSyncDaemons(ctx)
		db, _ := b.sd.ListSyncDaemons(ctx)
		return len(da) == 1 && da[0].State == ipvsmgr.SyncMaster && len(db) == 1 && db[0].State == ipvsmgr.SyncBackup
	})
	if hb := b.head(); !strings.HasPrefix(hb.Author, server.ReplicatedAuthor+"198.18.0.2") || hb.Hash != a.head().Hash {
		t.Fatalf("b's revision %+v is not a copy of a's", hb)
	}

	// The backup refuses local edits, naming the master.
	_, err := b.core.DrainServer(ctx, admin, "web", "r1", server.WriteOptions{})
	// It names the master by its address once an advert told it, else by its peer URL.
	if server.CodeOf(err) != server.CodeBackup || !strings.Contains(err.Error(), "198.18.0.2") && !strings.Contains(err.Error(), "http://127.0.0.1:") {
		t.Fatalf("edit on the backup: %v (code %q)", err, server.CodeOf(err))
	}

	// A change on the master reaches the backup within a second.
	if _, err := a.core.AddServer(ctx, admin, "web", ipvsmgr.Server{Name: "r2", Address: "198.18.0.12"}, server.WriteOptions{}); err != nil {
		t.Fatal(err)
	}
	took := eventually(t, time.Second, "the master's change on the backup", func() bool { return b.head().Hash == a.head().Hash })
	t.Logf("a change on the master reached the backup in %s", took)
	eventually(t, 2*time.Second, "the replication lag reported as 0, in sync", func() bool {
		r := b.status()
		return r != nil && r.Replication != nil && r.Replication.InSync && r.Replication.LagSeconds == 0 && r.Replication.LastCopy != nil
	})

	// Status everywhere: the API's status and node, the metrics.
	cb, _ := client.New(b.srv.URL, b.token)
	sv, err := cb.Status(ctx)
	if err != nil || sv.Redundancy == nil || sv.Redundancy.Role != "backup" || sv.Redundancy.Master != "198.18.0.2" ||
		sv.Redundancy.MasterPriority != 200 || sv.Redundancy.LastAdvertAge == nil || *sv.Redundancy.LastAdvertAge > 1 ||
		sv.Redundancy.SyncDaemon.Running[0] != "backup sync daemon on eth0, syncid 0" || sv.Redundancy.Replication == nil {
		t.Fatalf("b's status through the API: %+v, %v", sv.Redundancy, err)
	}
	nv, err := cb.NodeSettings(ctx)
	if err != nil || nv.Priority != 100 || nv.Address != "198.18.0.3" || !nv.PeerTokenSet || nv.Redundancy == nil {
		t.Fatalf("b's node through the API: %+v, %v", nv, err)
	}
	rec := httptest.NewRecorder()
	metrics.New(a.core).Handler().ServeHTTP(rec, httptest.NewRequest("GET", "/metrics", nil))
	for _, want := range []string{`ipvsctl_vrrp_state{family="ipv4",state="master"} 1`, `ipvsctl_vrrp_state{family="ipv4",state="backup"} 0`,
		`ipvsctl_vrrp_transitions_total{state="master"} 1`, "ipvsctl_replication_lag_seconds "} {
		if !strings.Contains(rec.Body.String(), want) {
			t.Errorf("a's metrics lack %s", want)
		}
	}

	// A tracked interface of the master goes down: it resigns and b takes over.
	a.link.Store(false)
	took = eventually(t, 5*time.Second, "b master with the VIP, a in fault without it", func() bool {
		return b.role() == "master" && b.hasVIP() && a.role() == "fault" && !a.hasVIP()
	})
	t.Logf("fault on the master: the backup took over in %s", took)
	eventually(t, 5*time.Second, "the sync daemons switched", func() bool {
		da, _ := a.sd.ListSyncDaemons(ctx)
		db, _ := b.sd.ListSyncDaemons(ctx)
		return len(da) == 1 && da[0].State == ipvsmgr.SyncBackup && len(db) == 1 && db[0].State == ipvsmgr.SyncMaster
	})
	// Back up: a (priority 200) preempts.
	a.link.Store(true)
	eventually(t, 5*time.Second, "a master again, b backup", func() bool {
		return a.role() == "master" && a.hasVIP() && b.role() == "backup" && !b.hasVIP()
	})

	// The master stops (SIGTERM): it resigns, its VIP goes, b takes over at once.
	stopped := time.Now()
	a.stop()
	if a.hasVIP() {
		t.Fatal("a stopped with the VIP still up")
	}
	eventually(t, 5*time.Second, "b master with the VIP", func() bool { return b.role() == "master" && b.hasVIP() })
	t.Logf("SIGTERM of the master: the backup had the VIP %s later", time.Since(stopped).Round(time.Millisecond))
	st := b.status()
	if len(st.Transitions) < 4 {
		t.Errorf("b's transitions: %+v", st.Transitions)
	}
	last := st.Transitions[len(st.Transitions)-1]
	if last.To != "master" || last.Reason == "" {
		t.Errorf("last transition %+v", last)
	}
}

// After a split in which both directors were master and both changed the
// desired state, they converge on the newer change; the older one stays in
// its director's history, and the conflict is in the logs, the status and
// the audit of both.
func TestSplitBrainConvergesOnTheNewerRevision(t *testing.T) {
	ctx := context.Background()
	h := &hub{}
	a, b := newDirector(t, "198.18.0.2", 200), newDirector(t, "198.18.0.3", 100)
	if _, err := a.core.Apply(ctx, admin, strings.NewReader(pairState), "state.json", server.WriteOptions{NoApply: true}); err != nil {
		t.Fatal(err)
	}
	a.peerWith(b)
	b.peerWith(a)
	a.start(h, nil)
	b.start(h, nil)
	eventually(t, 10*time.Second, "a master, b backup, in sync", func() bool {
		return a.role() == "master" && b.role() == "backup" && a.head().Hash == b.head().Hash
	})

	// The link between them fails: each is master, and each is changed.
	h.cut.Store(true)
	for _, d := range []*director{a, b} {
		d.httpUp.Store(false)
		d.srv.CloseClientConnections()
	}
	eventually(t, 5*time.Second, "both master", func() bool { return a.role() == "master" && b.role() == "master" })
	if _, err := a.core.AddServer(ctx, admin, "web", ipvsmgr.Server{Name: "from-a", Address: "198.18.0.12"}, server.WriteOptions{}); err != nil {
		t.Fatal(err)
	}
	lost := a.head()
	time.Sleep(10 * time.Millisecond)
	if _, err := b.core.AddServer(ctx, admin, "web", ipvsmgr.Server{Name: "from-b", Address: "198.18.0.13"}, server.WriteOptions{}); err != nil {
		t.Fatal(err)
	}
	won := b.head()

	// The link is back: a is master again, and both have b's newer change.
	h.cut.Store(false)
	a.httpUp.Store(true)
	b.httpUp.Store(true)
	eventually(t, 15*time.Second, "one desired state on both", func() bool {
		return a.role() == "master" && b.role() == "backup" && a.head().Hash == b.head().Hash
	})
	st, _, err := a.st.Current(ctx)
	if err != nil {
		t.Fatal(err)
	}
	names := []string{}
	for _, rs := range st.Services[0].Servers {
		names = append(names, rs.Name)
	}
	if strings.Join(names, ",") != "r1,from-b" {
		t.Fatalf("converged on servers %v, want b's newer change (r1,from-b)", names)
	}
	if b.head().Revision != won.Revision {
		t.Errorf("b, the winner, made another revision: %d, was %d", b.head().Revision, won.Revision)
	}
	old, err := a.st.Revision(ctx, lost.Revision)
	if err != nil || len(old.State.Services[0].Servers) != 2 || old.State.Services[0].Servers[1].Name != "from-a" {
		t.Fatalf("a's diverging revision %d is not kept in its history: %+v %v", lost.Revision, old, err)
	}
	// The loser, where the change was lost, reports it (the winner too when
	// it saw the peer's diverging revision before the peer took its own).
	var r *server.RedundancyStatus
	eventually(t, 5*time.Second, "a reporting the conflict", func() bool {
		r = a.status()
		return r != nil && r.Replication != nil && len(r.Replication.Conflicts) == 1
	})
	c := r.Replication.Conflicts[0]
	if c.Winner != "peer 198.18.0.3" || c.Revision != a.head().Revision || !strings.Contains(c.Lost, "local revision "+strconv.FormatInt(lost.Revision, 10)+" by alice") {
		t.Errorf("a's conflict: %+v", c)
	}
	entries, err := a.st.Audit(ctx, store.AuditFilter{Action: "replication conflict"})
	if err != nil || len(entries) != 1 || !strings.Contains(entries[0].Detail, "lost local revision") {
		t.Errorf("a's audit: %+v, %v", entries, err)
	}
	if !strings.Contains(a.logs.String(), "replication conflict") {
		t.Error("a did not log the conflict")
	}
	if r := b.status(); len(r.Replication.Conflicts) > 0 && r.Replication.Conflicts[0].Winner != "this director" {
		t.Errorf("b's conflict: %+v", r.Replication.Conflicts[0])
	}
}

// pairOf is directors 198.18.0.2 and .3 at these priorities, each with
// pairState stored (no replication between them).
func pairOf(t *testing.T, prioA, prioB int) (a, b *director) {
	t.Helper()
	return pairOfDoc(t, pairState, prioA, prioB)
}

// withSyncWait is pairState with settings.redundancy.preempt_sync_wait.
func withSyncWait(seconds string) string {
	return strings.Replace(pairState, `"sync_daemon": true`, `"sync_daemon": true, "preempt_sync_wait": `+seconds, 1)
}

func pairOfDoc(t *testing.T, doc string, prioA, prioB int) (a, b *director) {
	t.Helper()
	a, b = newDirector(t, "198.18.0.2", prioA), newDirector(t, "198.18.0.3", prioB)
	for _, d := range []*director{a, b} {
		if _, err := d.core.Apply(context.Background(), admin, strings.NewReader(doc), "state.json", server.WriteOptions{NoApply: true}); err != nil {
			t.Fatal(err)
		}
	}
	return a, b
}

// node set --priority reaches the running VRRP instance: the master's next
// adverts carry the new priority (the backup hears it), with no restart,
// so no resignation and no transition on either director and the VIP never
// leaves the master; raised above the master, the backup preempts it.
func TestNodePriorityChangeWithoutRestart(t *testing.T) {
	ctx := context.Background()
	h := &hub{}
	// No wait for the sync daemon before a preemption: that has tests of
	// its own (failback_test.go).
	a, b := pairOfDoc(t, withSyncWait("0"), 200, 100)
	a.start(h, nil)
	b.start(h, nil)
	eventually(t, 10*time.Second, "a master with the VIP, b backup hearing priority 200", func() bool {
		r := b.status()
		return a.role() == "master" && a.hasVIP() && r != nil && r.Role == "backup" && r.MasterPriority == 200
	})
	a.host.Ops()
	countsA, countsB := a.status().TransitionCounts, b.status().TransitionCounts

	p := 150
	if _, err := a.core.SetNode(ctx, admin, server.NodePatch{Priority: &p}); err != nil {
		t.Fatal(err)
	}
	eventually(t, 5*time.Second, "b hearing a's adverts at priority 150", func() bool {
		return b.status().MasterPriority == 150
	})
	time.Sleep(500 * time.Millisecond) // five advert intervals: a restart's resignation and takeover would show
	ra, rb := a.status(), b.status()
	if ra.Role != "master" || ra.Priority != 150 || rb.Role != "backup" {
		t.Fatalf("after the change: a %s at %d, b %s", ra.Role, ra.Priority, rb.Role)
	}
	if !maps.Equal(ra.TransitionCounts, countsA) || !maps.Equal(rb.TransitionCounts, countsB) {
		t.Errorf("transitions: a %v (was %v), b %v (was %v)", ra.TransitionCounts, countsA, rb.TransitionCounts, countsB)
	}
	if ops := a.host.Ops(); len(ops) != 0 {
		t.Errorf("a's VIP moved: %q", ops)
	}
	if logs := a.logs.String(); strings.Contains(logs, "VRRP restarts") || !strings.Contains(logs, "VRRP priority changed, without a restart") {
		t.Errorf("a's log of the change:\n%s", logs)
	}

	// Raised above the master, the backup preempts (the election goes on).
	p = 250
	if _, err := b.core.SetNode(ctx, admin, server.NodePatch{Priority: &p}); err != nil {
		t.Fatal(err)
	}
	eventually(t, 5*time.Second, "b master with the VIP, a backup without it", func() bool {
		return b.role() == "master" && b.hasVIP() && a.role() == "backup" && !a.hasVIP()
	})
	if last := b.status().Transitions; last[len(last)-1].Reason != "preempting a master of lower priority 150" {
		t.Errorf("b's takeover: %+v", last[len(last)-1])
	}
}

// A backup records, ahead of a takeover, the VIPs it would add as master
// (the ledger's intent); its takeover then writes the ledger only after the
// VIP is up, and after its gratuitous ARPs: nothing it starts competes with
// them. Its VIP up, it makes no reconcile and no IPVS change: it has
// nothing left to do but the record.
func TestBackupRecordsTheIntentAndTheTakeoverWritesAfter(t *testing.T) {
	ctx := context.Background()
	h := &hub{}
	a, b := pairOf(t, 200, 100)
	a.start(h, nil)
	b.start(h, nil)
	ledger := func(d *director) *ipvsmgr.Ledger {
		l, err := d.st.LoadLedger(ctx)
		if err != nil {
			t.Fatal(err)
		}
		return l
	}
	eventually(t, 10*time.Second, "b backup, its intent recorded", func() bool {
		l := ledger(b)
		return b.role() == "backup" && len(l.VIPs) == 0 && len(l.Intent) == 1 && l.Intent[0] == vip
	})
	time.Sleep(100 * time.Millisecond) // b's start-up reconciles are over
	reconciles := b.reconciles.Load()
	b.k.Ops()
	a.stop()
	const recordedLine = "VIPs recorded in the ledger after the takeover"
	eventually(t, 5*time.Second, "b master with the VIP, recorded", func() bool {
		l := ledger(b)
		// The log line follows the ledger's write: wait for both.
		return b.role() == "master" && b.hasVIP() && len(l.VIPs) == 1 && l.VIPs[0] == vip &&
			strings.Contains(b.logs.String(), recordedLine)
	})
	time.Sleep(200 * time.Millisecond) // ten of the runner's ticks
	logs := b.logs.String()
	moved := strings.Index(logs, "family=ipv4 to=master took=")
	announced := moved + strings.Index(logs[max(moved, 0):], "fake: announced")
	recorded := strings.Index(logs, recordedLine)
	if moved < 0 || announced < moved || recorded < announced {
		t.Errorf("b's log of the takeover (want the VIP moved, announced, then recorded):\n%s", logs)
	}
	if n, ops := b.reconciles.Load()-reconciles, b.k.Ops(); n != 0 || len(ops) != 0 {
		t.Errorf("b's takeover: %d reconciles, IPVS changes %q; want none", n, ops)
	}
}

// A takeover whose VIP add failed leaves it to a reconcile, which adds it.
func TestTakeoverVIPAddFailureIsRetried(t *testing.T) {
	h := &hub{}
	a, b := pairOf(t, 200, 100)
	a.start(h, quiet())
	b.start(h, nil)
	eventually(t, 10*time.Second, "a master, b backup", func() bool { return a.role() == "master" && b.role() == "backup" })
	b.host.FailAdds(1)
	a.stop()
	eventually(t, 5*time.Second, "b master with the VIP", func() bool { return b.role() == "master" && b.hasVIP() })
	if logs := b.logs.String(); !strings.Contains(logs, "VIP change on a change of role failed") {
		t.Errorf("b's log has no failed VIP add:\n%s", logs)
	}
}

// A director that starts after a crash with a VIP up that it added removes
// it before it speaks VRRP, so it never holds the VIP beside the master:
// one its ledger records, and one only its intent has (the crash came
// between a takeover's add and its record).
func TestRestartRemovesItsVIPsBeforeVRRP(t *testing.T) {
	for _, tc := range []struct {
		name   string
		ledger ipvsmgr.Ledger
	}{
		{"recorded", ipvsmgr.Ledger{VIPs: []ipvsmgr.VIP{vip}}},
		{"in the intent only", ipvsmgr.Ledger{Intent: []ipvsmgr.VIP{vip}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ctx := context.Background()
			h := &hub{}
			a, b := pairOf(t, 50, 100)
			b.start(h, quiet())
			eventually(t, 5*time.Second, "b master", func() bool { return b.role() == "master" && b.hasVIP() })
			// a crashed as master: its VIP is up.
			if _, err := a.host.EnsureVIP(ctx, vip); err != nil {
				t.Fatal(err)
			}
			if err := a.st.SaveLedger(ctx, &tc.ledger); err != nil {
				t.Fatal(err)
			}
			a.host.Ops()
			a.start(h, quiet())
			eventually(t, 5*time.Second, "a backup", func() bool { return a.role() == "backup" })
			if a.listenedWithVIP.Load() {
				t.Error("a spoke VRRP with the VIP still up")
			}
			if ops := a.host.Ops(); strings.Join(ops, ";") != "ip addr del 198.18.0.100 dev eth0" {
				t.Errorf("a's host changes: %q", ops)
			}
			if !b.hasVIP() || b.role() != "master" {
				t.Error("b lost the VIP")
			}
			if l, _ := a.st.LoadLedger(ctx); len(l.VIPs) != 0 || len(l.Intent) != 1 {
				t.Errorf("a's ledger after the restart: %+v", l)
			}
		})
	}
}
