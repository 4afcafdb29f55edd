package main

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"os/user"
	"strconv"

	"github.com/ipvsctl/ipvsctl/ipvsmgr"
	"github.com/ipvsctl/ipvsctl/ipvsmgr/kernel"
	"github.com/ipvsctl/ipvsctl/server/store"
)

// openStore opens the state database.
func (e *cliEnv) openStore(ctx context.Context, db string) (*store.Store, error) {
	return store.Open(ctx, db)
}

// reconciler opens the kernel; the ledger lives in the state database.
func (e *cliEnv) reconciler(st *store.Store, log *slog.Logger) (*ipvsmgr.Reconciler, func(), error) {
	r := &ipvsmgr.Reconciler{Ledger: st, Log: log}
	if e.kernel != nil {
		r.Kernel = e.kernel
		return r, func() {}, nil
	}
	drv, err := kernel.Open(kernel.Options{LoadModule: true})
	if err != nil {
		return nil, nil, err
	}
	r.Kernel, r.Addrs, r.Marks = drv, kernel.VIPs{}, kernel.Marks{}
	return r, drv.Close, nil
}

// author names who makes a change: the user behind sudo, else the user.
func (e *cliEnv) author() string {
	for _, k := range []string{"SUDO_USER", "USER"} {
		if v := e.getenv(k); v != "" {
			return v
		}
	}
	if u, err := user.Current(); err == nil {
		return u.Username
	}
	return "uid " + strconv.Itoa(os.Getuid())
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
