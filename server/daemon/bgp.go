package daemon

import (
	"context"
	"crypto/sha256"
	"encoding/json"
	"fmt"
	"maps"
	"net"
	"net/netip"
	"slices"
	"sync"
	"time"

	"github.com/ipvsctl/ipvsctl/ipvsmgr"
	"github.com/ipvsctl/ipvsctl/ipvsmgr/bgp"
	"github.com/ipvsctl/ipvsctl/server"
	"github.com/ipvsctl/ipvsctl/server/store"
)

// BGPWithdrawWait is how long a stopping director waits, its routes
// withdrawn, before it closes the sessions.
const BGPWithdrawWait = time.Second

// startBGP runs the BGP speaker while the desired state has settings.bgp:
// every half second, and at once when the node settings change, it decides
// which VIPs the director can serve and announces exactly those. When ctx
// ends it withdraws every route, waits BGPWithdrawWait and stops.
func (d *Daemon) startBGP(ctx context.Context) <-chan struct{} {
	done := make(chan struct{})
	go func() {
		defer close(done)
		(&bgpRunner{d: d}).run(ctx)
	}()
	return done
}

type bgpRunner struct {
	d       *Daemon
	sp      *bgp.Speaker
	key     string
	warnRev int64
	warn    []ipvsmgr.Problem
	drainSt bgpDrain

	// sessions is each router's session as last told of (events).
	sessions map[string]bool

	peersMu sync.Mutex
	// others is what the directors this one follows said last (and the
	// others they passed on); selfCert is this director's certificate.
	others   []bgp.DirectorFingerprints
	selfCert string
}

func (r *bgpRunner) run(ctx context.Context) {
	tick := time.NewTicker(500 * time.Millisecond)
	defer tick.Stop()
	defer r.stop(BGPWithdrawWait)
	actx, cancel := context.WithCancel(ctx)
	asked := make(chan struct{})
	go func() {
		defer close(asked)
		r.askDirectors(actx)
	}()
	defer func() { cancel(); <-asked }()
	for {
		r.step(ctx)
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		case <-r.d.side.BGPWake():
		}
	}
}

func (r *bgpRunner) stop(wait time.Duration) {
	if r.sp == nil {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), wait+5*time.Second)
	defer cancel()
	r.d.Log.Info("BGP: withdrawing every route and stopping")
	r.sp.Stop(ctx, wait)
	r.sp, r.key = nil, ""
}

// step brings the BGP speaker to the desired state and this director's
// node settings, and publishes what it announces.
func (r *bgpRunner) step(ctx context.Context) {
	sk := r.d.sk
	rev, desired := sk.newest()
	if desired != nil && desired.Settings.BGP != nil {
		rev, desired = sk.current() // what is announced follows the checks
	}
	if desired == nil || desired.Settings.BGP == nil {
		r.stop(BGPWithdrawWait)
		r.d.side.SetBGPStatus(nil)
		return
	}
	st := &server.BGPStatus{At: time.Now()}
	snap := sk.snap.Load()
	defer func() {
		r.fingerprints(desired, snap, st) // the kernel's, whatever the sessions do
		r.d.side.SetBGPStatus(st)
	}()
	node, err := r.d.store.Node(ctx)
	if err != nil {
		st.Error = err.Error()
		return
	}
	st.Drained = node.BGPDrained
	r.warnings(ctx, rev)
	st.Warnings = r.warn
	cfg, err := bgpConfig(*desired.Settings.BGP, node)
	if err != nil {
		r.stop(BGPWithdrawWait)
		st.Error = err.Error()
		return
	}
	st.RouterID = cfg.RouterID.String()
	if cfg.Source.IsValid() {
		st.Source = cfg.Source.String()
	}
	if !r.speak(ctx, cfg, st) {
		return
	}
	r.announce(ctx, desired, node, snap, st)
}

// speak has a speaker run cfg, restarting it when cfg changed; it is false
// when there is none to announce with.
func (r *bgpRunner) speak(ctx context.Context, cfg bgp.Config, st *server.BGPStatus) bool {
	var err error
	// The keys are read at every step, so that a key file rewritten (a
	// rotation) gives new sessions; one unreadable keeps the sessions that
	// run (with the key read before) and is shown.
	if cfg.Passwords, err = bgp.ReadPasswords("settings.bgp", cfg.Settings); err != nil {
		st.Error = err.Error()
		return r.sp != nil
	}
	if key := configKey(cfg); key != r.key {
		// A changed configuration: the new sessions announce again. The old
		// speaker has stopped (GoBGP's goroutines ended) before the new one
		// starts: one speaker a process (bgp.Start says why).
		r.stop(0)
		sp, err := bgp.Start(ctx, cfg, r.d.Log)
		if err != nil {
			st.Error = err.Error()
			return false
		}
		r.sp, r.key = sp, key
		r.d.Log.Info("BGP: speaker started", "asn", cfg.Settings.ASN, "router_id", cfg.RouterID.String(), "peers", len(cfg.Settings.Peers))
	}
	return true
}

// announce decides which VIPs this director announces, and with what
// prepend, has the speaker announce them and tend its peers, and records
// the routes and sessions in st.
func (r *bgpRunner) announce(ctx context.Context, desired *ipvsmgr.Desired, node store.Node, snap *server.Snapshot, st *server.BGPStatus) {
	sk := r.d.sk
	last := sk.lastReconcile()
	pol := desired.Settings.BGP.DrainPolicy()
	dir := bgp.Director{IPVS: sk.isOpen(), ReconcileErr: last.Err, Failures: len(last.Failures),
		Drained: node.BGPDrained && pol.Mode == ipvsmgr.DrainWithdraw}
	if last.At.IsZero() {
		dir.ReconcileErr = "none yet"
	}
	eff := ipvsmgr.ApplyHealth(desired.Table, desired, desired.Health)
	st.VIPs = bgp.Decide(dir, bgp.Services(desired, eff))
	if err := r.sp.SetPrepend(r.drain(node.BGPDrained, pol, desired, snap, st)); err != nil {
		st.Error = err.Error()
	}
	var prefixes []netip.Prefix
	for _, v := range st.VIPs {
		if v.Announce {
			prefixes = append(prefixes, v.Prefix)
		}
	}
	before := r.sp.Announced()
	if err := r.sp.Announce(prefixes); err != nil && st.Error == "" {
		st.Error = err.Error()
	}
	after := r.sp.Announced()
	st.Announced = len(after)
	r.routeEvents(before, after, st.VIPs)
	if err := r.sp.TendPeers(ctx); err != nil && st.Error == "" {
		st.Error = err.Error()
	}
	var err error
	if st.Peers, err = r.sp.Peers(ctx); err != nil && st.Error == "" {
		st.Error = err.Error()
	}
	r.sessionEvents(st.Peers)
}

// warnings keeps the BGP warnings of revision rev, logged once each.
func (r *bgpRunner) warnings(ctx context.Context, rev int64) {
	if rev == r.warnRev {
		return
	}
	doc, _, err := r.d.store.Current(ctx)
	if err != nil {
		return
	}
	r.warnRev, r.warn = rev, ipvsmgr.BGPWarnings(doc)
	for _, w := range r.warn {
		r.d.Log.Warn("BGP mode: settings move flows between directors", "field", w.Field, "why", w.Message)
	}
}

// bgpConfig is the speaker's configuration: the router ID from the node
// settings, else the node address, else the first global IPv4 address of
// the host's interfaces.
func bgpConfig(s ipvsmgr.BGP, n store.Node) (bgp.Config, error) {
	cfg := bgp.Config{Settings: s}
	if n.BGPSource != "" {
		cfg.Source, _ = netip.ParseAddr(n.BGPSource)
	}
	for _, cand := range []string{n.RouterID, n.BGPSource, n.Address} {
		if a, err := netip.ParseAddr(cand); err == nil && a.Is4() {
			cfg.RouterID = a
			return cfg, nil
		}
	}
	addrs, err := LocalAddrs()
	if err != nil {
		return cfg, fmt.Errorf("find a BGP router ID: %w", err)
	}
	for _, a := range addrs {
		if a.Is4() && a.IsGlobalUnicast() {
			cfg.RouterID = a
			return cfg, nil
		}
	}
	return cfg, fmt.Errorf("no IPv4 address for the BGP router ID: set one with node set --router-id")
}

// configKey tells a configuration that needs new sessions; the drain
// policy is not part of it (a drain changes the routes, not the sessions).
func configKey(cfg bgp.Config) string {
	cfg.Settings.Drain = nil
	b, _ := json.Marshal(cfg)
	// The keys as a digest: the key of a configuration stays in memory
	// and must not be a copy of them.
	h := sha256.New()
	h.Write(b)
	files := slices.Sorted(maps.Keys(cfg.Passwords))
	for _, f := range files {
		fmt.Fprintf(h, "|%s|%d|%s", f, len(cfg.Passwords[f]), cfg.Passwords[f])
	}
	return fmt.Sprintf("%x", h.Sum(nil))
}

func LocalAddrs() ([]netip.Addr, error) {
	as, err := net.InterfaceAddrs()
	if err != nil {
		return nil, err
	}
	var out []netip.Addr
	for _, a := range as {
		if p, err := netip.ParsePrefix(a.String()); err == nil {
			out = append(out, p.Addr())
		}
	}
	return out, nil
}
