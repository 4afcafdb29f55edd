package main

import (
	"context"
	"fmt"
	"log/slog"

	"github.com/ipvsctl/ipvsctl/ipvsmgr"
)

func runDiff(env *cliEnv, args []string) int {
	fs, db := env.newFlagSet("diff", "[-f FILE]",
		"Print the kernel changes (as ipvsadm commands) that would make the kernel match the stored desired\n"+
			"state, or the document given with -f. Changes nothing.")
	file := fs.String("f", "", "desired-state JSON document (- for stdin) instead of the stored state")
	if st, ok := env.parseFlags(fs, args); !ok {
		return st
	}
	if fs.NArg() > 0 {
		fmt.Fprintln(env.stderr, "ipvsctl diff: takes no arguments")
		return exitUsage
	}
	ctx := context.Background()
	st, err := env.openStore(ctx, *db)
	if err != nil {
		return env.fail("diff", err, false)
	}
	defer st.Close()
	var desired *ipvsmgr.Desired
	if *file != "" {
		if _, desired, err = readDocument(*file); err != nil {
			return env.fail("diff", err, isInvalid(err))
		}
	} else {
		state, _, err := st.Current(ctx)
		if err != nil {
			return env.fail("diff", err, false)
		}
		if desired, err = ipvsmgr.Compile(state); err != nil {
			return env.fail("diff", err, false)
		}
	}
	rec, closeKernel, err := env.reconciler(st, env.logger(slog.LevelWarn))
	if err != nil {
		return env.fail("diff", err, false)
	}
	defer closeKernel()
	ops, drains, err := rec.Plan(ctx, desired)
	if err != nil {
		return env.fail("diff", err, false)
	}
	for _, op := range ops {
		fmt.Fprintln(env.stdout, op)
	}
	for _, d := range drains {
		fmt.Fprintf(env.stdout, "# %s stays at weight 0 in %s until its %d active connections end\n", d.Dest, d.Service, d.ActiveConns)
	}
	if len(ops) == 0 {
		fmt.Fprintln(env.stdout, "# kernel matches the desired state")
	}
	return exitOK
}
