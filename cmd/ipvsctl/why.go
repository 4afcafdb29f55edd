package main

import (
	"context"
	"fmt"
	"text/tabwriter"

	"github.com/ipvsctl/ipvsctl/server"
)

func runWhy(env *cliEnv, args []string) int {
	fs, g := env.newFlagSet("why", "SERVICE SERVER [--json]",
		"Say why a real server is not getting traffic: every check in order (the virtual service, the\n"+
			"server's admin state and weight, the kernel, the VIP, its preparation, its health, its connection\n"+
			"limit), each with what it found. The panel's \"Why?\" page shows the same.")
	asJSON := fs.Bool("json", false, "print JSON (each check with its status and a reason code)")
	pos, st, ok := env.parseInterspersed(fs, args)
	if !ok {
		return st
	}
	if len(pos) != 2 {
		fmt.Fprintf(env.stderr, "ipvsctl why: want SERVICE SERVER, got %d arguments\n", len(pos))
		return exitUsage
	}
	ctx := context.Background()
	b, err := env.readBackend(ctx, g)
	if err != nil {
		return env.fail("why", err, false)
	}
	defer b.close()
	why, err := b.Why(ctx, pos[0], pos[1])
	if err != nil {
		return env.fail("why", err, false)
	}
	if *asJSON {
		return env.printJSON("why", why)
	}
	fmt.Fprintf(env.stdout, "Why is %s of %s (%s) not getting traffic?\n", why.Server, why.Service, why.Address)
	tw := tabwriter.NewWriter(env.stdout, 0, 0, 2, ' ', 0)
	for _, c := range why.Checks {
		mark := map[server.WhyStatus]string{server.WhyOK: "ok", server.WhyBlocking: "BLOCKS", server.WhyUnknown: "unknown"}[c.Status]
		fmt.Fprintf(tw, "  %s\t%s:\t%s\n", mark, c.Check.Title(), c.Detail)
	}
	tw.Flush()
	fmt.Fprintln(env.stdout, why.Verdict)
	return exitOK
}
