package main

import (
	"context"
	"fmt"
	"log/slog"
	"os/signal"
	"syscall"
	"time"

	"github.com/ipvsctl/ipvsctl/server"
	"github.com/ipvsctl/ipvsctl/server/store"
)

func runServe(env *cliEnv, args []string) int {
	fs, g := env.newFlagSet("serve", "[--interval 10s]",
		"The daemon: restore (modules, sysctls, VIPs, services), then keep the kernel matching the stored\n"+
			"desired state: at once after each new revision, and every --interval anyway, which repairs\n"+
			"out-of-band changes and finishes drains. Stops on SIGTERM or SIGINT.")
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
	st, err := store.Open(ctx, g.db)
	if err != nil {
		return env.fail("serve", err, false)
	}
	defer st.Close()
	log := env.logger(slog.LevelInfo)
	core := env.core(st, g.db)
	d := server.NewDaemon(core, log)
	d.Interval = *interval
	log.Info("ipvsctl serving", "db", g.db, "interval", interval.String())
	if err := d.Run(ctx); err != nil {
		return env.fail("serve", err, false)
	}
	log.Info("ipvsctl stopped")
	return exitOK
}
