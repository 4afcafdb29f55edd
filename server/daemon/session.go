package daemon

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/ipvsctl/ipvsctl/ipvsmgr"
	"github.com/ipvsctl/ipvsctl/ipvsmgr/health"
	"github.com/ipvsctl/ipvsctl/server"
	"github.com/ipvsctl/ipvsctl/server/store"
)

// sharedKernel is the daemon's one kernel connection, its reconciler, the
// newest desired state it knows of, and the snapshot.
type sharedKernel struct {
	open  func() (*server.KernelConn, error)
	store *store.Store
	log   *slog.Logger

	mu   sync.Mutex // one reconcile at a time; guards the fields below
	conn *server.KernelConn
	rec  *ipvsmgr.Reconciler
	// reader is what the poll reads the table through: a connection of
	// its own (readConn) when one could be opened.
	reader   ipvsmgr.Kernel
	readConn *server.KernelConn
	openErr  error
	rev      int64
	desired  *ipvsmgr.Desired
	// reconciling is the newest revision a write offered and reconciles
	// itself: the daemon's loop leaves it to the write, whose answer then
	// lists the kernel changes it made.
	reconciling int64
	// writing counts the writes begun that will reconcile their own
	// revision and have not offered it yet or ended: a revision the loop
	// finds meanwhile is likely one of theirs (see Daemon.reconcile).
	writing int
	last    server.ReconcileReport
	ready   chan struct{} // closed once the kernel is open
	// newDesired is told of each new desired state (under mu: it must
	// return at once); the redundancy runner, which ticks only while it has
	// something to watch, hears of settings.redundancy through it.
	newDesired func()

	// health runs the daemon's checks; its view is laid over every desired
	// state reconciled. check runs one check (the runner's, and "check now").
	health *health.Runner
	check  func(ctx context.Context, spec *ipvsmgr.CheckSpec) health.Result
	// maint is what the maintenance directory held out at its last read
	// (maintenance.go), laid over every plan with the health.
	maint atomic.Pointer[ipvsmgr.Maintenance]

	snap atomic.Pointer[server.Snapshot]
	// left is the table as the last reconcile left it (drift.go).
	left atomic.Pointer[server.Snapshot]
	// planMu guards the last plan a diff made of the snapshot (plan): the
	// viewers polling share it.
	planMu     sync.Mutex
	planned    *ipvsmgr.Planned
	plannedFor planKey
	reconciles atomic.Int64
	// knownRev is rev, for readers that must not wait for mu (which a
	// reconcile holds): the panel keys its pages on it.
	knownRev atomic.Int64
	// healthGen counts the checks' changes and every new set of checks.
	healthGen atomic.Int64
	// kernelReads counts reads of the whole kernel table (poll, reconcile,
	// diff): however many clients read the snapshot, this grows only with
	// the poll interval and the reconciles.
	kernelReads atomic.Int64
	// onReconcile, if set, hears of every reconcile (metrics).
	onReconcile func(server.ReconcileReport)
	// overlay lays the director's VRRP role over the desired state (Core.RoleOverlay).
	overlay func(*ipvsmgr.Desired) *ipvsmgr.Desired
}

var errKernelClosed = errors.New("kernel connection closed")

// knownFor is how long a table read stays good enough to plan a write on:
// the poll refreshes it every PollInterval, and every reconcile keeps it
// current with its own changes.
const knownFor = 10 * time.Second

// unavailable says why the kernel is not open (the caller holds mu).
func (sk *sharedKernel) unavailable() error { return unavailable(sk.openErr) }

// Unavailable says why the kernel is not open.
func Unavailable(openErr error) error { return unavailable(openErr) }

func unavailable(openErr error) error {
	if openErr == nil {
		return errors.New("kernel IPVS not opened yet: the daemon is starting")
	}
	if errors.Is(openErr, ipvsmgr.ErrIPVSUnavailable) {
		return openErr
	}
	return fmt.Errorf("kernel IPVS unavailable: %w", openErr)
}

// unavailableNow is unavailable for a caller that does not hold mu.
func (sk *sharedKernel) unavailableNow() error {
	sk.mu.Lock()
	defer sk.mu.Unlock()
	return sk.unavailable()
}

func (sk *sharedKernel) isOpen() bool {
	sk.mu.Lock()
	defer sk.mu.Unlock()
	return sk.conn != nil
}

// connect opens the kernel unless it is open; it returns why it could not.
func (sk *sharedKernel) connect() error {
	sk.mu.Lock()
	defer sk.mu.Unlock()
	if sk.conn != nil {
		return nil
	}
	kc, err := sk.open()
	if err != nil {
		sk.openErr = err
		return err
	}
	counted := *kc
	counted.Kernel = &countedKernel{Kernel: kc.Kernel, reads: &sk.kernelReads}
	sk.conn, sk.openErr = &counted, nil
	sk.rec = &ipvsmgr.Reconciler{Kernel: sk.conn.Kernel, Host: sk.conn.Host, Ledger: &cachedLedger{LedgerStore: sk.store}, Log: sk.log}
	// The poll reads over a connection of its own: a write does not wait
	// behind the poll's read of a large table.
	sk.reader = sk.conn.Kernel
	if rc, err := sk.open(); err == nil {
		sk.readConn = rc
		sk.reader = &countedKernel{Kernel: rc.Kernel, reads: &sk.kernelReads}
	}
	close(sk.ready)
	return nil
}

func (sk *sharedKernel) close() {
	sk.mu.Lock()
	defer sk.mu.Unlock()
	if sk.conn != nil {
		sk.conn.Close()
		sk.conn, sk.rec, sk.openErr = nil, nil, errKernelClosed
	}
	if sk.readConn != nil {
		sk.readConn.Close()
		sk.readConn, sk.reader = nil, nil
	}
}

// offer makes desired (of revision rev) the state to reconcile, unless a
// newer one is known already, and has its checks run (servers whose check
// did not change keep their health). willReconcile says the caller
// reconciles it at once.
func (sk *sharedKernel) offer(rev int64, desired *ipvsmgr.Desired, willReconcile bool) {
	sk.mu.Lock()
	defer sk.mu.Unlock()
	if willReconcile {
		sk.reconciling = max(sk.reconciling, rev)
	}
	if rev >= sk.rev {
		sk.rev, sk.desired = rev, desired
		sk.knownRev.Store(rev)
		if sk.newDesired != nil {
			sk.newDesired()
		}
		if sk.health != nil {
			sk.health.Update(desired.Checks)
			sk.healthGen.Add(1)
		}
	}
}

// withHealth is d with the checks' current view laid over it: every plan
// the daemon makes, a write's included, sees which servers are down.
func (sk *sharedKernel) withHealth(d *ipvsmgr.Desired) *ipvsmgr.Desired {
	if sk.health == nil || d == nil {
		return d
	}
	cp := *d
	cp.Health = sk.health.View()
	cp.Health.Maintenance = sk.maint.Load()
	return &cp
}

// maintenanceDir is the newest desired state's settings.maintenance_dir.
func (sk *sharedKernel) maintenanceDir() string {
	sk.mu.Lock()
	defer sk.mu.Unlock()
	if sk.desired == nil {
		return ""
	}
	return sk.desired.Settings.MaintenanceDir
}

// current is the newest desired state known and its revision, with health.
func (sk *sharedKernel) current() (int64, *ipvsmgr.Desired) {
	sk.mu.Lock()
	defer sk.mu.Unlock()
	return sk.rev, sk.withHealth(sk.desired)
}

// newest is the newest desired state known and its revision, without the
// checks' health: for a reader of its settings or its checks. Laying the
// health over copies every checked server's; the alerts and the notify
// programs read the state once per event, and 1,000 servers coming up at
// start made 2,000 such copies (400 MB allocated within seconds).
func (sk *sharedKernel) newest() (int64, *ipvsmgr.Desired) {
	sk.mu.Lock()
	defer sk.mu.Unlock()
	return sk.rev, sk.desired
}

// reconcile makes the kernel match the newest desired state known. With
// known, it plans against the table the daemon knows the kernel has (the
// snapshot: its last read with the changes made since), as a write does; the
// periodic reconcile reads the kernel, which repairs what others changed.
func (sk *sharedKernel) reconcile(ctx context.Context, known bool, only []ipvsmgr.ServiceKey) (*ipvsmgr.Result, error) {
	sk.mu.Lock()
	defer sk.mu.Unlock()
	if sk.conn == nil {
		return nil, sk.unavailable()
	}
	if sk.desired == nil {
		return &ipvsmgr.Result{}, nil
	}
	start := time.Now()
	var res *ipvsmgr.Result
	var err error
	desired := sk.overlay(sk.withHealth(sk.desired))
	if snap := sk.snap.Load(); known && snap != nil && snap.Table != nil && snap.Err == nil && time.Since(snap.At) < knownFor {
		res, err = sk.rec.ReconcileOn(ctx, desired, snap.Table, only)
	} else {
		res, err = sk.rec.Reconcile(ctx, desired)
	}
	rep := server.ReconcileReport{Revision: sk.rev, At: start, Duration: time.Since(start)}
	if err != nil {
		rep.Err = err.Error()
	} else {
		rep.Changes, rep.Failures, rep.Retiring = len(res.Changes), res.Failures, len(res.Retiring)
		// What the kernel has now is known without reading it again: the
		// table the reconcile read, with its changes.
		left := &server.Snapshot{Table: res.Table, At: time.Now()}
		sk.snap.Store(left)
		sk.left.Store(left)
	}
	sk.last = rep
	sk.reconciles.Add(1)
	if sk.onReconcile != nil {
		sk.onReconcile(rep)
	}
	return res, err
}

// plan is what a reconcile of desired would do, planned against the
// snapshot: a viewer's diff never reads the kernel and holds no lock a write
// takes (it waits for a reconcile in progress only to read the ledger).
// base, when not nil, is the desired state known that desired was made
// from (health and role laid over it): the IPVS half planned for it is kept
// until the snapshot, the state or the health changes, so that any number
// of viewers cost one plan per poll.
func (sk *sharedKernel) plan(ctx context.Context, desired, base *ipvsmgr.Desired) (*ipvsmgr.Planned, error) {
	sk.mu.Lock()
	rec, err := sk.rec, sk.unavailable()
	sk.mu.Unlock()
	if rec == nil {
		return nil, err
	}
	snap := sk.snap.Load()
	if snap == nil || snap.Table == nil {
		if snap != nil && snap.Err != nil {
			return nil, fmt.Errorf("read kernel IPVS table: %w", snap.Err)
		}
		return nil, server.Errorf(server.CodeUnavailable, "the kernel's table has not been read yet: the daemon is starting")
	}
	key := planKey{snap: snap, base: base, health: sk.healthGen.Load()}
	sk.planMu.Lock()
	p := sk.planned
	if base == nil || sk.plannedFor != key || p == nil {
		if p, err = rec.PlanTable(ctx, desired, snap.Table); err != nil {
			sk.planMu.Unlock()
			return nil, err
		}
		sk.planned, sk.plannedFor = p, key
	}
	sk.planMu.Unlock()
	out := *p
	if out.Host, err = rec.PlanHostChanges(ctx, desired); err != nil {
		return nil, err
	}
	return &out, nil
}

// planKey is what a plan of the IPVS table is a function of.
type planKey struct {
	snap   *server.Snapshot
	base   *ipvsmgr.Desired
	health int64
}

// planCurrent is plan for the newest desired state known, as its next
// reconcile would see it (health and role laid over it); ok is false when
// the daemon knows none yet.
func (sk *sharedKernel) planCurrent(ctx context.Context) (p *ipvsmgr.Planned, ok bool, err error) {
	sk.mu.Lock()
	base := sk.desired
	sk.mu.Unlock()
	if base == nil {
		return nil, false, nil
	}
	p, err = sk.plan(ctx, sk.overlay(sk.withHealth(base)), base)
	return p, true, err
}

// reconcileWaiting reconciles, then again every second while real servers
// drain, unless told not to wait.
// only names the services the write changed (nil: any).
func (sk *sharedKernel) reconcileWaiting(ctx context.Context, o server.WriteOptions, only []ipvsmgr.ServiceKey) (*ipvsmgr.Result, error) {
	return server.WaitDrains(ctx, o, func(first bool) (*ipvsmgr.Result, error) {
		if first {
			return sk.reconcile(ctx, true, only)
		}
		return sk.reconcile(ctx, false, nil)
	})
}

// poll reads the kernel's table into the snapshot, unless a reconcile
// stored a newer one while it read.
func (sk *sharedKernel) poll(ctx context.Context) {
	sk.mu.Lock()
	kc, reader, openErr := sk.conn, sk.reader, sk.openErr
	sk.mu.Unlock()
	next := &server.Snapshot{At: time.Now()}
	if kc == nil {
		next.Err = unavailable(openErr)
	} else if t, err := reader.Table(ctx); err != nil {
		next.Err = err
	} else {
		next.Table = t
	}
	for {
		prev := sk.snap.Load()
		if prev != nil && prev.At.After(next.At) {
			return
		}
		if next.Err != nil && prev != nil && kc != nil {
			next.Table = prev.Table // keep showing the last table, marked stale
		}
		if sk.snap.CompareAndSwap(prev, next) {
			return
		}
	}
}

// countedKernel counts the reads of the whole table.
type countedKernel struct {
	ipvsmgr.Kernel
	reads *atomic.Int64
}

// Unwrap is the driver counted (its sync daemons, for one).
func (k *countedKernel) Unwrap() ipvsmgr.Kernel { return k.Kernel }

func (k *countedKernel) Table(ctx context.Context) (*ipvsmgr.Table, error) {
	k.reads.Add(1)
	return k.Kernel.Table(ctx)
}

func (sk *sharedKernel) lastReconcile() server.ReconcileReport {
	sk.mu.Lock()
	defer sk.mu.Unlock()
	return sk.last
}

// The kernel session is the daemon's core's Runtime.

func (sk *sharedKernel) BeginWrite(_ context.Context, o server.WriteOptions) (server.ApplyFunc, func(), error) {
	if o.NoApply {
		return sk.apply, func() {}, nil // the daemon's reconcile reads under its own lock
	}
	sk.mu.Lock()
	sk.writing++
	sk.mu.Unlock()
	var once sync.Once
	return sk.apply, func() {
		once.Do(func() {
			sk.mu.Lock()
			sk.writing--
			sk.mu.Unlock()
		})
	}, nil
}

// apply tells the daemon of a new revision and reconciles it, unless NoApply.
func (sk *sharedKernel) apply(ctx context.Context, res *server.WriteResult, desired *ipvsmgr.Desired, o server.WriteOptions, only []ipvsmgr.ServiceKey) error {
	sk.offer(res.Revision, desired, !o.NoApply)
	if o.NoApply {
		return nil
	}
	got, err := sk.reconcileWaiting(ctx, o, only)
	if err != nil {
		res.Failures = append(res.Failures, ipvsmgr.Failure{Service: "kernel", Change: "reconcile", Err: err.Error()})
		return nil
	}
	res.Reconciled(got)
	return nil
}

func (sk *sharedKernel) Known() (int64, *ipvsmgr.Desired) { return sk.current() }

func (sk *sharedKernel) Table(ctx context.Context) (*server.Snapshot, error) {
	snap := sk.snap.Load()
	if snap == nil {
		sk.poll(ctx)
		snap = sk.snap.Load()
	}
	return snap, nil
}

func (sk *sharedKernel) Snapshot() *server.Snapshot { return sk.snap.Load() }

func (sk *sharedKernel) LastReconcile() (server.ReconcileReport, bool) {
	rep := sk.lastReconcile()
	return rep, !rep.At.IsZero()
}

func (sk *sharedKernel) Plan(ctx context.Context, desired *ipvsmgr.Desired) (*ipvsmgr.Planned, error) {
	return sk.plan(ctx, sk.withHealth(desired), nil)
}

func (sk *sharedKernel) PlanKnown(ctx context.Context) (*ipvsmgr.Planned, bool, error) {
	return sk.planCurrent(ctx)
}

func (sk *sharedKernel) Host() (ipvsmgr.Host, func(), error) {
	sk.mu.Lock()
	conn := sk.conn
	sk.mu.Unlock()
	if conn == nil {
		return nil, func() {}, sk.unavailableNow()
	}
	return conn.Host, func() {}, nil
}

func (sk *sharedKernel) Checks() []health.Status {
	if sk.health == nil {
		return nil
	}
	return sk.health.Status()
}

func (sk *sharedKernel) Check(ctx context.Context, spec *ipvsmgr.CheckSpec) health.Result {
	if sk.check == nil {
		return (&health.Checker{}).Run(ctx, spec)
	}
	return sk.check(ctx, spec)
}

func (sk *sharedKernel) Counters() server.RuntimeCounters {
	return server.RuntimeCounters{Rev: sk.knownRev.Load(), Reconciles: sk.reconciles.Load(), Health: sk.healthGen.Load(),
		KernelReads: sk.kernelReads.Load()}
}

// Session is the kernel session as the daemon's runners (redundancy) see it.
type Session struct{ sk *sharedKernel }

// View is the newest desired state known (nil before one), the kernel
// connection (nil while it is not open), why it is not, and the last
// reconcile's report.
func (s *Session) View() (desired *ipvsmgr.Desired, kc *server.KernelConn, openErr error, last server.ReconcileReport) {
	sk := s.sk
	sk.mu.Lock()
	defer sk.mu.Unlock()
	return sk.desired, sk.conn, sk.openErr, sk.last
}

// Snapshot is the last table the poll read; nil before the first.
func (s *Session) Snapshot() *server.Snapshot { return s.sk.Snapshot() }

// Conn is the kernel connection; nil while it is not open.
func (s *Session) Conn() *server.KernelConn {
	s.sk.mu.Lock()
	defer s.sk.mu.Unlock()
	return s.sk.conn
}

// Reconciler is the session's reconciler; nil while the kernel is not open.
func (s *Session) Reconciler() *ipvsmgr.Reconciler {
	s.sk.mu.Lock()
	defer s.sk.mu.Unlock()
	return s.sk.rec
}

// Reconcile makes the kernel match the newest desired state known,
// planned against the snapshot.
func (s *Session) Reconcile(ctx context.Context) (*ipvsmgr.Result, error) {
	return s.sk.reconcile(ctx, true, nil)
}

// OnNewDesired has f told of each new desired state; f must return at once.
func (s *Session) OnNewDesired(f func()) {
	s.sk.mu.Lock()
	s.sk.newDesired = f
	s.sk.mu.Unlock()
}
