package daemon

import (
	"context"
	"fmt"
	"log/slog"
	"strconv"
	"sync"
	"time"

	"github.com/ipvsctl/ipvsctl/ipvsmgr"
	"github.com/ipvsctl/ipvsctl/ipvsmgr/health"
	"github.com/ipvsctl/ipvsctl/server"
	"github.com/ipvsctl/ipvsctl/server/events"
	"github.com/ipvsctl/ipvsctl/server/store"
)

// Daemon keeps the kernel matching the stored desired state: at once when a
// change is made through its core, within Poll of a revision stored by
// another process, and every Interval anyway, which repairs out-of-band
// changes and finishes drains. It reads the kernel's table into the shared
// snapshot every PollInterval. It runs the health checks of the desired
// state and lays what they see over every reconcile; a change of health is
// applied at once and kept in the store. Where the kernel has no IPVS it
// keeps serving the desired state and retries in the background.
type Daemon struct {
	Core *server.Core
	// side is the core's side for the daemon: its hooks (server.DaemonSide).
	side *server.DaemonSide
	Log  *slog.Logger
	// eventsAfter is the last event published before New: the notify
	// programs and the alerts take every one after it.
	eventsAfter int64
	Interval    time.Duration // full reconcile period; 0 means 10 s
	Poll        time.Duration // how often to look for a revision stored elsewhere; 0 means 1 s
	Snapshot    time.Duration // kernel table poll; 0 means PollInterval
	Retry       time.Duration // how often to retry opening the kernel; 0 means 5 s
	// OnKernel, if set, is called once the kernel is open (before the first reconcile).
	OnKernel func(*server.KernelConn)
	// Check, if set, runs each health check instead of the real checkers (tests).
	Check func(ctx context.Context, spec *ipvsmgr.CheckSpec) health.Result
	// Directors reaches the director this one follows (package client's
	// NewPeer: it shows this director's certificate, and believes only the
	// dial's pins or pair CA; an http:// url is loopback, for tests), to
	// exchange Maglev fingerprints; nil: none is asked.
	Directors func(server.PeerDial) (DirectorPeer, error)
	// QuorumTimeout bounds a service's quorum_up/quorum_down program; 0
	// means DefaultQuorumTimeout.
	QuorumTimeout time.Duration
	// NotifyTimeout bounds a notify program (notify_up, notify_master...);
	// 0 means DefaultNotifyTimeout.
	NotifyTimeout time.Duration
	// AlertRetry is the wait before a webhook's attempt n+1 (n from 1);
	// nil: 1 s, doubled each time (tests shorten it).
	AlertRetry func(n int) time.Duration
	// AlertGrace is how long a stopping daemon goes on sending the alerts
	// queued (the VRRP stop's mail); 0 means alertStopGrace (tests that
	// must not depend on the machine's speed lengthen it).
	AlertGrace time.Duration
	// NotifySocket is systemd's notify socket ($NOTIFY_SOCKET of a
	// Type=notify unit): told READY=1 once the director is ready (every
	// check has run once), STOPPING=1 when it stops; "": none.
	NotifySocket string
	// HealthClock, if set, is the clock the checks and their watchdog run
	// by (tests).
	HealthClock health.Clock

	sk       *sharedKernel // the kernel session, the core's runtime
	runners  []func(ctx context.Context)
	store    *store.Store
	health   *daemonHealth
	quorum   quorumWatch
	maint    maintenanceWatch
	watch    checkerWatch // the checks' watchdog (watchdog.go)
	onRepair func(changes int)
	// onProgram hears of each program run (OnProgramRun).
	onProgram func(name, result string)
	onAlert   func(kind, outcome string)
	// results is the digest of the stored real-server results the loop last
	// saw (set once seen): another process's verify moves the core's count.
	results struct {
		digest uint64
		seen   bool
	}
}

// New makes c the daemon's core: its writes reconcile through the
// daemon's one kernel connection, and its reads use the daemon's snapshot.
func New(c *server.Core, st *store.Store, log *slog.Logger) *Daemon {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	side := server.DaemonSideOf(c)
	d := &Daemon{Core: c, side: side, Log: log, store: st, health: newDaemonHealth(), maint: maintenanceWatch{lookup: lookupHost}}
	sk := &sharedKernel{open: side.OpenKernel, store: st, log: side.Log(), ready: make(chan struct{}), check: d.runCheck, overlay: side.RoleOverlay}
	sk.health = health.NewRunner(health.Config{OnCheck: d.checked, Notify: d.notify, Log: log})
	d.sk = sk
	// The notify programs and the alerts follow every event from here: the
	// core's writes reach the daemon from AttachRuntime on, before Run runs.
	d.eventsAfter = c.Events().Last()
	side.Attach(sk)
	side.SetChecker(d.checkerStatus)
	return d
}

func orDuration(d, def time.Duration) time.Duration {
	if d == 0 {
		return def
	}
	return d
}

// Run reconciles and runs the health checks until ctx is cancelled, then
// closes the kernel.
func (d *Daemon) Run(ctx context.Context) error {
	defer d.sk.close()
	// The events, the notify programs and the alerts follow to the very end
	// (deferred first, they stop last): what the stop tells of, VRRP
	// resigning, is kept, runs notify_stop and is mailed.
	defer d.startEventFollowers(ctx)()
	// The runners (VRRP) stop before the kernel closes: a master resigns,
	// then its VIPs go.
	for _, run := range d.runners {
		done := make(chan struct{})
		go func() { defer close(done); run(ctx) }()
		defer func() { <-done }()
	}
	healthDone := d.startHealth(ctx)
	defer d.quorum.wg.Wait() // the quorum programs end with ctx (their timeout's kill)
	defer func() { <-healthDone }()
	// BGP withdraws its routes first when ctx ends (LIFO defers).
	bgpDone := d.startBGP(ctx)
	defer func() { <-bgpDone }()
	go d.pollKernel(ctx, orDuration(d.Snapshot, server.PollInterval))
	d.loop(ctx)
	return nil
}

// startEventFollowers runs the event log's writer, the notify programs and
// the alerts, past ctx's end, until the function it returns is called; that
// function waits for them.
func (d *Daemon) startEventFollowers(ctx context.Context) (stop func()) {
	evCtx, evStop := context.WithCancel(context.WithoutCancel(ctx))
	var wg sync.WaitGroup
	wg.Go(func() { d.Core.Events().Run(evCtx) })
	if d.Core.Events() != nil {
		wg.Go(func() { d.runNotify(evCtx, d.eventsAfter) })
		wg.Go(func() { d.runAlerts(evCtx, d.eventsAfter) })
	}
	return func() { evStop(); wg.Wait() }
}

// loop opens the kernel (again, after a failure), reconciles when the
// desired state moves or the periodic reconcile is due, and follows the
// checks, the quorums and the maintenance files, until ctx ends.
func (d *Daemon) loop(ctx context.Context) {
	sk := d.sk
	interval, poll := orDuration(d.Interval, 10*time.Second), orDuration(d.Poll, time.Second)
	tick := time.NewTicker(poll)
	defer tick.Stop()
	var lastTry, lastRun time.Time
	lastRev := int64(-1)
	left := false // the last reconcile left its revision to a write
	watch := d.store.Watch()
	defer watch.Close()
	for {
		opened := false // the kernel has just been opened: a restore, whatever the revision
		if !sk.isOpen() && time.Since(lastTry) >= orDuration(d.Retry, 5*time.Second) {
			lastTry = time.Now()
			d.openKernel(ctx)
			opened = sk.isOpen()
		}
		// Another process's commit moves the database's data_version: only
		// then can the revision have moved (this core's own writes tell
		// the daemon at once), or when the periodic reconcile is due.
		changed := watch.Changed(ctx)
		if changed {
			d.noticeResults(ctx)
		}
		if changed || opened || left || lastRev < 0 || time.Since(lastRun) >= interval {
			rev, err := d.store.CurrentRevision(ctx)
			switch {
			case err != nil && ctx.Err() == nil:
				d.Log.Error("read desired state revision", "err", err)
			case err == nil && (rev != lastRev || opened || time.Since(lastRun) >= interval):
				// A revision left to a write under way is asked for again at
				// each tick until taken: the database will not move again to
				// say so if the write ends without offering it.
				left = !d.reconcile(ctx, rev, rev != lastRev, opened)
				if !left {
					lastRev, lastRun = rev, time.Now()
				}
				d.checkQuorum(ctx)
			}
		}
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
			d.checkMaintenance(ctx)
		case <-d.health.wake:
			d.healthChanged(ctx)
			d.checkQuorum(ctx)
		}
	}
}

func (d *Daemon) openKernel(ctx context.Context) {
	sk := d.sk
	sk.mu.Lock()
	first := sk.openErr == nil
	sk.mu.Unlock()
	if err := sk.connect(); err != nil {
		if first {
			d.Log.Error("kernel IPVS unavailable; serving the desired state, retrying in the background", "err", err)
		}
		return
	}
	d.Log.Info("kernel IPVS open")
	sk.mu.Lock()
	kc := sk.conn
	sk.mu.Unlock()
	if d.OnKernel != nil {
		d.OnKernel(kc)
	}
	sk.poll(ctx)
}

// reconcile loads revision rev's state if it is newer than what the core
// knows, and makes the kernel match the newest state. After the kernel has
// just been opened (restore) it always does: a write made while the daemon
// was starting could not reconcile its own revision. It returns false when
// it left a new revision for later: a write through the core is under way
// and has not offered its revision yet (the revision is most likely its
// own, whose answer must list the kernel changes it made); the loop asks
// again on its next tick, when that write has offered it or ended.
func (d *Daemon) reconcile(ctx context.Context, rev int64, newRevision, restore bool) bool {
	sk := d.sk
	sk.mu.Lock()
	stale := rev > sk.rev || sk.desired == nil
	ours := newRevision && rev <= sk.reconciling && !restore
	pending := newRevision && !ours && !restore && sk.writing > 0
	sk.mu.Unlock()
	if ours {
		return true // a write through the core made it and reconciles it itself
	}
	if pending {
		return false
	}
	if stale {
		st, cur, err := d.store.Current(ctx)
		if err != nil {
			d.Log.Error("read desired state", "err", err)
			return true
		}
		desired, err := ipvsmgr.Compile(st)
		if err != nil {
			d.Log.Error("stored desired state is invalid", "revision", cur, "err", err)
			return true
		}
		sk.offer(cur, desired, false)
	}
	// A fresh read first, over the poll's own connection and outside the
	// reconcile's lock (a write does not wait behind it); the reconcile then
	// plans on it, which repairs what others changed.
	sk.poll(ctx)
	drift := sk.drift()
	res, err := sk.reconcile(ctx, true, nil)
	if err != nil {
		if sk.isOpen() {
			d.Log.Error("reconcile", "revision", rev, "err", err)
			d.reconcileFailed(rev, err)
		}
		return true
	}
	// A repair is what another process changed, not every change: those a
	// health change makes that its own reconcile has not made yet are not.
	if n := repairs(drift, res); n > 0 && !newRevision && !restore {
		d.Log.Warn("kernel had drifted from the desired state; repaired", "revision", rev, "changes", n)
		d.Core.Events().Publish(events.Event{Type: events.DriftRepaired, Subject: "kernel",
			Message: fmt.Sprintf("the kernel had drifted from revision %d; %d changes repaired it", rev, n),
			Fields:  map[string]string{"revision": strconv.FormatInt(rev, 10), "changes": strconv.Itoa(n)}})
		if d.onRepair != nil {
			d.onRepair(n)
		}
	}
	for _, dr := range res.Retiring {
		d.Log.Info("draining", "service", dr.Service.String(), "server", dr.Dest.String(), "active", dr.ActiveConns)
	}
	return true
}

// noticeResults looks at the stored real-server results after something
// was committed: results this core did not store (the CLI's realserver
// verify stores them from its own process) move its count too, so that no
// view keyed on it shows the ones before.
func (d *Daemon) noticeResults(ctx context.Context) {
	h, err := d.store.ResultsDigest(ctx)
	if err != nil {
		if ctx.Err() == nil {
			d.Log.Error("read real-server results", "err", err)
		}
		return
	}
	if !d.results.seen || h != d.results.digest {
		d.side.ResultsChanged()
	}
	d.results.digest, d.results.seen = h, true
}

func (d *Daemon) pollKernel(ctx context.Context, every time.Duration) {
	t := time.NewTicker(every)
	defer t.Stop()
	for {
		d.sk.poll(ctx)
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

// OnRepair calls f after a periodic reconcile repaired what another process
// changed in the kernel (metrics), with the number of changes it made.
func (d *Daemon) OnRepair(f func(changes int)) { d.onRepair = f }

// OnReconcile calls f after every reconcile of the daemon's (metrics).
func (d *Daemon) OnReconcile(f func(server.ReconcileReport)) { d.sk.onReconcile = f }

// Observer counts the daemon's work: server/metrics.Metrics.
type Observer interface {
	Reconciled(server.ReconcileReport)
	Repaired(changes int)
	HealthEvent(health.Event)
	Checked(spec *ipvsmgr.CheckSpec, r health.Result)
	QuorumRun(svc ipvsmgr.ServiceKey, up, failed bool)
	ProgramRan(name, result string)
	Alert(kind, outcome string)
}

// Observe has o count every reconcile and repair, check and health event,
// quorum and program run, and alert. Call it before Run.
func (d *Daemon) Observe(o Observer) {
	d.OnReconcile(o.Reconciled)
	d.OnRepair(o.Repaired)
	d.OnHealthEvent(o.HealthEvent)
	d.OnCheck(o.Checked)
	d.OnQuorumRun(func(r QuorumRun) { o.QuorumRun(r.Service, r.Up, r.Err != "") })
	d.OnProgramRun(o.ProgramRan)
	d.OnAlert(o.Alert)
}

// AddRunner has run run beside the daemon's loop from the start of Run
// until its ctx ends; Run waits for it before it closes the kernel (the
// redundancy runner: a master resigns, then its VIPs go). Call it before Run.
func (d *Daemon) AddRunner(run func(ctx context.Context)) { d.runners = append(d.runners, run) }

// Store is the daemon's store, for its runners.
func (d *Daemon) Store() *store.Store { return d.store }

// Session is the daemon's kernel session, for its runners.
func (d *Daemon) Session() *Session { return &Session{sk: d.sk} }
