package server

import (
	"context"
	"errors"
	"time"

	"github.com/ipvsctl/ipvsctl/ipvsmgr"
	"github.com/ipvsctl/ipvsctl/ipvsmgr/health"
)

// Runtime is the part of a director that outlives one call: the daemon's
// kernel session, its snapshot and its checks (package server/daemon). The
// core reaches the kernel only through it. A Core without a daemon (the CLI
// on the database) has the local one: each call opens the kernel, reads or
// reconciles once, and closes it; no checks run.
type Runtime interface {
	// BeginWrite starts a write's kernel half before the write stores
	// anything (the CLI takes the kernel lock and starts reading the table,
	// so that the read overlaps with decoding and storing). apply finishes
	// it once the revision is stored; release is called in any case.
	BeginWrite(ctx context.Context, o WriteOptions) (apply ApplyFunc, release func(), err error)
	// Table is the kernel's table: the snapshot (read now if there is none
	// yet), or one read of the kernel.
	Table(ctx context.Context) (*Snapshot, error)
	// Plan is what a reconcile of desired (the role laid over it) would
	// change.
	Plan(ctx context.Context, desired *ipvsmgr.Desired) (*ipvsmgr.Planned, error)
	// Host is the host half for a read (the VIPs on their interfaces);
	// done is called after it.
	Host() (h ipvsmgr.Host, done func(), err error)
	// Check runs one check now.
	Check(ctx context.Context, spec *ipvsmgr.CheckSpec) health.Result
}

// LiveRuntime is the daemon's Runtime, which lives on between calls: it
// holds the desired state, the kernel's snapshot, its last reconcile and
// the running checks. Without one (the CLI) the core reads the store and
// the kernel for each call.
type LiveRuntime interface {
	Runtime
	// Known is the newest desired state the runtime holds, with the
	// checks' view over it, and its revision; d is nil when it holds none.
	Known() (rev int64, d *ipvsmgr.Desired)
	// Snapshot is the last table read; nil before the first poll.
	Snapshot() *Snapshot
	// LastReconcile is the last reconcile; ok is false before the first.
	LastReconcile() (rep ReconcileReport, ok bool)
	// PlanKnown is Plan for Known's state; ok is false when there is none.
	PlanKnown(ctx context.Context) (p *ipvsmgr.Planned, ok bool, err error)
	// Checks is what the running checks say.
	Checks() []health.Status
	// Counters are what views are keyed on (RenderKey), and the reads of
	// the kernel's whole table.
	Counters() RuntimeCounters
}

// ApplyFunc makes the kernel match desired (of res.Revision) after a write
// stored it, filling res (Reconciled); only names the services the write
// touched (nil: any).
type ApplyFunc func(ctx context.Context, res *WriteResult, desired *ipvsmgr.Desired, o WriteOptions, only []ipvsmgr.ServiceKey) error

// RuntimeCounters are the runtime's change counters.
type RuntimeCounters struct {
	Rev         int64 // the newest revision known
	Reconciles  int64
	Health      int64 // the checks' changes and new sets of checks
	KernelReads int64
}

// Reconciled records a reconcile's result in a write's.
func (r *WriteResult) Reconciled(got *ipvsmgr.Result) {
	r.Result, r.Applied, r.Counts = *got, true, changeCounts(got.Applied)
}

// localRuntime is the runtime of a process without a daemon.
type localRuntime struct{ c *Core }

// kernelOpenError is the kernel failing to open for a write's reconcile.
type kernelOpenError struct{ err error }

func (e *kernelOpenError) Error() string { return e.err.Error() }
func (e *kernelOpenError) Unwrap() error { return e.err }

func (l localRuntime) BeginWrite(ctx context.Context, o WriteOptions) (ApplyFunc, func(), error) {
	if o.NoApply {
		return func(context.Context, *WriteResult, *ipvsmgr.Desired, WriteOptions, []ipvsmgr.ServiceKey) error {
			return nil
		}, func() {}, nil
	}
	c := l.c
	var lock *kernelLock
	if c.lockPath != "" {
		var err error
		if lock, err = lockKernel(ctx, c.lockPath, 30*time.Second); err != nil {
			return nil, nil, err
		}
	}
	wait := prefetch(ctx, c.open)
	apply := func(ctx context.Context, res *WriteResult, desired *ipvsmgr.Desired, o WriteOptions, _ []ipvsmgr.ServiceKey) error {
		if o.NoApply {
			return nil
		}
		kc, err := wait()
		if err != nil {
			return &kernelOpenError{err}
		}
		defer kc.Close()
		desired = withoutDaemon(c.roleOverlay(desired)) // without the daemon: no VRRP (no VIPs on a redundant director), no checks
		got, err := reconcileWaiting(ctx, kc.reconciler(c.store, c.log), desired, o)
		if err != nil {
			return err
		}
		res.Reconciled(got)
		return nil
	}
	return apply, lock.unlock, nil
}

func (l localRuntime) Table(ctx context.Context) (*Snapshot, error) {
	kc, err := l.c.open()
	if err != nil {
		return nil, err
	}
	defer kc.Close()
	t, err := kc.Kernel.Table(ctx)
	if err != nil {
		return nil, err
	}
	return &Snapshot{Table: t, At: l.c.now()}, nil
}

func (l localRuntime) Plan(ctx context.Context, desired *ipvsmgr.Desired) (*ipvsmgr.Planned, error) {
	kc, err := l.c.open()
	if err != nil {
		return nil, err
	}
	defer kc.Close()
	return kc.reconciler(l.c.store, l.c.log).Plan(ctx, withoutDaemon(desired))
}

func (l localRuntime) Host() (ipvsmgr.Host, func(), error) {
	kc, err := l.c.open()
	if err != nil {
		return nil, func() {}, err
	}
	return kc.Host, kc.Close, nil
}

func (localRuntime) Check(ctx context.Context, spec *ipvsmgr.CheckSpec) health.Result {
	return (&health.Checker{}).Run(ctx, spec)
}

// isOpenError says err is the kernel failing to open for a write.
func isOpenError(err error) bool {
	var oe *kernelOpenError
	return errors.As(err, &oe)
}

// Snapshot is the kernel's table as the daemon's poller last read it: every
// reader (API, panel, metrics) shares it, and none reads the kernel itself.
type Snapshot struct {
	Table *ipvsmgr.Table
	At    time.Time // when it was read
	Err   error     // why the last read failed (Table is then the one before)
}

// ReconcileReport is the outcome of the daemon's last reconcile.
type ReconcileReport struct {
	Revision int64
	At       time.Time
	Duration time.Duration
	Changes  int
	Failures []ipvsmgr.Failure
	Retiring int
	Err      string
}

// The live runtime's reads, as a core without one answers them: no state
// held, no snapshot, no reconcile, no checks.

func (c *Core) known() (int64, *ipvsmgr.Desired) {
	if c.live == nil {
		return 0, nil
	}
	return c.live.Known()
}

func (c *Core) checks() (st []health.Status, running bool) {
	if c.live == nil {
		return nil, false
	}
	return c.live.Checks(), true
}

func (c *Core) counters() RuntimeCounters {
	if c.live == nil {
		return RuntimeCounters{}
	}
	return c.live.Counters()
}

// Snapshot returns the daemon's last kernel snapshot; nil without a daemon
// or before its first poll.
func (c *Core) Snapshot() *Snapshot {
	if c.live == nil {
		return nil
	}
	return c.live.Snapshot()
}

// LastReconcile returns the daemon's last reconcile; ok is false without a
// daemon or before its first reconcile.
func (c *Core) LastReconcile() (rep ReconcileReport, ok bool) {
	if c.live == nil {
		return ReconcileReport{}, false
	}
	return c.live.LastReconcile()
}
