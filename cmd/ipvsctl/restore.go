package main

import (
	"context"
	"fmt"
	"log/slog"

	"github.com/ipvsctl/ipvsctl/ipvsmgr"
	"github.com/ipvsctl/ipvsctl/ipvsmgr/kernel"
)

func runRestore(env *cliEnv, args []string) int {
	fs, db := env.newFlagSet("restore", "[--json]",
		"Boot-time restore: load the modules the stored desired state needs (ip_vs and each scheduler), set\n"+
			"the sysctls it implies (ip_forward for NAT), add the VIPs, fwmark rules and services. What fails is\n"+
			"listed and everything else is still applied; then the exit status is 1.")
	asJSON := fs.Bool("json", false, "print the result as JSON")
	if st, ok := env.parseFlags(fs, args); !ok {
		return st
	}
	if fs.NArg() > 0 {
		fmt.Fprintln(env.stderr, "ipvsctl restore: takes no arguments")
		return exitUsage
	}
	ctx := context.Background()
	st, err := env.openStore(ctx, *db)
	if err != nil {
		return env.fail("restore", err, false)
	}
	defer st.Close()
	state, rev, err := st.Current(ctx)
	if err != nil {
		return env.fail("restore", err, false)
	}
	desired, err := ipvsmgr.Compile(state)
	if err != nil {
		return env.fail("restore", fmt.Errorf("stored desired state (revision %d): %w", rev, err), false)
	}
	res := &ipvsmgr.Result{}
	if env.kernel == nil {
		res.Failures = kernel.Prepare(desired).Apply()
	}
	rec, closeKernel, err := env.reconciler(st, env.logger(slog.LevelWarn))
	if err != nil {
		res.Failures = append(res.Failures, ipvsmgr.Failure{Service: "kernel", Change: "open IPVS", Err: err.Error()})
		printResult(env, res, *asJSON, false)
		return exitFail
	}
	defer closeKernel()
	got, err := rec.Reconcile(ctx, desired)
	if err != nil {
		return env.fail("restore", err, false)
	}
	res.Changes = got.Changes
	res.Failures = append(res.Failures, got.Failures...)
	if !*asJSON {
		fmt.Fprintf(env.stderr, "restoring revision %d\n", rev)
	}
	printResult(env, res, *asJSON, false)
	if len(res.Failures) > 0 {
		return exitFail
	}
	return exitOK
}
