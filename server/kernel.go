package server

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"syscall"
	"time"

	"github.com/ipvsctl/ipvsctl/ipvsmgr"
	"github.com/ipvsctl/ipvsctl/ipvsmgr/kernel"
)

// KernelConn is an opened kernel with what goes with it on the host: VIPs,
// fwmark rules, modules and sysctls. A nil manager leaves that part alone.
type KernelConn struct {
	Kernel ipvsmgr.Kernel
	Host   ipvsmgr.Host // the reconcile's host half: every revision's modules, sysctls, VIPs, mangle rules
	Close  func()
}

// OpenHostKernel opens the real kernel: IPVS over netlink (loading ip_vs),
// and the host (kernel.Host).
func OpenHostKernel() (*KernelConn, error) {
	drv, err := kernel.Open(kernel.Options{LoadModule: true})
	if err != nil {
		return nil, err
	}
	return &KernelConn{
		Kernel: drv, Host: kernel.Host{}, Close: drv.Close,
	}, nil
}

func (kc *KernelConn) reconciler(ledger ipvsmgr.LedgerStore, log *slog.Logger) *ipvsmgr.Reconciler {
	return &ipvsmgr.Reconciler{Kernel: kc.Kernel, Host: kc.Host, Ledger: ledger, Log: log}
}

// prefetched answers the first Table call with a table read ahead of time.
type prefetched struct {
	ipvsmgr.Kernel
	table *ipvsmgr.Table
}

func (p *prefetched) Table(ctx context.Context) (*ipvsmgr.Table, error) {
	if t := p.table; t != nil {
		p.table = nil
		return t, nil
	}
	return p.Kernel.Table(ctx)
}

// prefetch opens the kernel and reads its table in the background, so that
// the read overlaps with decoding and storing a large document. The returned
// function waits for it; the table it gives serves the reconcile's first
// read.
func prefetch(ctx context.Context, open func() (*KernelConn, error)) func() (*KernelConn, error) {
	type result struct {
		kc  *KernelConn
		err error
	}
	ch := make(chan result, 1)
	go func() {
		kc, err := open()
		if err != nil {
			ch <- result{nil, err}
			return
		}
		t, err := kc.Kernel.Table(ctx)
		if err != nil {
			kc.Close()
			ch <- result{nil, err}
			return
		}
		cp := *kc
		cp.Kernel = &prefetched{Kernel: kc.Kernel, table: t}
		ch <- result{&cp, nil}
	}()
	return func() (*KernelConn, error) {
		r := <-ch
		return r.kc, r.err
	}
}

// kernelLock is the lock a process holds while it writes the kernel, so that
// two never reconcile at once: the daemon holds it while it runs, a CLI
// without a daemon for the length of its reconcile.
type kernelLock struct{ f *os.File }

// errLocked is returned by tryLock when another process holds the lock.
var errLocked = errors.New("locked")

func lockKernel(ctx context.Context, path string, wait time.Duration) (*kernelLock, error) {
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE, 0o600)
	if err != nil {
		return nil, fmt.Errorf("open kernel lock %s: %w", path, err)
	}
	deadline := time.Now().Add(wait)
	for {
		err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB)
		if err == nil {
			return &kernelLock{f: f}, nil
		}
		if !errors.Is(err, syscall.EWOULDBLOCK) {
			f.Close()
			return nil, fmt.Errorf("lock %s: %w", path, err)
		}
		if time.Now().After(deadline) {
			f.Close()
			if wait == 0 {
				return nil, errLocked
			}
			return nil, errorf(CodeBusy, "another ipvsctl is writing the kernel (lock %s held for %s); try again", path, wait)
		}
		select {
		case <-ctx.Done():
			f.Close()
			return nil, ctx.Err()
		case <-time.After(20 * time.Millisecond):
		}
	}
}

func (l *kernelLock) unlock() {
	if l != nil {
		l.f.Close() // closing the descriptor releases the flock
	}
}

// LockKernel takes the kernel lock for the daemon's life: it waits up to
// 30 s for a CLI that is reconciling, and refuses when another daemon holds it.
func LockKernel(ctx context.Context, path string) (unlock func(), err error) {
	l, err := lockKernel(ctx, path, 30*time.Second)
	if err != nil {
		return nil, err
	}
	return l.unlock, nil
}
