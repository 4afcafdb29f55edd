package redundancy

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"maps"
	"net"
	"net/netip"
	"slices"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/ipvsctl/ipvsctl/ipvsmgr"
	"github.com/ipvsctl/ipvsctl/ipvsmgr/vrrp"
	"github.com/ipvsctl/ipvsctl/server"
	"github.com/ipvsctl/ipvsctl/server/daemon"
	"github.com/ipvsctl/ipvsctl/server/replication"
	"github.com/ipvsctl/ipvsctl/server/store"
	"github.com/vishvananda/netlink"
)

// Hooks are how the daemon's VRRP and replication reach the host
// and the peer; a nil hook is the host's (tests give fakes).
type Hooks struct {
	// Listen opens one virtual router's adverts (vrrp.Listen).
	Listen func(vrrp.ConnConfig) (vrrp.Conn, error)
	// Announcer sends gratuitous ARPs / unsolicited NAs (vrrp.NewAnnouncer).
	Announcer func(iface string, v4, v6 bool) (vrrp.Announcer, error)
	// LinkUp reports whether an interface is up (netlink).
	LinkUp func(name string) (bool, error)
	// LocalAddrs are the host's own addresses, dropped from the peers.
	LocalAddrs func() ([]netip.Addr, error)
	// SyncDaemons is the kernel's connection sync daemon (the driver's).
	SyncDaemons func(*server.KernelConn) ipvsmgr.SyncDaemons
	// Peer is the API of the director this one follows (package client),
	// believed only as PeerDial.Trust says (an http:// url is loopback,
	// for tests); nil: no replication.
	Peer func(server.PeerDial) (server.Peer, error)
	// Tick is how often the director's own health is looked at (default 200 ms).
	Tick time.Duration
	// AtStep, if set, is called as a takeover passes each TakeoverStep (the
	// fault matrix kills the daemon there); nil in production.
	AtStep func(TakeoverStep)
}

func (h *Hooks) defaults() {
	if h.Listen == nil {
		h.Listen = func(cfg vrrp.ConnConfig) (vrrp.Conn, error) { return vrrp.Listen(cfg) }
	}
	if h.Announcer == nil {
		h.Announcer = func(iface string, v4, v6 bool) (vrrp.Announcer, error) { return vrrp.NewAnnouncer(iface, v4, v6) }
	}
	if h.LinkUp == nil {
		h.LinkUp = linkUp
	}
	if h.LocalAddrs == nil {
		h.LocalAddrs = daemon.LocalAddrs
	}
	if h.SyncDaemons == nil {
		h.SyncDaemons = func(kc *server.KernelConn) ipvsmgr.SyncDaemons { return syncDaemonsOf(kc.Kernel) }
	}
	if h.Tick == 0 {
		h.Tick = 200 * time.Millisecond
	}
}

func linkUp(name string) (bool, error) {
	l, err := netlink.LinkByName(name)
	if err != nil {
		return false, err
	}
	a := l.Attrs()
	// Unknown is what a veth or dummy without carrier detection reports.
	return a.Flags&net.FlagUp != 0 && (a.OperState == netlink.OperUp || a.OperState == netlink.OperUnknown), nil
}

// redRunner runs the director's VRRP: one instance per address family that
// has VIPs, the director's own health as their fault, the sync daemon
// switched with the role, and the reconcile told of each change of role.
type redRunner struct {
	c     *server.Core
	role  *server.RoleState // the core's, which this runner keeps
	store *store.Store
	sk    *daemon.Session
	log   *slog.Logger
	h     Hooks

	wake    chan struct{}
	restart atomic.Bool // an instance stopped on its own: start again

	node     store.Node
	nodeRead bool
	key      string // the running instances' configuration
	insts    map[bool]*runningInst
	cleaned  bool   // the ledger's VIPs were removed before VRRP spoke
	fault    string // the director's own health: why it cannot be master
	lastErr  string // the last error starting VRRP, logged once
	// behind: a change of role left the host short of what the role wants
	// (a VIP move or its record failed, or there was no kernel to move them
	// with): the next step reconciles. A move that went through leaves
	// nothing for a reconcile to do, and a takeover's reconcile would only
	// compete with the new master's first packets.
	behind atomic.Bool

	mu          sync.Mutex // guards what status reads: below, and node, fault and insts (written under it)
	red         *ipvsmgr.Redundancy
	vips        []ipvsmgr.VIP
	transitions []server.RedundancyTransition
	counts      map[string]int
	sync        server.SyncDaemonStatus
	syncStarted map[ipvsmgr.SyncState]ipvsmgr.SyncDaemon
	rep         *replication.Replicator
	cu          catchUp // the backup sync daemon catching up (failback.go)

	// The adverts' authentication (redundancy_auth.go): the key files as
	// last read (the runner's goroutine only), and the configuration the
	// instances get, with its fingerprint and the key files' problems.
	keyFiles map[string]*keyFile
	authCfg  *vrrp.AuthConfig
	authFP   string
	authErr  string
}

type runningInst struct {
	v4     bool
	inst   *vrrp.Instance
	cancel context.CancelFunc
	done   chan struct{}
	ann    vrrp.Announcer
	// primary is this director's address in the instance's family.
	primary netip.Addr
	prio    uint8 // the priority the instance was last given
	// record is the ledger write of a takeover whose advert and
	// announcements are not out yet (the instance's goroutine only).
	record func(context.Context) []ipvsmgr.Failure
	// announcing: the family became master and its first advert and
	// gratuitous ARPs are not out yet: the runner's tick leaves the sync
	// daemon alone meanwhile (onAnnounced wakes it).
	announcing atomic.Bool
	conn       vrrp.Conn
	// auth signs and checks the adverts (nil: unauthenticated; written
	// under the runner's mu), authFP the configuration it has.
	auth   *vrrp.Auth
	authFP string
}

// Attach has d run the director's VRRP, its sync daemon and replication
// (the runner starts and stops with d.Run); h are how they reach the host
// and the peer (zero: the host's, without replication). Call it before Run.
func Attach(d *daemon.Daemon, h Hooks) {
	h.defaults()
	r := &redRunner{c: d.Core, role: server.DaemonSideOf(d.Core).Role(), store: d.Store(), sk: d.Session(), log: d.Log, h: h, wake: make(chan struct{}, 1),
		insts: map[bool]*runningInst{}, counts: map[string]int{}, syncStarted: map[ipvsmgr.SyncState]ipvsmgr.SyncDaemon{}}
	r.role.SetStatus(r.status)
	r.sk.OnNewDesired(r.poke)
	d.AddRunner(r.run)
}

func (r *redRunner) poke() {
	select {
	case r.wake <- struct{}{}:
	default:
	}
}

// idle says the runner has no VRRP instance, no sync daemon and no peer:
// only a change can give it work.
func (r *redRunner) idle() bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.nodeRead && r.red == nil && r.key == "" && len(r.insts) == 0 && r.rep == nil && len(r.syncStarted) == 0
}

// run manages VRRP until ctx ends, then resigns (priority 0 where master),
// lets the VIPs go and stops the sync daemons it started.
func (r *redRunner) run(ctx context.Context) {
	t := time.NewTicker(r.h.Tick)
	defer t.Stop()
	for {
		r.step(ctx)
		// Without VRRP or a peer to follow there is nothing to look at
		// between events: a new desired state, a node change or a poke
		// wakes the runner (a director that is no pair wakes no thread).
		tick := t.C
		if r.idle() {
			tick = nil
		}
		select {
		case <-ctx.Done():
			r.stopInstances()
			r.stopReplication()
			r.stopSyncDaemons(context.WithoutCancel(ctx))
			return
		case <-tick:
		case <-r.wake:
		case <-r.role.NodeChanged():
			r.nodeRead = false
		}
	}
}

// step looks at the desired state, the node settings and the director's
// health, and makes VRRP, the sync daemon and replication follow them.
func (r *redRunner) step(ctx context.Context) {
	if !r.readNode(ctx) {
		return
	}
	r.followPeer(ctx)
	sk := r.sk
	desired, kc, openErr, last := sk.View()
	if desired == nil || desired.Settings.Redundancy == nil {
		r.stopAll(ctx)
		return
	}
	red := *desired.Settings.Redundancy
	r.mu.Lock()
	r.red, r.vips = &red, desired.VIPs
	r.mu.Unlock()
	r.role.SetActive(true, map[bool]string{true: r.node.Role}[r.node.Role != "auto"], r.node.PeerURL)

	// Keys before the fault: a director whose signing key came back has it
	// before it takes part again.
	authFault := r.followAuth(&red)
	fault := r.health(kc, openErr, last, &red)
	if fault == "" {
		fault = authFault
	}
	r.setFault(fault)
	if !r.cleaned && !r.clean(ctx, kc) {
		return
	}
	if r.restart.Swap(false) {
		r.key = ""
	}
	if key := r.configKey(&red, desired.VIPs); key != r.key {
		if r.key != "" {
			r.log.Info("redundancy settings changed: VRRP restarts (a master resigns first)")
		}
		r.stopInstances()
		r.key = key
		r.startInstances(ctx, &red, desired.VIPs)
	}
	r.followPriority()
	if r.behind.Swap(false) {
		if _, err := sk.Reconcile(ctx); err != nil && ctx.Err() == nil {
			r.log.Error("reconcile after a change of role", "err", err)
		}
	}
	if kc != nil && !r.announcing() {
		r.switchSyncDaemon(ctx, kc, &red)
	}
	r.followFailback(ctx, &red)
}

// readNode reads the node settings once (again after they change); false:
// they could not be read.
func (r *redRunner) readNode(ctx context.Context) bool {
	if r.nodeRead {
		return true
	}
	n, err := r.store.Node(ctx)
	if err != nil {
		if ctx.Err() == nil {
			r.log.Error("read node settings", "err", err)
		}
		return false
	}
	r.mu.Lock()
	r.node, r.nodeRead = n, true
	r.mu.Unlock()
	return true
}

// stopAll stops VRRP and the sync daemons: the desired state has no
// settings.redundancy (any more).
func (r *redRunner) stopAll(ctx context.Context) {
	if len(r.insts) > 0 || r.key != "" {
		r.log.Info("settings.redundancy removed: VRRP stops")
		r.stopInstances()
		r.stopSyncDaemons(ctx)
		r.key = ""
	}
	r.role.SetActive(false, "", "")
	r.mu.Lock()
	r.red, r.vips = nil, nil
	r.mu.Unlock()
}

// clean removes, before VRRP speaks, the VIPs the ledger says this director
// added (after a crash too), so that it never holds one beside the master,
// and those of its intent that are up (a takeover's whose record the crash
// stopped). No family is master yet, so the reconcile removes them. False:
// not yet (no kernel, or the reconcile failed).
func (r *redRunner) clean(ctx context.Context, kc *server.KernelConn) bool {
	if kc == nil {
		return false
	}
	if _, err := r.sk.Reconcile(ctx); err != nil {
		if ctx.Err() == nil {
			r.log.Error("remove VIPs before VRRP starts", "err", err)
		}
		return false
	}
	r.cleaned = true
	return true
}

// announcing says whether a family's takeover has its first advert and
// gratuitous ARPs still to send: nothing competes with them.
func (r *redRunner) announcing() bool {
	for _, ri := range r.insts {
		if ri.announcing.Load() {
			return true
		}
	}
	return false
}

// health is why this director cannot be master now ("" when it can).
func (r *redRunner) health(kc *server.KernelConn, openErr error, last server.ReconcileReport, red *ipvsmgr.Redundancy) string {
	if kc == nil {
		if openErr == nil {
			return "kernel IPVS not open yet"
		}
		return daemon.Unavailable(openErr).Error()
	}
	if last.Err != "" {
		return "reconcile failed: " + last.Err
	}
	for _, name := range append([]string{red.Interface}, red.TrackInterfaces...) {
		up, err := r.h.LinkUp(name)
		if err != nil {
			return fmt.Sprintf("interface %s: %v", name, err)
		}
		if !up {
			return "interface " + name + " is down"
		}
	}
	return ""
}

func (r *redRunner) setFault(reason string) {
	if reason == r.fault {
		return
	}
	if reason != "" {
		r.log.Warn("director in fault: it cannot be VRRP master", "reason", reason)
	} else {
		r.log.Info("director healthy again: VRRP takes part in the election")
	}
	r.mu.Lock()
	r.fault = reason
	r.mu.Unlock()
	for _, ri := range r.insts {
		ri.inst.SetFault(reason)
	}
}

func (r *redRunner) configKey(red *ipvsmgr.Redundancy, vips []ipvsmgr.VIP) string {
	fams := ""
	for _, v4 := range []bool{true, false} {
		if len(vipsOf(vips, v4)) > 0 {
			fams += familyName(v4)
		}
	}
	n, d := red.GARPs()
	// Not the priority: a running instance takes a new one (followPriority).
	return fmt.Sprintf("%d|%s|%s|%v|%v|%s|%d|%s|%s|%s|%s", red.VRID, red.Interface, red.Advert(), red.UnicastPeers, red.PreemptOn(),
		red.Delay(), n, d, r.node.Role, r.node.Address, fams)
}

// priority is the VRRP priority the node settings give: 255, the address
// owner's, for a forced master.
func (r *redRunner) priority() uint8 {
	if r.node.Role == "master" {
		return vrrp.OwnerPriority
	}
	return uint8(r.node.Priority)
}

// followPriority hands the running instances a new priority (node set
// --priority) without restarting them: RFC 5798 has it in the next advert
// and in a backup's skew, and a restart would make a master resign.
func (r *redRunner) followPriority() {
	p := r.priority()
	for _, ri := range r.insts {
		if ri.prio == p {
			continue
		}
		if err := ri.inst.SetPriority(p); err != nil {
			r.log.Error("VRRP priority not changed", "family", familyName(ri.v4), "err", err)
			continue
		}
		r.log.Info("VRRP priority changed, without a restart", "family", familyName(ri.v4), "from", ri.prio, "to", p)
		ri.prio = p
	}
}

// startInstances starts a VRRP instance for each family with VIPs; a
// forced backup starts none and stays backup.
func (r *redRunner) startInstances(ctx context.Context, red *ipvsmgr.Redundancy, vips []ipvsmgr.VIP) {
	if r.node.Role != "backup" && len(vips) > 0 {
		r.warnUnauthenticated(red)
	}
	var errs []string
	for _, v4 := range []bool{true, false} {
		fam := vipsOf(vips, v4)
		if len(fam) == 0 {
			continue
		}
		if r.node.Role == "backup" {
			r.role.SetRole(v4, vrrp.Backup, "")
			r.behind.Store(true) // no transition moved the VIPs
			continue
		}
		if err := r.startInstance(ctx, red, v4, fam); err != nil {
			errs = append(errs, err.Error())
		}
	}
	if msg := strings.Join(errs, "; "); msg != r.lastErr {
		r.lastErr = msg
		if msg != "" {
			r.log.Error("VRRP not started", "err", msg)
		}
	}
	if len(errs) > 0 {
		r.key = "" // try again at the next step
	}
}

func (r *redRunner) startInstance(ctx context.Context, red *ipvsmgr.Redundancy, v4 bool, fam []ipvsmgr.VIP) error {
	own, _ := r.h.LocalAddrs()
	cc := vrrp.ConnConfig{Interface: red.Interface, VRID: uint8(red.VRID), IPv6: !v4, Logger: r.log}
	if a, err := netip.ParseAddr(r.node.Address); err == nil && a.Unmap().Is4() == v4 {
		cc.Primary = a.Unmap()
		own = append(own, cc.Primary)
	}
	for _, p := range red.UnicastPeers {
		a, err := netip.ParseAddr(p)
		if err != nil || a.Unmap().Is4() != v4 || slices.Contains(own, a.Unmap()) {
			continue
		}
		cc.Peers = append(cc.Peers, a.Unmap())
	}
	auth, authFP := r.newAuth()
	cc.Auth = auth
	conn, err := r.h.Listen(cc)
	if err != nil {
		return fmt.Errorf("%s adverts on %s: %w", familyName(v4), red.Interface, err)
	}
	ann, err := r.h.Announcer(red.Interface, v4, !v4)
	if err != nil {
		r.log.Warn("no gratuitous ARPs / unsolicited NAs", "interface", red.Interface, "err", err)
		ann = nil
	}
	prio := r.priority()
	n, delay := red.GARPs()
	cfg := vrrp.Config{VRID: uint8(red.VRID), Priority: prio, AdvertInterval: red.Advert(), Preempt: red.PreemptOn(),
		PreemptDelay: red.Delay(), GARPCount: n, GARPRepeatDelay: delay}
	for _, v := range fam {
		cfg.Addrs = append(cfg.Addrs, v.Addr)
	}
	ri := &runningInst{v4: v4, ann: ann, done: make(chan struct{}), primary: conn.Primary(), prio: prio, conn: conn, auth: auth, authFP: authFP}
	opt := vrrp.Options{Conn: conn, Logger: r.log.With("family", familyName(v4)),
		OnMaster: r.onTransition(ri), OnBackup: r.onTransition(ri), OnFault: r.onTransition(ri), OnAnnounced: r.onAnnounced(ri)}
	if ann != nil {
		opt.Announcer = ann
	}
	inst, err := vrrp.New(cfg, opt)
	if err != nil {
		conn.Close()
		closeAnnouncer(ann)
		return err
	}
	inst.SetFault(r.fault)
	r.mu.Lock()
	inst.SetPreemptHold(red.SyncWait(), r.cu.waitFor(time.Now()))
	r.mu.Unlock()
	ri.inst = inst
	ictx, cancel := context.WithCancel(context.WithoutCancel(ctx))
	ri.cancel = cancel
	go func() {
		defer close(ri.done)
		defer closeAnnouncer(ann)
		if err := inst.Run(ictx); err != nil {
			r.log.Error("VRRP instance stopped", "family", familyName(v4), "err", err)
			r.restart.Store(true)
			r.poke()
		}
	}()
	r.mu.Lock()
	r.insts[v4] = ri
	r.mu.Unlock()
	r.log.Info("VRRP started", "family", familyName(v4), "vrid", red.VRID, "priority", prio, "interface", red.Interface,
		"advert_interval", red.Advert().String(), "unicast_peers", fmt.Sprint(cc.Peers), "auth", map[bool]string{true: "none", false: "hmac-sha256"}[auth == nil])
	return nil
}

func closeAnnouncer(a vrrp.Announcer) {
	if c, ok := a.(io.Closer); ok && c != nil {
		c.Close()
	}
}

// onTransition moves the family's VIPs at once (they cannot wait for a
// reconcile: the adverts and gratuitous ARPs follow the callback), then
// wakes the runner to switch the sync daemon (and reconcile, when a move
// failed). On becoming master it writes nothing before the VIPs are up (the
// ledger's intent covers a crash meanwhile), and starts nothing that would
// compete with the advert and the gratuitous ARPs: the ledger write and the
// runner wait for them (onAnnounced).
func (r *redRunner) onTransition(ri *runningInst) func(vrrp.Transition) {
	return func(t vrrp.Transition) {
		master := ""
		if t.To == vrrp.Master && ri.primary.IsValid() {
			master = ri.primary.String()
		}
		ri.announcing.Store(t.To == vrrp.Master)
		r.role.SetRole(ri.v4, t.To, master)
		r.mu.Lock()
		vips := vipsOf(r.vips, ri.v4)
		r.counts[t.To.String()]++
		r.transitions = append(r.transitions, server.RedundancyTransition{At: t.At, Family: familyName(ri.v4), From: t.From.String(), To: t.To.String(), Reason: t.Reason})
		if len(r.transitions) > 64 {
			r.transitions = slices.Clone(r.transitions[len(r.transitions)-64:])
		}
		r.mu.Unlock()
		r.c.Events().Publish(vrrpEvent(t, familyName(ri.v4)))
		rec := r.sk.Reconciler()
		if rec != nil {
			ctx, cancel := context.WithTimeout(context.Background(), vipMoveTimeout)
			var fails []ipvsmgr.Failure
			var record func(context.Context) []ipvsmgr.Failure
			start := time.Now()
			if t.To == vrrp.Master {
				record, fails = rec.AddVIPs(ctx, vips)
				r.atStep(StepVIPAdded)
			} else {
				fails = rec.RemoveVIPs(ctx, vips)
			}
			cancel()
			if len(vips) > 0 {
				// The adverts and gratuitous ARPs wait for this: how long is part of the failover time.
				r.log.Info("VIPs moved with the role", "family", familyName(ri.v4), "to", t.To.String(), "took", time.Since(start).String())
			}
			r.logVIPFailures(fails)
			if len(fails) > 0 {
				r.behind.Store(true)
			}
			if record != nil {
				ri.record = record
				return // onAnnounced writes it and wakes the runner
			}
		} else {
			r.behind.Store(true)
		}
		r.poke()
	}
}

// onAnnounced follows a takeover's first advert and gratuitous ARPs: the
// ledger write its VIP add left, and the runner (the sync daemon).
func (r *redRunner) onAnnounced(ri *runningInst) func(vrrp.Transition) {
	return func(vrrp.Transition) {
		ri.announcing.Store(false)
		if rec := ri.record; rec != nil {
			ri.record = nil
			go r.recordVIPs(ri.v4, rec)
		}
		r.poke()
	}
}

// vipMoveTimeout bounds the VIP changes of a change of role, and the ledger
// write that follows a takeover.
const vipMoveTimeout = 5 * time.Second

// recordVIPs writes the ledger after a takeover's VIPs went up; the
// reconciler waits for it, so the next reconcile or removal sees them.
func (r *redRunner) recordVIPs(v4 bool, record func(context.Context) []ipvsmgr.Failure) {
	ctx, cancel := context.WithTimeout(context.Background(), vipMoveTimeout)
	defer cancel()
	start := time.Now()
	r.atStep(StepBeforeLedger)
	fails := record(ctx)
	r.log.Info("VIPs recorded in the ledger after the takeover", "family", familyName(v4), "took", time.Since(start).String())
	r.logVIPFailures(fails)
	if len(fails) > 0 {
		r.behind.Store(true)
		r.poke()
	}
}

func (r *redRunner) logVIPFailures(fails []ipvsmgr.Failure) {
	for _, f := range fails {
		r.log.Error("VIP change on a change of role failed", "change", f.Change, "err", f.Err)
	}
}

// stopInstances stops every instance: a master resigns (priority 0) and
// its VIPs go, in the instance's last transition.
func (r *redRunner) stopInstances() {
	for v4, ri := range r.insts {
		ri.cancel()
		<-ri.done
		r.mu.Lock()
		delete(r.insts, v4)
		r.mu.Unlock()
	}
	r.role.ClearRoles()
}

// switchSyncDaemon runs the master sync daemon on a master and the backup
// one elsewhere, as settings.redundancy.sync_daemon asks.
func (r *redRunner) switchSyncDaemon(ctx context.Context, kc *server.KernelConn, red *ipvsmgr.Redundancy) {
	r.mu.Lock()
	r.sync.Enabled = red.SyncDaemon
	r.mu.Unlock()
	if !red.SyncDaemon {
		r.stopSyncDaemons(ctx)
		return
	}
	want := ipvsmgr.SyncDaemon{State: ipvsmgr.SyncBackup, Interface: red.SyncDaemonInterface(), SyncID: uint32(red.SyncID)}
	if r.rolesMaster() {
		want.State = ipvsmgr.SyncMaster
	}
	other := ipvsmgr.SyncMaster
	if want.State == ipvsmgr.SyncMaster {
		other = ipvsmgr.SyncBackup
	}
	r.mu.Lock()
	have, started := r.syncStarted[want.State]
	_, otherStarted := r.syncStarted[other]
	r.mu.Unlock()
	if started && have == want && !otherStarted {
		return
	}
	sd := r.h.SyncDaemons(kc)
	if sd == nil {
		r.setSyncErr("this kernel driver has no connection sync daemon")
		return
	}
	running, err := sd.ListSyncDaemons(ctx)
	if err != nil {
		r.setSyncErr("list sync daemons: " + err.Error())
		return
	}
	for _, d := range running {
		if d.State == other || (d.State == want.State && (d.Interface != want.Interface || d.SyncID != want.SyncID)) {
			if err := sd.StopSyncDaemon(ctx, d.State); err != nil {
				r.setSyncErr(fmt.Sprintf("stop %s sync daemon: %v", d.State, err))
				return
			}
			r.log.Info("sync daemon stopped", "state", d.State.String())
		} else if d.State == want.State {
			have, started = want, true
		}
	}
	if !started || have != want {
		if want.State == ipvsmgr.SyncMaster {
			r.atStep(StepSyncSwitch)
		}
		if err := sd.StartSyncDaemon(ctx, want); err != nil {
			r.setSyncErr(fmt.Sprintf("start %s: %v", want, err))
			return
		}
		r.log.Info("sync daemon started", "daemon", want.String())
	}
	r.mu.Lock()
	delete(r.syncStarted, other)
	r.syncStarted[want.State] = want
	r.sync.Want, r.sync.Error = want.State.String(), ""
	r.sync.Running = []string{want.String()}
	r.mu.Unlock()
}

func (r *redRunner) setSyncErr(msg string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.sync.Error != msg {
		r.log.Error("sync daemon", "err", msg)
	}
	r.sync.Error = msg
}

func (r *redRunner) rolesMaster() bool {
	_, roles := r.role.Roles()
	for _, s := range roles {
		if s == vrrp.Master {
			return true
		}
	}
	return false
}

// stopSyncDaemons stops the sync daemons this runner started.
func (r *redRunner) stopSyncDaemons(ctx context.Context) {
	r.mu.Lock()
	started := maps2slice(r.syncStarted)
	clear(r.syncStarted)
	r.sync.Running, r.sync.Want = nil, ""
	r.mu.Unlock()
	if len(started) == 0 {
		return
	}
	kc := r.sk.Conn()
	if kc == nil {
		return
	}
	sd := r.h.SyncDaemons(kc)
	if sd == nil {
		return
	}
	for _, st := range started {
		if err := sd.StopSyncDaemon(ctx, st); err != nil {
			r.log.Warn("stop sync daemon", "state", st.String(), "err", err)
		} else {
			r.log.Info("sync daemon stopped", "state", st.String())
		}
	}
}

func maps2slice(m map[ipvsmgr.SyncState]ipvsmgr.SyncDaemon) []ipvsmgr.SyncState {
	var out []ipvsmgr.SyncState
	for k := range m {
		out = append(out, k)
	}
	sort.Slice(out, func(i, j int) bool { return out[i] < out[j] })
	return out
}

// status is the redundancy part of the status view.
func (r *redRunner) status() *server.RedundancyStatus {
	r.mu.Lock()
	red, vips := r.red, slices.Clone(r.vips)
	s := &server.RedundancyStatus{Transitions: slices.Clone(r.transitions), SyncDaemon: r.sync, VIPs: []string{}, Families: []server.FamilyStatus{}}
	s.SyncDaemon.Running = slices.Clone(r.sync.Running)
	if n := activeConns(r.sk.Snapshot()); n >= 0 {
		s.SyncDaemon.ActiveConnections = &n
	}
	s.TransitionCounts = maps.Clone(r.counts)
	rep, node, fault := r.rep, r.node, r.fault
	s.AuthError = r.authErr
	r.mu.Unlock()
	if rep != nil {
		s.Replication = rep.Status()
	}
	if red == nil {
		if s.Replication == nil {
			return nil
		}
		s.Role = "standalone"
		return s
	}
	if s.Transitions == nil {
		s.Transitions = []server.RedundancyTransition{}
	}
	if s.SyncDaemon.Running == nil {
		s.SyncDaemon.Running = []string{}
	}
	s.VRID, s.Interface = red.VRID, red.Interface
	for _, v := range vips {
		s.VIPs = append(s.VIPs, v.Addr.String())
	}
	forced, roles := r.role.Roles()
	s.Forced = forced != ""
	s.Priority = node.Priority
	if node.Role == "master" {
		s.Priority = vrrp.OwnerPriority
	}
	s.Role = r.families(s, roles).String()
	s.Auth = "none"
	if red.Auth != nil {
		s.Auth = "hmac-sha256 (no instance running)"
	}
	for _, f := range s.Families {
		if f.Auth != "" {
			s.Auth = f.Auth
			break
		}
	}
	if len(roles) == 0 && fault != "" {
		s.Role, s.Fault = "fault", fault
	}
	return s
}

// families adds each running family's status to s (s's master, its
// priority and the last advert's age are the first family's with a master)
// and returns the highest of their roles.
func (r *redRunner) families(s *server.RedundancyStatus, roles map[bool]vrrp.State) vrrp.State {
	now := time.Now()
	best := vrrp.Initialize
	for _, v4 := range []bool{true, false} {
		st, ok := roles[v4]
		if !ok {
			continue
		}
		fs := server.FamilyStatus{Family: familyName(v4), State: st.String()}
		if ri := r.instFor(v4); ri != nil {
			is := ri.inst.Status()
			if is.Master.IsValid() {
				fs.Master = is.Master.String()
			}
			fs.SendErrors = is.SendErrors
			fs.Auth = r.instAuth(v4)
			fs.Dropped = connStats(ri.conn)
			fs.PreemptWait = is.PreemptWait
			if s.Master == "" && fs.Master != "" {
				s.Master, s.MasterPriority = fs.Master, int(is.MasterPriority)
				if st != vrrp.Master {
					s.LastAdvertAge = secondsSince(now, is.LastAdvert)
				}
			}
			if st == vrrp.Fault {
				s.Fault = is.Fault
			}
		}
		if roleOrder(st) > roleOrder(best) {
			best = st
		}
		s.Families = append(s.Families, fs)
	}
	return best
}

func (r *redRunner) instFor(v4 bool) *runningInst {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.insts[v4]
}

// syncDaemonsOf finds the sync-daemon control of a kernel driver, through
// the wrappers the daemon puts around it (countedKernel).
func syncDaemonsOf(k ipvsmgr.Kernel) ipvsmgr.SyncDaemons {
	for k != nil {
		if sd, ok := k.(ipvsmgr.SyncDaemons); ok {
			return sd
		}
		u, ok := k.(interface{ Unwrap() ipvsmgr.Kernel })
		if !ok {
			return nil
		}
		k = u.Unwrap()
	}
	return nil
}

func familyName(v4 bool) string {
	if v4 {
		return "ipv4"
	}
	return "ipv6"
}

// vipsOf are the VIPs of one family.
func vipsOf(vips []ipvsmgr.VIP, v4 bool) []ipvsmgr.VIP {
	var out []ipvsmgr.VIP
	for _, v := range vips {
		if v.Addr.Unmap().Is4() == v4 {
			out = append(out, v)
		}
	}
	return out
}

func roleOrder(s vrrp.State) int {
	switch s {
	case vrrp.Master:
		return 3
	case vrrp.Fault:
		return 2
	case vrrp.Backup:
		return 1
	}
	return 0
}

func secondsSince(now, t time.Time) *float64 {
	if t.IsZero() {
		return nil
	}
	s := now.Sub(t).Seconds()
	return &s
}
