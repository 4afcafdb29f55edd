package main

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"os/user"
	"strconv"
	"strings"

	"github.com/ipvsctl/ipvsctl/ipvsmgr"
	"github.com/ipvsctl/ipvsctl/ipvsmgr/kernel"
	"github.com/ipvsctl/ipvsctl/server/store"
)

// openStore opens the state database.
func (e *cliEnv) openStore(ctx context.Context, db string) (*store.Store, error) {
	return store.Open(ctx, db)
}

// kernelConn is an opened kernel with the VIP and fwmark managers that go
// with it (none for a fake kernel).
type kernelConn struct {
	kernel ipvsmgr.Kernel
	addrs  ipvsmgr.AddressManager
	marks  ipvsmgr.MarkManager
	close  func()
}

func (e *cliEnv) openKernel() (*kernelConn, error) {
	if e.kernel != nil {
		return &kernelConn{kernel: e.kernel, close: func() {}}, nil
	}
	drv, err := kernel.Open(kernel.Options{LoadModule: true})
	if err != nil {
		return nil, err
	}
	return &kernelConn{kernel: drv, addrs: kernel.VIPs{}, marks: kernel.Marks{}, close: drv.Close}, nil
}

// reconciler opens the kernel; the ledger lives in the state database.
func (e *cliEnv) reconciler(st *store.Store, log *slog.Logger) (*ipvsmgr.Reconciler, func(), error) {
	kc, err := e.openKernel()
	if err != nil {
		return nil, nil, err
	}
	return kc.reconciler(st, log), kc.close, nil
}

func (kc *kernelConn) reconciler(st *store.Store, log *slog.Logger) *ipvsmgr.Reconciler {
	return &ipvsmgr.Reconciler{Kernel: kc.kernel, Addrs: kc.addrs, Marks: kc.marks, Ledger: st, Log: log}
}

// prefetch opens the kernel and reads its table in the background, so that
// the read overlaps with decoding a large document. The returned function
// waits for it; the table it gives serves the reconcile's first read. A
// command that fails before it needs the kernel does not wait: the read ends
// with the process.
func (e *cliEnv) prefetch(ctx context.Context) func() (*kernelConn, error) {
	type result struct {
		kc  *kernelConn
		err error
	}
	ch := make(chan result, 1)
	go func() {
		kc, err := e.openKernel()
		if err != nil {
			ch <- result{nil, err}
			return
		}
		t, err := kc.kernel.Table(ctx)
		if err != nil {
			kc.close()
			ch <- result{nil, err}
			return
		}
		kc.kernel = &prefetched{Kernel: kc.kernel, table: t}
		ch <- result{kc, nil}
	}()
	return func() (*kernelConn, error) {
		r := <-ch
		return r.kc, r.err
	}
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

// author names who makes a change: the user behind sudo, else the user.
func (e *cliEnv) author() string {
	for _, k := range []string{"SUDO_USER", "USER", "LOGNAME"} {
		if v := e.getenv(k); v != "" {
			return v
		}
	}
	// /etc/passwd first: user.Current asks NSS, which loads libraries, a
	// cost every write would pay when run without a login environment.
	uid := strconv.Itoa(os.Getuid())
	if b, err := os.ReadFile("/etc/passwd"); err == nil {
		for line := range strings.Lines(string(b)) {
			if f := strings.SplitN(line, ":", 4); len(f) == 4 && f[2] == uid {
				return f[0]
			}
		}
	}
	if u, err := user.Current(); err == nil {
		return u.Username
	}
	return "uid " + uid
}

// readDocument reads and validates a desired-state document ("-" is stdin).
func readDocument(path string) (*ipvsmgr.State, *ipvsmgr.Desired, error) {
	f := os.Stdin
	if path != "-" {
		var err error
		if f, err = os.Open(path); err != nil {
			return nil, nil, fmt.Errorf("open state document: %w", err)
		}
		defer f.Close()
	}
	st, err := ipvsmgr.DecodeState(f)
	if err != nil {
		return nil, nil, err
	}
	d, err := ipvsmgr.Compile(st)
	if err != nil {
		return nil, nil, err
	}
	return st, d, nil
}
