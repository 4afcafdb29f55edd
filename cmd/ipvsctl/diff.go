package main

import (
	"context"
	"fmt"
	"io"
)

func runDiff(env *cliEnv, args []string) int {
	fs, g := env.newFlagSet("diff", "[-f FILE]",
		"Print the changes that would make the kernel match the stored desired state, or the document given\n"+
			"with -f: IPVS changes as ipvsadm commands, then VIPs and fwmark rules. Changes nothing.")
	file := fs.String("f", "", "desired-state JSON document (- for stdin) instead of the stored state")
	asJSON := fs.Bool("json", false, "print JSON")
	if st, ok := env.parseFlags(fs, args); !ok {
		return st
	}
	if fs.NArg() > 0 {
		fmt.Fprintln(env.stderr, "ipvsctl diff: takes no arguments")
		return exitUsage
	}
	ctx := context.Background()
	b, err := env.readBackend(ctx, g)
	if err != nil {
		return env.fail("diff", err, false)
	}
	defer b.close()
	var doc io.Reader
	if *file != "" {
		f, err := env.openDocument(*file)
		if err != nil {
			return env.fail("diff", err, false)
		}
		defer f.Close()
		doc = f
	}
	d, err := b.Diff(ctx, doc)
	if err != nil {
		return env.fail("diff", err, false)
	}
	if *asJSON {
		return env.printJSON("diff", d)
	}
	for _, c := range d.Changes {
		fmt.Fprintln(env.stdout, c)
	}
	for _, dr := range d.Retiring {
		fmt.Fprintf(env.stdout, "# %s stays at weight 0 in %s until its %d active connections end\n", dr.Dest, dr.Service, dr.ActiveConns)
	}
	if len(d.Changes) == 0 {
		fmt.Fprintln(env.stdout, "# kernel matches the desired state")
	}
	return exitOK
}
