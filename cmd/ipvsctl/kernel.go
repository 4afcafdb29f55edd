package main

import (
	"fmt"
	"log/slog"
	"os"

	"github.com/ipvsctl/ipvsctl/ipvsmgr"
	"github.com/ipvsctl/ipvsctl/ipvsmgr/kernel"
)

// reconciler opens the kernel and the ledger kept beside the database.
func (e *cliEnv) reconciler(db string, log *slog.Logger) (*ipvsmgr.Reconciler, func(), error) {
	r := &ipvsmgr.Reconciler{Ledger: ipvsmgr.FileLedger{Path: db + ".ledger.json"}, Log: log}
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

// readState reads and compiles a desired-state document ("-" is stdin).
func readState(path string) (*ipvsmgr.Desired, error) {
	f := os.Stdin
	if path != "-" {
		var err error
		if f, err = os.Open(path); err != nil {
			return nil, fmt.Errorf("open state document: %w", err)
		}
		defer f.Close()
	}
	st, err := ipvsmgr.DecodeState(f)
	if err != nil {
		return nil, err
	}
	return ipvsmgr.Compile(st)
}
