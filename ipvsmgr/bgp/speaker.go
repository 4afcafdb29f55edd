package bgp

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"net/netip"
	"slices"
	"sync"
	"time"

	"github.com/google/uuid"
	"github.com/osrg/gobgp/v4/api"
	"github.com/osrg/gobgp/v4/pkg/apiutil"
	"github.com/osrg/gobgp/v4/pkg/packet/bgp"
	"github.com/osrg/gobgp/v4/pkg/server"

	"github.com/ipvsctl/ipvsctl/ipvsmgr"
)

// Config is a speaker's configuration: the document's settings.bgp with the
// director's own router ID and source address.
type Config struct {
	Settings ipvsmgr.BGP
	RouterID netip.Addr
	// Source is the address the sessions are opened from (and the routes'
	// next hop); invalid lets the kernel pick it.
	Source netip.Addr
	// ListenPort is where the speaker accepts sessions; 0 means it does
	// not listen (it opens every session itself).
	ListenPort int
	// Passwords are the peers' TCP MD5 keys by the file that holds each
	// (ReadPasswords); never encoded.
	Passwords map[string]string `json:"-"`
}

// Password is peer p's TCP MD5 key ("" for none).
func (c Config) Password(p ipvsmgr.BGPPeer) string {
	if p.PasswordFile == "" {
		return ""
	}
	return c.Passwords[p.PasswordFile]
}

// Speaker is a GoBGP server announcing a set of VIP prefixes.
type Speaker struct {
	s   *server.BgpServer
	log *slog.Logger
	cfg Config

	mu        sync.Mutex
	announced map[netip.Prefix]uuid.UUID
	// prepend is how many times the director's AS is put in front of its
	// routes' AS path beside the one eBGP adds (node drain's de-preference).
	prepend int

	// bfdSeen is each peer's BFD state at TendPeers' last look.
	bfdSeen map[string]api.BfdSessionState
}

// Start runs a BGP speaker with cfg's peers; it announces nothing until Announce.
//
// At most one Speaker may live in a process at a time: GoBGP v4.8.0 keeps
// its route selection options in package variables (table.SelectionOptions,
// table.UseMultiplePaths) that StartBgp writes and every best-path
// computation of every server in the process reads. The daemon's one BGP
// runner keeps to it: on a changed configuration it Stops the old speaker,
// which returns only once all of GoBGP's goroutines have ended, before it
// Starts the new one. Tests run their router in another process (bgptest).
func Start(ctx context.Context, cfg Config, log *slog.Logger) (*Speaker, error) {
	if !cfg.RouterID.Is4() {
		return nil, fmt.Errorf("start BGP: router ID %v is not an IPv4 address (set it with node set --router-id)", cfg.RouterID)
	}
	lvl := &slog.LevelVar{}
	lvl.Set(slog.LevelWarn)
	s := server.NewBgpServer(server.LoggerOption(log.With("part", "gobgp"), lvl))
	go s.Serve()
	g := &api.Global{Asn: uint32(cfg.Settings.ASN), RouterId: cfg.RouterID.String(), ListenPort: -1}
	if cfg.ListenPort > 0 {
		g.ListenPort = int32(cfg.ListenPort)
		if cfg.Source.IsValid() {
			g.ListenAddresses = []string{cfg.Source.String()}
		}
	}
	if err := s.StartBgp(ctx, &api.StartBgpRequest{Global: g}); err != nil {
		s.Stop()
		return nil, fmt.Errorf("start BGP as AS %d, router ID %s: %w", cfg.Settings.ASN, cfg.RouterID, err)
	}
	sp := &Speaker{s: s, log: log, cfg: cfg, announced: map[netip.Prefix]uuid.UUID{}, bfdSeen: map[string]api.BfdSessionState{}}
	for _, p := range cfg.Settings.Peers {
		if err := s.AddPeer(ctx, &api.AddPeerRequest{Peer: peerConfig(p, cfg.Password(p), cfg.Source, false)}); err != nil {
			sp.stopNow()
			return nil, fmt.Errorf("add BGP peer %s AS %d: %w", p.Address, p.ASN, err)
		}
	}
	return sp, nil
}

// peerConfig is a peer's GoBGP configuration; with bfd its BFD session
// too, when p has one (TendPeers turns it on once the session is up).
func peerConfig(p ipvsmgr.BGPPeer, password string, source netip.Addr, bfd bool) *api.Peer {
	addr, _ := netip.ParseAddr(p.Address)
	hold := uint64(p.HoldTime)
	if hold == 0 {
		hold = 90
	}
	peer := &api.Peer{
		Conf:      &api.PeerConf{NeighborAddress: addr.String(), PeerAsn: uint32(p.ASN), AuthPassword: password},
		Timers:    &api.Timers{Config: &api.TimersConfig{HoldTime: hold, KeepaliveInterval: max(hold/3, 1), ConnectRetry: 3, IdleHoldTimeAfterReset: 1}},
		Transport: &api.Transport{RemotePort: uint32(p.Port)},
		AfiSafis:  []*api.AfiSafi{{Config: &api.AfiSafiConfig{Family: family(addr), Enabled: true}}},
	}
	if source.IsValid() && source.Is4() == addr.Is4() {
		peer.Transport.LocalAddress = source.String()
	}
	if p.BFD != nil && bfd {
		us := uint32(math.Round(p.BFD.Interval * 1e6))
		peer.Bfd = &api.BfdPeerConfig{Enabled: true, DesiredMinimumTxInterval: us, RequiredMinimumReceive: us, DetectionMultiplier: uint32(p.BFD.Multiplier)}
	}
	return peer
}

func family(a netip.Addr) *api.Family {
	if a.Is4() {
		return &api.Family{Afi: api.Family_AFI_IP, Safi: api.Family_SAFI_UNICAST}
	}
	return &api.Family{Afi: api.Family_AFI_IP6, Safi: api.Family_SAFI_UNICAST}
}

// Announce makes the announced routes exactly prefixes: new ones are added,
// the ones not listed withdrawn.
func (sp *Speaker) Announce(prefixes []netip.Prefix) error {
	sp.mu.Lock()
	defer sp.mu.Unlock()
	want := map[netip.Prefix]bool{}
	var errs []error
	for _, p := range prefixes {
		want[p] = true
		if _, ok := sp.announced[p]; ok {
			continue
		}
		if err := sp.add(p); err != nil {
			errs = append(errs, err)
			continue
		}
		sp.log.Info("BGP: announced", "prefix", p.String(), "prepend", sp.prepend)
	}
	for p := range sp.announced {
		if !want[p] {
			if err := sp.withdraw(p); err != nil {
				errs = append(errs, err)
			}
		}
	}
	return errors.Join(errs...)
}

// SetPrepend re-announces every route with the director's AS n more times
// in front of its AS path (0: the plain path), so that the routers prefer
// the other directors' paths to the same VIPs and keep this one as a
// fallback: node drain's de-preference.
func (sp *Speaker) SetPrepend(n int) error {
	sp.mu.Lock()
	defer sp.mu.Unlock()
	if n == sp.prepend {
		return nil
	}
	sp.prepend = n
	var errs []error
	for p := range sp.announced {
		if err := sp.add(p); err != nil {
			errs = append(errs, err)
		}
	}
	if len(errs) == 0 {
		sp.log.Info("BGP: AS path prepend", "times", n, "routes", len(sp.announced))
	}
	return errors.Join(errs...)
}

// Prepend is how many times the director's AS is prepended now.
func (sp *Speaker) Prepend() int {
	sp.mu.Lock()
	defer sp.mu.Unlock()
	return sp.prepend
}

// add announces p with the current attributes (replacing the route of p
// announced before, if any); the caller holds mu.
func (sp *Speaker) add(p netip.Prefix) error {
	path, err := sp.path(p)
	if err != nil {
		return err
	}
	res, err := sp.s.AddPath(apiutil.AddPathRequest{Paths: []*apiutil.Path{path}})
	if err == nil && len(res) == 1 && res[0].Error != nil {
		err = res[0].Error
	}
	if err == nil && len(res) != 1 {
		err = fmt.Errorf("GoBGP answered %d results for one path", len(res))
	}
	if err != nil {
		return fmt.Errorf("announce %s: %w", p, err)
	}
	sp.announced[p] = res[0].UUID
	return nil
}

func (sp *Speaker) withdraw(p netip.Prefix) error {
	path, err := sp.path(p)
	if err != nil {
		return err
	}
	if err := sp.s.DeletePath(apiutil.DeletePathRequest{Paths: []*apiutil.Path{path}}); err != nil {
		return fmt.Errorf("withdraw %s: %w", p, err)
	}
	delete(sp.announced, p)
	sp.log.Info("BGP: withdrawn", "prefix", p.String())
	return nil
}

// path is the route of a VIP prefix: origin IGP, the next hop left to the
// session's local address (GoBGP sets it for eBGP), the communities and MED.
func (sp *Speaker) path(p netip.Prefix) (*apiutil.Path, error) {
	nlri, err := bgp.NewIPAddrPrefix(p)
	if err != nil {
		return nil, fmt.Errorf("route for %s: %w", p, err)
	}
	attrs := []bgp.PathAttributeInterface{bgp.NewPathAttributeOrigin(bgp.BGP_ORIGIN_ATTR_TYPE_IGP)}
	if sp.prepend > 0 {
		as := make([]uint32, sp.prepend)
		for i := range as {
			as[i] = uint32(sp.cfg.Settings.ASN)
		}
		attrs = append(attrs, bgp.NewPathAttributeAsPath([]bgp.AsPathParamInterface{bgp.NewAs4PathParam(bgp.BGP_ASPATH_ATTR_TYPE_SEQ, as)}))
	}
	fam := bgp.RF_IPv4_UC
	if p.Addr().Is4() {
		nh, err := bgp.NewPathAttributeNextHop(netip.IPv4Unspecified())
		if err != nil {
			return nil, fmt.Errorf("route for %s: %w", p, err)
		}
		attrs = append(attrs, nh)
	} else {
		fam = bgp.RF_IPv6_UC
		mp, err := bgp.NewPathAttributeMpReachNLRI(fam, []bgp.PathNLRI{{NLRI: nlri}}, netip.IPv6Unspecified())
		if err != nil {
			return nil, fmt.Errorf("route for %s: %w", p, err)
		}
		attrs = append(attrs, mp)
	}
	if len(sp.cfg.Settings.Communities) > 0 {
		cs := make([]uint32, 0, len(sp.cfg.Settings.Communities))
		for _, c := range sp.cfg.Settings.Communities {
			v, err := ipvsmgr.ParseCommunity(c)
			if err != nil {
				return nil, err
			}
			cs = append(cs, v)
		}
		attrs = append(attrs, bgp.NewPathAttributeCommunities(cs))
	}
	if sp.cfg.Settings.MED > 0 {
		attrs = append(attrs, bgp.NewPathAttributeMultiExitDisc(uint32(sp.cfg.Settings.MED)))
	}
	return &apiutil.Path{Family: fam, Nlri: nlri, Attrs: attrs}, nil
}

// Announced is the prefixes announced now, sorted.
func (sp *Speaker) Announced() []netip.Prefix {
	sp.mu.Lock()
	defer sp.mu.Unlock()
	out := make([]netip.Prefix, 0, len(sp.announced))
	for p := range sp.announced {
		out = append(out, p)
	}
	slices.SortFunc(out, func(a, b netip.Prefix) int { return a.Addr().Compare(b.Addr()) })
	return out
}

// TendPeers, called every half second, does two things GoBGP v4.8.0 does
// not do well by itself.
//
// It turns BFD on for a peer once its BGP session is established, not
// before: FRR's bgpd, when a session comes up, learns its local address and
// interface and has bfdd delete the BFD session it had and make a new one,
// and GoBGP takes the old session's end as BFD down and resets the BGP
// session it just established (once per director and router start;
// TestBGPAtFRRWithoutABFDFlap).
//
// It adds again each peer whose BFD session went down (since the last call)
// while its BGP session was not established. On BFD down GoBGP resets the
// peer by queueing a NOTIFICATION in a channel its FSM reads only in the
// established state (pkg/server/peer.go, sendNotification): queued while the
// session is down, it closes the next session the moment it is established.
// A router that runs BFD only while the session is up (BIRD) then takes BFD
// down again, which queues the next reset: the peer never comes back
// (TestBGPECMPAtBIRD, a director frozen and resumed). A peer added again has
// a new FSM, with nothing queued, and no BFD until its session is up.
func (sp *Speaker) TendPeers(ctx context.Context) error {
	type seen struct {
		addr        string
		bfdOn       bool
		bfd         api.BfdSessionState
		established bool
	}
	var now []seen
	err := sp.s.ListPeer(ctx, &api.ListPeerRequest{}, func(p *api.Peer) {
		st := p.GetState()
		now = append(now, seen{p.GetConf().GetNeighborAddress(), p.GetBfd().GetEnabled(), st.GetBfdState().GetSessionState(),
			st.GetSessionState() == api.PeerState_SESSION_STATE_ESTABLISHED})
	})
	if err != nil {
		return fmt.Errorf("list BGP peers: %w", err)
	}
	sp.mu.Lock()
	defer sp.mu.Unlock()
	var errs []error
	for _, n := range now {
		if !n.bfdOn {
			if p, ok := sp.peer(n.addr); ok && p.BFD != nil && n.established {
				if _, err := sp.s.UpdatePeer(ctx, &api.UpdatePeerRequest{Peer: peerConfig(p, sp.cfg.Password(p), sp.cfg.Source, true)}); err != nil {
					errs = append(errs, fmt.Errorf("turn BFD on for BGP peer %s: %w", n.addr, err))
				}
			}
			continue
		}
		prev := sp.bfdSeen[n.addr]
		sp.bfdSeen[n.addr] = n.bfd
		if !resetMayBeQueued(prev, n.bfd, n.established) {
			continue
		}
		if err := sp.readdPeer(ctx, n.addr); err != nil {
			errs = append(errs, err)
			continue
		}
		delete(sp.bfdSeen, n.addr)
		sp.log.Warn("BGP: peer added again after BFD went down with the session down, to drop GoBGP's queued reset", "peer", n.addr)
	}
	return errors.Join(errs...)
}

// resetMayBeQueued says whether GoBGP may hold a reset for the next session
// of a peer: its BFD went from up or init (where expiry or the remote's down
// resets the peer) to down, and the BGP session is not established (a reset
// sent on an established session took it down at once).
func resetMayBeQueued(prev, now api.BfdSessionState, established bool) bool {
	wasLive := prev == api.BfdSessionState_BFD_SESSION_STATE_UP || prev == api.BfdSessionState_BFD_SESSION_STATE_INIT
	return wasLive && now == api.BfdSessionState_BFD_SESSION_STATE_DOWN && !established
}

// peer is the settings' peer of GoBGP's neighbor address addr.
func (sp *Speaker) peer(addr string) (ipvsmgr.BGPPeer, bool) {
	for _, p := range sp.cfg.Settings.Peers {
		if a, err := netip.ParseAddr(p.Address); err == nil && a.String() == addr {
			return p, true
		}
	}
	return ipvsmgr.BGPPeer{}, false
}

func (sp *Speaker) readdPeer(ctx context.Context, addr string) error {
	p, ok := sp.peer(addr)
	if !ok {
		return fmt.Errorf("BGP peer %s is not in settings.bgp.peers", addr)
	}
	if err := sp.s.DeletePeer(ctx, &api.DeletePeerRequest{Address: addr}); err != nil {
		return fmt.Errorf("delete BGP peer %s to add it again: %w", addr, err)
	}
	if err := sp.s.AddPeer(ctx, &api.AddPeerRequest{Peer: peerConfig(p, sp.cfg.Password(p), sp.cfg.Source, false)}); err != nil {
		return fmt.Errorf("add BGP peer %s again: %w", addr, err)
	}
	return nil
}

// PeerStatus is one BGP session as the speaker sees it.
type PeerStatus struct {
	Address    string    `json:"address"`
	ASN        int       `json:"asn"`
	State      string    `json:"state"` // idle, connect, active, opensent, openconfirm, established
	Up         bool      `json:"up"`
	Since      time.Time `json:"since,omitzero"`
	BFD        string    `json:"bfd,omitempty"` // up, down, init, admin_down; "" without BFD
	Advertised int       `json:"advertised"`
	Received   int       `json:"received"`
	// LastError is why the session last went down, as GoBGP says it.
	LastError string `json:"last_error,omitempty"`
}

// Peers lists the sessions, in the configuration's order.
func (sp *Speaker) Peers(ctx context.Context) ([]PeerStatus, error) {
	var out []PeerStatus
	err := sp.s.ListPeer(ctx, &api.ListPeerRequest{EnableAdvertised: true}, func(p *api.Peer) {
		st := PeerStatus{}
		if c := p.GetConf(); c != nil {
			st.Address, st.ASN = c.NeighborAddress, int(c.PeerAsn)
		}
		if s := p.GetState(); s != nil {
			st.State = sessionState(s.SessionState)
			st.Up = s.SessionState == api.PeerState_SESSION_STATE_ESTABLISHED
			if s.DisconnectMessage != "" {
				st.LastError = s.DisconnectMessage
			}
			if b := s.GetBfdState(); b != nil && p.GetBfd().GetEnabled() {
				st.BFD = bfdState(b.SessionState)
			} else if cp, ok := sp.peer(st.Address); ok && cp.BFD != nil {
				st.BFD = "down" // on once the session is up (TendPeers)
			}
		}
		if t := p.GetTimers().GetState(); t != nil && st.Up && t.Uptime != nil {
			st.Since = t.Uptime.AsTime()
		}
		for _, a := range p.GetAfiSafis() {
			if s := a.GetState(); s != nil {
				st.Advertised += int(s.Advertised)
				st.Received += int(s.Received)
			}
		}
		out = append(out, st)
	})
	if err != nil {
		return nil, fmt.Errorf("list BGP peers: %w", err)
	}
	order := map[string]int{}
	for i, p := range sp.cfg.Settings.Peers {
		if a, err := netip.ParseAddr(p.Address); err == nil {
			order[a.String()] = i
		}
	}
	slices.SortStableFunc(out, func(a, b PeerStatus) int { return order[a.Address] - order[b.Address] })
	return out, nil
}

func sessionState(s api.PeerState_SessionState) string {
	switch s {
	case api.PeerState_SESSION_STATE_IDLE:
		return "idle"
	case api.PeerState_SESSION_STATE_CONNECT:
		return "connect"
	case api.PeerState_SESSION_STATE_ACTIVE:
		return "active"
	case api.PeerState_SESSION_STATE_OPENSENT:
		return "opensent"
	case api.PeerState_SESSION_STATE_OPENCONFIRM:
		return "openconfirm"
	case api.PeerState_SESSION_STATE_ESTABLISHED:
		return "established"
	}
	return "unknown"
}

func bfdState(s api.BfdSessionState) string {
	switch s {
	case api.BfdSessionState_BFD_SESSION_STATE_UP:
		return "up"
	case api.BfdSessionState_BFD_SESSION_STATE_DOWN:
		return "down"
	case api.BfdSessionState_BFD_SESSION_STATE_INIT:
		return "init"
	case api.BfdSessionState_BFD_SESSION_STATE_ADMIN_DOWN:
		return "admin_down"
	}
	return "unknown"
}

// Stop withdraws every route, gives the peers wait to take the withdrawal
// (bounded by ctx), then closes the sessions and stops the speaker; it
// returns once GoBGP has stopped, so that another speaker may start.
func (sp *Speaker) Stop(ctx context.Context, wait time.Duration) {
	if err := sp.Announce(nil); err != nil {
		sp.log.Error("BGP: withdraw before stop", "err", err)
	}
	t := time.NewTimer(wait)
	select {
	case <-ctx.Done():
	case <-t.C:
	}
	t.Stop()
	sp.stopNow()
}

// stopNow closes the sessions and returns once the server has stopped:
// GoBGP's Stop runs StopBgp, which waits for the server's loop and every
// peer's goroutines, then stops the BFD server and waits for its own.
func (sp *Speaker) stopNow() {
	sp.s.Stop()
}
