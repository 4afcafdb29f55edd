package server

import (
	"context"
	"encoding/json"
	"fmt"
	"net/netip"
	"sync"
	"sync/atomic"
	"time"

	"github.com/ipvsctl/ipvsctl/ipvsmgr"
	"github.com/ipvsctl/ipvsctl/ipvsmgr/bgp"
	"github.com/ipvsctl/ipvsctl/server/store"
)

// BGPStatus is what a director of a BGP group announces and why, and its
// sessions to the routers.
type BGPStatus struct {
	RouterID string           `json:"router_id"`
	Source   string           `json:"source,omitempty"`
	Drained  bool             `json:"drained"`
	Peers    []bgp.PeerStatus `json:"peers"`
	VIPs     []bgp.Decision   `json:"vips"`
	// Announced counts the prefixes announced now.
	Announced int `json:"announced"`
	// Warnings are the services whose settings move flows between directors.
	Warnings []ipvsmgr.Problem `json:"warnings,omitempty"`
	// Drain is how far node drain has come (nil while not drained).
	Drain *bgp.DrainStatus `json:"drain,omitempty"`
	// Fingerprints are this director's Maglev inputs per BGP-mode service;
	// Directors what the other directors it knows said of theirs, and
	// Mismatches where the two differ (Mismatch: there is one).
	Fingerprints []bgp.ServiceFingerprint   `json:"fingerprints"`
	Directors    []bgp.DirectorFingerprints `json:"directors,omitempty"`
	Mismatches   []bgp.Mismatch             `json:"mismatches,omitempty"`
	Mismatch     bool                       `json:"mismatch"`
	// Error is why the speaker is not running or could not announce.
	Error string    `json:"error,omitempty"`
	At    time.Time `json:"at"`
}

// bgpState is the BGP runner's part of the core; its zero value is ready.
type bgpState struct {
	status atomic.Pointer[BGPStatus]
	once   sync.Once
	wake   chan struct{}
}

func (b *bgpState) wakeC() chan struct{} {
	b.once.Do(func() { b.wake = make(chan struct{}, 1) })
	return b.wake
}

func (c *Core) bgpStatus() *BGPStatus { return c.bgp.status.Load() }

// BGPStatus is the BGP runner's latest status (nil outside BGP mode).
func (c *Core) BGPStatus() *BGPStatus { return c.bgpStatus() }

func (c *Core) bgpNodeChanged() { poke(c.bgp.wakeC()) }

// setNodeBGP applies the BGP fields of a node patch.
func setNodeBGP(n *store.Node, p NodePatch, detail *[]string) error {
	if p.RouterID != nil {
		if v := *p.RouterID; v != "" {
			if a, err := netip.ParseAddr(v); err != nil || !a.Is4() {
				return errorf(CodeBadInput, "router_id: %q is not an IPv4 address (a BGP router ID is one)", v)
			}
		}
		n.RouterID = *p.RouterID
		*detail = append(*detail, "router_id "+orDefault(n.RouterID, `""`))
	}
	if p.BGPSource != nil {
		if v := *p.BGPSource; v != "" {
			if _, err := netip.ParseAddr(v); err != nil {
				return errorf(CodeBadInput, "bgp_source: %q is not an IP address", v)
			}
		}
		n.BGPSource = *p.BGPSource
		*detail = append(*detail, "bgp_source "+orDefault(n.BGPSource, `""`))
	}
	if p.Drained != nil {
		n.BGPDrained = *p.Drained
		*detail = append(*detail, map[bool]string{true: "drained", false: "undrained"}[n.BGPDrained])
	}
	return nil
}

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

	peersMu sync.Mutex
	others  []bgp.DirectorFingerprints
}

func (r *bgpRunner) run(ctx context.Context) {
	c := r.d.Core
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
		case <-c.bgp.wakeC():
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

func (r *bgpRunner) step(ctx context.Context) {
	c, sk := r.d.Core, r.d.Core.shared
	rev, desired := sk.current()
	if desired == nil || desired.Settings.BGP == nil {
		r.stop(BGPWithdrawWait)
		c.bgp.status.Store(nil)
		return
	}
	st := &BGPStatus{At: time.Now()}
	defer func() { c.bgp.status.Store(st) }()
	node, err := c.store.Node(ctx)
	if err != nil {
		st.Error = err.Error()
		return
	}
	st.Drained = node.BGPDrained
	snap := sk.snap.Load()
	r.fingerprints(desired, snap, st) // the kernel's, whatever the sessions do
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
	if key := configKey(cfg); key != r.key {
		r.stop(0) // a changed configuration: the new sessions announce again
		sp, err := bgp.Start(ctx, cfg, r.d.Log)
		if err != nil {
			st.Error = err.Error()
			return
		}
		r.sp, r.key = sp, key
		r.d.Log.Info("BGP: speaker started", "asn", cfg.Settings.ASN, "router_id", cfg.RouterID.String(), "peers", len(cfg.Settings.Peers))
	}
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
	if err := r.sp.Announce(prefixes); err != nil && st.Error == "" {
		st.Error = err.Error()
	}
	st.Announced = len(r.sp.Announced())
	if st.Peers, err = r.sp.Peers(ctx); err != nil && st.Error == "" {
		st.Error = err.Error()
	}
}

// warnings keeps the BGP warnings of revision rev, logged once each.
func (r *bgpRunner) warnings(ctx context.Context, rev int64) {
	if rev == r.warnRev {
		return
	}
	doc, _, err := r.d.Core.store.Current(ctx)
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
	addrs, err := localAddrs()
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
	return string(b)
}
