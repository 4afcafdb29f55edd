package main

import (
	"context"
	"fmt"
)

func runRestore(env *cliEnv, args []string) int {
	fs, g := env.newFlagSet("restore", "[--json]",
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
	g.server = "" // the boot restore is this director's own
	b, err := env.backend(ctx, g)
	if err != nil {
		return env.fail("restore", err, false)
	}
	defer b.close()
	if b.local == nil {
		fmt.Fprintln(env.stderr, "ipvsctl restore: the daemon (ipvsctl serve) is running and restored the state itself")
		return exitOK
	}
	res, err := b.local.Restore(ctx)
	if err != nil {
		return env.fail("restore", err, false)
	}
	if !*asJSON {
		fmt.Fprintf(env.stderr, "restoring revision %d\n", res.Revision)
	}
	printResult(env, res, *asJSON, false)
	if len(res.Failures) > 0 {
		return exitFail
	}
	return exitOK
}
