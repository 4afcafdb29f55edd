package main

import (
	"context"
	"fmt"
	"log/slog"
)

func runDiff(env *cliEnv, args []string) int {
	fs, db := env.newFlagSet("diff", "-f FILE",
		"Print the kernel changes (as ipvsadm commands) that `ipvsctl apply -f FILE` would make.")
	file := fs.String("f", "", "desired-state JSON document (- for stdin)")
	if st, ok := env.parseFlags(fs, args); !ok {
		return st
	}
	if *file == "" || fs.NArg() > 0 {
		fmt.Fprintln(env.stderr, "ipvsctl diff: -f FILE is required and no other arguments are taken")
		return exitUsage
	}
	desired, err := readState(*file)
	if err != nil {
		return env.fail("diff", err, isInvalid(err))
	}
	rec, closeKernel, err := env.reconciler(*db, env.logger(slog.LevelWarn))
	if err != nil {
		return env.fail("diff", err, false)
	}
	defer closeKernel()
	ops, drains, err := rec.Plan(context.Background(), desired)
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
