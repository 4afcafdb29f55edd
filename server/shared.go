package server

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/ipvsctl/ipvsctl/ipvsmgr"
	"github.com/ipvsctl/ipvsctl/server/store"
)

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
	Draining int
	Err      string
}

// sharedKernel is the daemon's one kernel connection, its reconciler, the
// newest desired state it knows of, and the snapshot.
type sharedKernel struct {
	open  func() (*KernelConn, error)
	store *store.Store
	log   *slog.Logger

	mu      sync.Mutex // one reconcile at a time; guards the fields below
	conn    *KernelConn
	rec     *ipvsmgr.Reconciler
	openErr error
	rev     int64
	desired *ipvsmgr.Desired
	last    ReconcileReport
	ready   chan struct{} // closed once the kernel is open

	snap       atomic.Pointer[Snapshot]
	reconciles atomic.Int64
	// kernelReads counts reads of the whole kernel table (poll, reconcile,
	// diff): however many clients read the snapshot, this grows only with
	// the poll interval and the reconciles.
	kernelReads atomic.Int64
	// onReconcile, if set, hears of every reconcile (metrics).
	onReconcile func(ReconcileReport)
}

var errKernelClosed = errors.New("kernel connection closed")

// unavailable says why the kernel is not open (the caller holds mu).
func (sk *sharedKernel) unavailable() error { return unavailable(sk.openErr) }

func unavailable(openErr error) error {
	if errors.Is(openErr, ipvsmgr.ErrIPVSUnavailable) {
		return openErr
	}
	return fmt.Errorf("kernel IPVS unavailable: %w", openErr)
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
	sk.rec = sk.conn.reconciler(sk.store, sk.log)
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
}

// offer makes desired (of revision rev) the state to reconcile, unless a
// newer one is known already.
func (sk *sharedKernel) offer(rev int64, desired *ipvsmgr.Desired) {
	sk.mu.Lock()
	defer sk.mu.Unlock()
	if rev >= sk.rev {
		sk.rev, sk.desired = rev, desired
	}
}

// reconcile makes the kernel match the newest desired state known.
func (sk *sharedKernel) reconcile(ctx context.Context) (*ipvsmgr.Result, error) {
	sk.mu.Lock()
	defer sk.mu.Unlock()
	if sk.conn == nil {
		return nil, sk.unavailable()
	}
	if sk.desired == nil {
		return &ipvsmgr.Result{}, nil
	}
	start := time.Now()
	res, err := sk.rec.Reconcile(ctx, sk.desired)
	rep := ReconcileReport{Revision: sk.rev, At: start, Duration: time.Since(start)}
	if err != nil {
		rep.Err = err.Error()
	} else {
		rep.Changes, rep.Failures, rep.Draining = len(res.Changes), res.Failures, len(res.Draining)
	}
	sk.last = rep
	sk.reconciles.Add(1)
	if sk.onReconcile != nil {
		sk.onReconcile(rep)
	}
	return res, err
}

// reconcileWaiting reconciles, then again every second while real servers
// drain, unless told not to wait.
func (sk *sharedKernel) reconcileWaiting(ctx context.Context, o WriteOptions) (*ipvsmgr.Result, error) {
	res, err := sk.reconcile(ctx)
	if err != nil {
		return nil, err
	}
	total := *res
	for !o.NoWait && len(res.Draining) > 0 && ctx.Err() == nil {
		if o.Progress != nil {
			o.Progress(res.Draining)
		}
		select {
		case <-ctx.Done():
		case <-time.After(time.Second):
		}
		if res, err = sk.reconcile(ctx); err != nil {
			return nil, err
		}
		total.Applied = append(total.Applied, res.Applied...)
		total.Changes = append(total.Changes, res.Changes...)
		total.Failures = append(total.Failures, res.Failures...)
		total.Draining = res.Draining
	}
	return &total, nil
}

// poll reads the kernel's table into the snapshot.
func (sk *sharedKernel) poll(ctx context.Context) {
	sk.mu.Lock()
	kc, openErr := sk.conn, sk.openErr
	sk.mu.Unlock()
	prev := sk.snap.Load()
	next := &Snapshot{At: time.Now()}
	if prev != nil {
		next.Table = prev.Table
	}
	if kc == nil {
		next.Err = unavailable(openErr)
		next.Table = nil
	} else if t, err := kc.Kernel.Table(ctx); err != nil {
		next.Err = err
	} else {
		next.Table = t
	}
	sk.snap.Store(next)
}

// countedKernel counts the reads of the whole table.
type countedKernel struct {
	ipvsmgr.Kernel
	reads *atomic.Int64
}

func (k *countedKernel) Table(ctx context.Context) (*ipvsmgr.Table, error) {
	k.reads.Add(1)
	return k.Kernel.Table(ctx)
}

// KernelReads is how many times the daemon has read the kernel's whole
// table (0 without a daemon).
func (c *Core) KernelReads() int64 {
	if c.shared == nil {
		return 0
	}
	return c.shared.kernelReads.Load()
}

func (sk *sharedKernel) lastReconcile() ReconcileReport {
	sk.mu.Lock()
	defer sk.mu.Unlock()
	return sk.last
}
