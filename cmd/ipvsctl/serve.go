package main

import (
	"context"
	"fmt"
	"log/slog"
	"os/signal"
	"syscall"
	"time"

	"github.com/ipvsctl/ipvsctl/ipvsmgr"
	"github.com/ipvsctl/ipvsctl/ipvsmgr/kernel"
	"github.com/ipvsctl/ipvsctl/server"
)

func runServe(env *cliEnv, args []string) int {
	fs, db := env.newFlagSet("serve", "[--interval 10s]",
		"The daemon: restore (modules, sysctls, VIPs, services), then keep the kernel matching the stored\n"+
			"desired state: at once after each new revision, and every --interval anyway, which repairs\n"+
			"out-of-band changes and finishes drains. Stops on SIGTERM or SIGINT. (The HTTP panel and API on\n"+
			"port 3636 are not part of this release yet.)")
	interval := fs.Duration("interval", 10*time.Second, "full reconcile period")
	if st, ok := env.parseFlags(fs, args); !ok {
		return st
	}
	if fs.NArg() > 0 || *interval < 100*time.Millisecond {
		fmt.Fprintln(env.stderr, "ipvsctl serve: takes no arguments; --interval must be at least 100ms")
		return exitUsage
	}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	defer stop()
	st, err := env.openStore(ctx, *db)
	if err != nil {
		return env.fail("serve", err, false)
	}
	defer st.Close()
	log := env.logger(slog.LevelInfo)
	if state, _, err := st.Current(ctx); err == nil && env.kernel == nil {
		if desired, err := ipvsmgr.Compile(state); err == nil {
			for _, f := range kernel.Prepare(desired).Apply() {
				log.Error("prepare kernel", "change", f.Change, "err", f.Err)
			}
		}
	}
	rec, closeKernel, err := env.reconciler(st, log)
	if err != nil {
		return env.fail("serve", err, false)
	}
	defer closeKernel()
	log.Info("ipvsctl serving", "db", *db, "interval", interval.String())
	d := &server.Daemon{Store: st, Reconciler: rec, Log: log, Interval: *interval}
	if err := d.Run(ctx); err != nil {
		return env.fail("serve", err, false)
	}
	log.Info("ipvsctl stopped")
	return exitOK
}
